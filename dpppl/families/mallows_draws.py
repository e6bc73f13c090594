"""Moves on one Generalized Mallows cluster's parameters (Meilă & Chen 2010, Figs. 2-4).

Central permutations are held as positions `pos` (n,): `pos[l]` = sigma(l) - 1, the
0-based rank of item l. Conventions, math and data layout: `dpppl.families.generalized_mallows`.

**sigma given theta** (Lemma 2). With W = sum_j theta_j R_j,
p(sigma | theta, pi_c) ∝ exp(-L_sigma(W)), L_sigma(W) = sum_{a,b} W[a, b] [sigma(b) < sigma(a)].
Sample-sigma-Stagewise (Fig. 2) picks the items in rank order, item i with probability
∝ exp(-rho_i), rho_i the column sum of W over the items not yet placed. Its law is
q(sigma) = prod_k exp(-rho^(k)_{sigma_k}) / Z_k(sigma_1..sigma_{k-1}); the normalisers Z_k depend on the
earlier choices, so q differs from p(sigma | theta, pi_c) in general. Example: one ranking
(A, B, C), theta = (theta_1, theta_2): p(A first) = 1/psi_2(theta_1) but q(A first) =
1/(1 + e^{-theta_1} + e^{-theta_1-theta_2}); they agree only when theta_1 = theta_2. The
paper's Lemma 2 (exact sampling) therefore does not hold as stated (its proof is cut from
the text we have). `sigma_mh` keeps the stagewise draw as an *independence
Metropolis-Hastings proposal* with its exact log q, which makes the update exact
(it leaves p(sigma | theta, pi_c) invariant); `sigma_adjacent_swaps` adds a sweep of
adjacent-transposition Metropolis moves, cheap local steps that help when q is far from p.
tests/test_mallows.py checks both against enumeration (n <= 5) and measures q's error.

**sigma given theta and one ranking** (exact). The code s_1..s_t of pi and the order of the
unranked items determine sigma, and given theta the s_j are independent truncated
geometrics, P(s_j = k) ∝ e^{-theta_j k}, k = 0..m_j: `insert_code` places pi(j) at the
(s_j + 1)-th still free rank, then the unranked items in a uniform random order.
Sample-sigma-N1 (Fig. 4) is the same construction with P(V_j = k) ∝ Beta(nu r_j + k, nu + 2),
theta integrated out in the infinite-n approximation (approximate for finite n).

**theta given sigma** (Lemma 3, Fig. 3): the theta_j are independent with log-concave
density ∝ exp(-a_j theta - c_j ln psi_{m_j}(theta)) on [0, inf), a_j = nu r_j + S_j(sigma),
c_j = nu + N_j (eq. 10). `theta_slice` slice-samples each (stepping out and
shrinkage, Neal 2003, in u = log theta with the Jacobian; `dpppl.kernels.alpha.slice_log_alpha`).
`theta_exact` (in `dpppl.families.generalized_mallows`, beside the prior P0 it draws from,
which its NumPyro form samples) draws exactly by rejection from the piecewise-exponential envelope
made of tangents to the log density (valid for any log-concave density: every tangent
lies above it); used for the prior draw of a new cluster's theta, where
p(theta | pi_i) = P0(theta) (averaging GM over a uniform sigma removes theta).
Beta-Gibbs's theta draw (eq. 12, `theta_beta`) uses the infinite-n form
e^{-theta_j} ~ Beta(a_j, c_j + 1): approximate.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, logsumexp

from dpppl.core import numerics_random as random
from dpppl.core.numerics import log_gamma_draw, sample_index, slice_log_alpha
from dpppl.families.generalized_mallows import ranking_lengths, theta_log_density


# ------------------------------------------------------------------ sigma | theta ---
def _stagewise_pass(W, uniforms, forced=None):
    """Run Fig. 2 on cost matrix W (n, n); draw with `uniforms` (n,), or follow the
    item order `forced` (n,). Returns (order, log q(order))."""
    n = W.shape[0]

    def body(k, carry):
        remaining, rho, logq, order = carry
        logits = jnp.where(remaining, -rho, -jnp.inf)
        i = sample_index(logits, uniforms[k]) if forced is None else forced[k]
        logq = logq + logits[i] - logsumexp(logits)
        return remaining.at[i].set(False), rho - W[i], logq, order.at[k].set(i)

    init = (jnp.ones(n, bool), jnp.sum(W, axis=0), jnp.zeros((), W.dtype), jnp.zeros(n, jnp.int32))
    _, _, logq, order = jax.lax.fori_loop(0, n, body, init)
    return order, logq


def order_to_pos(order):
    """Item at each rank -> rank of each item."""
    return jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))


def stagewise(rng_key, W):
    """Sample-sigma-Stagewise (Fig. 2): (pos, log q(pos))."""
    order, logq = _stagewise_pass(W, random.uniform(rng_key, (W.shape[0],), W.dtype))
    return order_to_pos(order), logq


def stagewise_log_prob(pos, W):
    """log q(sigma) of the stagewise proposal at positions `pos`."""
    return _stagewise_pass(W, jnp.zeros(W.shape[0], W.dtype), forced=jnp.argsort(pos).astype(jnp.int32))[1]


def sigma_log_target(pos, W):
    """-L_sigma(W), the unnormalised log p(sigma | theta, pi_c)."""
    before = pos[None, :] < pos[:, None]
    return -jnp.sum(jnp.where(before, W, 0.0))


def sigma_mh(rng_key, pos, W):
    """One independence Metropolis-Hastings step with the stagewise proposal: exact.
    Returns (pos, accepted)."""
    k_prop, k_acc = random.split(rng_key)
    return sigma_mh_given(random.uniform(k_prop, (W.shape[0],), W.dtype),
                          random.uniform(k_acc, dtype=W.dtype), pos, W)


def sigma_mh_given(proposal_uniforms, accept_uniform, pos, W):
    """[`sigma_mh`][dpppl.families.mallows_draws.sigma_mh] with its random numbers given: the
    stagewise proposal drawn with `proposal_uniforms` (n,), accepted when log `accept_uniform` is
    below the log ratio. Returns (pos, accepted)."""
    order, logq_new = _stagewise_pass(W, proposal_uniforms)
    new = order_to_pos(order)
    log_ratio = (sigma_log_target(new, W) - sigma_log_target(pos, W)
                 + stagewise_log_prob(pos, W) - logq_new)
    accept = jnp.log(accept_uniform) < log_ratio
    return jnp.where(accept, new, pos), accept


def sigma_adjacent_swaps(rng_key, pos, W):
    """A sweep of Metropolis moves swapping the items at ranks k, k+1 (k = 0..n-2): swapping
    a (rank k) and b (rank k+1) changes L_sigma(W) by W[b, a] - W[a, b]. Exact."""
    return sigma_adjacent_swaps_given(random.uniform(rng_key, (W.shape[0] - 1,), W.dtype), pos, W)


def sigma_step(rng_key, pos, W):
    """One update of sigma given theta: [`sigma_mh`][dpppl.families.mallows_draws.sigma_mh] then
    [`sigma_adjacent_swaps`][dpppl.families.mallows_draws.sigma_adjacent_swaps], their 2n random
    numbers drawn in one call (one threefry expansion in a compiled program, not four). Exact.
    Returns (pos, accepted)."""
    n = W.shape[0]
    u = random.uniform(rng_key, (2 * n,), W.dtype)
    pos, accepted = sigma_mh_given(u[:n], u[n], pos, W)
    return sigma_adjacent_swaps_given(u[n + 1:], pos, W), accepted


def sigma_adjacent_swaps_given(uniforms, pos, W):
    """[`sigma_adjacent_swaps`][dpppl.families.mallows_draws.sigma_adjacent_swaps] with its n - 1
    uniforms given (swap k accepted when log `uniforms[k]` is below the log ratio)."""
    n = W.shape[0]
    logu = jnp.log(uniforms)

    def body(k, order):
        a, b = order[k], order[k + 1]
        ok = logu[k] < W[b, a] - W[a, b]   # new cost drops W[b, a] and adds W[a, b]
        return jnp.where(ok, order.at[k].set(b).at[k + 1].set(a), order)

    return order_to_pos(jax.lax.fori_loop(0, n - 1, body, jnp.argsort(pos).astype(pos.dtype)))


# -------------------------------------------------------- sigma | theta, one ranking ---
def insert_code(rng_key, ranking, logits):
    """Build sigma from a code drawn stage by stage: V_j ~ softmax(logits[j, :m_j + 1]),
    pi(j) at the (V_j + 1)-th free rank, then the unranked items uniformly at random.
    `ranking` padded (n,), `logits` (n-1, n) with -inf beyond m_j. Returns pos (n,)."""
    n = ranking.shape[-1]
    k_code, k_rest = random.split(rng_key)
    return insert_code_given(jnp.concatenate([random.uniform(k_code, (n - 1,), logits.dtype),
                                              random.uniform(k_rest, (n,), logits.dtype)]), ranking, logits)


def insert_code_given(u, ranking, logits):
    """[`insert_code`][dpppl.families.mallows_draws.insert_code] with its 2n - 1 uniforms `u` given:
    the first n - 1 draw the code V_j, the last n order the unranked items."""
    n = ranking.shape[-1]
    t = ranking_lengths(ranking)

    def body(j, order):
        v = sample_index(logits[j], u[j])
        free = order < 0
        slot = jnp.argmax(free & (jnp.cumsum(free) == v + 1))
        return jnp.where(j < t, order.at[slot].set(ranking[j]), order)

    ranking = ranking.astype(jnp.int32)
    order = jax.lax.fori_loop(0, n - 1, body, jnp.full(n, -1, jnp.int32))
    placed = jnp.zeros(n, bool).at[jnp.where(order >= 0, order, n)].set(True, mode="drop")
    scores = jnp.where(placed, jnp.inf, u[n - 1:])
    rest = jnp.argsort(scores).astype(jnp.int32)                # unranked items, random order, first
    free_slots = jnp.argsort(jnp.where(order < 0, 0, 1), stable=True).astype(jnp.int32)   # free ranks first, in order
    num_free = jnp.sum(order < 0)
    fill = jnp.where(jnp.arange(n) < num_free, rest, order[free_slots])
    return order_to_pos(order.at[free_slots].set(fill))


def code_logits_n1(nu, r, m, n):
    """Sample-sigma-N1 (Fig. 4): logits[j, k] = log Beta(nu r_j + k, nu + 2), k <= m_j."""
    k = jnp.arange(n)
    return jnp.where(k[None, :] <= m[:, None], betaln(nu * r[:, None] + k[None, :], nu + 2.0), -jnp.inf)


# ------------------------------------------------------------------ theta | sigma ---
def theta_slice(rng_key, theta, a, c, m, num_slices: int = 3):
    """Sample-theta-Slice (Fig. 3): `num_slices` slice updates of each theta_j
    (arrays (n-1,)); exact (leaves each conditional invariant)."""
    def one(key, th, aj, cj, mj):
        def density(v):
            return jnp.where(v > 0, theta_log_density(v, aj, cj, mj), -jnp.inf)
        return slice_log_alpha(key, th, density)

    shape = (num_slices,) + theta.shape
    keys = random.split(rng_key, tuple(shape))  # one split: update i of stage j

    def body(i, th):
        return jax.vmap(one)(keys[i], th, a, c, m)
    return jax.lax.fori_loop(0, num_slices, body, theta)


def theta_beta(rng_key, a, c):
    """Eq. (12), infinite-n form: e^{-theta_j} ~ Beta(a_j, c_j + 1) (approximate), as the ratio
    G_a / (G_a + G_c) of two Gamma draws, both in one `log_gamma_draw` (one rejection loop, where
    `jax.random.beta` compiles to two per-element loops)."""
    log_g = log_gamma_draw(rng_key, jnp.stack([a, c + 1.0]), (2,) + jnp.shape(a))
    theta = jnp.logaddexp(log_g[0], log_g[1]) - log_g[0]       # -log(G_a / (G_a + G_c))
    eps = jnp.finfo(theta.dtype)
    return jnp.clip(theta, -jnp.log1p(-eps.eps), -jnp.log(eps.tiny))
