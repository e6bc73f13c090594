"""`kernel="auto"` (dpppl.kernels.auto): each model kind gets its kernel, the threshold on N
switches a DP mixture to the sub-cluster sampler, the choice is in attrs, options go to the
chosen kernel (an option it does not take is an error naming it), `build("auto", ...)` builds
it, and a resumed run runs the kernel that was chosen."""

from pathlib import Path

import pytest

import dpppl
from dpppl import kernels
from dpppl.diagnostics.arviz_compat import group
from dpppl.errors import KernelError
from dpppl.kernels.auto import SUBCLUSTER_MIN_POINTS, choose, resolve
from dpppl.run.checkpoint import read_checkpoint
from tests.run.runs import assert_same_run

ROOT = Path(__file__).resolve().parents[2]
SMALL, LARGE = SUBCLUSTER_MIN_POINTS - 1, SUBCLUSTER_MIN_POINTS


@pytest.mark.parametrize("path, n, spec", [
    ("models/gaussian_niw.dp", SMALL, "gibbs+splitmerge"),
    ("models/gaussian_niw.dp", LARGE, "subcluster"),
    ("models/bernoulli.dp", SMALL, "gibbs+splitmerge"),
    ("models/bernoulli.dp", LARGE, "subcluster"),
    ("models/pitman_yor.dp", SMALL, "gibbs+splitmerge"),
    ("models/pitman_yor.dp", LARGE, "gibbs+splitmerge"),  # the sub-cluster sampler refuses Pitman-Yor
    ("models/gaussian_lognormal.dp", SMALL, "subcluster"),  # non-conjugate: the only partition kernel
    ("models/stick_breaking.dp", LARGE, "sbgibbs+labelswap+labelpermute"),
    ("models/pseudo_particles.dp", SMALL, "sbgibbs+labelswap+labelpermute"),
    ("models/rankings.dp", SMALL, "mallows-slice"),
    ("examples/ddp.dp", SMALL, "ddp+ddpswap"),
])
def test_each_model_kind_gets_its_kernel(path, n, spec):
    model = dpppl.load(ROOT / path)
    choice = choose(model, n, 2)
    assert choice.spec == spec and choice.options == {}
    assert choice.reason
    kernels.check_applies(choice.spec, model)  # the chosen kernel can sample the model


def test_options_go_to_the_chosen_kernel_and_others_name_it():
    model = dpppl.load(ROOT / "models/gaussian_niw.dp")
    spec, options, choice = resolve("auto", model, 100, 2, {"num_proposals": 3})
    assert (spec, options) == ("gibbs+splitmerge", {"num_proposals": 3}) and choice.spec == spec
    assert resolve("gibbs", model, 100, 2, {}) == ("gibbs", {}, None)
    with pytest.raises(KernelError, match=r"'variant'.*kernel 'auto', which chose 'gibbs\+splitmerge'"):
        resolve("auto", model, 100, 2, {"variant": "exact"})  # a subcluster option: chosen above the threshold
    assert resolve("auto", model, LARGE, 2, {"variant": "exact"})[:2] == ("subcluster", {"variant": "exact"})


def test_build_auto_builds_the_chosen_kernel(niw_model, two_blobs):
    bound = niw_model.bind(two_blobs[0])
    kern = kernels.build("auto", bound, num_proposals=2)
    assert kern.name == "gibbs+splitmerge" and kern.exact
    with pytest.raises(KernelError, match="which chose"):
        kernels.build("auto", bound, beam_width=4)


def test_the_default_kernel_is_auto_and_attrs_say_what_ran(niw_model, two_blobs, tmp_path):
    x = two_blobs[0]
    run = dict(num_warmup=3, num_samples=6, num_chains=2, seed=2, progress_bar=False, num_proposals=2)
    idata = dpppl.sample(niw_model, x, checkpoint=tmp_path / "run.ckpt", **run)
    attrs = group(idata, "posterior").attrs
    assert attrs["kernel"] == "gibbs+splitmerge" and attrs["kernel_requested"] == "auto"
    assert attrs["kernel_reason"].startswith("a conjugate component on 30 < ")
    assert attrs["exact"] == 1
    assert "splitmerge_split_proposed" in group(idata, "sample_stats")  # the chosen kernel's moves ran
    # the checkpoint keeps the chosen kernel and options: a resumed run runs them
    spec, _, _ = read_checkpoint(tmp_path / "run.ckpt")
    assert (spec.kernel, spec.options, spec.kernel_requested) == ("gibbs+splitmerge", {"num_proposals": 2}, "auto")
    longer = dpppl.resume(tmp_path / "run.ckpt", num_samples=10, progress_bar=False)
    assert_same_run(longer, dpppl.sample(niw_model, x, **{**run, "num_samples": 10}))
    assert group(longer, "posterior").attrs["kernel_reason"] == attrs["kernel_reason"]


def test_numpyro_adapter_takes_auto(niw_model, two_blobs):
    """`dpppl.kernels.make` builds through `build`, so "auto" works there too."""
    assert kernels.make("auto", niw_model, two_blobs[0]).exact
    with pytest.raises(KernelError, match="which chose 'gibbs\\+splitmerge'"):
        kernels.make("auto", niw_model, two_blobs[0], beam_width=4)
