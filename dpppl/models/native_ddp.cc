// The assignment sweep, parameter update and label swaps of the dependent DP over time (DdpSeat,
// DdpParameters, dpppl/models/ddp_state.py; DdpSwap, dpppl/kernels/ddp/swap.py) and the labels' terms
// of its log joint (DdpLabelLogJoints, dpppl/models/ddp.py), a library of its own (built on a DDP
// kernel's first native call), with the helpers of native_seating.h; dpppl/models/native_seating.py
// loads and calls it. Batching and threads as in native_seating.cc.

#include "native_seating.h"

namespace {


// Lower Cholesky factor L of the symmetric positive-definite a (n x n, row-major): a = L L^T
// (dpppl.families.gaussian.cholesky), and the inverse of a lower-triangular L by forward substitution.
template <typename T>
void cholesky_lower(const T* a, int n, T* L) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      if (i < j) { L[i * n + j] = 0; continue; }
      T v = a[i * n + j];
      for (int k = 0; k < j; ++k) v -= L[i * n + k] * L[j * n + k];
      L[i * n + j] = i == j ? std::sqrt(v) : v / L[j * n + j];
    }
}
template <typename T>
void inverse_lower(const T* L, int n, T* inv) {
  for (int col = 0; col < n; ++col)
    for (int i = 0; i < n; ++i) {
      T v = i == col ? T(1) : T(0);
      for (int k = 0; k < i; ++k) v -= L[i * n + k] * inv[k * n + col];
      inv[i * n + col] = v / L[i * n + i];
    }
}

// One chain of the DDP's assignment sweep (dpppl/models/ddp_state.py, seat; Porteous et al. 2006,
// eq. 10, with Neal's (2000) algorithm-8 auxiliaries): the points order[:Nv] in turn, point i of
// slice t first leaving its label when `remove_first` (alone: no other point kept it), then taking
//   label c (used)          with log weight  log E[pi_{t,c} | Z_{t,-i}] + log N(x_i; mu_{c,t}, Sigma_{c,s(t)}),
//   auxiliary k < m         with log weight  log W_new - log m + log N(x_i; mu*_{i,k}, Sigma*_{i,k}),
// W_new = sum over the unused labels of E[pi_{t,c}] plus the stick left past the C slots
// (StickBreaking.log_expected_weights of the counts N_{t,.}: a* = a + N, b* = b + sum_{l>c} N_l,
// log E[pi_c] = log a*_c - log(a*_c + b*_c) + sum_{j<c} log go_j, log go_j = log b*_j - log(a*_j + b*_j)),
// auxiliary 0 being the point's own label's parameters when it was alone. The draw inverts the CDF
// at uniforms[0, i] (sample_index); an auxiliary's label is drawn among the unused labels and the
// cell past the slots, in proportion to their weights, at uniforms[1, i]; past the slots the point
// keeps its label and the overflow is set (the chunk is re-run with more slots). A label opened by
// auxiliary k takes its mean in slice t (aux_mu[i, k]) and covariance (cov_*[i, k]), its other
// slices' means m + g_t (mu*_t - m) + chol_t rest[i] (CoupledGaussian.means_given_slice) and, per
// slice, the other slices' covariances cov_*[i, m + s]. The log-likelihoods are computed per point
// from the labels' current parameters (precisions from a Cholesky factor, as inverse_root), which is
// what the JAX loop's table of them holds; the draws are the JAX loop's up to rounding.
template <typename T>
bool ddp_chain(int Nv, int D, int C, int TT, int S, int m, int M, bool remove_first, const T* x,
               const int32_t* slices, const int32_t* order, const T* u0, const T* u1, int32_t* z, T* nt, T* total,
               T* mu, T* sigma, const T* aux_mu, const T* rest, const T* cov_sigma, const T* cov_prec,
               const T* cov_logdet, const T* gain, const T* cond, const T* mu0, const T* a, const T* b, int last) {
  const int DD = D * D;
  const bool per_slice = M > m;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T tiny = std::numeric_limits<T>::min();
  const T log_2pi = T(D) * std::log(T(2) * T(M_PI));
  // every label's precision and log determinant per covariance slot (identity for unused labels)
  std::vector<T> prec(size_t(C) * S * DD, T(0)), logdet(size_t(C) * S, T(0)), chol(DD), inv(DD);
  for (int c = 0; c < C; ++c)
    for (int s = 0; s < S; ++s) {
      T* p = &prec[(size_t(c) * S + s) * DD];
      if (!(remove_first && total[c] > T(0.5))) {
        for (int d = 0; d < D; ++d) p[d * D + d] = T(1);
        continue;
      }
      cholesky_lower(sigma + (size_t(c) * S + s) * DD, D, chol.data());  // sigma = L L^T
      inverse_lower(chol.data(), D, inv.data());
      T half = 0;
      for (int d = 0; d < D; ++d) half += std::log(chol[d * D + d]);
      for (int i = 0; i < D; ++i)  // prec = inv^T inv
        for (int j = 0; j < D; ++j) {
          T v = 0;
          for (int k = 0; k < D; ++k) v += inv[k * D + i] * inv[k * D + j];
          p[i * D + j] = v;
        }
      logdet[size_t(c) * S + s] = T(2) * half;
    }
  auto log_lik = [&](const T* xi, const T* mean, const T* p, T ld) {
    T quad = 0;
    for (int d = 0; d < D; ++d) {
      T row = 0;
      for (int e = 0; e < D; ++e) row += p[d * D + e] * (xi[e] - mean[e]);
      quad += (xi[d] - mean[d]) * row;
    }
    return T(-0.5) * (log_2pi + ld + quad);
  };
  // index from unnormalised log weights by inverting the CDF at u (dpppl.core.numerics.sample_index)
  std::vector<T> work(size_t(C) + m + 1);
  auto sample_index = [&](const T* logits, int count, T u) {
    T top = neg_inf;
    for (int k = 0; k < count; ++k) top = std::max(top, logits[k]);
    T sum = 0;
    for (int k = 0; k < count; ++k) work[k] = sum += std::exp(logits[k] - top);
    const T target = std::max(u, tiny) * sum;
    int index = 0;
    for (int k = 0; k < count; ++k) index += work[k] < target;
    return index;
  };
  std::vector<T> log_w(C), free_w(size_t(C) + 1), logits(size_t(C) + m), ll_aux(m);
  bool overflow = false;
  for (int step = 0; step < Nv; ++step) {
    const int i = order[step], t = slices[i], s = per_slice ? t : 0, old = z[i];
    const T* xi = x + size_t(i) * D;
    bool alone = false;
    if (remove_first) {
      nt[size_t(old) * TT + t] -= T(1);
      total[old] -= T(1);
      alone = total[old] < T(0.5);
    }
    // eq. (6) in slice t: log E[pi_{t,c} | Z_{t,-i}] and the log stick left past C
    T after = 0;  // sum_{l > c} N_{t,l}
    for (int c = 0; c < C; ++c) after += nt[size_t(c) * TT + t];
    T before = 0;
    for (int c = 0; c < C; ++c) {
      const T n = nt[size_t(c) * TT + t];
      after -= n;
      const bool beyond = last >= 0 && c > last;
      const T as = a[c] + n, bs = b[c] + after, lt = std::log(as + bs);
      log_w[c] = beyond ? neg_inf : std::log(as) - lt + before;
      before += beyond ? neg_inf : (bs > T(0) ? std::log(bs) - lt : neg_inf);
    }
    T top = before;  // the log weight of every unused label and the tail: log W_new
    for (int c = 0; c < C; ++c) {
      free_w[c] = total[c] > T(0.5) ? neg_inf : log_w[c];
      top = std::max(top, free_w[c]);
    }
    free_w[C] = before;
    T log_new = neg_inf;
    if (top > neg_inf) {
      T sum = 0;
      for (int c = 0; c <= C; ++c) sum += std::exp(free_w[c] - top);
      log_new = top + std::log(sum);
    }
    for (int c = 0; c < C; ++c)
      logits[c] = total[c] > T(0.5) ? log_w[c] + log_lik(xi, mu + (size_t(c) * TT + t) * D,
                                                          &prec[(size_t(c) * S + s) * DD], logdet[size_t(c) * S + s])
                                    : neg_inf;
    for (int k = 0; k < m; ++k)
      ll_aux[k] = log_lik(xi, aux_mu + (size_t(i) * m + k) * D, cov_prec + (size_t(i) * M + k) * DD,
                          cov_logdet[size_t(i) * M + k]);
    if (alone)
      ll_aux[0] = log_lik(xi, mu + (size_t(old) * TT + t) * D, &prec[(size_t(old) * S + s) * DD],
                          logdet[size_t(old) * S + s]);
    for (int k = 0; k < m; ++k) logits[C + k] = log_new - std::log(T(m)) + ll_aux[k];
    const int pick = sample_index(logits.data(), C + m, u0[i]);
    const bool is_new = pick >= C;
    const int k = std::min(std::max(pick - C, 0), m - 1);
    const int label = sample_index(free_w.data(), C + 1, u1[i]);
    const bool past = is_new && label == C;
    const int j = is_new ? (past ? old : label) : pick;
    if (is_new && !past && !(alone && k == 0)) {  // label j takes auxiliary k's parameters
      const T* mt = aux_mu + (size_t(i) * m + k) * D;
      const T *g = gain + size_t(t) * TT, *L = cond + size_t(t) * TT * TT, *eps = rest + size_t(i) * TT * D;
      for (int r = 0; r < TT; ++r)
        for (int d = 0; d < D; ++d) {
          T v = 0;
          for (int q = 0; q < TT; ++q) v += L[r * TT + q] * eps[q * D + d];
          mu[(size_t(j) * TT + r) * D + d] = mu0[d] + g[r] * (mt[d] - mu0[d]) + v;
        }
      for (int r = 0; r < S; ++r) {  // slot r of label j: auxiliary k's in slice t (or shared), else slice r's draw
        const size_t from = size_t(i) * M + (per_slice && r != t ? m + r : k);
        std::memcpy(sigma + (size_t(j) * S + r) * DD, cov_sigma + from * DD, sizeof(T) * DD);
        std::memcpy(&prec[(size_t(j) * S + r) * DD], cov_prec + from * DD, sizeof(T) * DD);
        logdet[size_t(j) * S + r] = cov_logdet[from];
      }
    } else if (is_new && !past && j != old) {  // the old label's own parameters (auxiliary 0, alone)
      std::memcpy(mu + size_t(j) * TT * D, mu + size_t(old) * TT * D, sizeof(T) * TT * D);
      std::memcpy(sigma + size_t(j) * S * DD, sigma + size_t(old) * S * DD, sizeof(T) * S * DD);
      std::memcpy(&prec[size_t(j) * S * DD], &prec[size_t(old) * S * DD], sizeof(T) * S * DD);
      std::memcpy(&logdet[size_t(j) * S], &logdet[size_t(old) * S], sizeof(T) * S);
    }
    nt[size_t(j) * TT + t] += T(1);
    total[j] += T(1);
    z[i] = j;
    overflow = overflow || past;
  }
  return overflow;
}

