// The collapsed-Gibbs point loop of dpppl/models/seating.py (Seat) and split-merge's allocation
// pass of dpppl/kernels/splitmerge.py (Allocate) as native functions, called from inside the
// jitted step through XLA's FFI, with sbgibbs's sweep over stick-breaking labels and the sequential
// seating under a stick-breaking prior (SbSeat) and the acceptance loop of the stick-breaking label
// moves (Relabel), a whole step of split-merge's SAMS proposals (SplitMerge: pair, allocation,
// marginals, Metropolis-Hastings ratio, all in one call) (dpppl/models/native_seating.py builds,
// loads and calls them). The permutation move's (native_perm.cc) and the dependent DP's (native_ddp.cc)
// are libraries of their own, built on first use only; the three share one copy of each family's
// mathematics and of the FFI helpers, in native_seating.h. One Seat call seats every point once, one
// Allocate call places the points of a split-merge proposal once; the uniforms that fix the
// visiting order and draw each seat or side come from JAX keys, so a run is reproducible from its
// seed and draws what the JAX loop draws up to floating-point rounding.
//
// The mathematics is that of dpppl/families/niw.py and dpppl/priors/crp.py, step by step:
//
//   statistics of a slot c:   n_c, s1_c = sum x, s2_c = sum x x^T      (additive: a point is
//                             added or removed as  n += 1, s1 += x, s2 += x x^T, or minus)
//   posterior (Murphy 2007, eqs. 250-254):
//       kappa_n = kappa0 + n,  nu_n = nu0 + n,  mu_n = (kappa0 mu0 + s1) / kappa_n,
//       psi_n = psi0 + s2 + kappa0 mu0 mu0^T - kappa_n mu_n mu_n^T
//   predictive: Student-t, df = nu_n - D + 1, location mu_n,
//       scale S = psi_n (kappa_n + 1) / (kappa_n df) = L L^T,
//       log t(x) = log_norm - (df + D)/2 log(1 + |L^-1 (x - mu_n)|^2 / df),
//       log_norm = lgamma((df + D)/2) - lgamma(df/2) - D/2 log(df pi) - sum_d log L_dd
//   seating weights (Pitman-Yor PY(d, alpha); d = 0 is the CRP, Neal 2000 alg. 3):
//       p(z_i = c | z_-i, x) ∝ (n_c,-i - d) t_c(x_i),   p(new) ∝ (alpha + K_-i d) t_0(x_i)
//   with the new cluster at the first empty slot (empty slots hold exact zeros: their
//   predictive is the prior's), and the slot drawn by inverting the CDF at the point's
//   uniform u exactly as dpppl.core.numerics.sample_index does:
//       p_c = exp(l_c - max l),  k = #{c : cumsum(p)_c < max(u, tiny) sum(p)}.
//   After a point leaves or joins a slot, only that slot's predictive is recomputed, and a
//   slot that emptied has its statistics set to exact zeros (seating.refresh).
//
// Batching: under jax.vmap the call is made with vmap_method="expand_dims": every operand
// has the same leading batch dimensions, of the batch size or of size 1 (shared, e.g. the
// data of every chain). Chains are independent and are run on `num_threads` threads when
// the work per call is large enough to pay for starting them.


#include "native_seating.h"

