"""The dependent-DP kernels: which models they accept, and what a run records."""


import numpy as np
import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import arviz, partition_group
from dpppl.models.ddp import DDPMixture
from tests.helpers.ddp import small_model


def test_kernels_refuse_the_wrong_models():
    x = np.zeros((6, 2))
    t = np.arange(6.0)
    for kernel in ("gibbs", "splitmerge", "ddp+gibbs"):
        with pytest.raises(dpppl.KernelError, match="DDP model"):
            dpppl.sample(small_model(), (x, t), kernel=kernel)
    for kernel in ("ddp", "ddpswap"):
        with pytest.raises(dpppl.KernelError, match="dependent DP"):
            dpppl.sample(dpppl.DPMixture(1.0, dpppl.NormalInverseWishart()), x, kernel=kernel)
    with pytest.raises(dpppl.KernelError, match="intervals"):
        dpppl.sample(small_model(), (x, t), kernel="ddp+ddpswap", intervals="sometimes")
    with pytest.raises(dpppl.ArgumentError, match="option record_atoms of kernel 'ddp' must be True or False"):
        dpppl.sample(small_model(), (x, t), kernel="ddp+ddpswap", record_atoms="yes")
    with pytest.raises(dpppl.KernelError, match="no collapsed log joint"):
        dpppl.log_joint(small_model(), (x, t), np.zeros(6, int))


# ----------------------------------------------------------------------------- sampling


@pytest.mark.slow  # compile-bound (~130 s on 2 busy cores); the Geweke test below runs the same hybrid
def test_sample_records_labels_lp_and_swap_acceptance():
    x, labels = dpppl.datasets.load("blobs", num_slices=4, points_per_blob=5, num_clusters=2, seed=1)
    model = DDPMixture()
    kw = dict(kernel="ddp+ddpswap", num_warmup=0, num_samples=10, seed=3, progress_bar=False, num_swaps=20)
    idata = dpppl.sample(model, x, **kw)
    post, stats = idata.posterior, idata.sample_stats
    assert partition_group(idata)["z"].shape == (1, 10, 40)
    assert "num_clusters" in post and "largest_cluster" in post
    assert np.all(np.isfinite(stats["lp"].values))
    assert "ddpswap_accept_prob" in stats and "ddpswap_accepted_full" in stats
    rates = stats["ddpswap_accept_prob"].values
    assert np.all((rates >= 0) & (rates <= 1))
    np.testing.assert_array_equal(idata.observed_data["t"].values, x[:, -1])
    mu, cov = partition_group(idata)["atom_mu"], partition_group(idata)["atom_cov"]  # record_atoms=True
    assert mu.dims[2:] == ("slot", "slice", "dim") and mu.shape[3:] == (4, 2) and cov.shape[-2:] == (2, 2)
    assert idata.log_likelihood["x"].shape == (1, 10, 40) and arviz().loo(idata).n_data_points == 40

