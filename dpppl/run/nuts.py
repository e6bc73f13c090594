"""The NUTS backend: NumPyro's NUTS on the compiled truncated stick-breaking model.

The labels are summed out of the model, so NUTS moves the stick proportions, the
component parameters and alpha. To give every kernel the same label-invariant
summaries, each draw's partition is each point's most probable component (the
deterministic site `assignment`), and `lp` is what the target's own kernels record for
it (`Target.lp_of_draw`): the log joint of that partition for a mixture (the quantity the
partition kernels report), the log joint of those labels with the draw's time-coupled
parameters for a DDP (`dpppl.models.ddp_compile`), not NUTS's own potential.
NUTS runs in the target's frame (`Target.nuts_model`): on `target.x` with
`target.family` (real data translated by their mean, `dpppl.models.mixture.BoundModel`);
nothing it records is a location.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

from dpppl.core.protocols import Target
from dpppl.errors import KernelError
from dpppl.kernels.base import register


def sample_nuts(target: Target, spec: str, options: dict, *, num_warmup: int, num_samples: int,
                num_chains: int, seed: int, thinning: int, progress_bar: bool, truncation: int, **_):
    """Run NUTS; return (records, attrs, record_dims) as the partition backend does."""
    if options:
        raise KernelError(f"kernel 'nuts' takes no options, got {sorted(options)}")
    model, args = target.nuts_model(truncation)
    mcmc = MCMC(NUTS(model), num_warmup=num_warmup, num_samples=num_samples * thinning, num_chains=num_chains,
                thinning=thinning, chain_method="sequential", progress_bar=progress_bar)
    mcmc.run(jax.random.key(seed), *args, extra_fields=("diverging", "accept_prob"))
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    component = np.asarray(samples["assignment"])
    chains, draws, n = component.shape
    flat = np.stack([target.prior.canonical(row) for row in component.reshape(-1, n).astype(np.int64)])
    alpha = (np.asarray(samples["alpha"]).reshape(-1) if target.prior.alpha_is_random
             else np.full(flat.shape[0], target.prior.initial_alpha))
    sites = {k: jnp.reshape(v, (-1,) + v.shape[2:]) for k, v in samples.items()}
    lp = jax.lax.map(lambda args: target.lp_of_draw(args[0], args[1], model.truncation), (jnp.asarray(flat), sites))
    shape = (chains, draws)
    records = {"z": flat.reshape(chains, draws, n), "alpha": alpha.reshape(shape),
               "lp": np.asarray(lp).reshape(shape), "diverging": np.asarray(extra["diverging"]),
               "acceptance_rate": np.asarray(extra["accept_prob"])}
    return records, dict(kernel="nuts", exact=0, truncation=truncation, interrupted=0, init="nuts"), None


register("nuts", None, exact=False, backend="nuts",
         description="NumPyro NUTS on the truncated stick-breaking model (labels summed out; DDP models "
                     "too); approximate")


__all__ = ["sample_nuts"]
