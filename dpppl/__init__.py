"""dpppl: Dirichlet-process mixture models on NumPyro and JAX.

    import dpppl
    model = dpppl.load("models/gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_chains=4)

See the README and ``docs/`` for the model language, the kernels and the papers.
"""

from . import _config  # noqa: F401  (float64 unless DPPPL_X64=0)
from . import datasets, kernels
from .dsl import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture, load, parse
from .errors import DataError, KernelError, ModelError
from .families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
                       NormalKnownCov, NormalLogNormal)
from .inference import log_joint, sample
from .analysis import (DPGaussianMixture, coclustering, metrics, plot_cluster_sizes, plot_clusters,
                       plot_coclustering, plot_log_joint, plot_num_clusters, plots, point_estimate,
                       predict, sample_prior)
from .priors import CRP, Gamma, PitmanYor
from .search import SearchResult, map_search
from .dsl import PseudoParticleMixture, StickBreakingMixture
from .priors import StickBreaking
from .ddp import DDPMixture, DDPModel
from .families import CoupledGaussian
from .priors.ddp import DDP
from .analysis import association_variance
from .families import GeneralizedMallows
from .rankings import Rankings, rankings

__version__ = "0.1.0"

__all__ = [
    "BetaBernoulli", "BoundModel", "CRP", "DataDecl", "DataError", "DirichletMultinomial",
    "DPMixture", "Gamma", "KernelError", "Model", "ModelError", "NormalGamma",
    "NormalInverseWishart", "NormalKnownCov", "NormalLogNormal", "PitmanYor", "PitmanYorMixture", "datasets",
    "kernels", "load", "log_joint", "parse", "sample",
    "DPGaussianMixture", "coclustering", "metrics", "plot_cluster_sizes", "plot_clusters",
    "plot_coclustering", "plot_log_joint", "plot_num_clusters", "plots", "point_estimate",
    "predict", "sample_prior",
    "SearchResult", "map_search",
    "PseudoParticleMixture", "StickBreaking", "StickBreakingMixture",
    "DDP", "DDPMixture", "DDPModel", "CoupledGaussian", "association_variance",
    "GeneralizedMallows", "Rankings", "rankings",
]