namespace {


// One chain: seat every point in the shuffled order (each first leaves its slot when remove_first).
template <typename T, typename Family>
bool seat_chain(int N, int D, int C, const T* x, const T* shuffle, const T* uniforms, int32_t* z,
                T* n, T* s1, T* s2, T alpha, T discount, bool remove_first, Family& fam) {
  const int DD = fam.second_size();  // numbers of s2 per slot
  const std::vector<int32_t> order = visiting_order(N, shuffle);
  const int padded = (C + 3) / 4 * 4;  // whole vectors for log_all and exp_all
  // per offered slot (padded with harmless values to whole vectors): its logit
  std::vector<T> log_weight(C), logits(padded, T(0));
  std::vector<int> active(C);
  // log(n - d) by cluster size n, and log(alpha + K d) by number of clusters K, once per call
  std::vector<T> log_size(size_t(N) + 2, std::numeric_limits<T>::quiet_NaN()), log_open(size_t(N) + 2,
                                                                                          std::numeric_limits<T>::quiet_NaN());
  auto weight_of = [&](T size) {
    const size_t m = size_t(size);
    if (m >= log_size.size()) return std::log(size - discount);
    if (std::isnan(log_size[m])) log_size[m] = std::log(size - discount);
    return log_size[m];
  };
  auto weight_new = [&](int clusters) {
    const size_t m = size_t(clusters);
    const T value = m < log_open.size() && !std::isnan(log_open[m]) ? log_open[m]
                                                                     : std::log(alpha + T(clusters) * discount);
    if (m < log_open.size()) log_open[m] = value;
    return value;
  };
  int occupied = 0;
  for (int c = 0; c < C; ++c) {
    fam.refresh(c, n[c], s1 + size_t(c) * D, s2 + size_t(c) * DD);
    if (n[c] > T(0)) { log_weight[c] = weight_of(n[c]); ++occupied; }
  }
  // statistics of slot k after adding (sign = 1) or removing (sign = -1) point xi
  auto move = [&](int k, const T* xi, T sign) {
    const bool was_occupied = n[k] > T(0);
    move_point(k, xi, sign, D, n, s1, s2, fam);
    const bool now_occupied = n[k] > T(0);
    occupied += int(now_occupied) - int(was_occupied);
    if (now_occupied) log_weight[k] = weight_of(n[k]);
  };
  const T tiny = std::numeric_limits<T>::min();
  const T neg_inf = -std::numeric_limits<T>::infinity();
  bool overflow = false;
  for (int t = 0; t < N; ++t) {
    const int i = order[t];
    const T* xi = x + size_t(i) * D;
    if (remove_first) move(z[i], xi, T(-1));
    // the slots offered, in slot order: the occupied ones and the first empty one
    int first_empty = -1, m = 0;
    for (int c = 0; c < C; ++c) {
      if (n[c] > T(0)) {
        active[m++] = c;
      } else if (first_empty < 0) {
        first_empty = c;
        active[m++] = c;
      }
    }
    overflow |= first_empty < 0;
    const T log_new = weight_new(occupied);
    fam.log_predictive(active.data(), m, xi, logits.data());
    T top = neg_inf;
    for (int j = 0; j < m; ++j) {
      logits[j] += active[j] == first_empty ? log_new : log_weight[active[j]];
      top = std::max(top, logits[j]);
    }
    for (int j = 0; j < m; ++j) logits[j] -= top;
    const int whole = (m + 3) / 4 * 4;
    for (int j = m; j < whole; ++j) logits[j] = T(0);
    exp_all(logits.data(), whole);  // now the CDF terms
    T total = 0;
    for (int j = 0; j < m; ++j) total += logits[j];
    // k = #{c : cdf_c < target}: the slots not offered add nothing to the CDF, so this is the
    // first offered slot where the CDF reaches the target (target <= total: there is one)
    const T target = std::max(uniforms[t], tiny) * total;
    T cdf = 0;
    int k = active[m - 1];
    for (int j = 0; j < m; ++j) {
      cdf += logits[j];
      if (!(cdf < target)) { k = active[j]; break; }
    }
    move(k, xi, T(1));
    z[i] = k;
  }
  return overflow;
}

// One chain of sbgibbs (dpppl/kernels/stick_breaking/sbgibbs.py): every point in the shuffled order
// leaves its slot and takes slot k (label k + 1) with
//   P(k) ∝ E[pi_k | Z_-n] t_k(x),   log E[pi_k | Z_-n] = log a*_k - log(a*_k + b*_k) + sum_{j<k} log go_j,
//   a*_k = a_k + N_k,  b*_k = b_k + M_k,  M_k = sum_{l>k} N_l,  log go_j = log b*_j - log(a*_j + b*_j)
// (StickBreaking.log_expected_weights; empty slots have the prior predictive t_0), or the cell "past
// the C slots"; a draw there keeps the old slot and sets the overflow (the chunk is re-run with more
// slots). The cost per point follows the largest occupied slot L, not C (Porteous et al. 2006,
// sec. 3.2): the cells 0..L are evaluated (M_k the suffix sum of the counts, taken down from the
// total as k rises), and every label past L, where the counts are zero and the stick terms are the
// prior's, is one lumped cell of log mass sum_{j<=L} log go_j + log t_0(x) (the stick's remainder
// past L; the prior's terms past L sum to it exactly: sum_{k>L} stop_k prod_{L<j<k} go_j
// + prod_{L<j<C} go_j = 1). The draw inverts the CDF at the point's uniform u, as sample_index does;
// when u falls in the lumped cell the inversion continues along the labels L+1, L+2, ... with the
// prior's terms (computed once per call), so the label drawn is the one the C + 1 cells would give,
// up to rounding. The last stick of a finite prior (slot `last`, b = 0) has log go = -inf, and the
// slots past it weight 0.
template <typename T, typename Family>
bool sb_chain(int N, int D, int C, const T* x, const T* shuffle, const T* uniforms, int32_t* z, T* n, T* s1, T* s2,
              const T* a, const T* b, int last, Family& fam) {
  const int DD = fam.second_size();
  const std::vector<int32_t> order = visiting_order(N, shuffle);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T tiny = std::numeric_limits<T>::min();
  // the prior's terms per slot (counts zero): log stop_k, log go_k
  std::vector<T> stop0(C), go0(C);
  for (int k = 0; k < C; ++k) {
    const bool beyond = last >= 0 && k > last;
    const T total = std::log(a[k] + b[k]);
    stop0[k] = beyond ? neg_inf : std::log(a[k]) - total;
    go0[k] = beyond || !(b[k] > T(0)) ? neg_inf : std::log(b[k]) - total;
  }
  std::vector<T> zeros(size_t(D) + DD, T(0));
  int top_slot = -1;  // the largest occupied slot
  for (int c = 0; c < C; ++c)
    if (n[c] > T(0)) fam.refresh(c, n[c], s1 + size_t(c) * D, s2 + size_t(c) * DD), top_slot = c;
  fam.refresh(C, T(0), zeros.data(), zeros.data() + D);  // slot C: the prior predictive t_0
  std::vector<T> logits(size_t(C) + 4, T(0)), pred(size_t(C) + 4, T(0));
  std::vector<int> active(size_t(C) + 1);
  bool overflow = false;
  for (int t = 0; t < N; ++t) {
    const int i = order[t];
    const T* xi = x + size_t(i) * D;
    const int old = z[i];
    move_point(old, xi, T(-1), D, n, s1, s2, fam);
    while (top_slot >= 0 && !(n[top_slot] > T(0))) --top_slot;
    int m = 0;
    T remaining = 0;
    for (int c = 0; c <= top_slot; ++c)
      if (n[c] > T(0)) active[m++] = c, remaining += n[c];
    active[m++] = C;
    fam.log_predictive(active.data(), m, xi, pred.data());
    const T empty = pred[m - 1];
    // cells 0..top_slot, then cell top_slot + 1: every label past top_slot
    const int cells = top_slot + 2, padded = (cells + 3) / 4 * 4;
    T before = 0;
    for (int k = 0, j = 0; k <= top_slot; ++k) {
      const bool beyond = last >= 0 && k > last;
      remaining -= n[k];
      const T as = a[k] + n[k], bs = b[k] + remaining, total = std::log(as + bs);
      const T stop = std::log(as) - total;
      const T go = beyond ? neg_inf : bs > T(0) ? std::log(bs) - total : neg_inf;
      const bool occupied = j < m - 1 && active[j] == k;
      logits[k] = beyond ? neg_inf : stop + before + (occupied ? pred[j] : empty);
      j += occupied;
      before += go;
    }
    logits[cells - 1] = before + empty;
    T top = neg_inf;
    for (int k = 0; k < cells; ++k) top = std::max(top, logits[k]);
    for (int k = 0; k < cells; ++k) logits[k] -= top;
    for (int k = cells; k < padded; ++k) logits[k] = neg_inf;
    exp_all(logits.data(), padded);
    T total = 0;
    for (int k = 0; k < cells; ++k) total += logits[k];
    const T target = std::max(uniforms[t], tiny) * total;
    T cdf = 0;
    int k = cells - 1;
    for (int c = 0; c < cells - 1; ++c) {
      cdf += logits[c];
      if (!(cdf < target)) { k = c; break; }
    }
    if (k == cells - 1) {  // past top_slot: continue the inversion along the prior's terms
      const T base = before + empty - top;
      T walked = 0;  // sum of log go_j over top_slot < j < k
      for (k = top_slot + 1; k < C; ++k) {
        cdf += std::exp(stop0[k] + walked + base);
        if (!(cdf < target)) break;
        walked += go0[k];
      }
    }
    if (k >= C) overflow = true, k = old;
    move_point(k, xi, T(1), D, n, s1, s2, fam);
    top_slot = std::max(top_slot, k);
    z[i] = k;
  }
  return overflow;
}


// One chain of the sequential seating under a stick-breaking prior (init="sequential":
// seating.seat_points with StickBreaking.log_seat_weights): every point in the shuffled order, none
// leaving a slot first, joins an occupied slot k with weight E[pi_k | Z] t_k(x) (eq. 6 as in sb_chain)
// or the first empty slot with the total weight of every empty label, those below the largest
// occupied slot L and the stick left past L (sum_{j<=L} log go_j: the prior's terms past L sum to it),
// times the prior predictive t_0(x); the draw inverts the CDF of these cells in slot order at the
// point's uniform (sample_index). With no empty slot the new cluster is not offered and the overflow
// is set (the driver seats again with more slots).
template <typename T, typename Family>
bool sb_sequential_chain(int N, int D, int C, const T* x, const T* shuffle, const T* uniforms, int32_t* z, T* n,
                         T* s1, T* s2, const T* a, const T* b, int last, Family& fam) {
  const int DD = fam.second_size();
  const std::vector<int32_t> order = visiting_order(N, shuffle);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> zeros(size_t(D) + DD, T(0));
  int top_slot = -1;  // the largest occupied slot
  for (int c = 0; c < C; ++c)
    if (n[c] > T(0)) fam.refresh(c, n[c], s1 + size_t(c) * D, s2 + size_t(c) * DD), top_slot = c;
  fam.refresh(C, T(0), zeros.data(), zeros.data() + D);  // slot C: the prior predictive t_0
  std::vector<T> pred(size_t(C) + 4, T(0)), weight(size_t(C) + 1), empty(size_t(C) + 1), logits(size_t(C) + 1);
  std::vector<int> active(size_t(C) + 1), cell(size_t(C) + 1);
  bool overflow = false;
  for (int t = 0; t < N; ++t) {
    const int i = order[t];
    const T* xi = x + size_t(i) * D;
    int m = 0, first_empty = -1;
    T remaining = 0;
    for (int c = 0; c <= top_slot; ++c) {
      if (n[c] > T(0)) active[m++] = c, remaining += n[c];
      else if (first_empty < 0) first_empty = c;
    }
    if (first_empty < 0 && top_slot + 1 < C) first_empty = top_slot + 1;
    const int occupied = m;
    active[m++] = C;
    fam.log_predictive(active.data(), m, xi, pred.data());
    // eq. (6) over the slots 0..L: the occupied ones' weights, the empty ones' collected with the stick past L
    T before = 0;
    int e = 0;
    for (int k = 0, j = 0; k <= top_slot; ++k) {
      const bool beyond = last >= 0 && k > last;
      remaining -= n[k];
      const T as = a[k] + n[k], bs = b[k] + remaining, total = std::log(as + bs);
      const T log_w = beyond ? neg_inf : std::log(as) - total + before;
      if (j < occupied && active[j] == k) weight[j++] = log_w;
      else empty[e++] = log_w;
      before += beyond ? neg_inf : bs > T(0) ? std::log(bs) - total : neg_inf;
    }
    empty[e++] = before;
    // the cells offered in slot order: the occupied slots and the first empty one
    int cells = 0;
    bool offered = first_empty < 0;  // the new cluster's cell placed (or not offered)
    for (int j = 0; j <= occupied; ++j) {
      if (!offered && (j == occupied || active[j] > first_empty)) {
        cell[cells] = first_empty;
        logits[cells++] = log_sum_exp(empty.data(), e) + pred[occupied];
        offered = true;
      }
      if (j < occupied) cell[cells] = active[j], logits[cells++] = weight[j] + pred[j];
    }
    overflow |= first_empty < 0;
    const int k = cell[std::min(sample_index(logits.data(), cells, uniforms[t]), cells - 1)];
    move_point(k, xi, T(1), D, n, s1, s2, fam);
    top_slot = std::max(top_slot, k);
    z[i] = k;
  }
  return overflow;
}

// One chain of split-merge's allocation pass over two slots, 0 (c_i) and 1 (c_j)
// (dpppl/kernels/splitmerge.py, allocation_pass): the points order[:count] in turn, each first
// leaving its side side[k] when `reseat` (a restricted Gibbs scan), then placed on side c with
//   P(c) ∝ (n_c - d) t_c(x_k)      (log(n_c - d) of prior.log_seat_weights; -inf when empty)
// drawn by inverting the CDF at uniform(t) (sample_index over the two logits; `uniform` is only called
// for a drawn side), or, when `force`,
// the side target[k]. Returns log_q = sum_t log P(side taken), each term the log_softmax of the
// two logits at that side (each <= 0, so the partial sums only decrease, rounded too). The pass stops
// early, returning the partial log_q, once offset + log_q < stop (by default never).
// log_size[m] caches log(m - d) for a cluster of m points (NaN: not yet computed; N + 1 entries).
template <typename T, typename Family, typename Uniform>
T allocate_chain(int D, const T* x, const int32_t* order, int count, const Uniform& uniform, bool force,
                 const int32_t* target, int32_t* side, T* n, T* s1, T* s2, T discount, bool reseat, Family& fam,
                 std::vector<T>& log_size, T offset = T(0), T stop = -std::numeric_limits<T>::infinity()) {
  const int DD = fam.second_size();
  auto weight = [&](T m) {
    if (!(m > T(0))) return -std::numeric_limits<T>::infinity();
    const size_t k = size_t(m);
    if (k >= log_size.size() || T(k) != m) return std::log(m - discount);
    if (std::isnan(log_size[k])) log_size[k] = std::log(m - discount);
    return log_size[k];
  };
  for (int c = 0; c < 2; ++c) fam.refresh(c, n[c], s1 + size_t(c) * D, s2 + size_t(c) * DD);
  const int active[2] = {0, 1};
  T logits[4];  // room for whole vectors (log_predictive's log_all)
  const T tiny = std::numeric_limits<T>::min();
  T log_q = 0;
  for (int t = 0; t < count; ++t) {
    const int k = order[t];
    const T* xk = x + size_t(k) * D;
    if (reseat) move_point(side[k], xk, T(-1), D, n, s1, s2, fam);
    fam.log_predictive(active, 2, xk, logits);
    for (int c = 0; c < 2; ++c) logits[c] += weight(n[c]);
    const T top = std::max(logits[0], logits[1]);
    const T p0 = std::exp(logits[0] - top), total = p0 + std::exp(logits[1] - top);
    const int s = force ? target[k] : int(p0 < std::max(uniform(t), tiny) * total);
    log_q += (logits[s] - top) - std::log(total);
    if (offset + log_q < stop) return log_q;
    move_point(s, xk, T(1), D, n, s1, s2, fam);
    side[k] = s;
  }
  return log_q;
}

// One chain's split-merge step of P SAMS proposals (dpppl/kernels/splitmerge.py, `step` and `propose`
// with method="sams"), in order, each on the state the previous one left. Proposal t takes the pair
// (i, j) = pairs[t] (i != j, real points) with c_i = z[i], c_j = z[j]; S is the other points of c_i
// and c_j in the order of `permutation`; i and j seed slots 0 and 1 and S is allocated by
// allocate_chain with the uniforms of jax.random.uniform(key, (N, 1)) for the threefry key
// allocation_keys[t] (2 words), the u-th point visited taking element u, computed as the pass draws
// them (a merge's forced pass draws none), forced to the current sides (target: 1 for the
// points of c_j) for a merge (c_i == c_j is a split). With the split's new slot b the first empty slot
// (c_j for a merge; a split with no empty slot is infeasible: rejected, and sets *overflow), the
// proposed rows are A = (slot 0 for a split, c_i + c_j for a merge) and B = (slot 1, or empty), the
// current ones c_i and b, and
//   log a = [log EPPF change + log m(A) + log m(B) - log m(c_i) - log m(b)] -+ log_q   (- for a split),
//   log EPPF change = (K' - K) terms: log(alpha + K d) for a cluster opened, -log(alpha + (K - 1) d) for
//                     one closed; plus sum_new lgamma(n - d) - sum_old lgamma(n - d) over occupied rows
//                     (PitmanYor.log_eppf_change; log m of an empty row is 0).
// Accepted when log(u_accept[t]) < log a: the points of S, i, j get c_i, or b on side 1 of a split, and
// the rows c_i, b become A, B. Adds exp(min(log a, 0)) to *total_p and counts[4] (splits proposed,
// accepted, merges proposed, accepted).
// A merge's bracket is known before its pass, which only lowers log a (log_q sums terms <= 0): the pass
// stops once log a < min(log u, log NEGLIGIBLE), where the merge is rejected whatever the rest of S does
// (the same decision as the whole pass, rounding included); its acceptance probability is then added as
// the bound reached, below NEGLIGIBLE. Most merges near a mode (two well separated clusters) stop
// before their first point. S is visited in the order of the permutation of the points by their
// `keys` (ascending, ties by index: jnp.argsort's).
template <typename T, typename Family>
void splitmerge_chain(int N, int D, int C, int P, const T* x, const int32_t* pairs, const T* u_accept,
                      const T* keys, const uint32_t* allocation_keys, int32_t* z, T* n, T* s1, T* s2, T alpha,
                      T discount, Family& fam, bool* overflow, T* total_p, int32_t* counts) {
  const int DD = fam.second_size();
  std::vector<int32_t> permutation(N), order(N), target(N, 0), side(N, 0);
  for (int k = 0; k < N; ++k) permutation[k] = k;
  std::stable_sort(permutation.begin(), permutation.end(), [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  const T log_negligible = std::log(T(NEGLIGIBLE));
  std::vector<T> log_size(size_t(N) + 1, std::numeric_limits<T>::quiet_NaN());
  std::vector<T> n2(2), a2(2 * size_t(D)), b2(2 * size_t(DD)), merged1(D), merged2(DD), zero1(D, T(0)),
      zero2(DD, T(0));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  auto size_term = [&](T m) { return m > T(0) ? T(log_gamma(double(m - discount)) - log_gamma(double(1 - discount))) : T(0); };
  auto marginal = [&](T m, const T* r1, const T* r2) { return m > T(0.5) ? fam.log_marginal(m, r1, r2) : T(0); };
  int clusters = 0;
  for (int c = 0; c < C; ++c) clusters += n[c] > T(0);
  for (int t = 0; t < P; ++t) {
    const int i = pairs[2 * t], j = pairs[2 * t + 1];
    const int ci = z[i], cj = z[j];
    const bool split = ci == cj;
    int count = 0;
    for (int r = 0; r < N; ++r) {
      const int k = permutation[r];
      if (k != i && k != j && (z[k] == ci || z[k] == cj)) order[count++] = k, target[k] = z[k] == cj;
    }
    // slots 0 and 1 hold i and j
    const T* xi = x + size_t(i) * D;
    const T* xj = x + size_t(j) * D;
    n2[0] = n2[1] = T(1);
    std::copy(xi, xi + D, a2.begin());
    std::copy(xj, xj + D, a2.begin() + D);
    std::fill(b2.begin(), b2.end(), T(0));
    fam.add_second(b2.data(), xi, T(1));
    fam.add_second(b2.data() + DD, xj, T(1));
    int empty = -1;
    for (int c = 0; c < C && empty < 0; ++c)
      if (n[c] < T(0.5)) empty = c;
    const bool feasible = !split || empty >= 0;
    const int b = split ? std::max(empty, 0) : cj;
    // the proposed rows A (at c_i) and B (at b): a split's are the pass's slots 0 and 1
    const T *A1, *A2, *B1, *B2;
    if (split) {
      A1 = a2.data(), A2 = b2.data(), B1 = a2.data() + D, B2 = b2.data() + DD;
    } else {
      B1 = zero1.data(), B2 = zero2.data();
      for (int d = 0; d < D; ++d) merged1[d] = s1[size_t(ci) * D + d] + s1[size_t(cj) * D + d];
      for (int d = 0; d < DD; ++d) merged2[d] = s2[size_t(ci) * DD + d] + s2[size_t(cj) * DD + d];
      A1 = merged1.data(), A2 = merged2.data();
    }
    const T nI = n[ci], nb = n[b];
    auto bracket = [&](T nA, T nB) {  // log a without log_q: the prior ratio and the marginals
      const int opened = int(nA > T(0)) + int(nB > T(0)) - int(nI > T(0)) - int(nb > T(0));
      T eppf = size_term(nA) + size_term(nB) - size_term(nI) - size_term(nb);
      if (opened > 0) eppf += std::log(alpha + T(clusters) * discount);
      if (opened < 0) eppf -= std::log(alpha + T(clusters - 1) * discount);
      return eppf + marginal(nA, A1, A2) + marginal(nB, B1, B2) - marginal(nI, s1 + size_t(ci) * D, s2 + size_t(ci) * DD)
             - marginal(nb, s1 + size_t(b) * D, s2 + size_t(b) * DD);
    };
    const T log_u = std::log(u_accept[t]);
    const uint32_t* key = allocation_keys + 2 * size_t(t);
    const auto uniform = [key](int u) { return threefry_uniform<T>(key, uint32_t(u)); };
    T log_accept = neg_inf, nA = 0, nB = 0;
    if (split) {
      const T log_q = allocate_chain(D, x, order.data(), count, uniform, false, target.data(),
                                     side.data(), n2.data(), a2.data(), b2.data(), discount, false, fam, log_size);
      nA = n2[0], nB = n2[1];
      if (feasible) log_accept = bracket(nA, nB) - log_q;
    } else {
      nA = nI + n[cj];
      const T log_ratio = bracket(nA, nB);
      const T log_q = allocate_chain(D, x, order.data(), count, uniform, true, target.data(),
                                     side.data(), n2.data(), a2.data(), b2.data(), discount, false, fam, log_size,
                                     log_ratio, std::min(log_u, log_negligible));
      log_accept = log_ratio + log_q;
    }
    *overflow |= !feasible;
    const bool accept = log_u < log_accept;
    *total_p += std::exp(std::min(log_accept, T(0)));
    counts[split ? 0 : 2] += 1;
    counts[split ? 1 : 3] += accept;
    if (!accept) continue;
    side[i] = 0, side[j] = 1;
    z[i] = ci, z[j] = split ? b : ci;
    for (int r = 0; r < count; ++r) z[order[r]] = split && side[order[r]] == 1 ? b : ci;
    // B first: its pointers may be the merged copies, A's may be the scratch rows
    n[b] = nB;
    std::copy(B1, B1 + D, s1 + size_t(b) * D);
    std::copy(B2, B2 + DD, s2 + size_t(b) * DD);
    n[ci] = nA;
    std::copy(A1, A1 + D, s1 + size_t(ci) * D);
    std::copy(A2, A2 + DD, s2 + size_t(ci) * DD);
    clusters += split ? 1 : -1;
  }
}

// One chain's relabelling proposals of dpppl/kernels/stick_breaking/labelswap.py (labelswap,
// labelpermute), the first `count` of a chunk, in order (labelswap.proposed_move): proposal t is
// the swap of slots labels[t, 0] and labels[t, 1], or (`permute`) the permutation of slots
// 0..m = labels[t, 0] sending slot s to the rank of keys[t, s] among keys[t, 0..m] (W keys per
// proposal: a permutation with m >= W is rejected); it reaches the label r = max(labels[t]) (C: past
// the slots) and is accepted when uniforms[t] < min(1, P(Z') / P(Z)) 1[r <= H(Z)] 1[r <= H(Z')], with
//   log P(Z) = sum_k lgamma(a_k + N_k) + lgamma(b_k + M_k) - lgamma(a_k + b_k + N_k + M_k) + const,
//   M_k = sum_{l>k} N_l      (StickBreaking.log_prob_labels; the last stick of a finite prior,
//                             slot `last`, contributes 0 when M = 0 and -inf otherwise, the slots
//                             past it 0),
//   H(Z) = 2 L + 1, L the largest occupied slot (labelswap.horizon).
// A proposal past the slots is rejected when it is past H(Z) (whatever label it drew), else it sets
// *overflow (the chunk is re-run with more slots). A proposal that moves only the slots lo..hi
// leaves N_k and M_k unchanged outside them, so the ratio is summed over lo..hi, and every step of
// a proposal costs O(r): L and the total count are kept as the proposals are accepted, and the slot
// map is kept as its inverse (the original slot now at each slot), composed on lo..hi only.
// Updates counts and slot_of (slot_of[s] = move[slot_of[s]] on acceptance); returns the sum of the
// acceptance probabilities and adds the acceptances to `accepted`.
template <typename T>
T relabel_chain(int C, int W, bool permute, int count, const int32_t* labels, const T* keys, const T* uniforms,
                const T* a, const T* b, int last, T* counts, int32_t* slot_of, int32_t* accepted, bool* overflow) {
  std::vector<T> proposed(C);
  std::vector<int32_t> mv(C), order(C), occupant(C), moved(C);
  for (int s = 0; s < C; ++s) mv[s] = s, occupant[slot_of[s]] = s;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  auto term = [&](int k, T n, T m) -> T {
    if (last >= 0 && k > last) return T(0);
    if (k == last) return m > T(0) ? neg_inf : T(0);
    return T(log_gamma(double(a[k] + n)) + log_gamma(double(b[k] + m)) - log_gamma(double(a[k] + b[k] + n + m)));
  };
  int top_slot = C - 1;  // L, the largest occupied slot (-1 when none)
  while (top_slot >= 0 && !(counts[top_slot] > T(0))) --top_slot;
  T total_count = 0;
  for (int s = 0; s <= top_slot; ++s) total_count += counts[s];
  T acc_sum = 0;
  for (int t = 0; t < count; ++t) {
    const int32_t* lab = labels + size_t(t) * 2;
    const int reach = std::max(lab[0], lab[1]);
    if (reach > 2 * top_slot + 1 || (permute && reach >= W)) continue;
    if (reach >= C) {
      *overflow = true;
      continue;
    }
    // the move on slots 0..reach (mv is the identity elsewhere, and everywhere between proposals)
    if (permute) {
      const T* key = keys + size_t(t) * W;
      for (int s = 0; s <= reach; ++s) order[s] = s;
      std::stable_sort(order.begin(), order.begin() + reach + 1, [&](int32_t u, int32_t v) { return key[u] < key[v]; });
      for (int r = 0; r <= reach; ++r) mv[order[r]] = r;
    } else {
      mv[lab[0]] = lab[1];
      mv[lab[1]] = lab[0];
    }
    int lo = C, hi = -1;
    for (int s = 0; s <= reach; ++s)
      if (mv[s] != s) lo = std::min(lo, s), hi = std::max(hi, s);
    T log_ratio = 0;
    bool within = true;
    int top = top_slot;  // the largest occupied slot of Z'
    if (hi >= 0) {
      for (int s = lo; s <= hi; ++s) proposed[mv[s]] = counts[s];
      if (top <= hi) {
        top = hi;
        while (top >= lo && !(proposed[top] > T(0))) --top;
        while (top >= 0 && top < lo && !(counts[top] > T(0))) --top;
      }
      within = reach <= 2 * top + 1;
      T after = total_count;  // M of slot hi: the points past the moved slots, the same on both sides
      for (int s = 0; s <= hi; ++s) after -= counts[s];
      T m_old = after, m_new = after;
      for (int k = hi; within && k >= lo; --k) {
        log_ratio += term(k, proposed[k], m_new) - term(k, counts[k], m_old);
        m_old += counts[k];
        m_new += proposed[k];
      }
    }
    const T accept_prob = within ? std::exp(std::min(log_ratio, T(0))) : T(0);
    acc_sum += accept_prob;
    if (uniforms[t] < accept_prob) {
      ++*accepted;
      for (int s = lo; s <= hi; ++s) counts[s] = proposed[s], moved[mv[s]] = occupant[s];
      for (int s = lo; s <= hi; ++s) occupant[s] = moved[s];
      top_slot = top;
    }
    for (int s = 0; s <= reach; ++s) mv[s] = s;
  }
  for (int s = 0; s < C; ++s) slot_of[occupant[s]] = s;
  return acc_sum;
}

// The state operands of a sweep (z (N,), n (C,), s1 (C, D), s2 (C, second)) and their results:
// copy(b) copies chain b's state into its results and returns the pointers the sweep updates.
template <ffi::DataType DT>
struct SweepState {
  using T = ffi::NativeType<DT>;
  struct Chain { int32_t* z; T *n, *s1, *s2; };
  ffi::Buffer<ffi::S32> z_in; ffi::Buffer<DT> n_in, s1_in, s2_in;
  ffi::ResultBuffer<ffi::S32>& z_out; ffi::ResultBuffer<DT> &n_out, &s1_out, &s2_out;
  int N, C, D; int64_t second;
  Operand oz, on, o1, o2;
  SweepState(ffi::Buffer<ffi::S32> z, ffi::Buffer<DT> n, ffi::Buffer<DT> s1, ffi::Buffer<DT> s2,
             ffi::ResultBuffer<ffi::S32>& zo, ffi::ResultBuffer<DT>& no, ffi::ResultBuffer<DT>& s1o,
             ffi::ResultBuffer<DT>& s2o, int N_, int C_, int D_, size_t full, int64_t B)
      : z_in(z), n_in(n), s1_in(s1), s2_in(s2), z_out(zo), n_out(no), s1_out(s1o), s2_out(s2o), N(N_), C(C_), D(D_),
        second(full ? int64_t(D_) * D_ : D_), oz(z.dimensions(), 1, B), on(n.dimensions(), 1, B),
        o1(s1.dimensions(), 2, B), o2(s2.dimensions(), 2 + full, B) {}
  Chain copy(int64_t b) const {
    Chain c{z_out->typed_data() + b * N, n_out->typed_data() + b * C, s1_out->typed_data() + b * int64_t(C) * D,
            s2_out->typed_data() + b * int64_t(C) * second};
    std::memcpy(c.z, oz.at(z_in.typed_data(), b), sizeof(int32_t) * N);
    std::memcpy(c.n, on.at(n_in.typed_data(), b), sizeof(T) * C);
    std::memcpy(c.s1, o1.at(s1_in.typed_data(), b), sizeof(T) * C * D);
    std::memcpy(c.s2, o2.at(s2_in.typed_data(), b), sizeof(T) * C * second);
    return c;
  }
};

template <ffi::DataType DT>
ffi::Error Seat(ffi::Buffer<DT> x, ffi::Buffer<DT> shuffle, ffi::Buffer<DT> uniforms,
                ffi::Buffer<ffi::S32> z_in, ffi::Buffer<DT> n_in, ffi::Buffer<DT> s1_in, ffi::Buffer<DT> s2_in,
                ffi::Buffer<DT> alpha, ffi::Buffer<DT> h1, ffi::Buffer<DT> h2, ffi::Buffer<DT> h3,
                ffi::Buffer<DT> scalars, ffi::Buffer<ffi::S32> num_valid, ffi::ResultBuffer<ffi::S32> z_out, ffi::ResultBuffer<DT> n_out,
                ffi::ResultBuffer<DT> s1_out, ffi::ResultBuffer<DT> s2_out, ffi::ResultBuffer<ffi::PRED> overflow_out,
                int64_t family, int64_t remove_first, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  const auto nd = n_out->dimensions();
  if (xd.size() < 2 || nd.size() < 1) return ffi::Error::InvalidArgument("native seating: bad operand ranks");
  if (family != 0 && family != 1) return ffi::Error::InvalidArgument("native seating: unknown family");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]), C = int(nd[nd.size() - 1]);
  const int64_t B = batch_of(z_out->dimensions(), 1);
  const size_t full = family == 0;  // NIW: s2 and h2 are D x D
  const Operand ox(xd, 2, B), ov(shuffle.dimensions(), 1, B), ou(uniforms.dimensions(), 1, B),
                oa(alpha.dimensions(), 0, B);
  const SweepState<DT> state(z_in, n_in, s1_in, s2_in, z_out, n_out, s1_out, s2_out, N, C, D, full, B);
  const Hyper<DT> hyper(h1, h2, h3, scalars, full, B);
  // the real points: the first Nv of the N rows (the others pad the points to a shape class, label -1)
  const int Nv = *num_valid.typed_data();
  if (Nv < 0 || Nv > N) return ffi::Error::InvalidArgument("native seating: num_valid outside [0, N]");
  // labels index the slots: one outside [0, C) would read and write past the statistics
  if (remove_first != 0) {
    const int64_t labels = z_in.element_count();
    const int32_t* zs = z_in.typed_data();
    for (int64_t j = 0; j < labels; ++j)
      if (j % N < Nv && (zs[j] < 0 || zs[j] >= C))
        return ffi::Error::InvalidArgument("native seating: a label outside [0, capacity)");
  }

  for_each_chain(B, num_threads, [&](int64_t b) {
    const auto st = state.copy(b);
    const T* xb = ox.at(x.typed_data(), b);
    const T* vb = ov.at(shuffle.typed_data(), b);
    const T* ub = ou.at(uniforms.typed_data(), b);
    const T ab = *oa.at(alpha.typed_data(), b);
    hyper.with_family(family, b, D, C, Nv, [&](auto& fam) {
      overflow_out->typed_data()[b] = seat_chain(Nv, D, C, xb, vb, ub, st.z, st.n, st.s1, st.s2, ab, hyper.discount(b),
                                                 remove_first != 0, fam);
    });
  });
  return ffi::Error::Success();
}

// sbgibbs's sweep for every chain of the batch (see sb_chain): Seat's operands with the sticks
// a, b (C,) and the last stick's slot (or -1) in place of alpha.
template <ffi::DataType DT>
ffi::Error SbSeat(ffi::Buffer<DT> x, ffi::Buffer<DT> shuffle, ffi::Buffer<DT> uniforms,
                  ffi::Buffer<ffi::S32> z_in, ffi::Buffer<DT> n_in, ffi::Buffer<DT> s1_in, ffi::Buffer<DT> s2_in,
                  ffi::Buffer<DT> a, ffi::Buffer<DT> b, ffi::Buffer<ffi::S32> last, ffi::Buffer<DT> h1,
                  ffi::Buffer<DT> h2, ffi::Buffer<DT> h3, ffi::Buffer<DT> scalars, ffi::Buffer<ffi::S32> num_valid,
                  ffi::ResultBuffer<ffi::S32> z_out, ffi::ResultBuffer<DT> n_out, ffi::ResultBuffer<DT> s1_out,
                  ffi::ResultBuffer<DT> s2_out, ffi::ResultBuffer<ffi::PRED> overflow_out, int64_t family,
                  int64_t sequential, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  const auto nd = n_out->dimensions();
  if (xd.size() < 2 || nd.size() < 1) return ffi::Error::InvalidArgument("native sbgibbs: bad operand ranks");
  if (family != 0 && family != 1) return ffi::Error::InvalidArgument("native sbgibbs: unknown family");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]), C = int(nd[nd.size() - 1]);
  const int64_t B = batch_of(z_out->dimensions(), 1);
  const size_t full = family == 0;
  const Operand ox(xd, 2, B), ov(shuffle.dimensions(), 1, B), ou(uniforms.dimensions(), 1, B),
                oa(a.dimensions(), 1, B), ob(b.dimensions(), 1, B), ol(last.dimensions(), 0, B);
  const SweepState<DT> state(z_in, n_in, s1_in, s2_in, z_out, n_out, s1_out, s2_out, N, C, D, full, B);
  const Hyper<DT> hyper(h1, h2, h3, scalars, full, B);
  const int Nv = *num_valid.typed_data();
  if (Nv < 0 || Nv > N) return ffi::Error::InvalidArgument("native sbgibbs: num_valid outside [0, N]");
  const int64_t labels = z_in.element_count();
  const int32_t* zs = z_in.typed_data();
  for (int64_t j = 0; j < labels; ++j)
    if (j % N < Nv && (zs[j] < 0 || zs[j] >= C))
      return ffi::Error::InvalidArgument("native sbgibbs: a label outside [0, capacity)");

  for_each_chain(B, num_threads, [&](int64_t c) {
    const auto st = state.copy(c);
    // C + 1 predictive slots: slot C holds the prior predictive (the empty labels and the tail)
    hyper.with_family(family, c, D, C + 1, Nv, [&](auto& fam) {
      const auto chain = sequential != 0 ? sb_sequential_chain<T, std::decay_t<decltype(fam)>>
                                         : sb_chain<T, std::decay_t<decltype(fam)>>;
      overflow_out->typed_data()[c] = chain(Nv, D, C, ox.at(x.typed_data(), c), ov.at(shuffle.typed_data(), c),
                                            ou.at(uniforms.typed_data(), c), st.z, st.n, st.s1, st.s2, oa.at(a.typed_data(), c),
                                            ob.at(b.typed_data(), c), *ol.at(last.typed_data(), c), fam);
    });
  });
  return ffi::Error::Success();
}