// The DDP sweep for every chain of the batch (see ddp_chain).
template <ffi::DataType DT>
ffi::Error DdpSeat(ffi::Buffer<DT> x, ffi::Buffer<ffi::S32> slices, ffi::Buffer<ffi::S32> order,
                   ffi::Buffer<DT> uniforms, ffi::Buffer<ffi::S32> z_in, ffi::Buffer<DT> nt_in, ffi::Buffer<DT> n_in,
                   ffi::Buffer<DT> mu_in, ffi::Buffer<DT> sigma_in, ffi::Buffer<DT> aux_mu, ffi::Buffer<DT> rest,
                   ffi::Buffer<DT> cov_sigma, ffi::Buffer<DT> cov_prec, ffi::Buffer<DT> cov_logdet,
                   ffi::Buffer<DT> gain, ffi::Buffer<DT> cond, ffi::Buffer<DT> mu0, ffi::Buffer<DT> a,
                   ffi::Buffer<DT> b, ffi::Buffer<ffi::S32> last, ffi::Buffer<ffi::S32> num_valid,
                   ffi::ResultBuffer<ffi::S32> z_out, ffi::ResultBuffer<DT> nt_out, ffi::ResultBuffer<DT> n_out,
                   ffi::ResultBuffer<DT> mu_out, ffi::ResultBuffer<DT> sigma_out,
                   ffi::ResultBuffer<ffi::PRED> overflow_out, int64_t remove_first, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions(), md = mu_out->dimensions(), sd = sigma_out->dimensions(),
             ad = aux_mu.dimensions(), cd = cov_logdet.dimensions();
  if (xd.size() < 2 || md.size() < 3 || sd.size() < 4 || ad.size() < 3 || cd.size() < 2)
    return ffi::Error::InvalidArgument("native ddp: bad operand ranks");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]);
  const int C = int(md[md.size() - 3]), TT = int(md[md.size() - 2]), S = int(sd[sd.size() - 3]);
  const int m = int(ad[ad.size() - 2]), M = int(cd[cd.size() - 1]);
  if (m < 1 || (M != m && M != m + TT) || (S != 1 && S != TT) || (M > m) != (S == TT && M == m + TT))
    return ffi::Error::InvalidArgument("native ddp: inconsistent auxiliary or covariance shapes");
  const int64_t B = batch_of(z_out->dimensions(), 1);
  const Operand ox(xd, 2, B), osl(slices.dimensions(), 1, B), oo(order.dimensions(), 1, B),
      ou(uniforms.dimensions(), 2, B), oz(z_in.dimensions(), 1, B), ont(nt_in.dimensions(), 2, B),
      on(n_in.dimensions(), 1, B), omu(mu_in.dimensions(), 3, B), osg(sigma_in.dimensions(), 4, B),
      oam(ad, 3, B), ore(rest.dimensions(), 3, B), ocs(cov_sigma.dimensions(), 4, B),
      ocp(cov_prec.dimensions(), 4, B), ocl(cd, 2, B), og(gain.dimensions(), 2, B), oc(cond.dimensions(), 3, B),
      om0(mu0.dimensions(), 1, B), oa(a.dimensions(), 1, B), ob(b.dimensions(), 1, B), ol(last.dimensions(), 0, B);
  const int Nv = *num_valid.typed_data();
  if (Nv < 0 || Nv > N) return ffi::Error::InvalidArgument("native ddp: num_valid outside [0, N]");
  // labels, slices and the order index arrays: checked before any is followed
  for (int64_t c = 0; c < B; ++c) {
    const int32_t *zs = oz.at(z_in.typed_data(), c), *ts = osl.at(slices.typed_data(), c),
                  *os = oo.at(order.typed_data(), c);
    for (int k = 0; k < Nv; ++k) {
      const int i = os[k];
      if (i < 0 || i >= N || ts[i] < 0 || ts[i] >= TT || zs[i] < 0 || zs[i] >= C)
        return ffi::Error::InvalidArgument("native ddp: an order, slice or label index out of range");
    }
  }
  for_each_chain(B, num_threads, [&](int64_t c) {
    int32_t* z = z_out->typed_data() + c * N;
    T *nt = nt_out->typed_data() + c * int64_t(C) * TT, *n = n_out->typed_data() + c * C,
      *mu = mu_out->typed_data() + c * int64_t(C) * TT * D, *sigma = sigma_out->typed_data() + c * int64_t(C) * S * D * D;
    std::memcpy(z, oz.at(z_in.typed_data(), c), sizeof(int32_t) * N);
    std::memcpy(nt, ont.at(nt_in.typed_data(), c), sizeof(T) * C * TT);
    std::memcpy(n, on.at(n_in.typed_data(), c), sizeof(T) * C);
    std::memcpy(mu, omu.at(mu_in.typed_data(), c), sizeof(T) * C * TT * D);
    std::memcpy(sigma, osg.at(sigma_in.typed_data(), c), sizeof(T) * C * S * D * D);
    const T* u = ou.at(uniforms.typed_data(), c);
    overflow_out->typed_data()[c] = ddp_chain<T>(
        Nv, D, C, TT, S, m, M, remove_first != 0, ox.at(x.typed_data(), c), osl.at(slices.typed_data(), c),
        oo.at(order.typed_data(), c), u, u + N, z, nt, n, mu, sigma, oam.at(aux_mu.typed_data(), c),
        ore.at(rest.typed_data(), c), ocs.at(cov_sigma.typed_data(), c), ocp.at(cov_prec.typed_data(), c),
        ocl.at(cov_logdet.typed_data(), c), og.at(gain.typed_data(), c), oc.at(cond.typed_data(), c),
        om0.at(mu0.typed_data(), c), oa.at(a.typed_data(), c), ob.at(b.typed_data(), c), *ol.at(last.typed_data(), c));
  });
  return ffi::Error::Success();
}

