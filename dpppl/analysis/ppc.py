"""Posterior predictive checks: replicated data for every kept draw of a run.

For a posterior draw of the partition z of the training points x, the replicated data are

    theta_k ~ p(theta | x_{z = k})           for every occupied cluster k,
    x_rep_i ~ f(x | theta_{z_i})             for every point i,

so that (z, theta, x_rep) is a draw of p(z, theta, x_rep | x) and x_rep, over the draws, a
draw of the posterior predictive p(x_rep | x) of data set replicates sharing the training
points' clustering (Gelman, Meng & Stern 1996, sec. 2; Gelman et al., BDA3, sec. 6.3). The
concentration alpha does not enter: given z, the atoms of the occupied clusters are
independent of it.

- Conjugate families (`family.conjugate`: NormalInverseWishart, NormalKnownCov,
  NormalGamma, DirichletMultinomial, BetaBernoulli) draw theta_k exactly from
  `family.posterior_draw` of the cluster's statistics, whatever kernel ran.
- A non-conjugate family (NormalLogNormal) has no closed-form posterior: the run's
  recorded parameters `theta_*` per label slot (`kernel="subcluster"`, which records them
  by default) are used, drawn in the same step as the labels. A slot that z occupies but
  whose parameters were not drawn in that step (a cluster a split made at the step's end)
  takes a draw of the family's data-driven proposal q(theta | x_k), an approximation of
  p(theta | x_k); `attrs["proposal_draws"]` counts them.
- Count data keep each point's total: x_rep_i ~ Multinomial(sum_v x_iv, p_{z_i}).

Rankings (Generalized Mallows, `kernel="mallows-slice"` or `"mallows-beta"`) have no conjugate
posterior: the run records each draw's instantiated parameters (central permutation `sigma` and
dispersions `theta` of the `record_clusters` largest clusters, their slots `gm_cluster_slot`), drawn
in the same step as the labels, and each replicated ranking is

    x_rep_i ~ GM(sigma_{z_i}, theta_{z_i})              of the observed ranking's length t_i

(a full ranking's last item completes it). A draw with a point whose cluster was not recorded
raises a DataError before any replicate is drawn (sample with a larger `record_clusters`).

DDP models (kernel `ddp`, which records every label slot's atoms per draw: `atom_mu`, the means per
slice, and `atom_cov`, the covariances) draw each point from its label's atom at its slice,

    x_rep_i ~ N(mu_{z_i, t_i}, Sigma_{z_i, s(t_i)})     (s(t) = t per-slice covariances, 1 shared),

the atoms drawn in the same step as the labels; a run without them raises a DataError.

**DP sites inside a NumPyro model** (`dpppl.dp_mixture`, runs of `dpppl.sample` on a model function,
or a NumPyro `MCMC` run of `dpppl.PartitionGibbs` through `site_predictive`): for each kept draw
(continuous sites, labels z, alpha), the model is traced at the draw, giving the values v of each
observed collapsed-mixture site (for `obs=y - X @ beta`, the residuals at the draw's beta); then

    theta_k ~ p(theta | v_{z = k})                      every occupied cluster,
    v_rep_i ~ f(v | theta_{z_i})                        in-sample,

and the replicated data are y_rep = y + (v_rep - v): the site observes y shifted by the parameters
(the run records which argument, `attrs["observed_arguments"]`), so y_rep = X beta + v_rep. For new
covariates (`model_args=`) the model is traced with them at the draw (v* = y* - X* beta; the
values given for y* are not used) and the new points are seated one after the other by the prior's
predictive rule, an existing cluster with weight n_k - d, a new one with weight alpha + K d (its
parameters from the base measure), counts updated as each is seated; then y*_rep = X* beta + v*_rep.

Cost and memory: one jitted map over the kept draws, `batch` draws vectorised at a time
(`jax.lax.map(..., batch_size=)`, sized so that a batch's replicated data and parameters
stay within `BATCH_BUDGET` numbers). The result holds chains x draws x N x D numbers;
`num_draws` (draws kept per chain, evenly spaced) bounds it, and by default the draws are
thinned to at most `OUTPUT_BUDGET` numbers.
"""