// Split-merge's allocation pass (dpppl/kernels/splitmerge.py, allocation_pass) over the two clusters
// of a proposal, slots 0 (c_i) and 1 (c_j), for every chain of the batch: see allocate_chain.
template <ffi::DataType DT>
ffi::Error Allocate(ffi::Buffer<DT> x, ffi::Buffer<ffi::S32> order, ffi::Buffer<ffi::S32> count,
                    ffi::Buffer<DT> uniforms, ffi::Buffer<ffi::S32> side_in, ffi::Buffer<ffi::S32> target,
                    ffi::Buffer<ffi::PRED> force, ffi::Buffer<DT> n_in, ffi::Buffer<DT> s1_in, ffi::Buffer<DT> s2_in,
                    ffi::Buffer<DT> h1, ffi::Buffer<DT> h2, ffi::Buffer<DT> h3, ffi::Buffer<DT> scalars,
                    ffi::ResultBuffer<DT> n_out, ffi::ResultBuffer<DT> s1_out, ffi::ResultBuffer<DT> s2_out,
                    ffi::ResultBuffer<ffi::S32> side_out, ffi::ResultBuffer<DT> log_q_out,
                    int64_t family, int64_t reseat, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  if (xd.size() < 2) return ffi::Error::InvalidArgument("native split-merge: bad operand ranks");
  if (family != 0 && family != 1) return ffi::Error::InvalidArgument("native split-merge: unknown family");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]);
  const int64_t B = batch_of(side_out->dimensions(), 1);
  const size_t full = family == 0;
  const int64_t second = full ? int64_t(D) * D : D;
  const Operand ox(xd, 2, B), oo(order.dimensions(), 1, B), oc(count.dimensions(), 0, B),
                ou(uniforms.dimensions(), 1, B), os(side_in.dimensions(), 1, B), ot(target.dimensions(), 1, B),
                of(force.dimensions(), 0, B), on(n_in.dimensions(), 1, B), o1(s1_in.dimensions(), 2, B),
                o2(s2_in.dimensions(), 2 + full, B);
  const Hyper<DT> hyper(h1, h2, h3, scalars, full, B);
  // the visited points index x and the sides index the two slots: checked before any is read
  for (int64_t b = 0; b < B; ++b) {
    const int m = *oc.at(count.typed_data(), b);
    if (m < 0 || m > N) return ffi::Error::InvalidArgument("native split-merge: count outside [0, N]");
    const int32_t *ob = oo.at(order.typed_data(), b), *sb = os.at(side_in.typed_data(), b),
                  *tb = ot.at(target.typed_data(), b);
    const bool forced = *of.at(force.typed_data(), b);
    for (int t = 0; t < m; ++t) {
      if (ob[t] < 0 || ob[t] >= N) return ffi::Error::InvalidArgument("native split-merge: a point outside [0, N)");
      if ((reseat != 0 && uint32_t(sb[ob[t]]) > 1) || (forced && uint32_t(tb[ob[t]]) > 1))
        return ffi::Error::InvalidArgument("native split-merge: a side outside {0, 1}");
    }
  }

  for_each_chain(B, num_threads, [&](int64_t b) {
    int32_t* side = side_out->typed_data() + b * N;
    T* n = n_out->typed_data() + b * 2;
    T* s1 = s1_out->typed_data() + b * 2 * int64_t(D);
    T* s2 = s2_out->typed_data() + b * 2 * second;
    std::memcpy(side, os.at(side_in.typed_data(), b), sizeof(int32_t) * N);
    std::memcpy(n, on.at(n_in.typed_data(), b), sizeof(T) * 2);
    std::memcpy(s1, o1.at(s1_in.typed_data(), b), sizeof(T) * 2 * D);
    std::memcpy(s2, o2.at(s2_in.typed_data(), b), sizeof(T) * 2 * second);
    std::vector<T> log_size(size_t(N) + 1, std::numeric_limits<T>::quiet_NaN());
    hyper.with_family(family, b, D, 2, N, [&](auto& fam) {
      log_q_out->typed_data()[b] = allocate_chain(
          D, ox.at(x.typed_data(), b), oo.at(order.typed_data(), b), *oc.at(count.typed_data(), b),
          [u = ou.at(uniforms.typed_data(), b)](int t) { return u[t]; }, *of.at(force.typed_data(), b), ot.at(target.typed_data(), b), side, n,
          s1, s2, hyper.discount(b), reseat != 0, fam, log_size);
    });
  });
  return ffi::Error::Success();
}