// One chain of the DDP's label swaps over time intervals (dpppl/kernels/ddp/swap.py; Porteous et al.
// 2006, sec. 5): the P proposals in turn, each on the state the one before left. Proposal s reads its
// uniforms u = uniforms[s] (6): the pair (i, j) from u0, u1 (by the prior weights `prior_logits`
// (C + 1) with sample_index, or two distinct labels uniformly among 0..R-1, R the largest used label
// + 2, with the Hastings factor R (R - 1) / (R' (R' - 1))), the interval kind kinds[floor(u2 K)] and
// slices a = floor(u3 T), b = floor(u4 T) ("single" [a, a], "random" [min, max], "full" [0, T - 1]),
// and is accepted when log u5 < log ratio + log q, the ratio of joints of swap_log_ratio:
//   sum_{t in I} [log P(Z'_t) - log P(Z_t)]    (sticks integrated out; only the labels lo..hi between
//                                               i and j change terms: their N or their M = sum_{l>k} N_l)
//   + sum over the rows (i', j') - (i, j) of  -1/2 vec(mu - m)^T (Gamma^-1 (x) I) vec(mu - m)
//       - (nu0 + D + 1)/2 sum_s log|Sigma_s| - 1/2 sum_s tr(psi0 Sigma_s^-1)
//       - 1/2 sum_t [N_t log|Sigma_s(t)| + tr(Sigma_s(t)^-1 S_t(mu_t))]
// (the normalising constants cancel between the four rows), a label no point uses taking the
// proposal's prior draw aug_*[s, 0 or 1]. The means, statistics and per-slice covariances of the
// slices in I travel with the points; a shared covariance only on the full interval. A pair past the
// C slots is rejected and sets the overflow. The draws are the JAX loop's up to rounding.
template <typename T>
struct SwapRow {  // one label's (nt (T), s1 (T, D), s2 (T, D, D), mu (T, D), sigma (S, D, D))
  std::vector<T> nt, s1, s2, mu, sigma;
  SwapRow(int TT, int S, int D)
      : nt(TT), s1(size_t(TT) * D), s2(size_t(TT) * D * D), mu(size_t(TT) * D), sigma(size_t(S) * D * D) {}
};

template <typename T>
T swap_row_log_joint(const SwapRow<T>& r, int TT, int S, int D, const T* gamma_inv, const T* mu0, const T* psi0,
                     T nu0) {
  const int DD = D * D;
  T quad = 0;
  for (int s = 0; s < TT; ++s)
    for (int t = 0; t < TT; ++t) {
      T dot = 0;
      for (int d = 0; d < D; ++d) dot += (r.mu[s * D + d] - mu0[d]) * (r.mu[t * D + d] - mu0[d]);
      quad += gamma_inv[s * TT + t] * dot;
    }
  T value = T(-0.5) * quad;
  std::vector<T> chol(DD), inv(DD), prec(size_t(S) * DD), logdet(S);
  for (int s = 0; s < S; ++s) {
    cholesky_lower(&r.sigma[size_t(s) * DD], D, chol.data());
    inverse_lower(chol.data(), D, inv.data());
    T half = 0;
    for (int d = 0; d < D; ++d) half += std::log(chol[d * D + d]);
    T* p = &prec[size_t(s) * DD];
    T trace = 0;
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) {
        T v = 0;
        for (int k = 0; k < D; ++k) v += inv[k * D + i] * inv[k * D + j];
        p[i * D + j] = v;
        trace += psi0[j * D + i] * v;
      }
    logdet[s] = T(2) * half;
    value -= T(0.5) * ((nu0 + T(D) + T(1)) * logdet[s] + trace);
  }
  for (int t = 0; t < TT; ++t) {
    const int s = S == TT ? t : 0;
    const T n = r.nt[t];
    const T *s1 = &r.s1[size_t(t) * D], *s2 = &r.s2[size_t(t) * DD], *m = &r.mu[size_t(t) * D], *p = &prec[size_t(s) * DD];
    T trace = 0;  // tr(prec S(mu)), S(mu) = s2 - s1 mu^T - mu s1^T + n mu mu^T
    for (int d = 0; d < D; ++d)
      for (int e = 0; e < D; ++e)
        trace += p[d * D + e] * (s2[d * D + e] - s1[d] * m[e] - m[d] * s1[e] + n * m[d] * m[e]);
    value -= T(0.5) * (n * logdet[s] + trace);
  }
  return value;
}

