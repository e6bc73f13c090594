// The collapsed-Gibbs point loop of dpppl/models/seating.py (Seat) and split-merge's allocation
// pass of dpppl/kernels/splitmerge.py (Allocate) as native functions, called from inside the
// jitted step through XLA's FFI, with sbgibbs's sweep over stick-breaking labels and the sequential
// seating under a stick-breaking prior (SbSeat) and the acceptance loop of the stick-breaking label
// moves (Relabel), a whole step of split-merge's SAMS proposals (SplitMerge: pair, allocation,
// marginals, Metropolis-Hastings ratio, all in one call), the permutation move's dynamic program and
// backward draw of the segments (PermSegments), and the assignment sweep, parameter update and label
// swaps of the dependent DP over time (DdpSeat, DdpParameters, dpppl/models/ddp_state.py; DdpSwap,
// dpppl/kernels/ddp/swap.py) and the labels' terms of its log joint (DdpLabelLogJoints, dpppl/models/ddp.py)
// (dpppl/models/native_seating.py builds, loads and calls them,
// sharing one copy of each family's mathematics). One Seat call seats every point once, one
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

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GLIBC__)
#include <dlfcn.h>
#include <immintrin.h>
#endif

#include "../core/numerics_threefry.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// lgamma without the global `signgam` that std::lgamma writes (chains run on threads).
inline double log_gamma(double v) {
  int sign;
  return lgamma_r(v, &sign);
}

// A split-merge merge whose acceptance probability is known to be below this stops its pass (splitmerge_chain).
constexpr double NEGLIGIBLE = 1e-12;

using dpppl::threefry2x32;  // JAX's Threefry-2x32 hash (../core/numerics_threefry.h)

// Element `index` (< 2^32) of jax.random.uniform(key, shape, T) for a key of JAX's default
// implementation (threefry, partitionable: the element's bits hash its flat index as the counter
// (0, index)), bit for bit: the top mantissa bits of the hash under the exponent of 1, minus 1.
template <typename T>
T threefry_uniform(const uint32_t* key, uint32_t index);
template <>
double threefry_uniform<double>(const uint32_t* key, uint32_t index) {
  uint32_t hi = 0, lo = index;
  threefry2x32(key[0], key[1], hi, lo);
  const uint64_t bits = ((uint64_t(hi) << 32 | lo) >> 12) | 0x3FF0000000000000ull;
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value - 1.0;
}
template <>
float threefry_uniform<float>(const uint32_t* key, uint32_t index) {
  uint32_t hi = 0, lo = index;
  threefry2x32(key[0], key[1], hi, lo);
  const uint32_t bits = ((hi ^ lo) >> 9) | 0x3F800000u;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value - 1.0f;
}

// log and exp of whole arrays (length a multiple of 4). On x86-64 glibc with AVX2 they go 4 at
// a time through glibc's vector math library (libmvec, found at run time; <= 4 ulp, which the
// logits' absolute error does not notice); elsewhere, and in float32, one at a time. They are
// most of the arithmetic of a point update: a log and an exp per occupied slot.
template <typename T>
void log_all(T* a, int n) { for (int i = 0; i < n; ++i) a[i] = std::log(a[i]); }
template <typename T>
void exp_all(T* a, int n) { for (int i = 0; i < n; ++i) a[i] = std::exp(a[i]); }

#if defined(__x86_64__) && defined(__GLIBC__)
typedef __m256d (*VectorFn)(__m256d);
struct VectorMath {
  VectorFn log = nullptr, exp = nullptr;
  VectorMath() {
    if (!__builtin_cpu_supports("avx2")) return;
    void* lib = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    log = reinterpret_cast<VectorFn>(dlsym(lib, "_ZGVdN4v_log"));
    exp = reinterpret_cast<VectorFn>(dlsym(lib, "_ZGVdN4v_exp"));
    if (log == nullptr || exp == nullptr) log = exp = nullptr;
  }
};
const VectorMath& vector_math() {
  static const VectorMath math;
  return math;
}
__attribute__((target("avx2"))) void apply4(VectorFn f, double* a, int n) {
  for (int i = 0; i < n; i += 4) _mm256_storeu_pd(a + i, f(_mm256_loadu_pd(a + i)));
}
template <>
void log_all<double>(double* a, int n) {
  if (vector_math().log != nullptr) { apply4(vector_math().log, a, n); return; }
  for (int i = 0; i < n; ++i) a[i] = std::log(a[i]);
}
template <>
void exp_all<double>(double* a, int n) {
  if (vector_math().exp != nullptr) { apply4(vector_math().exp, a, n); return; }
  for (int i = 0; i < n; ++i) a[i] = std::exp(a[i]);
}
#endif

