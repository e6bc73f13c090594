"""The summary statistics and convergence diagnostics of ArviZ's `summary(kind="all")`, without ArviZ.

`dpppl summary` and the summary `dpppl sample` prints show, per quantity, the columns of ArviZ 0.x's
`az.summary(data, kind="all", hdi_prob=INTERVAL, round_to="none")`: `mean`, `sd` (ddof 1), the
highest-density interval `hdi_5%` / `hdi_95%` (the narrowest interval holding `INTERVAL`, 90%, of the
draws: the one interval level of dpppl's summaries; `hdi_prob=` gives another), `mcse_mean`,
`mcse_sd`, `ess_bulk`, `ess_tail` and `r_hat` (the rank-normalized split R-hat, the larger of bulk and
tail: Vehtari, Gelman, Simpson, Carpenter and Buerkner 2021, "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC"). The arithmetic is ArviZ's, step for
step (FFT autocovariances, Geyer's initial monotone sequence, Blom's rank offset 3/8, quantiles of
type 7), so the numbers are the same; computed here with NumPy, the command line does not import ArviZ
(with Matplotlib and SciPy's statistics, about a second of every `dpppl sample`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

INTERVAL = 0.9
"""The share of the draws in every interval dpppl's summaries show: the table's HDI columns and the
headline intervals of `dpppl summary` (K, alpha, hyperparameters)."""


def columns(hdi_prob: float = INTERVAL) -> tuple[str, ...]:
    """The columns of `summary_table(..., hdi_prob)`, named as ArviZ names them (`hdi_5%`, `hdi_95%` at 0.9)."""
    alpha = 1 - hdi_prob
    return ("mean", "sd", f"hdi_{100 * alpha / 2:g}%", f"hdi_{100 * (1 - alpha / 2):g}%", "mcse_mean", "mcse_sd",
            "ess_bulk", "ess_tail", "r_hat")


COLUMNS = columns()
"""The columns of the summary table at `INTERVAL`."""


def explain(hdi_prob: float = INTERVAL) -> list[str]:
    """One line per column of the summary table, saying what it is (printed under the table)."""
    _, _, low, high, *_ = columns(hdi_prob)
    return ["mean, sd: posterior mean and standard deviation (the draws of all chains)",
            f"{low}, {high}: the narrowest interval holding {hdi_prob:.0%} of the draws",
            "mcse_mean, mcse_sd: Monte Carlo standard error of the mean and of the sd",
            "ess_bulk, ess_tail: effective sample size, the independent draws the chains are worth (centre; tails)",
            "r_hat: between- against within-chain variance: 1.00 when the chains agree, above 1.01 when not"]


def summary_table(dataset, hdi_prob: float = INTERVAL):
    """One row per scalar quantity of `dataset` (an `xarray.Dataset` of (chain, draw, ...) variables;
    `name[i]` for element i of a variable with one more axis, by its coordinate), with the columns
    `columns(hdi_prob)`, as ArviZ 0.x's `summary(dataset, kind="all", hdi_prob=hdi_prob, round_to="none")`:
    a `pandas.DataFrame`."""
    import pandas as pd  # noqa: PLC0415  (xarray's dependency, imported with the first summary)

    rows, index = [], []
    for name, var in dataset.data_vars.items():
        var = var.transpose("chain", "draw", ...)
        values = np.asarray(var.values, dtype=float)
        extra = [d for d in var.dims if d not in ("chain", "draw")]
        if not extra:
            rows.append(_statistics(values, hdi_prob))
            index.append(str(name))
            continue
        labels = np.asarray(var[extra[0]].values)
        for i in range(values.shape[2]):
            rows.append(_statistics(values[:, :, i], hdi_prob))
            index.append(f"{name}[{labels[i]}]")
    return pd.DataFrame(rows, index=index, columns=list(columns(hdi_prob)))


def _statistics(ary: np.ndarray, hdi_prob: float) -> list:
    """The row of one quantity's draws `ary` (chain, draw)."""
    lower, upper = hdi(ary, hdi_prob)
    return [ary.mean(), ary.std(ddof=1), lower, upper, *_multichain_statistics(ary)]


def hdi(ary: np.ndarray, prob: float = INTERVAL) -> tuple[float, float]:
    """The narrowest interval holding `prob` of the draws (ArviZ's `_hdi`, unimodal)."""
    ary = np.sort(ary.ravel())
    n = len(ary)
    inside = int(np.floor(prob * n))
    widths = np.subtract(ary[inside:], ary[:n - inside], dtype=np.float64)
    if len(widths) == 0:
        return np.nan, np.nan
    lowest = np.argmin(widths)
    return ary[lowest], ary[lowest + inside]


def _not_valid(ary: np.ndarray, min_draws: int = 4, min_chains: int = 1, check_shape: bool = True) -> bool:
    """Whether ArviZ returns NaN for these draws: a NaN draw, or too few draws or chains."""
    if np.isnan(ary).any():
        return True
    return check_shape and (ary.shape[0] < min_chains or ary.shape[1] < min_draws)


