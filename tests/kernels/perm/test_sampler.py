"""The permutation-augmented sampler (Liang, Jordan & Taskar 2007): the move ``kernel="perm-move"``
and the paper's sampler ``kernel="perm"`` (``"gibbs+splitmerge+perm-move"``).

(a) The factorisation A(K) prod B(c) of eq. (4) equals the EPPF times the marginal
likelihoods times p(pi | C), for the CRP and Pitman-Yor priors and both exact laws of pi.
(b) Each dynamic program's normaliser equals a brute-force sum over every segmentation of
a small permutation (sec. 3.1 exact, eq. 6, the beam restricted to its support, the
Markov scan weights). (c) Draws of each backward sampler, for a fixed permutation, match
the brute-force laws. (d) The Metropolis-Hastings ratio in closed form equals the
brute-force ratio p(C_new, pi) q(C_old) / (p(C_old, pi) q(C_new)) for every pair of
segmentations. (e) Options, exactness flags, hybrids, capacity growth, the CLI.
The permutation samplers are in tests/kernels/perm/test_permutations.py, chains against
the enumerated posterior in tests/statistical/test_perm_exactness.py."""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import dpppl
from dpppl import kernels
from dpppl.diagnostics.arviz_compat import group
from dpppl.errors import KernelError
from dpppl.kernels.auto import resolve
from dpppl.kernels.base import parse_kernel_name
from dpppl.kernels.perm import sampler as P
from dpppl.models.mixture import state_from_labels
from tests.helpers.cases import CASES
from tests.helpers.perm import NUM_DRAWS, bound, brute_markov_log_h, explicit_log_marginal
UNIT_CASES = ["niw_2d_overlap", "pitman_yor_normal_known", "dirichlet_multinomial_overlap",
              "beta_bernoulli_overlap"]


def segmentations(n):
    """Every segmentation of positions 0..n-1 as a list of (start, end) pairs."""
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        yield list(zip(bounds[:-1], bounds[1:]))


_EPPF = {}


def jitted_eppf(b):
    """The prior's log EPPF under one jit per bound model (the counts padded to N + 1 slots,
    zeros being empty slots): eagerly, every number of clusters would compile anew."""
    return _EPPF.setdefault(id(b), jax.jit(b.prior.log_eppf))


def brute_log_joint(b, pi, segs, alpha, order_law="uniform"):
    """log p(C, pi, x) = log EPPF(C) + sum_c log p(x_c) + log p(pi | C)."""
    counts = np.zeros(b.num_points + 1)
    counts[:len(segs)] = [e - s for s, e in segs]
    lp = float(jitted_eppf(b)(jnp.asarray(counts), alpha))
    lp += sum(explicit_log_marginal(b, pi[s:e]) for s, e in segs)
    lp -= special.gammaln(len(segs) + 1)
    if order_law == "uniform":
        lp -= sum(special.gammaln(e - s + 1) for s, e in segs)
    else:
        lp += sum(brute_markov_log_h(b, list(pi[s:e])) for s, e in segs)
    return lp


def brute_log_b(b, pi, s, e, uniform_order=True):
    d = b.prior.discount
    m = e - s
    lw = explicit_log_marginal(b, pi[s:e]) + special.gammaln(m - d) - special.gammaln(1 - d)
    return lw - special.gammaln(m + 1) if uniform_order else lw


def setup(name, seed=0):
    b = bound(name)
    x = jnp.asarray(b.x)
    pi = np.asarray(jax.random.permutation(jax.random.key(seed), b.num_points))
    x_pi = x[pi]
    prefix = jax.jit(lambda points: P.prefix_stats(b.family, points))(x_pi)
    return b, x, pi, x_pi, prefix


def uniform_rows(b, prefix):
    n = b.num_points

    def row(r):
        return P.segment_log_weights(b.family, b.prior, prefix, jnp.arange(n + 1), r, uniform_order=True)
    return row