// Hyperparameters of NormalInverseWishart and the predictive parameters of each slot.
template <typename T>
struct Niw {
  int D;
  const T* mu0;   // (D,)
  const T* psi0;  // (D, D)
  T kappa0, nu0;
  // per slot: location mu_n (D), W = L^-1 lower triangular (D x D), log_norm, (df + D)/2, 1/df
  std::vector<T> loc, white, log_norm, power, inv_df;
  std::vector<T> work;  // psi_n, then L (D x D)
  // the terms of log_norm that depend on the cluster size n only (a count):
  // lgamma((df + D)/2) - lgamma(df/2) - D/2 log(df pi), computed once per call and size
  std::vector<T> size_term;
  std::vector<char> known;

  Niw(int D_, const T* mu0_, const T* psi0_, T kappa0_, T nu0_, int C, int N)
      : D(D_), mu0(mu0_), psi0(psi0_), kappa0(kappa0_), nu0(nu0_),
        loc(size_t(C) * D), white(size_t(C) * D * D), log_norm(C), power(C), inv_df(C), work(size_t(D) * D),
        size_term(size_t(N) + 1), known(size_t(N) + 1, 0) {}

  T of_size(T n, T df) {
    const size_t m = size_t(n);
    if (m < known.size() && known[m]) return size_term[m];
    const T value = T(log_gamma(double((df + T(D)) / 2)) - log_gamma(double(df / 2)))
                    - T(0.5) * T(D) * std::log(df * T(M_PI));
    if (m < known.size()) { size_term[m] = value; known[m] = 1; }
    return value;
  }

  // Predictive parameters of slot k from its statistics (n, s1 (D,), s2 (D, D)).
  void refresh(int k, T n, const T* s1, const T* s2) {
    const T kn = kappa0 + n, nun = nu0 + n, df = nun - T(D) + T(1);
    T* mu = &loc[size_t(k) * D];
    posterior_scale(n, s1, s2, mu, (kn + T(1)) / (kn * df));
    const T logdet_half = cholesky_work();
    T* a = work.data();
    // W = L^-1 by forward substitution, column by column of the identity
    T* w = &white[size_t(k) * D * D];
    for (int c = 0; c < D; ++c) {
      for (int i = 0; i < D; ++i) {
        if (i < c) { w[i * D + c] = 0; continue; }
        T v = (i == c) ? T(1) : T(0);
        for (int m = c; m < i; ++m) v -= a[i * D + m] * w[m * D + c];
        w[i * D + c] = v / a[i * D + i];
      }
    }
    log_norm[k] = of_size(n, df) - logdet_half;
    power[k] = T(0.5) * (df + T(D));
    inv_df[k] = T(1) / df;
  }

