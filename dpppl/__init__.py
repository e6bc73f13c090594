"""dpppl: Dirichlet-process mixture models on NumPyro and JAX.

    import dpppl
    model = dpppl.load("models/gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_chains=4)

See the README and ``docs/`` for the model language, the kernels and the papers.
"""

from dpppl import config  # noqa: F401  (JAX settings changed on import: docs/configuration.md)
from dpppl import datasets, kernels
from dpppl.dsl import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture, load, parse
from dpppl.errors import DataError, KernelError, ModelError
from dpppl.families import (BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart,
    NormalKnownCov, NormalLogNormal)
from dpppl.run.driver import log_joint, sample
from dpppl.analysis import (DPGaussianMixture, coclustering, metrics, plot_cluster_sizes, plot_clusters,
    plot_coclustering, plot_log_joint, plot_num_clusters, plots, point_estimate, predict, sample_prior)
from dpppl.priors import CRP, Gamma, PitmanYor
from dpppl.search.beam import SearchResult, map_search
from dpppl.dsl import PseudoParticleMixture, StickBreakingMixture
from dpppl.priors import StickBreaking
from dpppl.models.ddp import DDPMixture, DDPModel
from dpppl.families import CoupledGaussian
from dpppl.priors.ddp import DDP
from dpppl.analysis import association_variance
from dpppl.families import GeneralizedMallows
from dpppl.models.rankings import Rankings, rankings

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
