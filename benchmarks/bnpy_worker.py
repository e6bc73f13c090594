"""Run bnpy's memoized VB with birth/merge/shuffle moves on one data split; write JSON.

Run by `bench_peers.py` with the Python of bnpy's own virtual environment (bnpy 0.1.7 is
not installable beside dpppl's JAX/NumPy; see benchmarks/README.md, "Peer table"):

    /work/bnpy-venv/bin/python benchmarks/bnpy_worker.py IN.npz OUT.json

`IN.npz` holds `x_train` (N, D), `x_test` (M, D) and `options`, a JSON string with `seed`,
`k_init`, `n_batch`, `n_lap`, `alpha` (the DP concentration, bnpy's `gamma0`), and the
Normal-Inverse-Wishart prior of dpppl's default `NormalInverseWishart` (what the peer table
scores every method under): `kappa0`, `nu0` and `cov_scale` (psi0 = cov_scale * cov(x)), the
prior mean being the training mean. bnpy's own names for that prior: `MMat='data'`,
`kappa=kappa0`, `nu=nu0`, `ECovMat='covdata'`, `sF=cov_scale`, which set
E[Sigma] = sF cov(x) = psi0 / (nu0 - D - 1) (bnpy's B = E[Sigma] (nu - D - 1) = psi0).

The call is `bnpy.run(Data, 'DPMixtureModel', 'Gauss', 'memoVB',
moves='birth,merge,shuffle', ...)`, timed with `time.perf_counter` around it (bnpy has no
compilation; its first call is its only call). Written back:

- `labels`: the hard assignment of the training points, argmax of bnpy's own local step
  `hmodel.calc_local_params(Data)["resp"]`;
- `test_log_density` (M,): the held-out log predictive density, computed here from bnpy's
  learned global parameters (bnpy 0.1.7 has no predictive-density call for held-out points):
  the variational posterior mixture
  `p(x*) = sum_k E_q[pi_k] t(x* | m_k, B_k (kappa_k + 1) / (kappa_k (nu_k - D + 1)), nu_k - D + 1)
  + E_q[pi_rest] t(x* | prior)`, with E_q[pi_k] = E[u_k] prod_{j<k} (1 - E[u_j]) from the
  stick posteriors Beta(eta1_k, eta0_k), the leftover stick mass given to a new component
  under the prior predictive, and each component's Normal-Inverse-Wishart posterior
  predictive, a multivariate Student t (Murphy 2007, "Conjugate Bayesian analysis of the
  Gaussian distribution", eq. 232);
- `seconds`, `num_clusters`, `laps`, `status` (converged or not), `elbo_per_point` (minus bnpy's
  loss), and bnpy's own trace of laps, seconds and components.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
import time
import warnings

import numpy as np

# bnpy 0.1.7 uses aliases removed in NumPy 1.24 / 2.0 and Python 3.11; restore them for this process only.
for _name, _value in (("float", float), ("int", int), ("bool", bool), ("object", object), ("complex", complex),
                      ("bool8", np.bool_), ("unicode_", np.str_), ("Inf", np.inf), ("NaN", np.nan), ("infty", np.inf)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(np, _name):
            setattr(np, _name, _value)
if not hasattr(inspect, "getargspec"):  # removed in Python 3.11; bnpy's Runner calls it
    inspect.getargspec = lambda fn: tuple(inspect.getfullargspec(fn))[:4]


def student_t_logpdf(x, loc, shape, dof):
    """log t_dof(x | loc, shape) for the rows of x (M, D); shape (D, D)."""
    from scipy.special import gammaln

    d = x.shape[1]
    chol = np.linalg.cholesky(shape)
    sol = np.linalg.solve(chol, (x - loc).T)
    maha = np.sum(sol * sol, axis=0)
    logdet = 2.0 * np.sum(np.log(np.diag(chol)))
    return (gammaln((dof + d) / 2) - gammaln(dof / 2) - 0.5 * d * np.log(dof * np.pi) - 0.5 * logdet
            - 0.5 * (dof + d) * np.log1p(maha / dof))


def predictive_log_density(hmodel, x_test):
    """The variational posterior predictive mixture at x_test (see the module docstring)."""
    from scipy.special import logsumexp

    alloc, obs = hmodel.allocModel, hmodel.obsModel
    d = x_test.shape[1]
    eu = alloc.eta1 / (alloc.eta1 + alloc.eta0)
    rest = np.concatenate([[1.0], np.cumprod(1.0 - eu)])
    weights = np.append(eu * rest[:-1], rest[-1])
    post, prior = obs.Post, obs.Prior
    params = [(post.m[k], post.B[k], post.kappa[k], post.nu[k]) for k in range(len(eu))]
    params.append((prior.m, prior.B, prior.kappa, prior.nu))
    columns = []
    for w, (m, b, kappa, nu) in zip(weights, params):
        dof = nu - d + 1
        columns.append(np.log(w) + student_t_logpdf(x_test, m, b * (kappa + 1) / (kappa * dof), dof))
    return logsumexp(np.stack(columns, axis=1), axis=1)


def main(in_path: str, out_path: str) -> None:
    import bnpy

    data = np.load(in_path)
    x_train, x_test = np.asarray(data["x_train"], float), np.asarray(data["x_test"], float)
    opts = json.loads(str(data["options"]))
    d = x_train.shape[1]
    train = bnpy.data.XData(X=x_train)
    kwargs = dict(K=opts["k_init"], initname="randexamples", nLap=opts["n_lap"], nBatch=opts["n_batch"],
                  moves="birth,merge,shuffle", gamma0=opts["alpha"], MMat="data", kappa=opts["kappa0"],
                  nu=opts["nu0"], ECovMat="covdata", sF=opts["cov_scale"], taskID=opts["seed"] + 1,
                  doWriteStdOut=False, convergeThr=opts.get("converge_thr", 0.01), saveEvery=10**9)
    # its birth moves log to files under the output path, so it must have one
    with tempfile.TemporaryDirectory() as out_dir:
        tic = time.perf_counter()
        hmodel, info = bnpy.run(train, "DPMixtureModel", "Gauss", "memoVB", output_path=out_dir, **kwargs)
        seconds = time.perf_counter() - tic
    resp = hmodel.calc_local_params(train)["resp"]
    labels = np.argmax(resp, axis=1)
    result = {"seconds": seconds, "labels": labels.tolist(), "num_clusters": int(np.unique(labels).size),
              "components": int(hmodel.allocModel.K), "d": d,
              "test_log_density": predictive_log_density(hmodel, x_test).tolist(),
              "laps": float(info["lap_history"][-1]), "status": str(info["status"]),
              "elbo_per_point": -float(info["loss"]), "call": kwargs,
              "trace": {"laps": np.asarray(info["lap_history"]).tolist(),
                        "seconds": np.asarray(info["elapsed_time_sec_history"]).tolist(),
                        "num_components": np.asarray(info["K_history"]).tolist()}}
    with open(out_path, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(*sys.argv[1:3])