// Split-merge's step of SAMS proposals for every chain of the batch: see splitmerge_chain.
template <ffi::DataType DT>
ffi::Error SplitMerge(ffi::Buffer<DT> x, ffi::Buffer<ffi::S32> z_in, ffi::Buffer<DT> n_in, ffi::Buffer<DT> s1_in,
                      ffi::Buffer<DT> s2_in, ffi::Buffer<DT> alpha, ffi::Buffer<ffi::S32> pairs, ffi::Buffer<DT> u_accept,
                      ffi::Buffer<DT> keys, ffi::Buffer<ffi::U32> allocation_keys, ffi::Buffer<DT> h1,
                      ffi::Buffer<DT> h2, ffi::Buffer<DT> h3, ffi::Buffer<DT> scalars,
                      ffi::ResultBuffer<ffi::S32> z_out, ffi::ResultBuffer<DT> n_out, ffi::ResultBuffer<DT> s1_out,
                      ffi::ResultBuffer<DT> s2_out, ffi::ResultBuffer<ffi::PRED> overflow_out,
                      ffi::ResultBuffer<DT> total_p_out, ffi::ResultBuffer<ffi::S32> counts_out, int64_t family,
                      int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions(), nd = n_out->dimensions(), pd = pairs.dimensions();
  if (xd.size() < 2 || nd.size() < 1 || pd.size() < 2 || pd[pd.size() - 1] != 2)
    return ffi::Error::InvalidArgument("native split-merge step: bad operand ranks");
  if (family != 0 && family != 1) return ffi::Error::InvalidArgument("native split-merge step: unknown family");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]), C = int(nd[nd.size() - 1]),
            P = int(pd[pd.size() - 2]);
  const int64_t B = batch_of(z_out->dimensions(), 1);
  const size_t full = family == 0;
  const Operand ox(xd, 2, B), oa(alpha.dimensions(), 0, B), op(pd, 2, B), ou(u_accept.dimensions(), 1, B),
                om(keys.dimensions(), 1, B), ow(allocation_keys.dimensions(), 2, B);
  const SweepState<DT> state(z_in, n_in, s1_in, s2_in, z_out, n_out, s1_out, s2_out, N, C, D, full, B);
  const Hyper<DT> hyper(h1, h2, h3, scalars, full, B);
  // labels index the slots (-1: a padded point) and pairs index the points
  for (int64_t b = 0; b < B; ++b) {
    const int32_t *zb = state.oz.at(z_in.typed_data(), b), *pb = op.at(pairs.typed_data(), b);
    for (int k = 0; k < N; ++k)
      if (zb[k] < -1 || zb[k] >= C) return ffi::Error::InvalidArgument("native split-merge step: a label outside [-1, capacity)");
    for (int t = 0; t < P; ++t) {
      const int i = pb[2 * t], j = pb[2 * t + 1];
      if (i < 0 || i >= N || j < 0 || j >= N || i == j || zb[i] < 0 || zb[j] < 0)
        return ffi::Error::InvalidArgument("native split-merge step: a pair that is not two distinct seated points");
    }
  }

  for_each_chain(B, num_threads, [&](int64_t b) {
    const auto st = state.copy(b);
    bool* overflow = overflow_out->typed_data() + b;
    T* total_p = total_p_out->typed_data() + b;
    int32_t* counts = counts_out->typed_data() + b * 4;
    *overflow = false, *total_p = T(0);
    std::fill(counts, counts + 4, 0);
    hyper.with_family(family, b, D, 2, N, [&](auto& fam) {
      splitmerge_chain(N, D, C, P, ox.at(x.typed_data(), b), op.at(pairs.typed_data(), b),
                       ou.at(u_accept.typed_data(), b), om.at(keys.typed_data(), b),
                       ow.at(allocation_keys.typed_data(), b), st.z, st.n, st.s1, st.s2, *oa.at(alpha.typed_data(), b),
                       hyper.discount(b), fam, overflow, total_p, counts);
    });
  });
  return ffi::Error::Success();
}

