"""dpppl: Dirichlet-process mixture models on NumPyro and JAX."""

from . import _config  # noqa: F401  (float64 unless DPPPL_X64=0)
from .dsl.spec import BoundModel, DataDecl, DPMixture, Model, PitmanYorMixture
from .errors import DataError, KernelError, ModelError
from .families import NormalInverseWishart
from .priors import CRP, Gamma, PitmanYor

__version__ = "0.1.0"
from . import kernels
from .inference import log_joint, sample