from __future__ import annotations

import importlib
import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.handlers import seed as seeded
from numpyro.handlers import substitute, trace

from dpppl.config import in_x64
from dpppl.analysis.partitions import is_inference_data
from dpppl.analysis.predict import bind_to_run
from dpppl.diagnostics.arviz_compat import PARTITION_GROUPS, group, has_group, with_groups
from dpppl.diagnostics.summaries import compact_labels
from dpppl.dsl import parse
from dpppl.dsl.parser import as_model
from dpppl.errors import ArgumentError, DataError, ModelError
from dpppl.families.base import segment_stats, stored_data, translated_params
from dpppl.models.ddp import DDPModel
from dpppl.models.mixture import BoundModel, Model
from dpppl.models.sites import dp_sites
from dpppl.run.output import ddp_atoms_at_points, recorded_cluster
from dpppl.run.partition_gibbs import call_arguments, dp_draw_trace, model_arguments, observed_data

OUTPUT_BUDGET = 2**25
"""Numbers of replicated data kept by default (256 MB in float64): more draws are thinned."""
BATCH_BUDGET = 2**23
"""Numbers of replicated data and parameters formed at once while drawing."""


def _model_of(idata, model):
    """The model the run sampled: `model`, or the model-file text the run recorded."""
    if model is not None:
        return model
    source = group(idata, "posterior").attrs.get("model_source")
    if source is None:
        raise ArgumentError("posterior_predictive: the run records no model source; pass model=...")
    try:
        return parse(source)
    except ModelError:
        raise ArgumentError("posterior_predictive: the run's model was built in Python, not read from a model "
                            "file; pass model=... (the model the run sampled)") from None


def _refuse(spec) -> None:
    if not isinstance(spec, Model):
        raise ModelError(f"posterior_predictive supports DP / Pitman-Yor / stick-breaking / DDP mixtures; "
                         f"{type(spec).__name__} is not one")