// The relabelling proposals of one chunk for every chain of the batch: see relabel_chain.
template <ffi::DataType DT>
ffi::Error Relabel(ffi::Buffer<DT> counts_in, ffi::Buffer<ffi::S32> slot_in, ffi::Buffer<ffi::S32> labels,
                   ffi::Buffer<DT> keys, ffi::Buffer<DT> uniforms, ffi::Buffer<ffi::S32> count,
                   ffi::Buffer<DT> a, ffi::Buffer<DT> b, ffi::Buffer<ffi::S32> last,
                   ffi::ResultBuffer<DT> counts_out, ffi::ResultBuffer<ffi::S32> slot_out,
                   ffi::ResultBuffer<DT> acc_sum_out, ffi::ResultBuffer<ffi::S32> accepted_out,
                   ffi::ResultBuffer<ffi::PRED> overflow_out, int64_t permute) {
  using T = ffi::NativeType<DT>;
  const auto ld = labels.dimensions(), kd = keys.dimensions();
  if (ld.size() < 2 || ld[ld.size() - 1] != 2 || kd.size() < 2) return ffi::Error::InvalidArgument("native relabel: bad operand ranks");
  const int P = int(ld[ld.size() - 2]), W = int(kd[kd.size() - 1]);
  const int64_t B = batch_of(slot_out->dimensions(), 1);
  const int C = int(slot_out->dimensions()[slot_out->dimensions().size() - 1]);
  const Operand oc(counts_in.dimensions(), 1, B), os(slot_in.dimensions(), 1, B), ol2(ld, 2, B), ok(kd, 2, B),
                ou(uniforms.dimensions(), 1, B), on(count.dimensions(), 0, B),
                oa(a.dimensions(), 1, B), ob(b.dimensions(), 1, B), ol(last.dimensions(), 0, B);
  // the labels and the slot map index the slots: checked before any is followed
  for (int64_t c = 0; c < B; ++c) {
    const int m = *on.at(count.typed_data(), c);
    if (m < 0 || m > P) return ffi::Error::InvalidArgument("native relabel: count outside [0, proposals]");
    const int32_t* lab = ol2.at(labels.typed_data(), c);
    for (int64_t j = 0; j < int64_t(m) * 2; ++j)
      if (uint32_t(lab[j]) > uint32_t(C)) return ffi::Error::InvalidArgument("native relabel: a label outside [0, C]");
    const int32_t* so = os.at(slot_in.typed_data(), c);
    for (int s = 0; s < C; ++s)
      if (uint32_t(so[s]) >= uint32_t(C)) return ffi::Error::InvalidArgument("native relabel: a slot outside [0, C)");
  }
  for (int64_t c = 0; c < B; ++c) {
    T* n = counts_out->typed_data() + c * C;
    int32_t* slot_of = slot_out->typed_data() + c * C;
    std::memcpy(n, oc.at(counts_in.typed_data(), c), sizeof(T) * C);
    std::memcpy(slot_of, os.at(slot_in.typed_data(), c), sizeof(int32_t) * C);
    int32_t* accepted = accepted_out->typed_data() + c;
    *accepted = 0;
    bool* overflow = overflow_out->typed_data() + c;
    *overflow = false;
    acc_sum_out->typed_data()[c] = relabel_chain<T>(
        C, W, permute != 0, *on.at(count.typed_data(), c), ol2.at(labels.typed_data(), c), ok.at(keys.typed_data(), c),
        ou.at(uniforms.typed_data(), c), oa.at(a.typed_data(), c), ob.at(b.typed_data(), c),
        *ol.at(last.typed_data(), c), n, slot_of, accepted, overflow);
  }
  return ffi::Error::Success();
}

