"""What ArviZ sees by default, and where dpppl keeps the labels (dpppl.diagnostics.arviz_compat)."""

import matplotlib

matplotlib.use("Agg")

import sys

import h5py
import matplotlib.pyplot as plt
import numpy as np
import pytest

import dpppl
from dpppl.analysis.partitions import coclustering, posterior_draws
from dpppl.diagnostics.arviz_compat import (PARTITION_GROUPS, RunGroups, arviz, group, has_group, labels,
                                            partition_group, to_arviz, writes_without_arviz)
from dpppl.run.output import CONVERSION_MODULES, import_conversion_modules, run_groups_only
from dpppl.diagnostics.summaries import label_summaries
from dpppl.errors import DataError

LABEL_INVARIANT = {"num_clusters", "largest_cluster", "entropy", "alpha", "lp"}


@pytest.fixture(scope="module")
def idata(niw_model, two_blobs):
    """Collapsed Gibbs on the conftest model and data (the programs tests/run/test_driver.py compiles)."""
    x, _ = two_blobs
    return dpppl.sample(niw_model, x, kernel="gibbs", num_warmup=5, num_samples=30, num_chains=2, seed=2,
                        progress_bar=False)


def test_arviz_without_var_names_sees_only_label_invariant_quantities(idata):
    az = arviz()
    assert set(group(idata, "posterior").data_vars) == LABEL_INVARIANT
    assert set(az.summary(idata).index) == LABEL_INVARIANT
    assert set(az.ess(idata).data_vars) == LABEL_INVARIANT
    assert set(az.rhat(idata).data_vars) == LABEL_INVARIANT
    axes = az.plot_trace(idata)
    assert axes.shape == (len(LABEL_INVARIANT), 2)
    assert {ax.get_title() for ax in axes[:, 0]} == LABEL_INVARIANT
    plt.close("all")
    axes = az.plot_autocorr(idata)
    titles = [ax.get_title() for ax in np.ravel(axes) if ax.get_title()]  # "name\nchain"
    assert sorted(titles) == sorted(f"{name}\n{chain}" for name in LABEL_INVARIANT for chain in (0, 1))
    plt.close("all")


def test_lp_in_posterior_is_the_sample_stats_lp(idata):
    np.testing.assert_array_equal(group(idata, "posterior")["lp"], group(idata, "sample_stats")["lp"])


def test_the_labels_live_in_the_partition_group_where_dpppl_finds_them(idata, two_blobs):
    x, _ = two_blobs
    assert has_group(idata, PARTITION_GROUPS["posterior"])
    part = partition_group(idata)
    assert part["z"].dims == ("chain", "draw", "point") and part["cluster_sizes"].dims[-1] == "cluster"
    z = labels(idata)
    assert z.shape == (2, 30, x.shape[0])
    np.testing.assert_array_equal(z, part["z"])
    np.testing.assert_array_equal(posterior_draws(idata), z.reshape(-1, x.shape[0]))
    np.testing.assert_array_equal(label_summaries(z)["num_clusters"], group(idata, "posterior")["num_clusters"])
    assert coclustering(idata).shape == (x.shape[0], x.shape[0])


def test_netcdf_round_trip_keeps_the_labels(idata, tmp_path):
    path = tmp_path / "run.nc"
    idata.to_netcdf(str(path))
    back = arviz().from_netcdf(str(path))
    assert has_group(back, PARTITION_GROUPS["posterior"])
    np.testing.assert_array_equal(labels(back), labels(idata))
    np.testing.assert_array_equal(partition_group(back)["cluster_sizes"], partition_group(idata)["cluster_sizes"])
    assert set(arviz().summary(back).index) == LABEL_INVARIANT


def test_a_file_written_before_the_move_still_reads(tmp_path):
    """Runs written with z in ``posterior`` (and prior simulations with z in ``prior``)."""
    z = np.array([[[0, 0, 1], [0, 1, 2]]], np.int32)
    old = to_arviz({"posterior": {"z": z, **label_summaries(z)}, "sample_stats": {"lp": np.zeros((1, 2))}},
                   dims={"z": ["point"], "cluster_sizes": ["cluster"]})
    path = tmp_path / "old.nc"
    old.to_netcdf(str(path))
    back = arviz().from_netcdf(str(path))
    np.testing.assert_array_equal(labels(back), z)
    np.testing.assert_array_equal(partition_group(back)["z"], z)
    np.testing.assert_array_equal(posterior_draws(back), z[0])
    old_prior = to_arviz({"prior": {"z": z}}, dims={"z": ["point"]})
    np.testing.assert_array_equal(labels(old_prior), z)


def test_prior_simulation_keeps_its_labels_out_of_the_prior_group():
    model = dpppl.DPMixture(dpppl.Gamma(2.0, 1.0), dpppl.NormalKnownCov(sigma2=0.5, mu0=1.0, tau2=2.0))
    prior = dpppl.sample_prior(model, 12, num_samples=50, seed=1)
    assert set(group(prior, "prior").data_vars) == {"num_clusters", "largest_cluster", "entropy", "alpha"}
    z = labels(prior)
    assert z.shape == (1, 50, 12)
    np.testing.assert_array_equal(partition_group(prior, "prior")["z"], z)
    assert set(arviz().summary(prior, group="prior").index) == {"num_clusters", "largest_cluster", "entropy",
                                                               "alpha"}


def test_labels_missing_is_a_data_error():
    ds = to_arviz({"sample_stats": {"lp": np.zeros((1, 2))}})
    with pytest.raises(DataError, match="no labels"):
        labels(ds)


def _without_created_at(dataset):
    dataset = dataset.copy()
    dataset.attrs.pop("created_at")
    return dataset


def test_the_command_line_s_run_imports_xarray_in_a_thread_while_its_chains_run():
    """Inside `run_groups_only` (where ArviZ 0.x is installed) the run's conversion modules are imported
    in a thread of their own; elsewhere nothing is started (ArviZ is imported where it is used)."""
    assert import_conversion_modules() is None
    with run_groups_only():
        thread = import_conversion_modules()
    if not writes_without_arviz():
        assert thread is None
        return
    thread.join(60)
    assert thread.name == "dpppl-imports" and not thread.is_alive()
    assert all(name in sys.modules for name in CONVERSION_MODULES)


def test_a_run_as_groups_is_the_inference_data_and_writes_the_same_file(idata, niw_model, two_blobs, tmp_path):
    """What the command line writes without ArviZ (`run_groups_only`) is the InferenceData's groups and file."""
    x, _ = two_blobs
    with run_groups_only():
        run = dpppl.sample(niw_model, x, kernel="gibbs", num_warmup=5, num_samples=30, num_chains=2, seed=2,
                           progress_bar=False)
    assert isinstance(run, RunGroups) and run.groups() == list(idata.groups())
    assert has_group(run, "posterior") and partition_group(run)["z"].shape == (2, 30, len(x))
    for name in idata.groups():
        assert _without_created_at(group(run, name)).identical(_without_created_at(group(idata, name))), name
    run.to_netcdf(tmp_path / "groups.nc")
    idata.to_netcdf(str(tmp_path / "idata.nc"))
    written, expected = (arviz().from_netcdf(str(tmp_path / name)) for name in ("groups.nc", "idata.nc"))
    assert written.groups() == expected.groups()
    for name in expected.groups():
        assert _without_created_at(written[name]).identical(_without_created_at(expected[name])), name
    with h5py.File(tmp_path / "groups.nc") as f:  # labels compressed, floating-point draws as they are
        assert f["posterior_partition/z"].compression == "gzip" and f["log_likelihood/x"].compression is None
