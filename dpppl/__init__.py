"""dpppl: Dirichlet-process mixture models on NumPyro and JAX.

    import dpppl
    model = dpppl.load("models/gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_chains=4)

The top level holds what a first session uses (`__all__`; docs/api/index.md says why each
name is there). The rest lives in namespaces: `dpppl.families` (components), `dpppl.priors`
(partition priors, `Gamma`), `dpppl.analysis`, `dpppl.metrics`, `dpppl.plots`,
`dpppl.diagnostics`, `dpppl.datasets`, `dpppl.kernels`, `dpppl.errors`. A name that moved off
the top level still resolves here, with a DeprecationWarning naming its new path (`MOVED`).
See the README and `docs/` for the model language, the kernels and the papers.
"""

import importlib
import warnings
from typing import TYPE_CHECKING

from dpppl import config  # noqa: F401  (JAX settings changed on import: docs/configuration.md)
from dpppl import datasets, diagnostics, families, kernels, priors  # noqa: F401
from dpppl.dsl import load, parse
from dpppl.errors import ArgumentError, DataError, DPPPLError, HyperparameterError, KernelError, ModelError
from dpppl.models.ddp import DDPMixture
from dpppl.models.mixture import DPMixture, PitmanYorMixture, PseudoParticleMixture, StickBreakingMixture
from dpppl.models.rankings import rankings
from dpppl.models.sites import dp_mixture
from dpppl.run.driver import log_joint, resume, sample
from dpppl.run.numpyro_output import from_numpyro
from dpppl.run.partition_gibbs import PartitionGibbs
from dpppl.search import map_search  # also registers init="search" (dpppl.models.init)
from dpppl.version import __version__  # noqa: F401  (dpppl.__version__)

if TYPE_CHECKING:  # the names imported on first use, and the moved ones; at run time see __getattr__
    from dpppl import analysis, metrics, plots, simulate  # noqa: F401
    from dpppl.analysis import point_estimate, posterior_predictive, predict  # noqa: F401
    from dpppl.simulate import sample_prior  # noqa: F401
    from dpppl.families import NormalGamma, NormalInverseWishart, NormalLogNormal  # noqa: F401
    from dpppl.models.mixture import BoundModel  # noqa: F401
    from dpppl.priors import StickBreaking  # noqa: F401

MOVED = {
    **dict.fromkeys(("BetaBernoulli", "CoupledGaussian", "DirichletMultinomial", "GeneralizedMallows", "NormalGamma",
                     "NormalInverseWishart", "NormalKnownCov", "NormalLogNormal"), "dpppl.families"),
    **dict.fromkeys(("CRP", "DDP", "Gamma", "PitmanYor", "StickBreaking"), "dpppl.priors"),
    **dict.fromkeys(("BoundModel", "DataDecl", "Model"), "dpppl.models.mixture"),
    "DDPModel": "dpppl.models.ddp",
    "Rankings": "dpppl.models.rankings",
    **dict.fromkeys(("CollapsedMixture", "Partition"), "dpppl.models.sites"),
    "SearchResult": "dpppl.search",
    "DPGaussianMixture": "dpppl.estimators",
    **dict.fromkeys(("association_variance", "coclustering"), "dpppl.analysis"),
    **dict.fromkeys(("plot_cluster_sizes", "plot_clusters", "plot_coclustering", "plot_log_joint",
                     "plot_num_clusters"), "dpppl.plots"),
}
"""Names that were on the top level and now live in a namespace: name -> module.
`dpppl.NAME` still returns the object, with a DeprecationWarning naming `MODULE.NAME`."""


ON_FIRST_USE = {
    **{name: f"dpppl.{name}" for name in ("analysis", "metrics", "plots", "simulate")},
    **dict.fromkeys(("point_estimate", "posterior_predictive", "predict"), "dpppl.analysis"),
    "sample_prior": "dpppl.simulate",
}
"""Top-level names imported when first used, not with `import dpppl` (a run from the command line
needs none of them): name -> its module (for a namespace, the module itself)."""


def __getattr__(name: str):
    if name in ON_FIRST_USE:
        module = importlib.import_module(ON_FIRST_USE[name])
        value = module if module.__name__ == f"dpppl.{name}" else getattr(module, name)
        globals()[name] = value
        return value
    if name in MOVED:
        warnings.warn(f"dpppl.{name} moved to {MOVED[name]}.{name}: import it from there "
                      f"(`from {MOVED[name]} import {name}`); the top-level name will be removed",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(MOVED[name]), name)
    raise AttributeError(f"module 'dpppl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = [
    # load or write a model, sample it, continue a run
    "load", "parse", "sample", "resume", "log_joint",
    # the model constructors from Python
    "DPMixture", "PitmanYorMixture", "StickBreakingMixture", "PseudoParticleMixture", "DDPMixture", "rankings",
    # DP mixtures inside a NumPyro model
    "dp_mixture", "PartitionGibbs", "from_numpyro",
    # after sampling
    "point_estimate", "posterior_predictive", "predict", "map_search", "sample_prior",
    # the errors a user catches
    "DPPPLError", "ModelError", "DataError", "ArgumentError", "KernelError", "HyperparameterError",
    # namespaces used in the first hour: dpppl.datasets.load, dpppl.kernels.available
    "datasets", "kernels",
]