  int second_size() const { return D * D; }
  void add_second(T* s2, const T* xi, T sign) const {
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) s2[i * D + j] += sign * xi[i] * xi[j];
  }

  // mu_n = (kappa0 mu0 + s1) / kappa_n into `mu` (D,) and factor * psi_n into the lower triangle of `work`,
  //   psi_n = psi0 + s2 + kappa0 mu0 mu0^T - kappa_n mu_n mu_n^T, for a slot with statistics (n, s1, s2)
  void posterior_scale(T n, const T* s1, const T* s2, T* mu, T factor) {
    const T kn = kappa0 + n;
    for (int i = 0; i < D; ++i) mu[i] = (kappa0 * mu0[i] + s1[i]) / kn;
    T* a = work.data();
    for (int i = 0; i < D; ++i)
      for (int j = 0; j <= i; ++j)
        a[i * D + j] = (psi0[i * D + j] + s2[i * D + j] + kappa0 * mu0[i] * mu0[j] - kn * mu[i] * mu[j]) * factor;
  }
  // Cholesky of the symmetric positive-definite D x D matrix in `work` (lower triangle), A = L L^T in place,
  // column by column; returns 1/2 log |A| = sum_j log L_jj, as the log of products flushed before they could
  // leave the normal range
  T cholesky_work() {
    T* a = work.data();
    T logdet_half = 0, product = 1;
    for (int j = 0; j < D; ++j) {
      T v = a[j * D + j];
      for (int m = 0; m < j; ++m) v -= a[j * D + m] * a[j * D + m];
      const T pivot = std::sqrt(v);
      a[j * D + j] = pivot;
      product *= pivot;
      if (!(product > T(1e-30) && product < T(1e30))) logdet_half += std::log(product), product = 1;
      for (int i = j + 1; i < D; ++i) {
        T w = a[i * D + j];
        for (int m = 0; m < j; ++m) w -= a[i * D + m] * a[j * D + m];
        a[i * D + j] = w / pivot;
      }
    }
    return logdet_half + std::log(product);
  }
  // log Gamma_D(v), the multivariate log gamma function
  T multi_log_gamma(T v) const {
    double out = 0.25 * D * (D - 1) * std::log(M_PI);
    for (int j = 0; j < D; ++j) out += log_gamma(double(v) - 0.5 * j);
    return T(out);
  }
  // log m(x_c), the marginal likelihood of a slot with statistics (n, s1, s2) (NormalInverseWishart.log_marginal):
  //   -n D/2 log pi + log Gamma_D(nu_n/2) - log Gamma_D(nu0/2) + nu0/2 log|psi0| - nu_n/2 log|psi_n|
  //   + D/2 (log kappa0 - log kappa_n)
  T log_marginal(T n, const T* s1, const T* s2) {
    if (!prior_known) {
      for (int i = 0; i < D * D; ++i) work[i] = psi0[i];
      prior_term = nu0 * cholesky_work() - multi_log_gamma(nu0 / 2);
      prior_known = true;
    }
    const T kn = kappa0 + n, nun = nu0 + n;
    marginal_mu.resize(D);
    posterior_scale(n, s1, s2, marginal_mu.data(), T(1));
    return -T(0.5) * n * T(D) * T(std::log(M_PI)) + multi_log_gamma(nun / 2) + prior_term
           - nun * cholesky_work() + T(0.5) * T(D) * (std::log(kappa0) - std::log(kn));
  }
  bool prior_known = false;
  T prior_term = 0;  // nu0/2 log|psi0| - log Gamma_D(nu0/2), once per call
  std::vector<T> marginal_mu;

  // out[j] = log t_k(x) for the slots k = active[j], j < m; out has room for whole vectors
  void log_predictive(const int* active, int m, const T* x, T* out) {
    const int whole = (m + 3) / 4 * 4;
    for (int j = 0; j < m; ++j) {
      const int k = active[j];
      const T* mu = &loc[size_t(k) * D];
      const T* w = &white[size_t(k) * D * D];
      T q = 0;
      for (int i = 0; i < D; ++i) {
        T y = 0;
        for (int l = 0; l <= i; ++l) y += w[i * D + l] * (x[l] - mu[l]);
        q += y * y;
      }
      // log(1 + y) rather than log1p(y): the absolute error, which is what a logit's is, is
      // the same (an ulp of 1), and log is the faster of the two
      out[j] = T(1) + q * inv_df[k];
    }
    for (int j = m; j < whole; ++j) out[j] = T(1);
    log_all(out, whole);
    for (int j = 0; j < m; ++j) out[j] = log_norm[active[j]] - power[active[j]] * out[j];
  }
};

// Hyperparameters of NormalKnownCov (dpppl/families/normal_known.py; every one (D,)) and the
// predictive of each slot. Per dimension, the cluster mean's posterior is N(mu_n, v_n) with
//   v_n = 1 / (1/tau2 + n/sigma2),  mu_n = v_n (mu0/tau2 + s1/sigma2),
// and the predictive N(mu_n, v_n + sigma2): log p(x) = log_norm - 1/2 sum_d (x_d - mu_n,d)^2 / var_d,
// log_norm = -1/2 sum_d log(2 pi var_d). The statistics are n, s1 = sum x, s2 = sum x^2 (D).
template <typename T>
struct NormalKnown {
  int D;
  const T *mu0, *sigma2, *tau2;
  std::vector<T> loc, precision, log_norm;

