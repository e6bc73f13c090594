"""Compilation of models to NumPyro (dpppl.models.compile)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from scipy import stats

import dpppl
from tests.helpers.stick_breaking import NKC, X4


def test_compiled_numpyro_model_has_beta_a_i_b_i_sticks():
    model = dpppl.StickBreakingMixture(a=lambda i: 1.0 + 0.0 * i, b="2 + i", component=NKC)
    fn = model.bind(X4).numpyro_model(6)
    v = np.array([0.3, 0.5, 0.2, 0.7, 0.1])

    def log_prob_of_sticks(v):  # one compiled program, not the model's ops one by one
        seeded = numpyro.handlers.seed(fn, 0)
        trace = numpyro.handlers.trace(numpyro.handlers.substitute(seeded, {"v": v})).get_trace(X4[:, None])
        return trace["v"]["fn"].log_prob(v)

    want = stats.beta.logpdf(v, 1.0, 2.0 + np.arange(1, 6)).sum()
    assert float(jax.jit(log_prob_of_sticks)(jnp.asarray(v))) == pytest.approx(want, rel=1e-10)
    finite = dpppl.PseudoParticleMixture([1.0, 0.5, 2.0], NKC).bind(X4).numpyro_model(20)
    assert finite.truncation == 3  # V_3 = 1: three sticks are the exact model

