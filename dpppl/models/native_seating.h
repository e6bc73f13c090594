// The code the native sources of dpppl/models share (native_seating.cc, native_ddp.cc, native_perm.cc):
// the families' mathematics, the index sampling, and the FFI operand helpers. Each source includes it
// and is built into its own library, so a kernel's first call compiles only the source it needs.
// Everything here has internal linkage (an anonymous namespace): each library has its own copy.
#pragma once

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

using dpppl::threefry_uniform;  // element `index` of jax.random.uniform(key, shape, T), bit for bit (same header)

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

}  // namespace