  NormalKnown(int D_, const T* mu0_, const T* sigma2_, const T* tau2_, int C)
      : D(D_), mu0(mu0_), sigma2(sigma2_), tau2(tau2_), loc(size_t(C) * D), precision(size_t(C) * D), log_norm(C) {}

  int second_size() const { return D; }
  void add_second(T* s2, const T* xi, T sign) const {
    for (int i = 0; i < D; ++i) s2[i] += sign * xi[i] * xi[i];
  }

  void refresh(int k, T n, const T* s1, const T*) {
    T* mu = &loc[size_t(k) * D];
    T* prec = &precision[size_t(k) * D];
    T norm = 0;
    for (int i = 0; i < D; ++i) {
      const T vn = T(1) / (T(1) / tau2[i] + n / sigma2[i]);
      mu[i] = vn * (mu0[i] / tau2[i] + s1[i] / sigma2[i]);
      const T var = vn + sigma2[i];
      prec[i] = T(1) / var;
      norm += std::log(T(2) * T(M_PI) * var);
    }
    log_norm[k] = T(-0.5) * norm;
  }

  // log m(x_c) of a slot with statistics (n, s1, s2) (NormalKnownCov.log_marginal): per dimension, with
  // S = s1 - n mu0 and Q = s2 - 2 mu0 s1 + n mu0^2 (sums about mu0),
  //   -n/2 log(2 pi sigma2) - 1/2 log(1 + n tau2 / sigma2) - (Q - tau2 S^2 / (sigma2 + n tau2)) / (2 sigma2)
  T log_marginal(T n, const T* s1, const T* s2) const {
    T out = 0;
    for (int i = 0; i < D; ++i) {
      const T S = s1[i] - n * mu0[i], Q = s2[i] - T(2) * mu0[i] * s1[i] + n * mu0[i] * mu0[i];
      out += -T(0.5) * n * std::log(T(2) * T(M_PI) * sigma2[i]) - T(0.5) * std::log1p(n * tau2[i] / sigma2[i])
             - T(0.5) * (Q - tau2[i] * S * S / (sigma2[i] + n * tau2[i])) / sigma2[i];
    }
    return out;
  }

  void log_predictive(const int* active, int m, const T* x, T* out) {
    for (int j = 0; j < m; ++j) {
      const int k = active[j];
      const T* mu = &loc[size_t(k) * D];
      const T* prec = &precision[size_t(k) * D];
      T q = 0;
      for (int i = 0; i < D; ++i) q += prec[i] * (x[i] - mu[i]) * (x[i] - mu[i]);
      out[j] = log_norm[k] - T(0.5) * q;
    }
  }
};

// Adds (sign = 1) or removes (sign = -1) point xi to the statistics of slot k and refreshes its
// predictive; a slot that empties gets exact zeros (the prior's predictive, seating.refresh).
template <typename T, typename Family>
void move_point(int k, const T* xi, T sign, int D, T* n, T* s1, T* s2, Family& fam) {
  const int DD = fam.second_size();
  n[k] += sign;
  T* a = s1 + size_t(k) * D;
  T* b = s2 + size_t(k) * DD;
  for (int i = 0; i < D; ++i) a[i] += sign * xi[i];
  fam.add_second(b, xi, sign);
  if (n[k] < T(0.5)) {
    n[k] = 0;
    std::fill(a, a + D, T(0));
    std::fill(b, b + DD, T(0));
  }
  fam.refresh(k, n[k], a, b);
}

// The visiting order of N points: seating.visiting_order's Fisher-Yates shuffle, operation for operation.
template <typename T>
std::vector<int32_t> visiting_order(int N, const T* shuffle) {
  std::vector<int32_t> order(N);
  for (int j = 0; j < N; ++j) order[j] = j;
  for (int j = N - 1; j >= 1; --j) {
    const int r = std::min(int(std::floor(shuffle[j] * T(j + 1))), j);
    std::swap(order[j], order[r]);
  }
  return order;
}

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