def factors_and_normaliser(b, prefix, alpha):
    """In one jitted call: table[s, e] = log B(pi_{s+1..e}) for every pair 0 <= s, e <= N
    (`segment_log_weights` at one start and one end, vmapped over the pairs), log A(K) for
    K = 0..N, and log p(pi, x) from the sec. 3.1 dynamic program (`forward_by_count`,
    `sample_by_count`)."""
    n = b.num_points
    starts, ends = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    row = uniform_rows(b, prefix)

    @jax.jit
    def run():
        table = jax.vmap(lambda s, e: P.segment_log_weights(b.family, b.prior, prefix, s, e, uniform_order=True))(
            starts.ravel(), ends.ravel())
        counts = jnp.arange(n + 1)
        log_a = P.log_count_factor(b.prior, alpha, counts.astype(float), n)
        log_g, rows = P.forward_by_count(row, n, prefix.n.dtype)
        log_norm = P.sample_by_count(rows, log_g, jnp.where(counts >= 1, log_a, -jnp.inf), 0.5, jnp.full(n, 0.5))[2]
        return table.reshape(n + 1, n + 1), log_a, log_norm
    table, log_a, log_norm = run()
    return np.asarray(table), np.asarray(log_a), float(log_norm)


# ----------------------------------------------------------------------- (a), (b) ---
@pytest.mark.parametrize("name", UNIT_CASES)
def test_factorisation_and_exact_normaliser(name):
    """A(K) prod B(c) = EPPF prod p(x_c) / (K! prod |c|!) for every segmentation, and the
    sec. 3.1 DP's p(pi, x) equals the brute-force sum."""
    b, x, pi, x_pi, prefix = setup(name)
    n, alpha = b.num_points, b.prior.initial_alpha
    table, log_a, log_norm = factors_and_normaliser(b, prefix, alpha)
    brute = []
    for segs in segmentations(n):
        factored = log_a[len(segs)] + sum(table[s, e] for s, e in segs)
        brute.append(brute_log_joint(b, pi, segs, alpha))
        np.testing.assert_allclose(factored, brute[-1], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(log_norm, special.logsumexp(brute), rtol=1e-10)


@pytest.mark.parametrize("name", UNIT_CASES[:2])
def test_factored_and_beam_normalisers(name):
    """log g'(N) of eq. (6) is the brute-force sum of prod B'; the beam's g~(N) is the
    same sum over the segmentations inside the beam, and with epsilon = 0 and a width of
    N it is g'(N)."""
    b, x, pi, x_pi, prefix = setup(name, seed=3)
    n, alpha = b.num_points, b.prior.initial_alpha
    lam = float(P.log_count_slope(b.prior, alpha, 2.0))
    weights = {(s, e): brute_log_b(b, pi, s, e) + lam for s in range(n) for e in range(s + 1, n + 1)}
    all_segs = list(segmentations(n))
    brute = special.logsumexp([sum(weights[seg] for seg in segs) for segs in all_segs])
    row = uniform_rows(b, prefix)

    def fn(starts, r):
        return P.segment_log_weights(b.family, b.prior, prefix, starts, r, uniform_order=True) + lam

    @jax.jit
    def forward():  # the three forward passes in one program
        return (P.forward_factored(lambda r: row(r) + lam, n, x.dtype)[0], P.forward_beam(fn, n, 0.0, n, x.dtype)[0],
                P.forward_beam(fn, n, 0.2, 2, x.dtype)[:2])
    log_g, full, (log_gb, kept) = forward()
    np.testing.assert_allclose(float(log_g[n]), brute, rtol=1e-10)
    np.testing.assert_allclose(float(full[n]), brute, rtol=1e-10)
    kept = np.asarray(kept)
    inside = [segs for segs in all_segs if all((e - s) in kept[e] for s, e in segs)]
    assert 0 < len(inside) < len(all_segs)        # the narrow beam does prune
    np.testing.assert_allclose(float(log_gb[n]), special.logsumexp(
        [sum(weights[seg] for seg in segs) for segs in inside]), rtol=1e-10)
    z_pi = np.stack([np.concatenate([np.full(e - s, k) for k, (s, e) in enumerate(segs)]) for segs in all_segs])
    member = np.asarray(jax.jit(jax.vmap(P.in_beam, in_axes=(None, 0)))(jnp.asarray(kept), jnp.asarray(z_pi)))
    assert list(member) == [segs in inside for segs in all_segs]  # in_beam agrees with the membership rule


def test_markov_segment_weights_match_brute_force():
    """Every entry of the Markov scan segment table equals log p(x_seg) + log (1-d)_{m-1}
    + log h(seg) from a direct evaluation, and h sums to one over the orders of a block."""
    b, x, pi, x_pi, prefix = setup("niw_2d_overlap", seed=1)
    n = b.num_points
    table = np.asarray(jax.jit(lambda points: P.markov_segment_matrix(b.family, b.prior, prefix, points))(x_pi))
    for s in range(n):
        for e in range(s + 1, n + 1):
            expected = brute_log_b(b, pi, s, e, uniform_order=False) + brute_markov_log_h(b, list(pi[s:e]))
            np.testing.assert_allclose(table[e - 1, s], expected, rtol=1e-9, atol=1e-9)
        assert np.all(np.isneginf(table[s, s + 1:]))
    block = [0, 2, 3, 4]
    total = special.logsumexp([brute_markov_log_h(b, list(o)) for o in itertools.permutations(block)])
    assert abs(total) < 1e-10


# --------------------------------------------------------------------------- (c) ---
def frequencies(starts_batch):
    keys = ["".join("1" if v else "0" for v in row) for row in np.asarray(starts_batch)]
    values, counts = np.unique(keys, return_counts=True)
    return dict(zip(values, counts / len(keys)))


def starts_key(segs, n):
    mask = np.zeros(n + 1, bool)
    for s, _ in segs:
        mask[s] = True
    return "".join("1" if v else "0" for v in mask)


def assert_law(draws, law, num):
    """Every cell's frequency within 5 binomial standard errors of its probability."""
    freq = frequencies(draws)
    assert set(freq) <= {k for k, p in law.items() if p > 0}
    for k, p in law.items():
        se = math.sqrt(p * (1 - p) / num)
        assert abs(freq.get(k, 0.0) - p) <= 5 * se + 1e-12, (k, freq.get(k, 0.0), p)


def uniforms(keys, size):
    """`size` uniforms from each key (the backward samplers' random numbers)."""
    return jax.vmap(lambda k: jax.random.uniform(k, (size,)))(keys)


@pytest.mark.parametrize("form", ["exact", "factored", "beam", "markov"])
def test_backward_samplers_draw_the_dp_law(form):
    b, x, pi, x_pi, prefix = setup("normal_known_2d_overlap_n4" if form != "exact" else "niw_2d_overlap", seed=2)
    n, alpha = b.num_points, b.prior.initial_alpha
    keys = jax.random.split(jax.random.key(7), NUM_DRAWS)
    all_segs = list(segmentations(n))
    lam = float(P.log_count_slope(b.prior, alpha, 1.5))
    if form == "exact":
        row = uniform_rows(b, prefix)

        @jax.jit
        def draw(keys):
            counts = jnp.arange(n + 1)
            log_a = jnp.where(counts >= 1, P.log_count_factor(b.prior, alpha, counts.astype(float), n), -jnp.inf)
            log_g, rows = P.forward_by_count(row, n, x.dtype)
            return jax.vmap(lambda u: P.sample_by_count(rows, log_g, log_a, u[n], u[:n])[0])(uniforms(keys, n + 1))
        draws = draw(keys)
        logp = [brute_log_joint(b, pi, segs, alpha) for segs in all_segs]
    elif form == "markov":
        @jax.jit
        def draw(keys):
            table = P.markov_segment_matrix(b.family, b.prior, prefix, x_pi)

            def row(r):
                return table[r - 1] + lam
            log_g, rows = P.forward_factored(row, n, x.dtype)
            return jax.vmap(lambda u: P.sample_factored(rows, log_g, u))(uniforms(keys, n))
        draws = draw(keys)
        logp = [sum(brute_log_b(b, pi, s, e, uniform_order=False) + brute_markov_log_h(b, list(pi[s:e])) + lam
                    for s, e in segs) for segs in all_segs]
    else:
        def fn(starts, r):
            return P.segment_log_weights(b.family, b.prior, prefix, starts, r, uniform_order=True) + lam
        weights = [sum(brute_log_b(b, pi, s, e) + lam for s, e in segs) for segs in all_segs]
        if form == "factored":
            @jax.jit
            def draw(keys):
                log_g, rows = P.forward_factored(lambda r: fn(jnp.arange(n + 1), r), n, x.dtype)
                return jax.vmap(lambda u: P.sample_factored(rows, log_g, u))(uniforms(keys, n))
            draws = draw(keys)
            logp = weights
        else:
            @jax.jit
            def draw(keys):
                _, kept, contrib = P.forward_beam(fn, n, 0.3, 2, x.dtype)
                return kept, jax.vmap(lambda u: P.sample_beam(kept, contrib, u))(uniforms(keys, n))
            kept, draws = draw(keys)
            kept_np = np.asarray(kept)
            logp = [w if all((e - s) in kept_np[e] for s, e in segs) else -np.inf
                    for w, segs in zip(weights, all_segs)]
    logp = np.asarray(logp)
    law = {starts_key(segs, n): p for segs, p in zip(all_segs, np.exp(logp - special.logsumexp(logp)))}
    assert_law(draws, law, NUM_DRAWS)


# --------------------------------------------------------------------------- (d) ---
@pytest.mark.parametrize("name, k_ref", [("niw_2d_overlap", 2.0), ("pitman_yor_normal_known", 3.4)])
def test_mh_ratio_matches_brute_force(name, k_ref):
    """For every pair (C_old, C_new) of segmentations of pi: log A(K_new) - log A(K_old)
    - lambda (K_new - K_old) equals log [p(C_new, pi, x) q(C_old | pi) / (p(C_old, pi, x)
    q(C_new | pi))] with q normalised by enumeration."""
    b, x, pi, x_pi, prefix = setup(name, seed=5)
    n, alpha = b.num_points, b.prior.initial_alpha
    lam = float(P.log_count_slope(b.prior, alpha, k_ref))
    eps = 1e-6
    numeric = (float(P.log_count_factor(b.prior, alpha, k_ref + eps, n))
               - float(P.log_count_factor(b.prior, alpha, k_ref - eps, n))) / (2 * eps)
    np.testing.assert_allclose(lam, numeric, rtol=1e-6)
    if b.prior.discount == 0:
        np.testing.assert_allclose(lam, math.log(alpha) - special.digamma(k_ref + 1), rtol=1e-12)
    all_segs = list(segmentations(n))
    log_p = np.array([brute_log_joint(b, pi, segs, alpha) for segs in all_segs])
    log_q = np.array([sum(brute_log_b(b, pi, s, e) + lam for s, e in segs) for segs in all_segs])
    log_q -= special.logsumexp(log_q)
    ks = np.array([len(segs) for segs in all_segs], float)
    closed = jax.jit(lambda kn, ko: P.log_count_change(b.prior, alpha, kn, ko) - lam * (kn - ko))
    closed_all = np.asarray(closed(jnp.asarray(ks)[:, None], jnp.asarray(ks)[None, :]))   # [new, old]
    brute = (log_p[:, None] + log_q[None, :]) - (log_p[None, :] + log_q[:, None])
    np.testing.assert_allclose(closed_all, brute, rtol=1e-9, atol=1e-8)


# --------------------------------------------------------------------------- (f) ---
@pytest.mark.parametrize("options, message", [
    (dict(dp="fast"), "dp must be one of"),
    (dict(permutation="random"), "permutation must be one of"),
    (dict(beam_epsilon=1.5), "beam_epsilon must be"),
    (dict(beam_width=0), "beam_width must be"),
    (dict(dp="exact", beam_epsilon=1e-8), "applies to dp='mh' only"),
    (dict(permutation="markov", beam_epsilon=1e-8), "cannot be combined with the beam"),
    (dict(warmup_permutation="markov", beam_epsilon=1e-8), "cannot be combined with the beam"),
])
def test_bad_options_raise(options, message):
    with pytest.raises(KernelError, match=message):
        kernels.build("perm-move", bound("niw_2d_overlap"), **options)


def test_exactness_flags():
    b = bound("niw_2d_overlap")
    assert kernels.entry("perm-move").exact and kernels.entry("perm").exact
    for options in ({}, dict(dp="exact"), dict(permutation="markov"), dict(beam_epsilon=1e-8),
                    dict(warmup_permutation=None), dict(warmup_permutation="uniform")):
        assert kernels.build("perm-move", b, **options).exact, options
    with pytest.warns(UserWarning, match="not an exact sampler"):
        kern = kernels.build("perm-move", b, permutation="projection")
    assert not kern.exact
    with pytest.warns(UserWarning):
        assert not kernels.build("perm", b, permutation="projection").exact


def test_k_ref_adapts_in_warmup_and_is_fixed_after(two_blobs):
    """During warmup k_ref follows the current K; after it, k_ref is one constant per
    chain: the mean K over the warmup."""
    x, _ = two_blobs
    model = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=25.0))
    # capacity N + 1 from the start: the uniform warmup permutations outgrow 16 slots, and a run that grows
    # its capacity compiles its chunk again (the same draws: test_driver's capacity-growth test)
    idata = dpppl.sample(model, x, kernel="perm-move", num_warmup=30, num_samples=40, num_chains=2, seed=1,
                         init="single", capacity=31, progress_bar=False, log_likelihood=False,
                         warmup_permutation="uniform")
    stats = group(idata, "sample_stats")
    k_ref = stats["k_ref"].values
    assert np.all(k_ref == k_ref[:, :1]) and np.all((k_ref >= 1) & (k_ref <= 30))
    assert {"accept_prob", "accepted", "proposed_clusters", "in_beam"} <= set(stats.data_vars)
    b = model.bind(x)
    kern = kernels.build("perm-move", b)
    xb = jnp.asarray(b.x)  # the bound model's frame
    state = jax.jit(lambda xb: kern.init(state_from_labels(b.family, xb, jnp.zeros(30, jnp.int32), 31, 1.0), xb))(xb)
    assert isinstance(state.extras, P.PermExtras)
    total, count = float(state.extras.k_sum), float(state.extras.k_count)
    step = jax.jit(kern.warmup)
    for t in range(5):
        k_before = int(np.sum(np.asarray(state.stats.n) > 0))
        state, info = step(jax.random.key(t), state, xb)
        assert float(info.k_ref) == k_before
        total, count = total + int(np.sum(np.asarray(state.stats.n) > 0)), count + 1
    np.testing.assert_allclose(float(state.extras.k_sum / state.extras.k_count), total / count)
    _, info = jax.jit(kern.step)(jax.random.key(9), state, xb)
    np.testing.assert_allclose(float(info.k_ref), total / count)