template <typename T>
T ddpswap_chain(int C, int TT, int S, int D, int P, int K, bool prior_pairs, T* nt, T* s1, T* s2, T* mu, T* sigma,
                T* n, int32_t* perm, const T* aug_mu, const T* aug_sigma, const T* uniforms, const T* prior_logits,
                const int32_t* kinds, const T* gamma_inv, const T* mu0, const T* psi0, T nu0, const T* a, const T* b,
                int last, int32_t* accepted, bool* overflow) {
  const int DD = D * D;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T tiny = std::numeric_limits<T>::min();
  auto index_of = [](T u, int size) { return std::min(int(std::floor(u * T(size))), size - 1); };
  auto top_label = [&] {
    int top = -1;
    for (int c = 0; c < C; ++c)
      if (n[c] > T(0.5)) top = c;
    return top;
  };
  std::vector<T> cdf(size_t(C) + 1);
  auto sample_index = [&](const T* logits, int count, T u) {
    T top = neg_inf;
    for (int k = 0; k < count; ++k) top = std::max(top, logits[k]);
    T sum = 0;
    for (int k = 0; k < count; ++k) cdf[k] = sum += std::exp(logits[k] - top);
    const T target = std::max(u, tiny) * sum;
    int index = 0;
    for (int k = 0; k < count; ++k) index += cdf[k] < target;
    return index;
  };
  // sum over the labels lo..hi of slice t's terms of log P(Z_t) (the others do not change)
  auto partition_terms = [&](int t, int lo, int hi, int i, int j, T ni, T nj) {
    T after = 0;  // M_k = sum_{l > k} N_l, with labels i, j holding ni, nj
    for (int c = hi + 1; c < C; ++c) after += nt[size_t(c) * TT + t];
    T value = 0;
    for (int k = hi; k >= lo; --k) {
      const T nk = k == i ? ni : k == j ? nj : nt[size_t(k) * TT + t];
      if (k == last) value += after > T(0) ? neg_inf : T(0);
      else if (!(last >= 0 && k > last))
        value += T(log_gamma(double(a[k] + nk)) + log_gamma(double(b[k] + after)) -
                   log_gamma(double(a[k] + b[k] + nk + after)));
      after += nk;
    }
    return value;
  };
  SwapRow<T> ri(TT, S, D), rj(TT, S, D), ni(TT, S, D), nj(TT, S, D);
  auto load = [&](SwapRow<T>& r, int k, const T* am, const T* as) {
    const bool used = n[k] > T(0.5);
    std::memcpy(r.nt.data(), nt + size_t(k) * TT, sizeof(T) * TT);
    std::memcpy(r.s1.data(), s1 + size_t(k) * TT * D, sizeof(T) * TT * D);
    std::memcpy(r.s2.data(), s2 + size_t(k) * TT * DD, sizeof(T) * TT * DD);
    std::memcpy(r.mu.data(), used ? mu + size_t(k) * TT * D : am, sizeof(T) * TT * D);
    std::memcpy(r.sigma.data(), used ? sigma + size_t(k) * S * DD : as, sizeof(T) * S * DD);
  };
  auto store = [&](const SwapRow<T>& r, int k) {
    std::memcpy(nt + size_t(k) * TT, r.nt.data(), sizeof(T) * TT);
    std::memcpy(s1 + size_t(k) * TT * D, r.s1.data(), sizeof(T) * TT * D);
    std::memcpy(s2 + size_t(k) * TT * DD, r.s2.data(), sizeof(T) * TT * DD);
    std::memcpy(mu + size_t(k) * TT * D, r.mu.data(), sizeof(T) * TT * D);
    std::memcpy(sigma + size_t(k) * S * DD, r.sigma.data(), sizeof(T) * S * DD);
    T total = 0;
    for (int t = 0; t < TT; ++t) total += r.nt[t];
    n[k] = total;
  };
  T total_p = 0;
  for (int p = 0; p < P; ++p) {
    const T* u = uniforms + size_t(p) * 6;
    int i, j;
    T log_q = 0;
    if (prior_pairs) {
      i = sample_index(prior_logits, C + 1, u[0]);
      j = sample_index(prior_logits, C + 1, u[1]);
    } else {
      const int r = top_label() + 2;
      i = index_of(u[0], r);
      j = index_of(u[1], r - 1);
      j += j >= i;
      log_q = std::log(T(r) * (T(r) - T(1)));
    }
    const int kind = kinds[index_of(u[2], K)];
    const int ta = index_of(u[3], TT), tb = index_of(u[4], TT);
    const int t1 = kind == 0 ? ta : kind == 1 ? std::min(ta, tb) : 0;
    const int t2 = kind == 0 ? ta : kind == 1 ? std::max(ta, tb) : TT - 1;
    T log_accept = neg_inf;
    if (i >= C || j >= C) {
      *overflow = true;
    } else if (i != j) {
      load(ri, i, aug_mu + size_t(p) * 2 * TT * D, aug_sigma + size_t(p) * 2 * S * DD);
      load(rj, j, aug_mu + (size_t(p) * 2 + 1) * TT * D, aug_sigma + (size_t(p) * 2 + 1) * S * DD);
      ni = ri, nj = rj;
      for (int t = t1; t <= t2; ++t) {
        std::swap(ni.nt[t], nj.nt[t]);
        for (int d = 0; d < D; ++d) std::swap(ni.s1[t * D + d], nj.s1[t * D + d]), std::swap(ni.mu[t * D + d], nj.mu[t * D + d]);
        for (int d = 0; d < DD; ++d) std::swap(ni.s2[t * DD + d], nj.s2[t * DD + d]);
      }
      for (int s = 0; s < S; ++s)
        if (S == TT ? (s >= t1 && s <= t2) : (t1 == 0 && t2 == TT - 1))
          for (int d = 0; d < DD; ++d) std::swap(ni.sigma[s * DD + d], nj.sigma[s * DD + d]);
      const int lo = std::min(i, j), hi = std::max(i, j);
      T log_ratio = 0;
      for (int t = t1; t <= t2; ++t)
        log_ratio += partition_terms(t, lo, hi, i, j, ni.nt[t], nj.nt[t]) -
                     partition_terms(t, lo, hi, i, j, ri.nt[t], rj.nt[t]);
      log_ratio += swap_row_log_joint(ni, TT, S, D, gamma_inv, mu0, psi0, nu0) +
                   swap_row_log_joint(nj, TT, S, D, gamma_inv, mu0, psi0, nu0) -
                   swap_row_log_joint(ri, TT, S, D, gamma_inv, mu0, psi0, nu0) -
                   swap_row_log_joint(rj, TT, S, D, gamma_inv, mu0, psi0, nu0);
      bool reachable = true;
      if (!prior_pairs) {  // the reverse move's pair probability, on the state after the swap
        const T old_i = n[i], old_j = n[j];
        T ci = 0, cj = 0;
        for (int t = 0; t < TT; ++t) ci += ni.nt[t], cj += nj.nt[t];
        n[i] = ci, n[j] = cj;
        const int r_new = top_label() + 2;
        n[i] = old_i, n[j] = old_j;
        log_q -= std::log(T(r_new) * (T(r_new) - T(1)));
        reachable = i < r_new && j < r_new;
      }
      if (reachable) log_accept = log_ratio + log_q;
    }
    const bool accept = std::log(u[5]) < log_accept;
    if (accept) {
      store(ni, i), store(nj, j);
      for (int t = t1; t <= t2; ++t)
        for (int c = 0; c < C; ++c) {
          int32_t& v = perm[size_t(t) * C + c];
          v = v == i ? j : v == j ? i : v;
        }
      ++accepted[kind];
    }
    total_p += std::exp(std::min(log_accept, T(0)));
  }
  return total_p;
}