// The operands of Seat, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_SEAT_BINDING(DT)                                                 \
  ffi::Ffi::Bind()                                                                 \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                               \
      .Arg<ffi::Buffer<DT>>()         /* shuffle (N,): uniforms fixing the order */ \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (N,) */                          \
      .Arg<ffi::Buffer<ffi::S32>>()   /* z (N,) */                                 \
      .Arg<ffi::Buffer<DT>>()         /* n (C,) */                                 \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, D) */                              \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, D, D) or (C, D) */                 \
      .Arg<ffi::Buffer<DT>>()         /* alpha () */                               \
      .Arg<ffi::Buffer<DT>>()         /* h1: hyperparameters (see Hyper) */        \
      .Arg<ffi::Buffer<DT>>()         /* h2 */                                     \
      .Arg<ffi::Buffer<DT>>()         /* h3 */                                     \
      .Arg<ffi::Buffer<DT>>()         /* scalars (3,): kappa0, nu0, discount */    \
      .Arg<ffi::Buffer<ffi::S32>>()   /* num_valid (): the real points, first rows */ \
      .Ret<ffi::Buffer<ffi::S32>>()   /* z */                                      \
      .Ret<ffi::Buffer<DT>>()         /* n */                                      \
      .Ret<ffi::Buffer<DT>>()         /* s1 */                                     \
      .Ret<ffi::Buffer<DT>>()         /* s2 */                                     \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow: a point found no empty slot */  \
      .Attr<int64_t>("family")                                                     \
      .Attr<int64_t>("remove_first")                                               \
      .Attr<int64_t>("num_threads")