def test_statistics_and_overflow(two_blobs):
    """The statistics after an accepted move equal a recomputation from the labels; a
    proposal with more clusters than slots sets ``overflow`` (the driver then grows the
    capacity and re-runs the step with the same key) and leaves the state unchanged."""
    x, _ = two_blobs
    model = dpppl.DPMixture(5.0, dpppl.NormalKnownCov(sigma2=0.05, mu0=0.0, tau2=25.0))
    b = model.bind(x)
    kern = kernels.build("perm-move", b, dp="exact")
    state = state_from_labels(b.family, jnp.asarray(x), np.zeros(30, int), 31, 5.0)
    new, info = jax.jit(kern.step)(jax.random.key(0), state, jnp.asarray(x))
    assert kern.info_type is P.PermInfo and kern.init is None and int(info.accepted) == 1
    fresh = state_from_labels(b.family, jnp.asarray(x), np.asarray(new.z), 31, 5.0)
    for a, c in zip(new.stats, fresh.stats):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), atol=1e-10)
    small = state_from_labels(b.family, jnp.asarray(x), np.zeros(30, int), 2, 5.0)
    kept, info = jax.jit(kern.step)(jax.random.key(0), small, jnp.asarray(x))
    assert bool(kept.overflow) and int(info.accepted) == 0 and np.all(np.asarray(kept.z) == 0)