// The DDP's label swaps for every chain of the batch (see ddpswap_chain).
template <ffi::DataType DT>
ffi::Error DdpSwap(ffi::Buffer<DT> nt_in, ffi::Buffer<DT> s1_in, ffi::Buffer<DT> s2_in, ffi::Buffer<DT> mu_in,
                   ffi::Buffer<DT> sigma_in, ffi::Buffer<DT> aug_mu, ffi::Buffer<DT> aug_sigma,
                   ffi::Buffer<DT> uniforms, ffi::Buffer<DT> prior_logits, ffi::Buffer<ffi::S32> kinds,
                   ffi::Buffer<DT> gamma_inv, ffi::Buffer<DT> mu0, ffi::Buffer<DT> psi0, ffi::Buffer<DT> nu0,
                   ffi::Buffer<DT> a, ffi::Buffer<DT> b, ffi::Buffer<ffi::S32> last,
                   ffi::ResultBuffer<DT> nt_out, ffi::ResultBuffer<DT> s1_out, ffi::ResultBuffer<DT> s2_out,
                   ffi::ResultBuffer<DT> mu_out, ffi::ResultBuffer<DT> sigma_out, ffi::ResultBuffer<DT> n_out,
                   ffi::ResultBuffer<ffi::S32> perm_out, ffi::ResultBuffer<DT> total_p_out,
                   ffi::ResultBuffer<ffi::S32> accepted_out, ffi::ResultBuffer<ffi::PRED> overflow_out,
                   int64_t prior_pairs) {
  using T = ffi::NativeType<DT>;
  const auto md = mu_out->dimensions(), sd = sigma_out->dimensions(), ud = uniforms.dimensions(),
             kd = kinds.dimensions();
  if (md.size() < 3 || sd.size() < 4 || ud.size() < 2 || kd.size() < 1)
    return ffi::Error::InvalidArgument("native ddpswap: bad operand ranks");
  const int C = int(md[md.size() - 3]), TT = int(md[md.size() - 2]), D = int(md[md.size() - 1]);
  const int S = int(sd[sd.size() - 3]), P = int(ud[ud.size() - 2]), K = int(kd[kd.size() - 1]);
  if ((S != 1 && S != TT) || K < 1 || K > 3 || ud[ud.size() - 1] != 6)
    return ffi::Error::InvalidArgument("native ddpswap: bad covariance, kind or uniform shapes");
  const int64_t B = batch_of(overflow_out->dimensions(), 0);
  const Operand ont(nt_in.dimensions(), 2, B), os1(s1_in.dimensions(), 3, B), os2(s2_in.dimensions(), 4, B),
      omu(mu_in.dimensions(), 3, B), osg(sigma_in.dimensions(), 4, B), oam(aug_mu.dimensions(), 4, B),
      oas(aug_sigma.dimensions(), 5, B), ou(ud, 2, B), opl(prior_logits.dimensions(), 1, B), ok(kd, 1, B),
      ogi(gamma_inv.dimensions(), 2, B), om0(mu0.dimensions(), 1, B), ops(psi0.dimensions(), 2, B),
      onu(nu0.dimensions(), 0, B), oa(a.dimensions(), 1, B), ob(b.dimensions(), 1, B), ol(last.dimensions(), 0, B);
  for (int64_t c = 0; c < B; ++c) {
    const int32_t* kk = ok.at(kinds.typed_data(), c);
    for (int k = 0; k < K; ++k)
      if (kk[k] < 0 || kk[k] > 2) return ffi::Error::InvalidArgument("native ddpswap: an interval kind outside 0..2");
  }
  const int DD = D * D;
  for (int64_t c = 0; c < B; ++c) {
    T *nt = nt_out->typed_data() + c * C * TT, *s1 = s1_out->typed_data() + c * C * TT * D,
      *s2 = s2_out->typed_data() + c * C * TT * DD, *mu = mu_out->typed_data() + c * C * TT * D,
      *sigma = sigma_out->typed_data() + c * C * S * DD, *n = n_out->typed_data() + c * C;
    std::memcpy(nt, ont.at(nt_in.typed_data(), c), sizeof(T) * C * TT);
    std::memcpy(s1, os1.at(s1_in.typed_data(), c), sizeof(T) * C * TT * D);
    std::memcpy(s2, os2.at(s2_in.typed_data(), c), sizeof(T) * C * TT * DD);
    std::memcpy(mu, omu.at(mu_in.typed_data(), c), sizeof(T) * C * TT * D);
    std::memcpy(sigma, osg.at(sigma_in.typed_data(), c), sizeof(T) * C * S * DD);
    for (int k = 0; k < C; ++k) {
      T total = 0;
      for (int t = 0; t < TT; ++t) total += nt[size_t(k) * TT + t];
      n[k] = total;
    }
    int32_t* perm = perm_out->typed_data() + c * TT * C;
    for (int t = 0; t < TT; ++t)
      for (int k = 0; k < C; ++k) perm[t * C + k] = k;
    int32_t* accepted = accepted_out->typed_data() + c * 3;
    accepted[0] = accepted[1] = accepted[2] = 0;
    bool* overflow = overflow_out->typed_data() + c;
    *overflow = false;
    total_p_out->typed_data()[c] = ddpswap_chain<T>(
        C, TT, S, D, P, K, prior_pairs != 0, nt, s1, s2, mu, sigma, n, perm, oam.at(aug_mu.typed_data(), c),
        oas.at(aug_sigma.typed_data(), c), ou.at(uniforms.typed_data(), c), opl.at(prior_logits.typed_data(), c),
        ok.at(kinds.typed_data(), c), ogi.at(gamma_inv.typed_data(), c), om0.at(mu0.typed_data(), c),
        ops.at(psi0.typed_data(), c), *onu.at(nu0.typed_data(), c), oa.at(a.typed_data(), c),
        ob.at(b.typed_data(), c), *ol.at(last.typed_data(), c), accepted, overflow);
  }
  return ffi::Error::Success();
}