def _ddp_predictive(idata, spec: DDPModel, num_draws, seed):
    """`posterior_predictive` of a DDP run: x_rep_i ~ N(mu_(z_i, t_i), Sigma_(z_i, s(t_i))) of each
    kept draw's recorded atoms (module docstring)."""
    part, observed = group(idata, PARTITION_GROUPS["posterior"]), group(idata, "observed_data")
    if "atom_mu" not in part.data_vars or "atom_cov" not in part.data_vars:
        raise DataError("posterior_predictive: the DDP run recorded no atoms (atom_mu, atom_cov); sample it with "
                        "kernel 'ddp' (or 'ddp+ddpswap') and record_atoms=True, the default")
    name, by = spec.data.name, spec.data.by
    slices = jnp.asarray(np.unique(np.asarray(observed[by]), return_inverse=True)[1])
    z = np.asarray(part["z"])
    chains, draws, n = z.shape
    mu, cov = np.asarray(part["atom_mu"]), np.asarray(part["atom_cov"])
    dim = mu.shape[-1]
    kept = _kept_draws(num_draws, chains, draws, n * dim)

    def one(args):
        key, labels, m, c = args
        loc, scale = ddp_atoms_at_points(labels, slices, m, c)
        return loc + jnp.einsum("nij,nj->ni", jnp.linalg.cholesky(scale), jax.random.normal(key, loc.shape))

    flat = [jnp.asarray(v[:, kept].reshape((-1,) + v.shape[2:])) for v in (z, mu, cov)]
    keys = jax.random.split(jax.random.key(seed), flat[0].shape[0])
    batch = int(max(1, min(flat[0].shape[0], BATCH_BUDGET // max(1, n * dim * dim))))
    x_rep = jax.jit(lambda *a: jax.lax.map(one, a, batch_size=batch))(keys, *flat)
    return with_groups(idata, {"posterior_predictive": {name: np.asarray(x_rep).reshape(chains, len(kept), n, dim)}},
                       coords={"draw": kept, "point": np.arange(n), "dim": np.arange(dim)},
                       dims={name: ["point", "dim"]}, attrs={"seed": seed})


def _kept_draws(num_draws, chains: int, draws: int, per_draw: int) -> np.ndarray:
    """Indices of the draws kept in every chain, evenly spaced."""
    if num_draws is None:
        num_draws = max(1, OUTPUT_BUDGET // max(chains * per_draw, 1))
    elif isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
        raise ArgumentError(f"num_draws must be an integer >= 1 or None, got {num_draws!r}")
    if num_draws >= draws:
        return np.arange(draws)
    return np.unique(np.round(np.linspace(0, draws - 1, int(num_draws))).astype(int))


def _recorded_params(idata, family):
    """The run's `theta_*` per slot (chain, draw, slot, ...) of a non-conjugate family."""
    part = group(idata, PARTITION_GROUPS["posterior"])
    names = [k for k in part.data_vars if k.startswith("theta_")]
    if not names:
        raise DataError(f"posterior_predictive: {family.name} is not conjugate and the run recorded no cluster "
                        "parameters (theta_*); sample it with kernel='subcluster' and record_parameters=True")
    return {k[len("theta_"):]: np.asarray(part[k]) for k in names}


def _sampler(bound: BoundModel, capacity: int, recorded: bool):
    """One draw: `(key, z, theta or None) -> (x_rep (N, D), number of proposal draws)`."""
    family, x, shift = bound.family, jnp.asarray(bound.x), bound.shift
    totals = jnp.sum(jnp.asarray(bound.observed_x, x.dtype), axis=1) if family.data_kind == "count" else None

    def points(key, theta, z):
        if totals is None:
            return family.sample_points(key, theta, z)
        return family.sample_points(key, theta, z, num_trials=totals)

    def one(key, z, theta):
        k_theta, k_x = jax.random.split(key)
        stats = segment_stats(family, x, z, capacity)
        if not recorded:
            drawn = translated_params(family, family.posterior_draw(k_theta, stats), shift)
            return points(k_x, drawn, z), jnp.zeros((), jnp.int32)
        fallback = translated_params(family, family.params_of(family.draw_proposal(k_theta, stats)), shift)
        missing = jnp.zeros(capacity, bool)
        for value in theta.values():
            missing = missing | jnp.any(jnp.isnan(value.reshape(capacity, -1)), axis=1)
        filled = {name: jnp.where(missing.reshape((capacity,) + (1,) * (value.ndim - 1)), fallback[name], value)
                  for name, value in theta.items()}
        used = missing & (stats.n > 0)
        return points(k_x, filled, z), jnp.sum(used).astype(jnp.int32)

    return one


def _ranking_draws(idata, family, x, z, kept, seed):
    """Replicated rankings (chain, kept draw, N, n) of a Generalized Mallows run: each point's ranking
    drawn from its cluster's recorded (sigma, theta), of the observed ranking's length (module docstring)."""
    part = group(idata, PARTITION_GROUPS["posterior"])
    if not {"sigma", "theta", "gm_cluster_slot"} <= set(part.data_vars):
        raise DataError("posterior_predictive: the rankings run recorded no cluster parameters (sigma, theta, "
                        "gm_cluster_slot); sample it with kernel='mallows-slice' or 'mallows-beta'")
    sigma, theta = np.asarray(part["sigma"])[:, kept], np.asarray(part["theta"])[:, kept]
    index = recorded_cluster(z, np.asarray(part["gm_cluster_slot"])[:, kept])
    if np.any(index < 0):
        chain, draw = np.argwhere((index < 0).any(axis=-1))[0]
        raise DataError(f"posterior_predictive: draw {int(kept[draw])} of chain {int(chain)} has more clusters than "
                        f"the {sigma.shape[2]} whose parameters the run recorded; sample with a larger "
                        "record_clusters=")
    n_items = x.shape[1]
    lengths = jnp.asarray(np.minimum((x >= 0).sum(axis=1), n_items - 1))
    full = jnp.asarray((x >= 0).all(axis=1))
    pos = jnp.asarray(np.argsort(sigma, axis=-1).reshape((-1,) + sigma.shape[2:]), jnp.int32)
    theta = jnp.asarray(theta.reshape((-1,) + theta.shape[2:]), float)

    def one(args):
        key, labels, p, t = args
        rep = family.sample_points(key, {"pos": p, "theta": t}, labels, lengths).astype(jnp.int32)
        last = (n_items * (n_items - 1) // 2 - jnp.sum(jnp.where(rep >= 0, rep, 0), axis=1)).astype(jnp.int32)
        return rep.at[:, -1].set(jnp.where(full, last, rep[:, -1]))

    keys = jax.random.split(jax.random.key(seed), pos.shape[0])
    batch = int(max(1, min(pos.shape[0], BATCH_BUDGET // max(1, x.size))))
    rep = jax.jit(lambda *a: jax.lax.map(one, a, batch_size=batch))(keys, jnp.asarray(index.reshape(-1, x.shape[0])),
                                                                    pos, theta)
    return np.asarray(rep).reshape(z.shape + (n_items,))


def _seat_new(key, prior, counts, alpha, m: int):
    """Labels of `m` new points seated one after the other by the prior's predictive rule given the
    slot `counts` (capacity >= occupied + m): an occupied slot with weight n_k - d, the first empty
    slot with weight alpha + K d; counts updated after each."""
    def seat(c, k):
        existing, new = prior.log_seat_weights(c, alpha)
        first_empty = jnp.argmax(c == 0)
        logits = existing.at[first_empty].set(new)
        slot = jax.random.categorical(k, logits)
        return c.at[slot].add(1.0), slot

    return jax.lax.scan(seat, counts, jax.random.split(key, m))[1].astype(jnp.int32)


def _site_draws(fn, train: tuple, new: tuple | None, shifted: dict):
    """One draw's replicated data of every observed collapsed-mixture site: `(key, params) -> {site:
    data shaped as the site's}` (module docstring); `train`, `new`: `(args, kwargs, arguments)`."""
    def one(key, params):
        tr, found = dp_draw_trace(fn, train[0], train[1], params)
        labels = {f.labels for f in found}
        if new is not None:
            continuous = {k: v for k, v in params.items() if k not in labels}
            tr_new = trace(substitute(seeded(fn, jax.random.key(0)), data=continuous)).get_trace(*new[0], **new[1])
        out = {}
        for j, f in enumerate(found):
            if not tr[f.values]["is_observed"]:
                continue
            family, mixture = f.mixture.family, f.mixture
            k_theta, k_seat, k_x = jax.random.split(jax.random.fold_in(key, j), 3)
            x = jnp.asarray(mixture.points(f.value), jnp.result_type(float))
            z = jnp.asarray(params[f.labels], jnp.int32)
            if new is None:
                stats = segment_stats(family, x, z, x.shape[0])
                seats, values, data = z, x, train[2][shifted[f.values]]
            else:
                values = jnp.asarray(mixture.points(tr_new[f.values]["value"]), x.dtype)
                stats = segment_stats(family, x, z, x.shape[0] + values.shape[0])
                seats = _seat_new(k_seat, f.partition.prior, stats.n, f.partition.alpha, values.shape[0])
                data = new[2][shifted[f.values]]
            theta = family.posterior_draw(k_theta, stats)  # empty slots: the base measure
            extra = {"num_trials": jnp.sum(values, axis=1)} if family.data_kind == "count" else {}
            rep = family.sample_points(k_x, theta, seats, **extra)
            data = jnp.asarray(data, x.dtype)
            out[f.values] = data + (rep - values).reshape(data.shape)
        return out

    return one


@in_x64
def site_predictive(model, samples: dict, model_args: tuple = (), model_kwargs: dict | None = None, *,
                    new_args: tuple | None = None, new_kwargs: dict | None = None, seed: int = 0,
                    shifted: dict | None = None) -> dict:
    """Replicated data of the observed DP sites of a NumPyro model, from posterior draws (module
    docstring): what `posterior_predictive` does for a run of `dpppl.sample`, for a NumPyro `MCMC`
    run of [`dpppl.PartitionGibbs`][dpppl.PartitionGibbs] (`samples = mcmc.get_samples()`).

    Parameters
    ----------
    model : callable
        The NumPyro model function.
    samples : dict
        `{site: (S, ...)}`: every latent site's draws (the partition sites' labels included).
    model_args, model_kwargs
        The arguments the model was conditioned on (the training data).
    new_args, new_kwargs : optional
        Arguments with new covariates: the new points are seated by the prior's predictive rule;
        the observed argument (y of `obs=y - X @ beta`) must be given with the new points' shape
        (its values are not used). Default: in-sample replicates.
    seed : int
    shifted : dict, optional
        `{site: argument}` the sites observe (default: found by `dpppl.run.partition_gibbs.observed_data`).

    Returns
    -------
    dict
        `{site: (S, N or M, ...)}` for each observed collapsed-mixture site, shaped as its data.
    """
    model_kwargs = dict(model_kwargs or {})
    if shifted is None:
        shifted = observed_data(model, model_args, model_kwargs)[1]
    train = (tuple(model_args), model_kwargs, model_arguments(model, model_args, model_kwargs))
    new = None
    if new_args is not None or new_kwargs is not None:
        new_args, new_kwargs = tuple(new_args or ()), dict(new_kwargs or {})
        new = (new_args, new_kwargs, model_arguments(model, new_args, new_kwargs))
    tr = trace(seeded(model, jax.random.key(0))).get_trace(*train[0], **train[1])
    latent = [k for k, site in tr.items() if site["type"] == "sample" and not site["is_observed"]]
    missing = [k for k in latent if k not in samples]
    if missing:
        raise DataError(f"site_predictive: samples lack the model's latent sites {missing}")
    flat = {k: jnp.asarray(samples[k]) for k in latent}  # not deterministic sites: their shapes follow the data
    found = dp_sites(tr)
    observed = [f.values for f in found if tr[f.values]["is_observed"]]
    if not observed:
        raise ModelError("site_predictive: the model has no observed dpppl.dp_mixture site (a latent DP site's "
                         "values are a posterior site: numpyro.infer.Predictive replicates the data given them)")
    for site in observed:
        if site not in shifted:
            raise DataError(f"site_predictive: the observed site {site!r} is not a model argument shifted by the "
                            "parameters (obs=y - X @ beta observes y), so replicated data of it cannot be formed")
        for where, call in (("the training arguments", train), ("the new arguments", new)):
            if call is not None and not _is_data(call[2].get(shifted[site])):
                raise ArgumentError(f"posterior predictive: {where} give {shifted[site]}="
                                    f"{call[2].get(shifted[site])!r}; site {site!r} observes it: pass an array of "
                                    "the points' shape (with new covariates its values are not used)")
    s = len(next(iter(flat.values())))
    n = max(np.shape(train[2][shifted[site]])[0] for site in observed)
    batch = int(max(1, min(s, BATCH_BUDGET // max(n * n, 1))))
    one = _site_draws(model, train, new, shifted)
    keys = jax.random.split(jax.random.key(seed), s)
    out = jax.jit(lambda k, p: jax.lax.map(lambda a: one(*a), (k, p), batch_size=batch))(keys, flat)
    return {k: np.asarray(v) for k, v in out.items()}


def _is_data(value) -> bool:
    return value is not None and np.asarray(value).dtype.kind in "biuf"


def _model_function(idata, model):
    """The model function of a NumPyro-model run: `model`, or the function the run recorded
    (`attrs["model_function"]`, `module:qualname`), imported."""
    if callable(model):
        return model
    where = group(idata, "posterior").attrs.get("model_function", "")
    module, _, qualname = where.partition(":")
    try:
        if "<locals>" in qualname:
            raise AttributeError(qualname)
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError, ValueError):
        raise ArgumentError(f"posterior_predictive: the run's model function {where!r} cannot be imported here "
                            "(defined inside a function, or in another process's script); pass model=the "
                            "function") from None
    return fn


def _recorded_call(idata, fn) -> tuple[tuple, dict]:
    """The call the run was conditioned on: the model's arguments from `constant_data` and
    `attrs["model_arguments"]`."""
    arguments = json.loads(group(idata, "posterior").attrs.get("model_arguments", "{}"))
    if has_group(idata, "constant_data"):
        const = group(idata, "constant_data")
        arguments.update({k: np.asarray(const[k]) for k in const.data_vars})
    try:
        return call_arguments(fn, dict(inspect.signature(fn).bind(**arguments).arguments))
    except TypeError as e:
        raise ArgumentError(f"posterior_predictive: the run recorded the model's arguments "
                            f"{', '.join(arguments) or 'none'}, which do not make a call ({e}); pass model_args= "
                            "(and model_kwargs=)") from None


def _site_run_predictive(idata, model, model_args, model_kwargs, num_draws, seed):
    """`posterior_predictive` of a run of a NumPyro model function (`dpppl.sample(fn, model_args=...)`)."""
    fn = _model_function(idata, model)
    args, kwargs = _recorded_call(idata, fn)
    new_args = new_kwargs = None
    if model_args is not None or model_kwargs is not None:
        new_args, new_kwargs = tuple(model_args or ()), dict(model_kwargs or {})
    post, part = group(idata, "posterior"), group(idata, PARTITION_GROUPS["posterior"])
    found = dp_sites(trace(seeded(fn, jax.random.key(0))).get_trace(*args, **kwargs))
    z_name = {f.labels: "z" if len(found) == 1 else f"{f.values}_z" for f in found}
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    n = int(np.prod(np.shape(part[next(iter(z_name.values()))])[2:]))
    kept = _kept_draws(num_draws, chains, draws, n)
    drawn = {k: np.asarray(post[k]) for k in post.data_vars} | {k: np.asarray(part[z]) for k, z in z_name.items()}
    samples = {k: v[:, kept].reshape((chains * len(kept),) + v.shape[2:]) for k, v in drawn.items()}
    shifted = json.loads(post.attrs.get("observed_arguments", "{}"))
    reps = site_predictive(fn, samples, args, kwargs, new_args=new_args, new_kwargs=new_kwargs, seed=seed,
                           shifted=shifted)
    suffix = "" if new_args is None else "_new"
    values = {k: v.reshape((chains, len(kept)) + v.shape[1:]) for k, v in reps.items()}
    dims = {k: [f"{k}{suffix}_dim_{i}" for i in range(v.ndim - 2)] for k, v in values.items()}
    return with_groups(idata, {"posterior_predictive": values}, coords={"draw": kept}, dims=dims,
                       attrs={"seed": seed, "new_points": int(new_args is not None)})


@in_x64
def posterior_predictive(idata, model=None, *, num_draws: int | None = None, seed: int = 0,
                         model_args: tuple | None = None, model_kwargs: dict | None = None):
    """Replicated data for the kept draws of a run, in a `posterior_predictive` group.

    Parameters
    ----------
    idata : InferenceData
        A run of [`dpppl.sample`][dpppl.sample] (its labels `z`, its observed data and, for a
        non-conjugate family, its recorded `theta_*`; for rankings its recorded `sigma`, `theta` and
        `gm_cluster_slot`), or of a NumPyro model function with
        `dpppl.dp_mixture` sites (its continuous draws, labels, `constant_data` and the model
        function it records).
    model : Model, BoundModel, str or callable, optional
        The model the run sampled; by default the model-file text the run recorded
        (`attrs["model_source"]`), which a model built in Python does not have, or for a run of a
        NumPyro model function the function it records (`attrs["model_function"]`, imported).
    num_draws : int, optional
        Draws kept per chain, evenly spaced (default: all, thinned to at most
        `OUTPUT_BUDGET` = 2^25 numbers of replicated data in all).
    seed : int
    model_args, model_kwargs : optional
        A NumPyro model function's arguments with new covariates (the observed argument, such as y
        of `obs=y - X @ beta`, of the new points' shape; its values are not used): replicated data
        of new points, seated by the prior's predictive rule (module docstring). Default: in-sample.

    Returns
    -------
    InferenceData
        `idata` with the group `posterior_predictive` added (replacing one it had): the
        data variable (`x`, dims chain, draw, point, dim), the draw coordinate the kept
        draws' indices. ArviZ's `az.plot_ppc(idata)` compares it with `observed_data`.
        See the module docstring for the draw.
    """
    if not is_inference_data(idata):
        raise DataError("posterior_predictive needs the InferenceData returned by dpppl.sample")
    if callable(model) or "inner_kernel" in group(idata, "posterior").attrs:  # a NumPyro model function's run
        return _site_run_predictive(idata, model, model_args, model_kwargs, num_draws, seed)
    if model_args is not None or model_kwargs is not None:
        raise ArgumentError("posterior_predictive: model_args and model_kwargs are a NumPyro model function's "
                            "arguments; this run sampled a dpppl model")
    model = _model_of(idata, model)
    spec = as_model(model)
    if isinstance(spec, DDPModel):
        return _ddp_predictive(idata, spec, num_draws, seed)
    _refuse(spec)
    bound = bind_to_run(model if isinstance(model, BoundModel) else spec, idata)
    family = bound.family
    z = np.asarray(group(idata, PARTITION_GROUPS["posterior"])["z"])
    chains, draws, n = z.shape
    if n != bound.num_points:
        raise DataError(f"the run's labels cover {n} points but its data have {bound.num_points}")
    dim = bound.x.shape[1]
    kept = _kept_draws(num_draws, chains, draws, n * dim)
    name = spec.data.name
    if family.data_kind == "ranking":
        x_rep = stored_data(family, _ranking_draws(idata, family, np.asarray(bound.x), z[:, kept], kept, seed))
        return with_groups(idata, {"posterior_predictive": {name: x_rep}},
                           coords={"draw": kept, "point": np.arange(n), "dim": np.arange(dim)},
                           dims={name: ["point", "dim"]}, attrs={"seed": seed})
    z = z[:, kept].reshape(-1, n)
    recorded = not family.conjugate
    if recorded:
        theta = {k: v[:, kept].reshape((z.shape[0],) + v.shape[2:]) for k, v in _recorded_params(idata, family).items()}
        capacity = next(iter(theta.values())).shape[1]
    else:
        z, counts = compact_labels(z)
        capacity, theta = counts.shape[1], {}
    one = _sampler(bound, capacity, recorded)
    per_draw = n * dim + capacity * (dim * dim + dim)
    batch = int(max(1, min(z.shape[0], BATCH_BUDGET // per_draw)))
    keys = jax.random.split(jax.random.key(seed), z.shape[0])
    dtype = jnp.asarray(bound.x).dtype
    run = jax.jit(lambda k, labels, th: jax.lax.map(lambda a: one(*a), (k, labels, th), batch_size=batch))
    x_rep, proposal_draws = run(keys, jnp.asarray(z, jnp.int32), jax.tree.map(lambda v: jnp.asarray(v, dtype), theta))
    x_rep = stored_data(family, np.asarray(x_rep).reshape(chains, len(kept), n, dim))
    attrs = {"proposal_draws": int(np.sum(proposal_draws)), "seed": seed}
    return with_groups(idata, {"posterior_predictive": {name: x_rep}},
                       coords={"draw": kept, "point": np.arange(n), "dim": np.arange(dim)},
                       dims={name: ["point", "dim"]}, attrs=attrs)


__all__ = ["posterior_predictive", "site_predictive"]