def test_hybrids_and_cli(tmp_path, capsys):
    from dpppl.cli import main

    case = CASES["normal_known_1d_separated"]
    hybrid = kernels.build("gibbs+splitmerge+perm", bound(case.name), beam_epsilon=1e-10, beam_width=4)
    assert hybrid.name == "gibbs+splitmerge+perm-every" and [p.name for p in hybrid.parts] == [
        "gibbs", "splitmerge", "perm-every"]
    assert hybrid.exact and "perm-every_accept_prob" in hybrid.info_names and hybrid.init is not None
    assert "perm-every_ran" in hybrid.info_names
    data = tmp_path / "points.csv"
    np.savetxt(data, np.asarray(case.x), delimiter=",", header="a", comments="")
    assert main(["sample", "models/gaussian_known.dp", "--data", str(data), "--kernel", "perm",
                 "--option", "dp=exact", "--option", "permutation=markov", "--warmup", "2", "--samples", "3",
                 "--no-progress"]) == 0
    assert "gibbs+splitmerge+perm-every (exact)" in capsys.readouterr().out  # attrs["kernel"]: what "perm" ran
    assert main(["kernels"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "runs 'gibbs+splitmerge+perm-every'" in listed["perm"]
    assert "the permutation move alone" in listed["perm-move"]
    assert "every `every`-th step (default 16)" in listed["perm-every"]


def test_perm_is_the_papers_sampler():
    """`kernel="perm"` is a collapsed Gibbs sweep and split-merge each iteration and the permutation
    move every 16th (`"gibbs+splitmerge+perm-every"`), the move's options and `every` reach the move,
    and an option no part takes names what the user asked for and what it runs."""
    b = bound("niw_2d_overlap")
    kern = kernels.build("perm", b, beam_epsilon=1e-8, beam_width=3)
    assert kern.name == "gibbs+splitmerge+perm-every"  # alpha ~ Gamma here: the alpha move is appended
    assert [p.name for p in kern.parts] == ["gibbs", "splitmerge", "perm-every", "alpha"]
    assert parse_kernel_name("gibbs+perm") == ["gibbs", "splitmerge", "perm-every"]
    assert parse_kernel_name("splitmerge+perm") == ["splitmerge", "gibbs", "perm-every"]
    # what dpppl.sample records in attrs["kernel"] (the requested "perm" in attrs["kernel_requested"])
    assert resolve("perm", b.model, b.num_points, 2, {"beam_width": 3}) == ("gibbs+splitmerge+perm-every",
                                                                          {"beam_width": 3}, None)
    with pytest.raises(KernelError, match="perm: beam_width must be an integer >= 1, got 0"):
        kernels.build("perm", b, beam_width=0)
    with pytest.raises(KernelError, match=r"unknown option\(s\) \['beam_widht'\] for kernel 'perm' \(runs "
                                          r"'gibbs\+splitmerge\+perm-every'\); 'beam_widht': did you mean "
                                          r"'beam_width'\?"):
        kernels.build("perm", b, beam_widht=3)

    with pytest.raises(KernelError, match=r"perm-every: every must be an integer >= 1 \(the move runs at steps 0, "
                                          r"every, 2 every, ...\), got 0"):
        kernels.build("perm", b, every=0)


def test_perm_compiles_one_program():
    """A warmup step of its own (a second compiled program, Gibbs sweep and split-merge included in
    `kernel="perm"`) only where warmup differs from sampling: `perm-move` by default (projection
    hill-climbing, k_ref adapted), not `perm-every` nor `perm` (warmup runs the sampling move, k_ref
    each chain's initial K), unless asked for; `adapt_k_ref` is a switch."""
    from dpppl.errors import ArgumentError

    b = bound("niw_2d_overlap")
    assert kernels.build("perm-move", b).warmup_step is not None
    assert kernels.build("perm-move", b, warmup_permutation=None, adapt_k_ref=False).warmup_step is None
    assert kernels.build("perm-move", b, dp="exact", warmup_permutation=None).warmup_step is None
    assert kernels.build("perm-move", b, warmup_permutation=None).warmup_step is not None  # k_ref adapts
    assert kernels.build("perm-every", b).warmup_step is None and kernels.build("perm", b).warmup_step is None
    assert kernels.build("perm", b, warmup_permutation="projection").warmup_step is not None
    assert kernels.build("perm", b, adapt_k_ref=True).warmup_step is not None
    with pytest.raises(ArgumentError, match=r"option adapt_k_ref of kernel 'perm-every' must be True or False, "
                                            r"got 'no' \(str\)"):
        kernels.build("perm", b, adapt_k_ref="no")


def test_perm_every_runs_the_move_on_its_schedule(two_blobs):
    """`perm-every` runs the move at steps 0, every, 2 every, ... of each chain (`ran`, counted in
    its extras, warmup included) and leaves the state as it is at the others, under `vmap` over
    chains as the runner steps them; `every=1` is the move each step."""
    x, _ = two_blobs
    b = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=25.0)).bind(x)
    kern = kernels.build("perm-every", b, every=3, dp="exact")
    assert kern.name == "perm-every" and kern.exact and kern.info_names[-1] == "ran"
    xb = jnp.asarray(b.x)
    start = state_from_labels(b.family, xb, jnp.zeros(30, jnp.int32), 31, 1.0)
    states = jax.tree.map(lambda a: jnp.stack([a, a]), kern.init(start, xb))
    step = jax.jit(jax.vmap(kern.step, in_axes=(0, 0, None)))
    ran = []
    for t in range(7):
        new, info = step(jax.random.split(jax.random.key(t), 2), states, xb)
        ran.append(np.asarray(info.ran).tolist())
        if t % 3:
            np.testing.assert_array_equal(np.asarray(new.z), np.asarray(states.z))
            assert np.all(np.asarray(info.accepted) == 0)
        states = new
    assert ran == [[1, 1], [0, 0], [0, 0], [1, 1], [0, 0], [0, 0], [1, 1]]
    assert np.asarray(states.extras.steps).tolist() == [7, 7]
    assert len(np.unique(np.asarray(states.z))) > 1  # the move ran: it split the single cluster
    assert kernels.entry("perm-every").options[0] == "every" and "beam_width" in kernels.entry("perm-every").options