// One chain of the DDP's parameter update (dpppl/models/ddp_state.py, update_parameters; eq. 11 of
// Porteous et al. 2006) for every used label c (n_c > 0): first each covariance slot s,
//   Sigma_{c,s} ~ IW(psi0 + S_{c,s}(mu), nu0 + N_{c,s})   (S_{c,s}: the slice's scatter about mu_{c,t}, or
//                                                         their sum over the slices when shared),
// by the Bartlett decomposition (dpppl.families.gaussian.inverse_wishart_bartlett) from the variates
// `below` (C, S, D (D - 1) / 2) and `chi2` (C, S, D) drawn in JAX: psi = U U^T, A lower triangular
// (below under the diagonal, sqrt(chi2) on it), Sigma^-1 = (U^-T A)(U^-T A)^T, Sigma = (U A^-T)(U A^-T)^T;
// then vec(mu_c) ~ N(P^-1 h, P^-1) (CoupledGaussian.draw_means), P = Gamma^-1 (x) I + blockdiag_t(N_{c,t}
// Sigma_{c,s(t)}^-1), h_t = (sum_t' Gamma^-1_{t,t'}) m + Sigma_{c,s(t)}^-1 s1_{c,t}, P = L L^T,
// mu = L^-T (L^-1 h) + L^-T eps_c from the standard normals `eps` (C, T D). Unused labels keep theirs.
template <typename T>
void ddp_parameters_chain(int C, int TT, int S, int D, const T* nt, const T* s1, const T* s2, T* mu, T* sigma,
                          const T* below, const T* chi2, const T* eps, const T* psi0, const T* gamma_inv,
                          const T* mu0) {
  const int DD = D * D, R = D * (D - 1) / 2, M = TT * D;
  std::vector<T> psi(DD), U(DD), Uinv(DD), A(DD), Ainv(DD), proot(DD), croot(DD), prec(size_t(S) * DD);
  std::vector<T> P(size_t(M) * M), L(size_t(M) * M), h(M), y(M), z(M), e(M);
  // x with L^T x = b, back substitution
  auto solve_upper_t = [&](const T* b, T* x) {
    for (int i = M - 1; i >= 0; --i) {
      T v = b[i];
      for (int k = i + 1; k < M; ++k) v -= L[k * M + i] * x[k];
      x[i] = v / L[i * M + i];
    }
  };
  for (int c = 0; c < C; ++c) {
    T n = 0;
    for (int t = 0; t < TT; ++t) n += nt[size_t(c) * TT + t];
    if (!(n > T(0.5))) continue;
    T* mc = mu + size_t(c) * M;
    for (int s = 0; s < S; ++s) {
      std::memcpy(psi.data(), psi0, sizeof(T) * DD);
      for (int t = 0; t < TT; ++t) {
        if (S == TT && t != s) continue;
        const size_t ct = size_t(c) * TT + t;
        const T nn = nt[ct], *a1 = s1 + ct * D, *a2 = s2 + ct * DD, *m = mc + size_t(t) * D;
        for (int i = 0; i < D; ++i)
          for (int j = 0; j < D; ++j)
            psi[i * D + j] += a2[i * D + j] - a1[i] * m[j] - m[i] * a1[j] + nn * m[i] * m[j];
      }
      std::fill(A.begin(), A.end(), T(0));
      const T *bl = below + (size_t(c) * S + s) * R, *ch = chi2 + (size_t(c) * S + s) * D;
      for (int i = 1, k = 0; i < D; ++i)
        for (int j = 0; j < i; ++j) A[i * D + j] = bl[k++];
      for (int i = 0; i < D; ++i) A[i * D + i] = std::sqrt(ch[i]);
      cholesky_lower(psi.data(), D, U.data());
      inverse_lower(U.data(), D, Uinv.data());
      inverse_lower(A.data(), D, Ainv.data());
      for (int i = 0; i < D; ++i)
        for (int k = 0; k < D; ++k) {
          T pr = 0, cr = 0;
          for (int j = 0; j < D; ++j) pr += Uinv[j * D + i] * A[j * D + k], cr += U[i * D + j] * Ainv[k * D + j];
          proot[i * D + k] = pr, croot[i * D + k] = cr;
        }
      T *sg = sigma + (size_t(c) * S + s) * DD, *pc = &prec[size_t(s) * DD];
      for (int i = 0; i < D; ++i)
        for (int j = 0; j < D; ++j) {
          T sv = 0, pv = 0;
          for (int k = 0; k < D; ++k) sv += croot[i * D + k] * croot[j * D + k], pv += proot[i * D + k] * proot[j * D + k];
          sg[i * D + j] = sv, pc[i * D + j] = pv;
        }
    }
    for (int t = 0; t < TT; ++t) {
      const T* pc = &prec[size_t(S == TT ? t : 0) * DD];
      const size_t ct = size_t(c) * TT + t;
      T g = 0;
      for (int q = 0; q < TT; ++q) g += gamma_inv[t * TT + q];
      for (int d = 0; d < D; ++d) {
        T v = g * mu0[d];
        for (int k = 0; k < D; ++k) v += pc[d * D + k] * s1[ct * D + k];
        h[t * D + d] = v;
        for (int q = 0; q < TT; ++q)
          for (int k = 0; k < D; ++k)
            P[size_t(t * D + d) * M + q * D + k] =
                (d == k ? gamma_inv[t * TT + q] : T(0)) + (q == t ? nt[ct] * pc[d * D + k] : T(0));
      }
    }
    cholesky_lower(P.data(), M, L.data());
    for (int i = 0; i < M; ++i) {  // y = L^-1 h
      T v = h[i];
      for (int k = 0; k < i; ++k) v -= L[i * M + k] * y[k];
      y[i] = v / L[i * M + i];
    }
    solve_upper_t(y.data(), z.data());
    solve_upper_t(eps + size_t(c) * M, e.data());
    for (int i = 0; i < M; ++i) mc[i] = z[i] + e[i];
  }
}

