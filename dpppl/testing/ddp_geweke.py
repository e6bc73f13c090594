"""Geweke (2004) joint-distribution test of the DDP kernels (`dpppl.kernels.ddp`,
`dpppl.kernels.ddp.swap`).

The collapsed test (`dpppl.testing.geweke`) redraws the data from p(x | z) with the
parameters integrated out; a DDP state instantiates the parameters, so here the joint is
p(z, theta, x) with the sticks integrated out, and

* **forward** draws: per slice, sticks V_{t,i} ~ Beta(a_i, b_i) for i < C and labels
  z_n ~ pi_{t_n} (the stick mass beyond C, below 1e-6 for the test's settings, goes to the
  last label), theta_i ~ prior for every label, x_n ~ N(mu_{z_n, t_n}, Sigma_{z_n});
* **successive-conditional** chains alternate the kernel, (z, theta) ~ T(. | x), with
  x ~ p(x | z, theta) (theta of the used labels; the others are not part of the state).

The points' slices are fixed (the design). Test functions are label-dependent as well as
label-invariant, since the labelled law is what the kernels must get right: the number
of used labels, the largest used label, the share of points with label 0, the share of
co-clustered pairs (within and across slices), point 0's cluster's mean (first
coordinate, in its slice) and log-determinant of its covariance, the mean first
coordinate of the data through tanh, and the log joint `lp`. The comparison is
`dpppl.testing.geweke.compare`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpppl.core.expressions import depends_on_data
from dpppl.families.gaussian import cholesky, logdet_pd
from dpppl.kernels.base import build
from dpppl.models.ddp_state import DDPSlots, slot_statistics
from dpppl.core.state import PartitionState
from dpppl.core.numerics import sample_index
from dpppl.testing.geweke import GewekeResult, compare

TEST_FUNCTIONS = ("num_labels", "top_label", "label0_share", "coclustered_pairs", "cluster_mean",
                  "cluster_logdet", "tanh_mean", "log_joint")


def _functions(family, prior, state, x, slice0):
    stats, z = state.stats, state.z
    n = z.shape[0]
    used = stats.n > 0.5
    C = stats.n.shape[0]
    same = (z[:, None] == z[None, :]) & ~jnp.eye(n, dtype=bool)
    logdet = logdet_pd(jnp.where(used[:, None, None, None], stats.sigma, jnp.eye(family.dim)))
    values = (jnp.sum(used), jnp.max(jnp.where(used, jnp.arange(C), -1)), jnp.mean(z == 0),
              jnp.sum(same) / (n * (n - 1)), stats.mu[z[0], slice0, 0],
              logdet[z[0], family.covariance_index(slice0)],
              jnp.mean(jnp.tanh(x[:, 0])), family.log_joint_state(prior, state))
    return jnp.stack([jnp.asarray(v, x.dtype) for v in values])


def ddp_geweke_test(model, kernel: str, slices, *, capacity: int = 24, num_chains: int = 64,
                    num_steps: int = 100, num_forward: int = 20000, seed: int = 0,
                    family_alpha: float = 1e-3, kernel_model=None, **options) -> GewekeResult:
    """Compare forward and successive-conditional simulation of a DDP `model` under
    `kernel` (`"ddp"`, `"ddp+ddpswap"`, ...).

    Parameters
    ----------
    model : DDPModel
        With numeric hyperparameters (`mu0` given: the data change at every step).
    kernel : str
    slices : sequence of int
        The slice index (0..T-1) of every simulated point; the slice times are 0..T-1.
    capacity : int
        Label slots; also the labels the forward draws use (see the module docstring).
    num_chains, num_steps, num_forward, seed, family_alpha
        As in `dpppl.testing.geweke_test`.
    kernel_model : DDPModel, optional
        Build the kernel from this model instead (to show that the test rejects a kernel
        that targets another posterior).
    **options
        Kernel options.
    """
    comp = model.component
    if depends_on_data(comp.mu0) or any(v is not None and depends_on_data(v) for v in (comp.nu0, comp.psi0)):
        raise ValueError("ddp_geweke_test needs mu0 (and nu0, psi0 if given) free of the data (they are redrawn)")
    slices = np.asarray(slices, np.int32)
    n, T = slices.shape[0], int(slices.max()) + 1
    D = int(np.size(comp.mu0))
    probe = np.zeros((n, D))
    bound = model.bind((probe, slices.astype(float)))
    if bound.num_slices != T:
        raise ValueError("every slice 0..T-1 needs at least one point")
    family, prior = bound.family, bound.prior
    kern = build(kernel, (kernel_model or model).bind((probe, slices.astype(float))), **options)
    a, b = (jnp.asarray(v) for v in prior.sticks(capacity))
    sl = jnp.asarray(slices)

    def draw_x(key, z, mu, sigma):
        eps = jax.random.normal(key, (n, D))
        chol = cholesky(sigma[z, family.covariance_index(sl)])
        return mu[z, sl] + jnp.einsum("nij,nj->ni", chol, eps)

    def make_state(x, z, mu, sigma):
        cnt, nt, s1, s2 = slot_statistics(x, sl, z, capacity, T)
        return PartitionState(z, DDPSlots(cnt, nt, s1, s2, mu, sigma), jnp.zeros(()), jnp.zeros((), bool))

    def forward(key):
        k_v, k_z, k_theta, k_x = jax.random.split(key, 4)
        v = jnp.where(b > 0, jax.random.beta(k_v, a, jnp.where(b > 0, b, 1.0), (T, capacity)), 1.0)  # b_L = 0: V_L = 1
        stay = jnp.cumprod(1.0 - v, axis=1)
        pi = v * jnp.concatenate([jnp.ones((T, 1)), stay[:, :-1]], axis=1)
        pi = pi.at[:, -1].add(stay[:, -1])  # the stick beyond the last label
        u = jax.random.uniform(k_z, (n,))
        z = jax.vmap(lambda t, ui: sample_index(jnp.log(pi[t]), ui))(sl, u)
        mu, sigma = family.draw_prior(k_theta, (capacity,))
        x = draw_x(k_x, z, mu, sigma)
        return make_state(x, z, mu, sigma), x

    def successive(key):
        k_init, k_run = jax.random.split(key)
        state, x = forward(k_init)

        def step(carry, t):
            state, x = carry
            k_kernel, k_data = jax.random.split(jax.random.fold_in(k_run, t))
            state, _ = kern.step(k_kernel, state, x)
            x = draw_x(k_data, state.z, state.stats.mu, jnp.where(
                (state.stats.n > 0.5)[:, None, None, None], state.stats.sigma, jnp.eye(D)))
            state = make_state(x, state.z, state.stats.mu, state.stats.sigma)._replace(overflow=state.overflow)
            return (state, x), (_functions(family, prior, state, x, sl[0]), state.overflow)

        _, (values, overflow) = jax.lax.scan(step, (state, x), jnp.arange(num_steps))
        return values.mean(axis=0), jnp.any(overflow)

    key_forward, key_successive = jax.random.split(jax.random.key(seed))
    fwd = jax.jit(jax.vmap(lambda k: _functions(family, prior, *forward(k), sl[0])))(
        jax.random.split(key_forward, num_forward))
    chain_means, overflow = jax.jit(jax.vmap(successive))(jax.random.split(key_successive, num_chains))
    if bool(np.any(overflow)):
        raise RuntimeError(f"a chain needed more than {capacity} labels; raise capacity")
    return compare(kernel, TEST_FUNCTIONS, np.asarray(fwd), np.asarray(chain_means), num_steps, family_alpha)


__all__ = ["ddp_geweke_test", "TEST_FUNCTIONS"]