def test_perm_every_traces_the_move_once(two_blobs):
    """`perm-every` traces its move once per trace of its step: the move's jaxpr gives the info's
    shapes and is the loop's body (an `eval_shape` beside the body traced the whole dynamic
    program twice)."""
    x, _ = two_blobs
    b = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=25.0)).bind(x)
    move = kernels.build("perm-move", b, dp="exact")
    traced = []

    def counted(rng_key, state, x):
        traced.append(1)
        return move.step(rng_key, state, x)

    kern = P.every_kernel(dataclasses.replace(move, step=counted), 3)
    xb = jnp.asarray(b.x)
    state = kern.init(state_from_labels(b.family, xb, jnp.zeros(30, jnp.int32), 31, 1.0), xb)
    new, info = jax.jit(kern.step)(jax.random.key(0), state, xb)
    assert len(traced) == 1
    assert int(info.ran) == 1 and int(new.extras.steps) == 1


def test_default_beam_from_its_threshold():
    """`beam_epsilon="auto"` (the default): the full dynamic program below `BEAM_MIN_POINTS`
    points, the beam (1e-32, width 16) from there, where it applies; the default kernel makes the
    draws of the explicit beam options."""
    from dpppl.kernels.perm.sampler import BEAM_MIN_POINTS, default_beam_epsilon

    assert default_beam_epsilon(BEAM_MIN_POINTS - 1, "mh", "uniform", "projection") is None
    assert default_beam_epsilon(BEAM_MIN_POINTS, "mh", "uniform", "projection") == 1e-32
    assert default_beam_epsilon(10**4, "exact", "uniform", "projection") is None
    assert default_beam_epsilon(10**4, "mh", "markov", "projection") is None
    n = 250  # from the threshold on (the data this test drew when the threshold was 250)
    assert n >= BEAM_MIN_POINTS
    x, _ = dpppl.datasets.load("w1", n=n, dim=2, num_clusters=4, seed=0)
    b = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=100.0)).bind(x)
    state = state_from_labels(b.family, b.x, np.zeros(n, np.int32), 16, 1.0)
    draws = []
    for options in ({}, dict(beam_epsilon=1e-32, beam_width=16)):
        kern = kernels.build("perm-move", b, **options)
        new, info = jax.jit(kern.warmup)(jax.random.key(3), kern.init(state, b.x), b.x)
        draws.append(np.asarray(new.z))
    np.testing.assert_array_equal(draws[0], draws[1])
    assert len(np.unique(draws[0])) > 1  # the move split the single cluster


