"""Geweke (2004) joint-distribution tests ("getting it right") for partition kernels.

Enumeration (`dpppl.testing.exact`) proves a kernel on data sets of at most eight
points. Geweke's test reaches further: it checks that a kernel leaves the *joint*
distribution p(alpha, z, x) of the model invariant, for any number of points, by
comparing two ways of simulating it.

* **Marginal-conditional** (forward) simulation draws independent samples:
  alpha ~ p(alpha), z ~ CRP/Pitman-Yor(alpha) by sequential seating, theta_k ~ G_0 and
  x_i ~ F(theta_{z_i}).
* **Successive-conditional** simulation starts from one forward draw and alternates
  the kernel under test, (alpha, z) ~ T(. | alpha, z, x), which should leave
  p(alpha, z | x) invariant, with a fresh draw of the data given the partition,
  x ~ p(x | z) (theta_k ~ G_0, x_i ~ F(theta_{z_i}); the parameters are not part of a
  collapsed state). If T is correct, the chain's stationary law is the joint, and
  because it starts from a draw of the joint it is stationary from its first step.

Test functions g(alpha, z, x) are averaged under both. Their means agree for a correct
kernel; a kernel that targets the wrong posterior (a wrong seating weight, predictive or
alpha update) moves them apart. Each mean's Monte Carlo error is estimated from
independent replicates: independent forward draws, and independent successive chains
(the across-chain variance of per-chain means, which accounts for autocorrelation).
The difference of means is a Student-t statistic; thresholds are Bonferroni-split over
the test functions so that a correct kernel fails the whole test with probability about
`family_alpha`.

The test functions are bounded or have every moment (so the normal approximation holds):
the number of clusters, the largest cluster's share, alpha and log alpha, the share of
co-clustered pairs, the share of points whose first coordinate is positive and its mean through `tanh`, a
data-partition interaction (co-clustered pairs weighted by `exp(-|x_i - x_j|^2)`),
and the collapsed log joint log p(z, x | alpha). Under a stick-breaking prior (explicit labels,
drawn forward by the prediction rule, eq. 6 of Porteous et al. 2006) the log joint is the
labelled one and the share of points at label 1 is compared too.

Random hyperparameters of the base measure (`m ~ Normal(0, 1)`, then `mu0 = m`) are part of the
joint: forward simulation draws them from their priors first and the data from the family at those
values; the successive chains redraw the data from the family at the state's values, after the
kernel, whose appended slice move updates them (`dpppl.kernels.hyperparameters`). Each one's value
is then a test function too (named `h:NAME`).

Hyperparameters must not depend on the data: the data change at every step.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats as sps

from dpppl.config import float_dtype
from dpppl.core.expressions import depends_on_data
from dpppl.simulate import draw_alpha, draw_data
from dpppl.families.base import segment_stats
from dpppl.kernels.base import build
from dpppl.core.state import PartitionState
from dpppl.models.mixture import log_joint

TEST_FUNCTIONS = ("num_clusters", "largest_share", "coclustered_pairs", "positive_share", "tanh_mean",
                  "near_pairs_coclustered", "log_joint", "alpha", "log_alpha")


@dataclasses.dataclass(frozen=True)
class GewekeResult:
    """Result of `geweke_test`.

    Attributes
    ----------
    passed : bool
        True when no test function's |t| exceeded its threshold.
    names : tuple of str
        The test functions compared.
    forward_mean, forward_se, successive_mean, successive_se, t : ndarray
        Per test function: means of both simulators, their standard errors, and
        t = (successive - forward) / sqrt(se_s^2 + se_f^2).
    threshold : float
        Critical |t| (Student t with `num_chains - 1` dof, Bonferroni-split).
    family_alpha : float
    report : str
    """

    passed: bool
    names: tuple
    forward_mean: np.ndarray
    forward_se: np.ndarray
    successive_mean: np.ndarray
    successive_se: np.ndarray
    t: np.ndarray
    threshold: float
    family_alpha: float
    report: str


def _test_functions(family, prior, state: PartitionState, x, names=TEST_FUNCTIONS):
    z, counts = state.z, state.stats.n
    n = z.shape[0]
    same = (z[:, None] == z[None, :]) & ~jnp.eye(n, dtype=bool)
    num_pairs = n * (n - 1)
    first = x[:, 0]
    near = jnp.exp(-jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1))
    values = {
        "num_clusters": jnp.sum(counts > 0.5),
        "largest_share": jnp.max(counts) / n,
        "coclustered_pairs": jnp.sum(same) / num_pairs,
        "positive_share": jnp.mean(first > 0),
        "tanh_mean": jnp.mean(jnp.tanh(first)),
        "near_pairs_coclustered": jnp.sum(jnp.where(same, near, 0.0)) / num_pairs,
        "log_joint": log_joint(family, prior, state) - prior.log_prior_alpha(state.alpha),
        "alpha": state.alpha,
        "log_alpha": jnp.log(state.alpha),
        "label_1_share": jnp.mean(z == 0),  # labelled priors only: slot 0 is label 1
        **{f"h:{name}": value for name, value in state.hyper.items()},
        **{f"h:{name}^2": value ** 2 for name, value in state.hyper.items()},
    }
    return jnp.stack([jnp.asarray(values[k], x.dtype) for k in names])


def geweke_test(model, kernel: str, num_points: int, dim: int, *, num_chains: int = 128,
                num_steps: int = 200, num_forward: int = 20000, seed: int = 0,
                num_trials: int | None = None, kernel_model=None, family_alpha: float = 1e-3,
                **options) -> GewekeResult:
    """Compare forward and successive-conditional simulation of `model` under `kernel`.

    Parameters
    ----------
    model : Model
        A model whose hyperparameters are numbers (not data summaries).
    kernel : str
        Kernel name or `+`-joined hybrid; the alpha move is appended when alpha has a
        Gamma prior, so the concentration update is under test too.
    num_points, dim : int
        Size of the simulated data sets.
    num_chains, num_steps : int
        Independent successive-conditional chains and steps per chain.
    num_forward : int
        Independent forward draws.
    num_trials : int, optional
        Total count of each simulated vector (Dirichlet-multinomial data).
    kernel_model : Model, optional
        Build the kernel from this model instead (to show that the test rejects a kernel
        that targets the wrong posterior); with a fixed alpha, the chains carry this
        model's alpha, which is how a wrong new-cluster weight is simulated.
    family_alpha : float
        Probability that a correct kernel fails (Bonferroni over the test functions).
    **options
        Kernel options.

    Returns
    -------
    GewekeResult
    """
    dtype = float_dtype()
    free = [f.name for f in dataclasses.fields(model.component) if depends_on_data(getattr(model.component, f.name))]
    if free:
        raise ValueError(f"geweke_test needs hyperparameters that do not depend on the data (the data are "
                         f"redrawn at every step); give {', '.join(free)} as numbers")
    probe = np.ones((num_points, dim)) * (1.0 if num_trials is None else float(num_trials) / dim)
    bound = model.bind(probe)
    kernel_bound = (kernel_model or model).bind(probe)
    kern = build(kernel, kernel_bound, **options)
    family, prior = bound.family, bound.prior
    # a prior on explicit labels needs slots up to the labels drawn: enough that a label past
    # them has prior probability below 1e-9 (the chains cannot grow; overflow fails the test)
    capacity = prior.labels_needed(num_points, 1e-9) if prior.labelled else num_points + 1
    names = TEST_FUNCTIONS if prior.alpha_is_random else TEST_FUNCTIONS[:-2]
    if prior.labelled:  # the law of the labels themselves, not only the partition
        names = names + ("label_1_share",)
    hyperpriors = dict(model.hyperpriors)
    # each random hyperparameter by its first and second moments (Geweke 2004): a move that lets it
    # wander symmetrically keeps its mean and shows in its square
    names = names + tuple(f"h:{name}{power}" for name in hyperpriors for power in ("", "^2"))

    def at(hyper):
        """The family at the random hyperparameters `hyper` (the bound family without any)."""
        return bound.at_hyperparameters(hyper).family

    def forward(key):
        k_alpha, k_z, k_x, k_h = jax.random.split(key, 4)
        alpha = draw_alpha(prior, k_alpha, dtype)
        hyper = {name: h.sample(k).astype(dtype) for (name, h), k in zip(
            hyperpriors.items(), jax.random.split(k_h, max(len(hyperpriors), 1)))}
        z = prior.draw_labels(k_z, num_points, capacity, alpha)
        x = draw_data(at(hyper), k_x, z, capacity, num_trials).astype(dtype)
        return PartitionState(z, segment_stats(family, x, z, capacity), alpha, jnp.zeros((), bool), hyper=hyper), x

    def successive(key):
        k_init, k_run = jax.random.split(key)
        state, x = forward(k_init)
        if not kernel_bound.prior.alpha_is_random:
            # a fixed alpha is the kernel's own; it differs from the model's only with kernel_model
            state = state._replace(alpha=jnp.asarray(kernel_bound.prior.initial_alpha, dtype))
        if kern.init is not None:  # the kernel's carried values in state.extras
            state = kern.init(state, x)

        def step(carry, t):
            state, x = carry
            k_kernel, k_data = jax.random.split(jax.random.fold_in(k_run, t))
            state, _ = kern.step(k_kernel, state, x)
            x = draw_data(at(state.hyper), k_data, state.z, capacity, num_trials).astype(dtype)
            state = state._replace(stats=segment_stats(family, x, state.z, capacity))
            scored = state if prior.alpha_is_random else state._replace(alpha=jnp.asarray(prior.initial_alpha, dtype))
            return (state, x), _test_functions(at(state.hyper), prior, scored, x, names)

        (state, _), values = jax.lax.scan(step, (state, x), jnp.arange(num_steps))
        return values.mean(axis=0), state.overflow

    key_forward, key_successive = jax.random.split(jax.random.key(seed))
    def forward_values(key):
        state, x = forward(key)
        return _test_functions(at(state.hyper), prior, state, x, names)

    fwd = jax.jit(jax.vmap(forward_values))(
        jax.random.split(key_forward, num_forward))
    chain_means, overflow = jax.jit(jax.vmap(successive))(jax.random.split(key_successive, num_chains))
    overflowed = int(np.sum(np.asarray(overflow)))
    keep = len(names)
    return compare(kernel, names, np.asarray(fwd)[:, :keep], np.asarray(chain_means)[:, :keep], num_steps,
                   family_alpha, overflowed=overflowed, capacity=capacity)


def compare(kernel: str, names, fwd: np.ndarray, chain_means: np.ndarray, num_steps: int,
            family_alpha: float, *, overflowed: int = 0, capacity: int | None = None) -> GewekeResult:
    """The t statistics of Geweke's test from forward draws `fwd` (num_forward, F) and
    per-chain means of the successive-conditional chains `chain_means` (num_chains, F)
    of the test functions `names`; thresholds Bonferroni-split over the F functions. The
    test fails when `overflowed` chains ran out of their `capacity` cluster slots."""
    num_forward, keep = fwd.shape
    num_chains = chain_means.shape[0]
    f_mean, f_se = fwd.mean(0), fwd.std(0, ddof=1) / np.sqrt(num_forward)
    s_mean, s_se = chain_means.mean(0), chain_means.std(0, ddof=1) / np.sqrt(num_chains)
    se = np.sqrt(f_se ** 2 + s_se ** 2)
    t = np.where(se > 0, (s_mean - f_mean) / np.where(se > 0, se, 1.0), 0.0)
    threshold = float(sps.t.ppf(1 - family_alpha / (2 * keep), num_chains - 1))
    passed = bool(np.all(np.abs(t) <= threshold)) and overflowed == 0
    lines = [f"Geweke test of {kernel!r}: {'passed' if passed else 'FAILED'} "
             f"({num_chains} chains x {num_steps} steps vs {num_forward} forward draws; "
             f"|t| <= {threshold:.2f} at family-wise {family_alpha:g})"]
    if overflowed:
        lines.append(f"  [FAIL] {overflowed} chain(s) ran out of the {capacity} cluster slots")
    for i, name in enumerate(names):
        flag = "FAIL" if abs(t[i]) > threshold else "ok"
        lines.append(f"  [{flag}] {name}: forward {f_mean[i]:.4f} +- {f_se[i]:.4f}, "
                     f"successive {s_mean[i]:.4f} +- {s_se[i]:.4f}, t = {t[i]:+.2f}")
    return GewekeResult(passed, tuple(names), f_mean, f_se, s_mean, s_se, t, threshold,
                        family_alpha, "\n".join(lines))
