"""dpppl: Dirichlet-process mixture models on NumPyro and JAX.

    import dpppl
    model = dpppl.load("models/gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_chains=4)

See the README and ``docs/`` for the model language, the kernels and the papers.
"""

from dpppl import config as _config  # noqa: F401  (float64 unless DPPPL_X64=0)
from dpppl import datasets, kernels
from dpppl.dsl import load, parse
from dpppl.models.mixture import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture
from dpppl.errors import DataError, KernelError, ModelError
from dpppl.version import __version__
from dpppl.families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
    NormalKnownCov, NormalLogNormal)
from dpppl.run.driver import log_joint, sample
from dpppl.analysis import (DPGaussianMixture, coclustering, metrics, plot_cluster_sizes, plot_clusters,
    plot_coclustering, plot_log_joint, plot_num_clusters, plots, point_estimate, predict, sample_prior)
from dpppl.priors import CRP, Gamma, PitmanYor
from dpppl.search.beam import SearchResult, map_search
from dpppl.models.mixture import PseudoParticleMixture, StickBreakingMixture
from dpppl.priors import StickBreaking
from dpppl.models.ddp import DDPMixture, DDPModel
from dpppl.families import CoupledGaussian
from dpppl.priors.ddp import DDP
from dpppl.analysis import association_variance
from dpppl.families import GeneralizedMallows
from dpppl.models.rankings import Rankings, rankings


__all__ = [
    "__version__",
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