@pytest.mark.parametrize("options", [dict(beam_epsilon=None), dict(beam_epsilon=1e-32)])
def test_padded_points_change_no_draw(two_blobs, options):
    """On the points padded with 10 rows (`BoundModel.padded`, label -1), the warmup step
    (projection) and the sampling step (uniform) make the draws of the unpadded points, with and
    without the beam: the padded points are last in pi, outside every segment and every count."""
    x, _ = two_blobs
    b = dpppl.DPMixture(1.0, dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=25.0)).bind(x)
    padded = b.padded(40)
    labels = np.r_[np.zeros(20, np.int32), np.ones(10, np.int32)]  # one group split in two
    runs = []
    for target, z in ((b, labels), (padded, np.r_[labels, np.full(10, -1, np.int32)])):
        kern = kernels.build("perm-move", target, **options)

        @jax.jit
        def steps(target, z, kern=kern):
            xb = jnp.asarray(target.x)
            state = kern.init(state_from_labels(target.family, xb, z, 8, 1.0), xb)
            state = jax.lax.fori_loop(0, 3, lambda t, s: kern.warmup(jax.random.key(t), s, xb)[0], state)
            state = jax.lax.fori_loop(3, 5, lambda t, s: kern.step(jax.random.key(t), s, xb)[0], state)
            state, info = kern.step(jax.random.key(5), state, xb)
            return state.z, state.stats.n, info

        runs.append(steps(target, jnp.asarray(z)))
    (z, n, info), (z_padded, n_padded, info_padded) = runs
    assert not np.array_equal(z, labels)  # the moves changed the clustering
    np.testing.assert_array_equal(z_padded[:30], z)
    np.testing.assert_array_equal(z_padded[30:], -1)
    np.testing.assert_array_equal(n_padded, n)
    assert info_padded == info


