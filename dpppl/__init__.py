"""dpppl: Dirichlet-process mixture models on NumPyro and JAX.

    import dpppl
    model = dpppl.load("models/gaussian_niw.dp")
    idata = dpppl.sample(model, x, kernel="gibbs", num_chains=4)

See the README and `docs/` for the model language, the kernels and the papers.
"""

from dpppl import config  # noqa: F401  (JAX settings changed on import: docs/configuration.md)
from dpppl import datasets, kernels
from dpppl.analysis import (association_variance, coclustering, metrics, plot_cluster_sizes, plot_clusters,
                            plot_coclustering, plot_log_joint, plot_num_clusters, plots, point_estimate,
                            posterior_predictive, predict)
from dpppl.dsl import load, parse
from dpppl.errors import ArgumentError, DataError, DPPPLError, HyperparameterError, KernelError, ModelError
from dpppl.estimators import DPGaussianMixture
from dpppl.families import (BetaBernoulli, CoupledGaussian, DirichletMultinomial, GeneralizedMallows, NormalGamma,
                            NormalInverseWishart, NormalKnownCov, NormalLogNormal)
from dpppl.models.ddp import DDPMixture, DDPModel
from dpppl.models.mixture import (BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture, PseudoParticleMixture,
                                  StickBreakingMixture)
from dpppl.models.rankings import Rankings, rankings
from dpppl.models.sites import CollapsedMixture, Partition, dp_mixture
from dpppl.priors import CRP, DDP, Gamma, PitmanYor, StickBreaking
from dpppl.run.driver import log_joint, resume, sample
from dpppl.run.partition_gibbs import PartitionGibbs
from dpppl.search import SearchResult, map_search
from dpppl.simulate import sample_prior
from dpppl.version import __version__  # noqa: F401  (dpppl.__version__)

__all__ = [
    "ArgumentError", "BetaBernoulli", "BoundModel", "CRP", "DataDecl", "DataError", "DirichletMultinomial",
    "DPMixture", "DPPPLError", "HyperparameterError", "Gamma", "KernelError", "Model", "ModelError", "NormalGamma",
    "NormalInverseWishart", "NormalKnownCov", "NormalLogNormal", "PitmanYor", "PitmanYorMixture", "datasets",
    "kernels", "load", "log_joint", "parse", "resume", "sample",
    "DPGaussianMixture", "coclustering", "metrics", "plot_cluster_sizes", "plot_clusters",
    "plot_coclustering", "plot_log_joint", "plot_num_clusters", "plots", "point_estimate",
    "posterior_predictive", "predict", "sample_prior",
    "SearchResult", "map_search",
    "PseudoParticleMixture", "StickBreaking", "StickBreakingMixture",
    "DDP", "DDPMixture", "DDPModel", "CoupledGaussian", "association_variance",
    "GeneralizedMallows", "Rankings", "rankings",
    "CollapsedMixture", "Partition", "PartitionGibbs", "dp_mixture",
]
