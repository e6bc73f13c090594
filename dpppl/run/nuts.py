"""``kernel="nuts"``: NumPyro's NUTS on the compiled truncated stick-breaking model.

The labels are summed out of the model, so NUTS moves the stick proportions, the
component parameters and alpha. To give every kernel the same label-invariant
summaries, each draw's partition is each point's most probable component (the
deterministic site ``component``), and ``lp`` is the collapsed log joint of that
partition (the same quantity the partition kernels report), not NUTS's own potential.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

from dpppl.core.state import canonical_labels
from dpppl.models.mixture import log_joint, state_from_labels


def sample_nuts(bound, *, num_warmup, num_samples, num_chains, seed, truncation, progress_bar, thinning):
    from dpppl.run.driver import _to_inference_data

    model_fn = bound.numpyro_model(truncation)
    mcmc = MCMC(NUTS(model_fn), num_warmup=num_warmup, num_samples=num_samples * thinning,
                num_chains=num_chains, thinning=thinning, chain_method="sequential",
                progress_bar=progress_bar and not os.environ.get("CI"))
    x = jnp.asarray(bound.x)
    mcmc.run(jax.random.key(seed), x, extra_fields=("diverging", "accept_prob"))
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    component = np.asarray(samples["assignment"])
    chains, draws, n = component.shape
    if getattr(bound.prior, "labelled", False):  # stick-breaking: component k is label k + 1
        flat = component.reshape(-1, n).astype(np.int32)
    else:
        flat = np.stack([canonical_labels(row) for row in component.reshape(-1, n)])

    alpha = (np.asarray(samples["alpha"]).reshape(-1) if bound.prior.alpha_is_random
             else np.full(flat.shape[0], bound.prior.initial_alpha))

    def joint(labels_alpha):
        labels, a = labels_alpha
        return log_joint(bound.family, bound.prior, state_from_labels(bound.family, x, labels, truncation, a))

    lp = jax.lax.map(joint, (jnp.asarray(flat), jnp.asarray(alpha)))
    shape = (chains, draws)
    records = {"z": flat.reshape(chains, draws, n), "alpha": alpha.reshape(shape),
               "lp": np.asarray(lp).reshape(shape),
               "diverging": np.asarray(extra["diverging"]),
               "acceptance_rate": np.asarray(extra["accept_prob"])}
    return _to_inference_data(bound, records, dict(
        kernel="nuts", exact=0, truncation=truncation, seed=seed, num_warmup=num_warmup,
        thinning=thinning, interrupted=0, init="nuts"))