// The operands of Allocate, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_ALLOCATE_BINDING(DT)                                                           \
  ffi::Ffi::Bind()                                                                               \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                                             \
      .Arg<ffi::Buffer<ffi::S32>>()   /* order (N,): the points visited, order[:count] */       \
      .Arg<ffi::Buffer<ffi::S32>>()   /* count () */                                             \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (N,): uniforms[t] draws the t-th point's side */ \
      .Arg<ffi::Buffer<ffi::S32>>()   /* side (N,): each point's side, read with reseat */      \
      .Arg<ffi::Buffer<ffi::S32>>()   /* target (N,): the sides taken when forced */            \
      .Arg<ffi::Buffer<ffi::PRED>>()  /* force () */                                             \
      .Arg<ffi::Buffer<DT>>()         /* n (2,) */                                               \
      .Arg<ffi::Buffer<DT>>()         /* s1 (2, D) */                                            \
      .Arg<ffi::Buffer<DT>>()         /* s2 (2, D, D) or (2, D) */                               \
      .Arg<ffi::Buffer<DT>>()         /* h1: hyperparameters (see Hyper) */                      \
      .Arg<ffi::Buffer<DT>>()         /* h2 */                                                   \
      .Arg<ffi::Buffer<DT>>()         /* h3 */                                                   \
      .Arg<ffi::Buffer<DT>>()         /* scalars (3,): kappa0, nu0, discount */                  \
      .Ret<ffi::Buffer<DT>>()         /* n */                                                    \
      .Ret<ffi::Buffer<DT>>()         /* s1 */                                                   \
      .Ret<ffi::Buffer<DT>>()         /* s2 */                                                   \
      .Ret<ffi::Buffer<ffi::S32>>()   /* side */                                                 \
      .Ret<ffi::Buffer<DT>>()         /* log_q () */                                             \
      .Attr<int64_t>("family")                                                                   \
      .Attr<int64_t>("reseat")                                                                   \
      .Attr<int64_t>("num_threads")