def _multichain_statistics(ary: np.ndarray) -> list:
    """mcse_mean, mcse_sd, ess_bulk, ess_tail and r_hat (ArviZ's `_multichain_statistics`, focus mean)."""
    ary = np.atleast_2d(ary)
    if _not_valid(ary):
        return [np.nan] * 5
    z_split = _z_scale(_split_chains(ary))
    q05, q95 = np.quantile(ary, [0.05, 0.95])
    ess_tail = min(_ess(_split_chains(ary <= q05)), _ess(_split_chains(ary <= q95)))
    if _not_valid(ary, min_chains=2):
        r_hat = np.nan
    else:
        folded = np.abs(ary - np.median(ary))
        r_hat = max(_rhat(z_split), _rhat(_z_scale(_split_chains(folded))))
    ess_mean = _ess(_split_chains(ary))
    sims_c2 = (ary - ary.mean()) ** 2
    sims_c2_sum = sims_c2.sum()
    mcse_mean = np.sqrt(sims_c2_sum / (sims_c2.size - 1) / ess_mean)
    evar = sims_c2_sum / sims_c2.size
    varvar = ((sims_c2 ** 2).mean() - evar ** 2) / _ess(_split_chains(sims_c2))
    with np.errstate(divide="ignore", invalid="ignore"):  # a constant quantity: NaN, said by the caller
        mcse_sd = np.sqrt(varvar / evar / 4)
    return [mcse_mean, mcse_sd, _ess(z_split), ess_tail, r_hat]


def _split_chains(ary: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as two chains."""
    half = ary.shape[1] // 2
    return np.vstack((ary[:, :half], ary[:, -half:]))


def _ranks(ary: np.ndarray) -> np.ndarray:
    """Ranks 1..n of the flattened `ary`, ties given their average rank (SciPy's `rankdata`)."""
    flat = ary.ravel()
    order = np.argsort(flat, kind="mergesort")
    ordered = flat[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = first.cumsum()[np.argsort(order, kind="mergesort")]
    starts = np.r_[np.nonzero(first)[0], len(first)]
    return 0.5 * (starts[dense] + starts[dense - 1] + 1)


def _z_scale(ary: np.ndarray) -> np.ndarray:
    """Rank-normalized draws: the normal quantiles of the ranks with Blom's offset 3/8."""
    rank = _ranks(ary)
    return ndtri((rank - 3 / 8) / (rank.size - 2 * 3 / 8 + 1)).reshape(ary.shape)


def _rhat(ary: np.ndarray) -> float:
    """The potential scale reduction of the chains (rows) of `ary`."""
    ary = np.asarray(ary, dtype=float)
    if _not_valid(ary, check_shape=False):
        return np.nan
    n = ary.shape[1]
    between = n * np.var(np.mean(ary, axis=1), ddof=1)
    within = np.mean(np.var(ary, axis=1, ddof=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _autocov(ary: np.ndarray) -> np.ndarray:
    """Autocovariances of each row of `ary` at lags 0..n-1, by FFT (ArviZ's `autocov`)."""
    n = ary.shape[1]
    m = _next_fast_len(2 * n)
    centred = ary - ary.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=m, axis=1)
    spectrum *= np.conjugate(spectrum)
    return np.fft.irfft(spectrum, n=m, axis=1)[:, :n] / n


def autocorrelation(ary: np.ndarray) -> np.ndarray:
    """The autocorrelation of each chain (row) of `ary` at lags 0..n-1 (1 at lag 0; NaN for a
    chain whose draws are all equal)."""
    acov = _autocov(np.asarray(ary, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        return acov / acov[:, :1]


def _next_fast_len(target: int) -> int:
    """The smallest 5-smooth number (2^a 3^b 5^c) >= `target` (SciPy's `next_fast_len` for real FFTs)."""
    best = None
    p5 = 1
    while p5 < 2 * target:
        p35 = p5
        while p35 < 2 * target:
            p = p35
            while p < target:
                p *= 2
            best = p if best is None or p < best else best
            p35 *= 3
        p5 *= 5
    return best


def _ess(ary: np.ndarray) -> float:
    """The effective sample size of the chains (rows) of `ary` (ArviZ's `_ess`)."""
    ary = np.asarray(ary, dtype=float)
    if _not_valid(ary, check_shape=False):
        return np.nan
    if (np.max(ary) - np.min(ary)) < np.finfo(float).resolution:
        return ary.size
    n_chain, n_draw = ary.shape
    acov = _autocov(ary)
    chain_mean = ary.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, ddof=1)
    rho_hat_t = np.zeros(n_draw)
    rho_hat_even = 1.0
    rho_hat_t[0] = rho_hat_even
    rho_hat_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho_hat_t[1] = rho_hat_odd
    t = 1  # Geyer's initial positive sequence
    while t < (n_draw - 3) and (rho_hat_even + rho_hat_odd) > 0.0:
        rho_hat_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_hat_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if (rho_hat_even + rho_hat_odd) >= 0:
            rho_hat_t[t + 1] = rho_hat_even
            rho_hat_t[t + 2] = rho_hat_odd
        t += 2
    max_t = t - 2
    if rho_hat_even > 0:
        rho_hat_t[max_t + 1] = rho_hat_even
    t = 1  # Geyer's initial monotone sequence
    while t <= max_t - 2:
        if (rho_hat_t[t + 1] + rho_hat_t[t + 2]) > (rho_hat_t[t - 1] + rho_hat_t[t]):
            rho_hat_t[t + 1] = (rho_hat_t[t - 1] + rho_hat_t[t]) / 2.0
            rho_hat_t[t + 2] = rho_hat_t[t + 1]
        t += 2
    ess = n_chain * n_draw
    tau_hat = -1.0 + 2.0 * np.sum(rho_hat_t[:max_t + 1]) + np.sum(rho_hat_t[max_t + 1:max_t + 2])
    tau_hat = max(tau_hat, 1 / np.log10(ess))
    return np.nan if np.isnan(rho_hat_t).any() else ess / tau_hat


__all__ = ["COLUMNS", "INTERVAL", "autocorrelation", "columns", "explain", "hdi", "summary_table"]