def test_perm_samples_models_with_random_hyperparameters():
    """`perm` runs its move on a schedule (`perm-every`), which like `perm-move` is a collapsed move
    run at the state's hyperparameters: a model with random hyperparameters takes it."""
    from tests.kernels.test_hyperparameters import RANDOM, X

    model = dpppl.parse(RANDOM)
    dpppl.kernels.check_applies("perm", model)
    kern = kernels.build("perm", model.bind(X))
    assert kern.name == "gibbs+splitmerge+perm-every" and kern.exact


@pytest.mark.parametrize("beam", [None, (1e-32, 16), (1e-3, 3)], ids=["full", "beam", "narrow-beam"])
@pytest.mark.parametrize("augmented", [True, False], ids=["uniform-order", "projection-target"])
def test_native_segments_make_the_jax_programs_draws(two_blobs, beam, augmented):
    """`dp="mh"`'s C | pi (`_draw_factored`) as one native call (`native_perm_segments`) and as the JAX
    dynamic programs, on the same permutation and uniforms: the same segments, beam membership and
    acceptance (to rounding), for NIW and Normal components under the CRP and Pitman-Yor, on points
    padded to a class (the segments of the real points only)."""
    from dpppl.kernels.perm.permutations import uniform_permutation
    x = np.concatenate([two_blobs[0], two_blobs[0][:10] + 1.0])
    niw = dpppl.NormalInverseWishart(kappa0=0.1, nu0=4.0, mu0=0.0, psi0=1.0)
    normal = dpppl.NormalKnownCov(sigma2=1.0, mu0=0.0, tau2=25.0)
    segments = []
    for model in (dpppl.DPMixture(1.0, niw), dpppl.PitmanYorMixture(0.3, 1.0, normal)):
        target = model.bind(x).padded(48)
        n = target.num_points
        assert P.use_native(target.family, target.prior, None)
        z = jnp.asarray(np.r_[np.arange(40) % 3, np.full(n - 40, -1)], jnp.int32)

        @jax.jit
        def both(key, target):
            xb = jnp.asarray(target.x)
            u = jax.random.uniform(key, (n, 4), xb.dtype)
            pi = uniform_permutation(u[:, :2], z, 8)
            prefix = P.prefix_stats(target.family, xb[pi])
            row = P._segment_row_fn(target.family, target.prior, prefix, xb[pi], "uniform", augmented)
            args = (target.family, target.prior, jnp.asarray(1.3), row, prefix, jnp.asarray(3.0), jnp.asarray(3),
                    (z, pi), n, xb.dtype, augmented, beam, u[:, 2], target.points)
            return P._draw_factored(*args), P._draw_factored(*args, native_x=xb)

        for seed in range(6):
            (starts, log_accept, support), (native_starts, native_accept, native_support) = both(
                jax.random.key(seed), target)
            np.testing.assert_array_equal(native_starts, starts)
            assert not np.any(np.asarray(starts)[40:])  # no segment starts among the padded points
            assert int(native_support) == int(support)
            np.testing.assert_allclose(native_accept, log_accept, rtol=1e-9, atol=1e-9)
            segments.append(int(np.sum(np.asarray(starts)[:-1])))
    assert len(set(segments)) > 1  # the draws differ: the test could fail