// The DDP's parameter update for every chain of the batch (see ddp_parameters_chain).
template <ffi::DataType DT>
ffi::Error DdpParameters(ffi::Buffer<DT> nt, ffi::Buffer<DT> s1, ffi::Buffer<DT> s2, ffi::Buffer<DT> mu_in,
                         ffi::Buffer<DT> sigma_in, ffi::Buffer<DT> below, ffi::Buffer<DT> chi2, ffi::Buffer<DT> eps,
                         ffi::Buffer<DT> psi0, ffi::Buffer<DT> gamma_inv, ffi::Buffer<DT> mu0,
                         ffi::ResultBuffer<DT> mu_out, ffi::ResultBuffer<DT> sigma_out) {
  using T = ffi::NativeType<DT>;
  const auto md = mu_out->dimensions(), sd = sigma_out->dimensions();
  if (md.size() < 3 || sd.size() < 4) return ffi::Error::InvalidArgument("native ddp parameters: bad operand ranks");
  const int C = int(md[md.size() - 3]), TT = int(md[md.size() - 2]), D = int(md[md.size() - 1]);
  const int S = int(sd[sd.size() - 3]);
  if (S != 1 && S != TT) return ffi::Error::InvalidArgument("native ddp parameters: bad covariance shape");
  const int64_t B = batch_of(md, 3);
  const Operand ont(nt.dimensions(), 2, B), os1(s1.dimensions(), 3, B), os2(s2.dimensions(), 4, B),
      omu(mu_in.dimensions(), 3, B), osg(sigma_in.dimensions(), 4, B), obl(below.dimensions(), 3, B),
      och(chi2.dimensions(), 3, B), oe(eps.dimensions(), 3, B), ops(psi0.dimensions(), 2, B),
      ogi(gamma_inv.dimensions(), 2, B), om0(mu0.dimensions(), 1, B);
  for (int64_t c = 0; c < B; ++c) {
    T *mu = mu_out->typed_data() + c * int64_t(C) * TT * D, *sigma = sigma_out->typed_data() + c * int64_t(C) * S * D * D;
    std::memcpy(mu, omu.at(mu_in.typed_data(), c), sizeof(T) * C * TT * D);
    std::memcpy(sigma, osg.at(sigma_in.typed_data(), c), sizeof(T) * C * S * D * D);
    ddp_parameters_chain<T>(C, TT, S, D, ont.at(nt.typed_data(), c), os1.at(s1.typed_data(), c),
                            os2.at(s2.typed_data(), c), mu, sigma, obl.at(below.typed_data(), c),
                            och.at(chi2.typed_data(), c), oe.at(eps.typed_data(), c), ops.at(psi0.typed_data(), c),
                            ogi.at(gamma_inv.typed_data(), c), om0.at(mu0.typed_data(), c));
  }
  return ffi::Error::Success();
}

// The labels' terms of a DDP state's log joint (CoupledGaussian.log_joint_state) for every chain of the
// batch: for each label c with points, swap_row_log_joint of its row (the means' prior, the covariances'
// inverse-Wishart priors and the points' likelihood, without their normalising constants) plus those
// constants, `constants` = (-1/2 (D log|Gamma| + T D log 2 pi), the log normaliser of IW(psi0, nu0)) per
// label and per covariance, and -1/2 N_c D log 2 pi; 0 for a label without points.
template <ffi::DataType DT>
ffi::Error DdpLabelLogJoints(ffi::Buffer<DT> nt, ffi::Buffer<DT> s1, ffi::Buffer<DT> s2, ffi::Buffer<DT> mu,
                             ffi::Buffer<DT> sigma, ffi::Buffer<DT> gamma_inv, ffi::Buffer<DT> mu0,
                             ffi::Buffer<DT> psi0, ffi::Buffer<DT> nu0, ffi::Buffer<DT> constants,
                             ffi::ResultBuffer<DT> out) {
  using T = ffi::NativeType<DT>;
  const auto md = mu.dimensions(), sd = sigma.dimensions();
  if (md.size() < 3 || sd.size() < 4) return ffi::Error::InvalidArgument("native ddp lp: bad operand ranks");
  const int C = int(md[md.size() - 3]), TT = int(md[md.size() - 2]), D = int(md[md.size() - 1]);
  const int S = int(sd[sd.size() - 3]), DD = D * D;
  if (S != 1 && S != TT) return ffi::Error::InvalidArgument("native ddp lp: bad covariance shape");
  const int64_t B = batch_of(out->dimensions(), 1);
  const Operand ont(nt.dimensions(), 2, B), os1(s1.dimensions(), 3, B), os2(s2.dimensions(), 4, B),
      omu(md, 3, B), osg(sd, 4, B), ogi(gamma_inv.dimensions(), 2, B), om0(mu0.dimensions(), 1, B),
      ops(psi0.dimensions(), 2, B), onu(nu0.dimensions(), 0, B), oco(constants.dimensions(), 1, B);
  const T log_2pi = T(D) * std::log(T(2) * T(M_PI));
  SwapRow<T> row(TT, S, D);
  for (int64_t b = 0; b < B; ++b) {
    const T *n = ont.at(nt.typed_data(), b), *a1 = os1.at(s1.typed_data(), b), *a2 = os2.at(s2.typed_data(), b),
            *m = omu.at(mu.typed_data(), b), *sg = osg.at(sigma.typed_data(), b), *co = oco.at(constants.typed_data(), b);
    T* o = out->typed_data() + b * C;
    for (int c = 0; c < C; ++c) {
      T count = 0;
      for (int t = 0; t < TT; ++t) count += n[size_t(c) * TT + t];
      if (!(count > T(0.5))) { o[c] = 0; continue; }
      std::memcpy(row.nt.data(), n + size_t(c) * TT, sizeof(T) * TT);
      std::memcpy(row.s1.data(), a1 + size_t(c) * TT * D, sizeof(T) * TT * D);
      std::memcpy(row.s2.data(), a2 + size_t(c) * TT * DD, sizeof(T) * TT * DD);
      std::memcpy(row.mu.data(), m + size_t(c) * TT * D, sizeof(T) * TT * D);
      std::memcpy(row.sigma.data(), sg + size_t(c) * S * DD, sizeof(T) * S * DD);
      o[c] = swap_row_log_joint(row, TT, S, D, ogi.at(gamma_inv.typed_data(), b), om0.at(mu0.typed_data(), b),
                                ops.at(psi0.typed_data(), b), *onu.at(nu0.typed_data(), b)) +
             co[0] + T(S) * co[1] - T(0.5) * count * log_2pi;
    }
  }
  return ffi::Error::Success();
}

// The operands of DdpSeat, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_DDP_SEAT_BINDING(DT)                                                         \
  ffi::Ffi::Bind()                                                                           \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                                         \
      .Arg<ffi::Buffer<ffi::S32>>()   /* slices (N,): each point's slice t */                \
      .Arg<ffi::Buffer<ffi::S32>>()   /* order (N,): the visiting order, order[:num_valid] */ \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (2, N): the pick's, the new label's */     \
      .Arg<ffi::Buffer<ffi::S32>>()   /* z (N,) */                                           \
      .Arg<ffi::Buffer<DT>>()         /* nt (C, T): the counts per label and slice */        \
      .Arg<ffi::Buffer<DT>>()         /* n (C,): the counts per label */                     \
      .Arg<ffi::Buffer<DT>>()         /* mu (C, T, D) */                                     \
      .Arg<ffi::Buffer<DT>>()         /* sigma (C, S, D, D) */                               \
      .Arg<ffi::Buffer<DT>>()         /* aux_mu (N, m, D): the auxiliaries' means in the point's slice */ \
      .Arg<ffi::Buffer<DT>>()         /* rest (N, T, D): normals of the other slices' means */ \
      .Arg<ffi::Buffer<DT>>()         /* cov_sigma (N, M, D, D): m auxiliaries' (+ T per slice) */ \
      .Arg<ffi::Buffer<DT>>()         /* cov_prec (N, M, D, D): their precisions */          \
      .Arg<ffi::Buffer<DT>>()         /* cov_logdet (N, M): their log determinants */        \
      .Arg<ffi::Buffer<DT>>()         /* gain (T, T): g_t of means_given_slice */            \
      .Arg<ffi::Buffer<DT>>()         /* cond (T, T, T): the conditional Cholesky factors */ \
      .Arg<ffi::Buffer<DT>>()         /* mu0 (D,) */                                         \
      .Arg<ffi::Buffer<DT>>()         /* a (C,): the sticks' a_k */                          \
      .Arg<ffi::Buffer<DT>>()         /* b (C,): the sticks' b_k */                          \
      .Arg<ffi::Buffer<ffi::S32>>()   /* last (): the last stick's slot, or -1 */            \
      .Arg<ffi::Buffer<ffi::S32>>()   /* num_valid () */                                     \
      .Ret<ffi::Buffer<ffi::S32>>()   /* z */                                                \
      .Ret<ffi::Buffer<DT>>()         /* nt */                                               \
      .Ret<ffi::Buffer<DT>>()         /* n */                                                \
      .Ret<ffi::Buffer<DT>>()         /* mu */                                               \
      .Ret<ffi::Buffer<DT>>()         /* sigma */                                            \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow: a draw past the C slots */                \
      .Attr<int64_t>("remove_first")                                                         \
      .Attr<int64_t>("num_threads")