// log(sum(exp(a[0..m)))), as jax.scipy.special.logsumexp: -inf when every entry is -inf.
template <typename T>
T log_sum_exp(const T* a, int m) {
  T top = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < m; ++j) top = std::max(top, a[j]);
  const T shift = std::isfinite(top) ? top : T(0);
  T total = 0;
  for (int j = 0; j < m; ++j) total += std::exp(a[j] - shift);
  return std::log(total) + shift;
}

// The index dpppl.core.numerics.sample_index(logits[0..m), u) draws: the first j at which the CDF of
// exp(logits - max) reaches max(u, tiny) times its total (m when none does: NaN logits).
template <typename T>
int sample_index(const T* logits, int m, T u) {
  T top = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < m; ++j) top = std::max(top, logits[j]);
  T total = 0;
  for (int j = 0; j < m; ++j) total += std::exp(logits[j] - top);
  const T target = std::max(u, std::numeric_limits<T>::min()) * total;
  T cdf = 0;
  for (int j = 0; j < m; ++j) {
    cdf += std::exp(logits[j] - top);
    if (!(cdf < target)) return j;
  }
  return m;
}

// One chain of the permutation move's draw of C | pi for dp="mh" (dpppl/kernels/perm/sampler.py,
// _draw_factored; Liang, Jordan & Taskar 2007, secs. 3.2-3.3), on the first R positions of pi (the
// real points; padded ones are last in pi). A segment pi_{s+1..r} of m = r - s points has the weight
//   log B'(s, r) = log m(x_seg) + lgamma(m - d) - lgamma(1 - d) [- lgamma(m + 1) when augmented] + lambda
// (segment_log_weights plus the slope lambda), its statistics the difference of prefix sums along pi.
// W = 0: the full dynamic program of eq. (6), log g'(r) = logsumexp_s log g'(s) + log B'(s, r)
// (forward_factored), and the segments drawn backwards from r = R, segment i from the end with
// uniforms[i] by sample_index over s of log g'(s) + log B'(s, r) (sample_factored; the rows are
// computed again there, O(K R) marginals, rather than kept, O(R^2) memory). W > 0: the beam of
// sec. 3.3 with epsilon (forward_beam, slot for slot: the kept lengths and their contributions per
// position), the segments drawn from the kept lengths (sample_beam), and `support` whether the
// current clustering (labels z along pi) has every segment within the beam (in_beam; true when not
// augmented). Writes the segment starts (positions 0..N) to `starts`; returns `support`.
template <typename T, typename Family>
bool perm_chain(int N, int R, int D, const T* x, const int32_t* pi, const int32_t* z, const T* uniforms, T lam,
                T discount, bool augmented, int W, T epsilon, Family& fam, bool* starts) {
  const int DD = fam.second_size();
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> p1(size_t(R + 1) * D, T(0)), p2(size_t(R + 1) * DD, T(0));  // prefix sums along pi
  for (int r = 0; r < R; ++r) {
    const T* xi = x + size_t(pi[r]) * D;
    for (int i = 0; i < D; ++i) p1[size_t(r + 1) * D + i] = p1[size_t(r) * D + i] + xi[i];
    std::copy(&p2[size_t(r) * DD], &p2[size_t(r) * DD] + DD, &p2[size_t(r + 1) * DD]);
    fam.add_second(&p2[size_t(r + 1) * DD], xi, T(1));
  }
  std::vector<T> size_term(size_t(R) + 1, T(0)), d1(D), d2(DD);
  const double base = log_gamma(1.0 - double(discount));
  for (int m = 1; m <= R; ++m)
    size_term[m] = T(log_gamma(double(m) - double(discount)) - base - (augmented ? log_gamma(double(m) + 1.0) : 0.0));
  auto weight = [&](int s, int r) -> T {  // log B'(s, r), s < r
    for (int i = 0; i < D; ++i) d1[i] = p1[size_t(r) * D + i] - p1[size_t(s) * D + i];
    for (int i = 0; i < DD; ++i) d2[i] = p2[size_t(r) * DD + i] - p2[size_t(s) * DD + i];
    return fam.log_marginal(T(r - s), d1.data(), d2.data()) + size_term[r - s] + lam;
  };
  std::fill(starts, starts + N + 1, false);
  bool support = true;
  if (W == 0) {
    std::vector<T> log_g(size_t(R) + 1, neg_inf), row(size_t(R) + 1);
    log_g[0] = 0;
    for (int r = 1; r <= R; ++r) {
      for (int s = 0; s < r; ++s) row[s] = log_g[s] + weight(s, r);
      log_g[r] = log_sum_exp(row.data(), r);
    }
    for (int r = R, i = 0; r > 0; ++i) {
      for (int s = 0; s < r; ++s) row[s] = log_g[s] + weight(s, r);
      const int s = std::min(sample_index(row.data(), r, uniforms[i]), r - 1);
      starts[s] = true;
      r = s;
    }
    return support;
  }
  const T cut = std::log(epsilon / T(W + 1));
  std::vector<int32_t> kept_all(size_t(R + 1) * W, 0), kept(W, 0), lengths(W + 1), moved(W);
  std::vector<T> contrib_all(size_t(R + 1) * W, neg_inf), kept_log_g(W, neg_inf), start_log_g(W + 1),
      contrib(W + 1), kept_contrib(W);
  std::vector<char> keep(W + 1);
  T log_g_prev = 0;
  for (int r = 1; r <= R; ++r) {
    for (int j = 0; j < W; ++j) lengths[j] = kept[j] > 0 ? kept[j] + 1 : 0, start_log_g[j] = kept_log_g[j];
    lengths[W] = 1;
    start_log_g[W] = log_g_prev;
    for (int j = 0; j <= W; ++j) contrib[j] = lengths[j] > 0 ? start_log_g[j] + weight(r - lengths[j], r) : neg_inf;
    const T bar = log_sum_exp(contrib.data(), W + 1) + cut;
    bool all = true;
    int smallest = 0;  // argmin of the kept contributions (+inf where not kept): the first such
    T least = std::numeric_limits<T>::infinity();
    for (int j = 0; j <= W; ++j) {
      keep[j] = contrib[j] >= bar && std::isfinite(contrib[j]);
      all = all && keep[j];
      if (keep[j] && contrib[j] < least) least = contrib[j], smallest = j;
    }
    keep[smallest] = !all;  // all W + 1 qualify: the smallest goes
    int free = 0;  // the first of the W slots not kept (0 when every one is)
    while (free < W && keep[free]) ++free;
    if (free == W) free = 0;
    const bool take_new = keep[W] && !keep[free];
    for (int j = 0; j < W; ++j) {
      moved[j] = take_new && j == free ? W : j;
      const bool on = keep[moved[j]];
      kept[j] = on ? lengths[moved[j]] : 0;
      kept_contrib[j] = on ? contrib[moved[j]] : neg_inf;
      kept_log_g[j] = start_log_g[moved[j]];
      kept_all[size_t(r) * W + j] = kept[j];
      contrib_all[size_t(r) * W + j] = kept_contrib[j];
    }
    log_g_prev = log_sum_exp(kept_contrib.data(), W);
  }
  for (int r = R, i = 0; r > 0; ++i) {
    const int j = std::min(sample_index(&contrib_all[size_t(r) * W], W, uniforms[i]), W - 1);
    const int s = r - std::max(kept_all[size_t(r) * W + j], int32_t(1));  // (a kept length is >= 1)
    starts[s] = true;
    r = s;
  }
  if (augmented) {  // every segment of the current clustering (along pi) ends at r with a kept length
    int start = 0;
    for (int p = 0; p < R && support; ++p) {
      if (p > 0 && z[pi[p]] != z[pi[p - 1]]) start = p;
      if (p + 1 < R && z[pi[p + 1]] == z[pi[p]]) continue;
      const int length = p + 1 - start;
      bool member = false;
      for (int j = 0; j < W; ++j) member = member || kept_all[size_t(p + 1) * W + j] == length;
      support = member;
    }
  }
  return support;
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

// Product of the leading `rank - base` dimensions of a buffer: its batch size.
int64_t batch_of(ffi::AnyBuffer::Dimensions dims, size_t base) {
  int64_t b = 1;
  for (size_t i = 0; i + base < dims.size(); ++i) b *= dims[i];
  return b;
}

// One chain's slice of an operand of `base` dimensions per chain under a batch of B chains: its
// number of elements, and whether it is batched (else one value shared by every chain).
struct Operand {
  int64_t size = 1;
  bool batched = false;
  Operand(ffi::AnyBuffer::Dimensions dims, size_t base, int64_t B) {
    for (size_t i = dims.size() - base; i < dims.size(); ++i) size *= dims[i];
    batched = batch_of(dims, base) == B && B > 1;
  }
  template <typename P>
  P* at(P* data, int64_t b) const { return data + (batched ? b * size : 0); }
};

// run(b) for every chain b < B, on up to num_threads threads: each thread takes the next chain not
// yet taken (a thread the OS holds back takes fewer); which thread runs a chain never changes its draws.
template <typename Run>
void for_each_chain(int64_t B, int64_t num_threads, const Run& run) {
  const int64_t threads = std::min<int64_t>(B, std::max<int64_t>(1, num_threads));
  if (threads <= 1) {
    for (int64_t b = 0; b < B; ++b) run(b);
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&] { for (int64_t b = next++; b < B; b = next++) run(b); };
  std::vector<std::thread> pool;
  for (int64_t r = 1; r < threads; ++r) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

// The families the native code covers, and the shapes of their hyperparameter operands
// h1, h2, h3 and second statistics s2 (dimensions of one chain's value):
//   family 0, NormalInverseWishart: h1 = mu0 (D), h2 = psi0 (D, D), h3 unused (D); s2 (C, D, D)
//   family 1, NormalKnownCov:      h1 = mu0 (D), h2 = sigma2 (D), h3 = tau2 (D); s2 (C, D)
// and scalars = (kappa0, nu0, discount) (3,) (NormalKnownCov reads only the discount): operands, not
// attributes, so one compiled program serves every value of them.
template <ffi::DataType DT>
struct Hyper {
  using T = ffi::NativeType<DT>;
  ffi::Buffer<DT> h1, h2, h3, scalars;
  Operand o1, o2, o3, osc;
  Hyper(ffi::Buffer<DT> h1_, ffi::Buffer<DT> h2_, ffi::Buffer<DT> h3_, ffi::Buffer<DT> scalars_, bool full, int64_t B)
      : h1(h1_), h2(h2_), h3(h3_), scalars(scalars_), o1(h1_.dimensions(), 1, B), o2(h2_.dimensions(), 1 + full, B),
        o3(h3_.dimensions(), 1, B), osc(scalars_.dimensions(), 1, B) {}
  T discount(int64_t b) const { return osc.at(scalars.typed_data(), b)[2]; }
  // f(fam) with chain b's family for C slots and clusters of at most N points
  template <typename F>
  void with_family(int64_t family, int64_t b, int D, int C, int N, const F& f) const {
    const T *p1 = o1.at(h1.typed_data(), b), *p2 = o2.at(h2.typed_data(), b), *p3 = o3.at(h3.typed_data(), b);
    const T* sc = osc.at(scalars.typed_data(), b);
    if (family == 0) {
      Niw<T> fam(D, p1, p2, sc[0], sc[1], C, N);
      f(fam);
    } else {
      NormalKnown<T> fam(D, p1, p2, p3, C);
      f(fam);
    }
  }
};

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

// The permutation move's draw of C | pi (see perm_chain) for every chain of the batch.
template <ffi::DataType DT>
ffi::Error PermSegments(ffi::Buffer<DT> x, ffi::Buffer<ffi::S32> pi, ffi::Buffer<ffi::S32> z, ffi::Buffer<DT> uniforms,
                        ffi::Buffer<DT> lam, ffi::Buffer<DT> epsilon, ffi::Buffer<ffi::S32> points, ffi::Buffer<DT> h1,
                        ffi::Buffer<DT> h2, ffi::Buffer<DT> h3, ffi::Buffer<DT> scalars,
                        ffi::ResultBuffer<ffi::PRED> starts_out, ffi::ResultBuffer<ffi::PRED> support_out,
                        int64_t family, int64_t width, int64_t augmented, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions();
  if (xd.size() < 2) return ffi::Error::InvalidArgument("native permutation move: bad operand ranks");
  if (family != 0 && family != 1) return ffi::Error::InvalidArgument("native permutation move: unknown family");
  if (width < 0) return ffi::Error::InvalidArgument("native permutation move: negative beam width");
  const int N = int(xd[xd.size() - 2]), D = int(xd[xd.size() - 1]);
  const int64_t B = batch_of(starts_out->dimensions(), 1);
  const size_t full = family == 0;
  const Operand ox(xd, 2, B), op(pi.dimensions(), 1, B), oz(z.dimensions(), 1, B), ou(uniforms.dimensions(), 1, B),
                ol(lam.dimensions(), 0, B), oe(epsilon.dimensions(), 0, B), on(points.dimensions(), 0, B);
  const Hyper<DT> hyper(h1, h2, h3, scalars, full, B);
  // pi indexes the points: checked before any is followed
  for (int64_t b = 0; b < B; ++b) {
    const int R = *on.at(points.typed_data(), b);
    if (R < 0 || R > N) return ffi::Error::InvalidArgument("native permutation move: points outside [0, N]");
    const int32_t* p = op.at(pi.typed_data(), b);
    for (int r = 0; r < R; ++r)
      if (uint32_t(p[r]) >= uint32_t(N)) return ffi::Error::InvalidArgument("native permutation move: pi outside [0, N)");
  }
  for_each_chain(B, num_threads, [&](int64_t b) {
    hyper.with_family(family, b, D, 1, N, [&](auto& fam) {
      support_out->typed_data()[b] = perm_chain(
          N, *on.at(points.typed_data(), b), D, ox.at(x.typed_data(), b), op.at(pi.typed_data(), b),
          oz.at(z.typed_data(), b), ou.at(uniforms.typed_data(), b), *ol.at(lam.typed_data(), b), hyper.discount(b),
          augmented != 0, int(width), *oe.at(epsilon.typed_data(), b), fam, starts_out->typed_data() + b * (N + 1));
    });
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

// The operands of PermSegments, in order (shapes of one chain; a leading batch under vmap).
#define DPPPL_PERM_BINDING(DT)                                                              \
  ffi::Ffi::Bind()                                                                              \
      .Arg<ffi::Buffer<DT>>()         /* x (N, D) */                                            \
      .Arg<ffi::Buffer<ffi::S32>>()   /* pi (N,): the permutation, real points first */         \
      .Arg<ffi::Buffer<ffi::S32>>()   /* z (N,): the current labels (in_beam) */                \
      .Arg<ffi::Buffer<DT>>()         /* uniforms (N,): segment i from the end takes uniforms[i] */ \
      .Arg<ffi::Buffer<DT>>()         /* lambda (): the slope of log A at k_ref */              \
      .Arg<ffi::Buffer<DT>>()         /* epsilon (): the beam's */                              \
      .Arg<ffi::Buffer<ffi::S32>>()   /* points (): the real points, first in pi */             \
      .Arg<ffi::Buffer<DT>>()         /* h1: hyperparameters (see Hyper) */                     \
      .Arg<ffi::Buffer<DT>>()         /* h2 */                                                  \
      .Arg<ffi::Buffer<DT>>()         /* h3 */                                                  \
      .Arg<ffi::Buffer<DT>>()         /* scalars (3,): kappa0, nu0, discount */                 \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* starts (N + 1,): the segments' first positions */      \
      .Ret<ffi::Buffer<ffi::PRED>>()  /* support (): the current clustering within the beam */  \
      .Attr<int64_t>("family")                                                                  \
      .Attr<int64_t>("width")                                                                   \
      .Attr<int64_t>("augmented")                                                               \
      .Attr<int64_t>("num_threads")

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
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSeatF64, DdpSeat<ffi::F64>, DPPPL_DDP_SEAT_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSeatF32, DdpSeat<ffi::F32>, DPPPL_DDP_SEAT_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSwapF64, DdpSwap<ffi::F64>, DPPPL_DDP_SWAP_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpSwapF32, DdpSwap<ffi::F32>, DPPPL_DDP_SWAP_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpParametersF64, DdpParameters<ffi::F64>, DPPPL_DDP_PARAMETERS_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpParametersF32, DdpParameters<ffi::F32>, DPPPL_DDP_PARAMETERS_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpLpF64, DdpLabelLogJoints<ffi::F64>, DPPPL_DDP_LP_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplDdpLpF32, DdpLabelLogJoints<ffi::F32>, DPPPL_DDP_LP_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplPermF64, PermSegments<ffi::F64>, DPPPL_PERM_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplPermF32, PermSegments<ffi::F32>, DPPPL_PERM_BINDING(ffi::F32));
