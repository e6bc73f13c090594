"""The dependent-DP model (Porteous et al. 2006, sec. 5): model files, data forms and errors."""


import jax.numpy as jnp
import numpy as np
import pytest

import dpppl
from dpppl.models.ddp_state import slot_statistics
from tests.helpers.ddp import MODEL_TEXT, small_model


# ----------------------------------------------------------------------------- model


def test_model_file_builds_a_ddp_model():
    model = dpppl.parse(MODEL_TEXT)
    assert isinstance(model, dpppl.DDPModel)
    assert model.data.by == "t" and model.prior == dpppl.DDP(a=1.0, b=2.0)
    fam = model.bind((np.zeros((4, 2)), np.array([0.0, 0.0, 2.0, 3.0]))).family
    assert fam.gamma.shape == (3, 3)
    assert fam.gamma[0, 1] == pytest.approx(np.exp(-0.5 * 2.0)) and fam.gamma[0, 0] == 1.5


@pytest.mark.parametrize("text, message", [
    (MODEL_TEXT.replace("DDP(a = 1, b = 2)", "CRP(1)"), "need a dependent DP"),
    (MODEL_TEXT.replace(" by t", ""), "a DDP needs time-indexed data"),
    (MODEL_TEXT.replace("CoupledGaussian(a = 1, beta = 0.5, delta = 1, b = 1.5, mu0 = [0, 0], nu0 = 4, psi0 = 0.5)",
                        "NormalInverseWishart()"), "CoupledGaussian components"),
    (MODEL_TEXT.replace("mu0 = [0, 0]", "mu0 = t"), "'t' is the data's time"),
])
def test_model_file_errors(text, message):
    with pytest.raises(dpppl.ModelError, match=message):
        dpppl.parse(text)


def test_data_forms_agree_and_bad_times_raise():
    model = small_model()
    x = np.arange(12.0).reshape(6, 2)
    t = np.array([3.0, 1.0, 1.0, 7.0, 3.0, 1.0])
    for data in ((x, t), {"x": x, "t": t}, np.column_stack([x, t])):
        bound = model.bind(data)
        np.testing.assert_array_equal(bound.observed()["x"], x)
        np.testing.assert_array_equal(bound.x, x - x.mean(axis=0))  # the frame kernels work in
        np.testing.assert_array_equal(bound.times, [1.0, 3.0, 7.0])
        np.testing.assert_array_equal(bound.slices, [1, 0, 0, 2, 1, 0])
    for data, message in [((x, t[:-1]), "5 entries but the data have 6"),
                          ((x, np.where(t == 7.0, np.inf, t)), "non-finite value .* at point 3"),
                          ({"x": x}, "missing 't'"), (x[:, :1], "at least two columns"),
                          ((x, t.astype(str)), "must be numeric"),
                          ((x.astype(complex), t), "data 'x' is complex"),
                          ((x, t.astype(complex)), "time 't' is complex"),
                          (np.column_stack([x, t]).astype(complex), "data 'x' are complex"),
                          ((np.ma.masked_less(x, 1.0), t), "data 'x' is a masked array .* at row 0, column 0"),
                          ((x, np.ma.masked_greater(t, 5.0)), "data 't' is a masked array .* at row 3"),
                          (np.ma.masked_less(np.column_stack([x, t]), 1.0), "masked array")]:
        with pytest.raises(dpppl.DataError, match=message):
            model.bind(data)
    with pytest.raises(dpppl.DataError, match="not positive definite"):
        small_model(a=1.0, b=0.5, beta=0.001).bind((x, t))



def test_padded_points_are_in_no_slice_and_no_label():
    """`DDPBound.padded` (what the runner runs the DDP kernels on from 64 points): the real points
    and their slices as they were, the padding with label -1 in no statistics, no time and no
    data as given."""
    x = np.random.default_rng(0).normal(size=(7, 2))
    t = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 3.0, 3.0])
    bound = small_model().bind((x, t))
    padded = bound.padded(10)
    assert (padded.num_points, int(padded.num_valid), int(padded.points), bound.points) == (10, 7, 7, 7)
    assert padded.observed_x is None and np.isnan(padded.t[7:]).all()
    np.testing.assert_array_equal(padded.slices[:7], bound.slices)
    np.testing.assert_array_equal(padded.times, bound.times)
    np.testing.assert_array_equal(padded.empty_state(4).z, [0] * 7 + [-1] * 3)
    labels = np.array([0, 1, 1, 0, 2, 2, 0])
    real = slot_statistics(jnp.asarray(bound.x), jnp.asarray(bound.slices), jnp.asarray(labels), 4, 3)
    padded_labels = jnp.asarray(np.r_[labels, [-1] * 3])
    for got, want in zip(slot_statistics(jnp.asarray(padded.x), jnp.asarray(padded.slices), padded_labels, 4, 3),
                         real):
        np.testing.assert_array_equal(got, want)


def test_sequential_start_is_the_seating_alone(monkeypatch):
    """`DDPBound.seat` (a chain's sequential start) seats the points and stops: no parameter update
    (eq. 11) is traced into its program, which is the seating alone (issue 35). Traced, not run."""
    import jax

    import dpppl.models.ddp as ddp_module

    def no_update(*args, **kwargs):
        raise AssertionError("the sequential start ran a parameter update")

    monkeypatch.setattr(ddp_module, "update_parameters", no_update)
    x = np.random.default_rng(0).normal(size=(7, 2))
    bound = small_model().bind((x, np.array([0.0, 0.0, 1.0, 1.0, 1.0, 3.0, 3.0])))
    shapes = jax.eval_shape(lambda key: bound.seat(key, bound.empty_state(4)), jax.random.key(0))
    assert shapes.z.shape == (7,) and shapes.stats.mu.shape == (4, 3, 2)
    with pytest.raises(AssertionError, match="ran a parameter update"):  # the labels' start still updates
        jax.eval_shape(lambda key: bound.state_from_labels(key, jnp.zeros(7, jnp.int32), 4), jax.random.key(0))
