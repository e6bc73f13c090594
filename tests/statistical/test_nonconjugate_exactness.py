"""kernel="subcluster" on NormalLogNormal components: the exact variant matches the
enumerated partition posterior (marginals by quadrature)."""

import pytest

import dpppl
from dpppl.diagnostics.arviz_compat import group, partition_group
from dpppl.testing import check_kernel_samples, exact_posterior
from tests.helpers.nonconjugate import FAMILY, X_SMALL


# both with -m slow (the mh run is the default run's single longest test, ~45 s, most of it
# sampling): by default the parameter moves are checked against their exact conditional law
# (tests/kernels/subcluster/test_parameter_moves.py), the random split / merge ratios against
# the log joint change (tests/kernels/subcluster/test_sampler.py), and the sub-cluster exact
# variant against enumeration on a conjugate family (test_exactness.py)
@pytest.mark.slow
@pytest.mark.parametrize("param_update", ["mh", "nuts"])
def test_exact_variant_matches_enumeration(param_update):
    """Restricted Gibbs with parameters moved by MH (or NUTS) and data-independent random
    splits / merges whose new parameters come from the proposal (eq. 21, first
    expression): exact, against the partition posterior with marginals by quadrature."""
    model = dpppl.DPMixture(dpppl.Gamma(1.0, 1.0), FAMILY)
    burn_in, draws = 100, 500
    idata = dpppl.sample(model, X_SMALL, kernel="subcluster", variant="exact", param_update=param_update,
                         num_warmup=0, num_samples=burn_in + draws, num_chains=64, seed=5, init="prior",
                         progress_bar=False, log_likelihood=False)
    post = group(idata, "posterior")
    result = check_kernel_samples(exact_posterior(model, X_SMALL), partition_group(idata)["z"].values[:, burn_in:],
                                  alpha=post["alpha"].values[:, burn_in:])
    assert result.passed, result.report
    assert "subcluster_param_accept_rate" in group(idata, "sample_stats")
    assert idata.attrs["exact"] == 1