// The operands of SplitMerge, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_SPLITMERGE_BINDING(DT)                                                        \
  ffi::Ffi::Bind()                                                                              \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                                            \
      .Arg<ffi::Buffer<ffi::S32>>()   /* z (N,): -1 for a padded point */                       \
      .Arg<ffi::Buffer<DT>>()         /* n (C,) */                                              \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, D) */                                           \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, D, D) or (C, D) */                              \
      .Arg<ffi::Buffer<DT>>()         /* alpha () */                                            \
      .Arg<ffi::Buffer<ffi::S32>>()   /* pairs (P, 2): each proposal's (i, j) */                \
      .Arg<ffi::Buffer<DT>>()         /* u_accept (P,): the acceptance uniforms */              \
      .Arg<ffi::Buffer<DT>>()         /* keys (N,): S is visited in the order of their argsort */ \
      .Arg<ffi::Buffer<ffi::U32>>()   /* allocation_keys (P, 2): proposal t's threefry key */   \
      .Arg<ffi::Buffer<DT>>()         /* h1: hyperparameters (see Hyper) */                     \
      .Arg<ffi::Buffer<DT>>()         /* h2 */                                                  \
      .Arg<ffi::Buffer<DT>>()         /* h3 */                                                  \
      .Arg<ffi::Buffer<DT>>()         /* scalars (3,): kappa0, nu0, discount */                 \
      .Ret<ffi::Buffer<ffi::S32>>()   /* z */                                                   \
      .Ret<ffi::Buffer<DT>>()         /* n */                                                   \
      .Ret<ffi::Buffer<DT>>()         /* s1 */                                                  \
      .Ret<ffi::Buffer<DT>>()         /* s2 */                                                  \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow: a split found no empty slot */               \
      .Ret<ffi::Buffer<DT>>()         /* total_p (): the sum of the acceptance probabilities */ \
      .Ret<ffi::Buffer<ffi::S32>>()   /* counts (4,): splits proposed, accepted, merges proposed, accepted */ \
      .Attr<int64_t>("family")                                                                  \
      .Attr<int64_t>("num_threads")

// The operands of SbSeat, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_SB_SEAT_BINDING(DT)                                                \
  ffi::Ffi::Bind()                                                                   \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                                 \
      .Arg<ffi::Buffer<DT>>()         /* shuffle (N,) */                             \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (N,) */                            \
      .Arg<ffi::Buffer<ffi::S32>>()   /* z (N,) */                                   \
      .Arg<ffi::Buffer<DT>>()         /* n (C,) */                                   \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, D) */                                \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, D, D) or (C, D) */                   \
      .Arg<ffi::Buffer<DT>>()         /* a (C,): the sticks' a_k */                  \
      .Arg<ffi::Buffer<DT>>()         /* b (C,): the sticks' b_k */                  \
      .Arg<ffi::Buffer<ffi::S32>>()   /* last (): the last stick's slot, or -1 */    \
      .Arg<ffi::Buffer<DT>>()         /* h1: hyperparameters (see Hyper) */          \
      .Arg<ffi::Buffer<DT>>()         /* h2 */                                       \
      .Arg<ffi::Buffer<DT>>()         /* h3 */                                       \
      .Arg<ffi::Buffer<DT>>()         /* scalars (3,): kappa0, nu0, (discount) */    \
      .Arg<ffi::Buffer<ffi::S32>>()   /* num_valid () */                             \
      .Ret<ffi::Buffer<ffi::S32>>()   /* z */                                        \
      .Ret<ffi::Buffer<DT>>()         /* n */                                        \
      .Ret<ffi::Buffer<DT>>()         /* s1 */                                       \
      .Ret<ffi::Buffer<DT>>()         /* s2 */                                       \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow: a draw past the C slots */        \
      .Attr<int64_t>("family")                                                       \
      .Attr<int64_t>("sequential")  /* 1: the sequential seating, not the sweep */    \
      .Attr<int64_t>("num_threads")

// The operands of Relabel, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_RELABEL_BINDING(DT)                                                      \
  ffi::Ffi::Bind()                                                                         \
      .Arg<ffi::Buffer<DT>>()         /* counts (C,) */                                    \
      .Arg<ffi::Buffer<ffi::S32>>()   /* slot_of (C,): each original slot's slot now */   \
      .Arg<ffi::Buffer<ffi::S32>>()   /* labels (P, 2): a swap's (i, j), a permutation's (m, m); C: past */ \
      .Arg<ffi::Buffer<DT>>()         /* keys (P, W): a permutation's keys (W per proposal, whatever C), else unused */ \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (P,): the acceptance uniforms */        \
      .Arg<ffi::Buffer<ffi::S32>>()   /* count (): the proposals made, labels[:count] */  \
      .Arg<ffi::Buffer<DT>>()         /* a (C,): the sticks' a_k */                       \
      .Arg<ffi::Buffer<DT>>()         /* b (C,): the sticks' b_k */                       \
      .Arg<ffi::Buffer<ffi::S32>>()   /* last (): the last stick's slot, or -1 */         \
      .Ret<ffi::Buffer<DT>>()         /* counts */                                         \
      .Ret<ffi::Buffer<ffi::S32>>()   /* slot_of */                                        \
      .Ret<ffi::Buffer<DT>>()         /* acc_sum () */                                     \
      .Ret<ffi::Buffer<ffi::S32>>()   /* accepted () */                                    \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow (): a proposal past the slots within the horizon */ \
      .Attr<int64_t>("permute")

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSeatF64, Seat<ffi::F64>, DPPPL_SEAT_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSeatF32, Seat<ffi::F32>, DPPPL_SEAT_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplAllocateF64, Allocate<ffi::F64>, DPPPL_ALLOCATE_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplAllocateF32, Allocate<ffi::F32>, DPPPL_ALLOCATE_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSplitMergeF64, SplitMerge<ffi::F64>, DPPPL_SPLITMERGE_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSplitMergeF32, SplitMerge<ffi::F32>, DPPPL_SPLITMERGE_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplRelabelF64, Relabel<ffi::F64>, DPPPL_RELABEL_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplRelabelF32, Relabel<ffi::F32>, DPPPL_RELABEL_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSbSeatF64, SbSeat<ffi::F64>, DPPPL_SB_SEAT_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSbSeatF32, SbSeat<ffi::F32>, DPPPL_SB_SEAT_BINDING(ffi::F32));