// The operands of DdpSwap, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_DDP_SWAP_BINDING(DT)                                                          \
  ffi::Ffi::Bind()                                                                            \
      .Arg<ffi::Buffer<DT>>()         /* nt (C, T) */                                         \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, T, D) */                                      \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, T, D, D) */                                   \
      .Arg<ffi::Buffer<DT>>()         /* mu (C, T, D) */                                      \
      .Arg<ffi::Buffer<DT>>()         /* sigma (C, S, D, D) */                                \
      .Arg<ffi::Buffer<DT>>()         /* aug_mu (P, 2, T, D): prior draws for unused labels */ \
      .Arg<ffi::Buffer<DT>>()         /* aug_sigma (P, 2, S, D, D) */                         \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (P, 6) */                                   \
      .Arg<ffi::Buffer<DT>>()         /* prior_logits (C + 1,): log prior weights, the rest last */ \
      .Arg<ffi::Buffer<ffi::S32>>()   /* kinds (K,): the interval kinds allowed */            \
      .Arg<ffi::Buffer<DT>>()         /* gamma_inv (T, T) */                                  \
      .Arg<ffi::Buffer<DT>>()         /* mu0 (D,) */                                          \
      .Arg<ffi::Buffer<DT>>()         /* psi0 (D, D) */                                       \
      .Arg<ffi::Buffer<DT>>()         /* nu0 () */                                            \
      .Arg<ffi::Buffer<DT>>()         /* a (C,): the sticks' a_k */                           \
      .Arg<ffi::Buffer<DT>>()         /* b (C,): the sticks' b_k */                           \
      .Arg<ffi::Buffer<ffi::S32>>()   /* last (): the last stick's slot, or -1 */             \
      .Ret<ffi::Buffer<DT>>()         /* nt */                                                \
      .Ret<ffi::Buffer<DT>>()         /* s1 */                                                \
      .Ret<ffi::Buffer<DT>>()         /* s2 */                                                \
      .Ret<ffi::Buffer<DT>>()         /* mu */                                                \
      .Ret<ffi::Buffer<DT>>()         /* sigma */                                             \
      .Ret<ffi::Buffer<DT>>()         /* n (C,) */                                            \
      .Ret<ffi::Buffer<ffi::S32>>()   /* perm (T, C): each slice's label map */               \
      .Ret<ffi::Buffer<DT>>()         /* total_p (): the sum of the acceptance probabilities */ \
      .Ret<ffi::Buffer<ffi::S32>>()   /* accepted (3,): by interval kind */                   \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* overflow (): a pair past the C slots */              \
      .Attr<int64_t>("prior_pairs")

// The operands of DdpParameters, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_DDP_PARAMETERS_BINDING(DT)                                                  \
  ffi::Ffi::Bind()                                                                          \
      .Arg<ffi::Buffer<DT>>()         /* nt (C, T) */                                       \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, T, D) */                                    \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, T, D, D) */                                 \
      .Arg<ffi::Buffer<DT>>()         /* mu (C, T, D) */                                    \
      .Arg<ffi::Buffer<DT>>()         /* sigma (C, S, D, D) */                              \
      .Arg<ffi::Buffer<DT>>()         /* below (C, S, D (D - 1) / 2): Bartlett normals */   \
      .Arg<ffi::Buffer<DT>>()         /* chi2 (C, S, D): Bartlett chi-squares */            \
      .Arg<ffi::Buffer<DT>>()         /* eps (C, T D, 1): the means' normals */             \
      .Arg<ffi::Buffer<DT>>()         /* psi0 (D, D) */                                     \
      .Arg<ffi::Buffer<DT>>()         /* gamma_inv (T, T) */                                \
      .Arg<ffi::Buffer<DT>>()         /* mu0 (D,) */                                        \
      .Ret<ffi::Buffer<DT>>()         /* mu */                                              \
      .Ret<ffi::Buffer<DT>>()         /* sigma */

// The operands of DdpLabelLogJoints, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_DDP_LP_BINDING(DT)                                                          \
  ffi::Ffi::Bind()                                                                          \
      .Arg<ffi::Buffer<DT>>()         /* nt (C, T) */                                       \
      .Arg<ffi::Buffer<DT>>()         /* s1 (C, T, D) */                                    \
      .Arg<ffi::Buffer<DT>>()         /* s2 (C, T, D, D) */                                 \
      .Arg<ffi::Buffer<DT>>()         /* mu (C, T, D) */                                    \
      .Arg<ffi::Buffer<DT>>()         /* sigma (C, S, D, D) */                              \
      .Arg<ffi::Buffer<DT>>()         /* gamma_inv (T, T) */                                \
      .Arg<ffi::Buffer<DT>>()         /* mu0 (D,) */                                        \
      .Arg<ffi::Buffer<DT>>()         /* psi0 (D, D) */                                     \
      .Arg<ffi::Buffer<DT>>()         /* nu0 () */                                          \
      .Arg<ffi::Buffer<DT>>()         /* constants (2,): per label, per covariance */       \
      .Ret<ffi::Buffer<DT>>()         /* the labels' log joints (C,) */

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSeatF64, DdpSeat<ffi::F64>, DPPPL_DDP_SEAT_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSeatF32, DdpSeat<ffi::F32>, DPPPL_DDP_SEAT_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSwapF64, DdpSwap<ffi::F64>, DPPPL_DDP_SWAP_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSwapF32, DdpSwap<ffi::F32>, DPPPL_DDP_SWAP_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpParametersF64, DdpParameters<ffi::F64>, DPPPL_DDP_PARAMETERS_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpParametersF32, DdpParameters<ffi::F32>, DPPPL_DDP_PARAMETERS_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpLpF64, DdpLabelLogJoints<ffi::F64>, DPPPL_DDP_LP_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpLpF32, DdpLabelLogJoints<ffi::F32>, DPPPL_DDP_LP_BINDING(ffi::F32));
