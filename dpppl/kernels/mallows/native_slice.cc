// One step of the mallows-slice kernel (dpppl/kernels/mallows/sampler.py, build_slice_gibbs) as one
// native function, called from inside the jitted step through XLA's FFI
// (dpppl/kernels/mallows/native_slice.py builds, loads and calls it). It makes the draws of the JAX
// step from the same random numbers: every key and uniform is derived here from the step's
// threefry keys exactly as dpppl.core.numerics_random derives them (split: key i hashes the counter
// (0, i); fold_in(key, d) hashes (0, d); uniform(key, shape)[i]: the top mantissa bits of the hash of
// (0, i)), and the arithmetic is the JAX step's, operation by operation, up to floating-point
// rounding (sums may be taken in another order; log and exp are libm's).
//
// The mathematics (Meila & Chen 2010; docs/kernels/mallows-slice.md):
//   1. every occupied slot c, T_Gibbs rounds (round i: keys split(fold_in(k_par, c), (T_Gibbs, 2))[i]):
//        sigma | theta: W = sum_j theta_j R_j; the stagewise proposal (Fig. 2) drawn with u[0..n),
//          accepted by independence Metropolis-Hastings when log u[n] < log p(new) - log p(old)
//          + log q(old) - log q(new), p(sigma) ∝ exp(-L_sigma(W)); then adjacent swaps k, k + 1
//          accepted when log u[n + 1 + k] < W[b, a] - W[a, b] (u = uniform(key, 2n));
//        theta_j | sigma, T_Slices slice updates of u = log theta_j (stepping out, shrinkage) of
//          -a_j theta - c_j log psi_{m_j}(theta) + u, a_j = nu r_j + S_j(sigma), c_j = nu + N_j;
//   2. the labels in the order given (eq. 11): point i leaves its slot, and takes slot c with
//        probability ∝ (|c|_-i - d) GM(pi_i | sigma_c, theta_c), or the first empty slot with
//        probability ∝ (alpha + K d) (n - t_i)!/n! (Lemma 1), drawn with uniform(k_u, (N, 2n))[i, 0];
//        a new cluster takes the theta drawn exactly from P0 for that visit (theta_exact, by
//        rejection from a tangent envelope, keys split(k_theta, (N, n - 1))) and the sigma built
//        from its code (insert_code_given with uniforms [i, 1..2n)).
//
// Batching: under jax.vmap the call is made with vmap_method="expand_dims": every operand has the
// same leading batch dimensions, of the batch size or of size 1 (shared by every chain).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>
#include <vector>

#include "../../core/numerics_threefry.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

struct Key {
  uint32_t k0, k1;
  // split(key, shape)'s key of flat index i, and fold_in(key, i): the hash of the counter (0, i)
  Key child(uint32_t i) const {
    uint32_t hi = 0, lo = i;
    dpppl::threefry2x32(k0, k1, hi, lo);
    return {hi, lo};
  }
};

// Element i of numerics_random.uniform(key, shape, T) (minval 0, maxval 1), bit for bit.
template <typename T>
T unit(Key key, uint32_t i) {
  const uint32_t words[2] = {key.k0, key.k1};
  return dpppl::threefry_uniform<T>(words, i);
}

// numerics_random.uniform(key, (), T, lo, hi): max(lo, u (hi - lo) + lo).
template <typename T>
T unit_in(Key key, T lo, T hi) {
  return std::max(lo, unit<T>(key, 0) * (hi - lo) + lo);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// dpppl.core.numerics.sample_index: the index k with cdf[k - 1] < max(u, tiny) cdf[-1] <= cdf[k].
template <typename T>
int sample_index(const T* logits, int size, T u) {
  T top = -std::numeric_limits<T>::infinity();
  for (int k = 0; k < size; ++k) top = std::max(top, logits[k]);
  T cdf[64 * 64];
  T* c = size <= 64 * 64 ? cdf : nullptr;
  std::vector<T> big;
  if (c == nullptr) {
    big.resize(size);
    c = big.data();
  }
  T acc = 0;
  for (int k = 0; k < size; ++k) c[k] = acc = acc + std::exp(logits[k] - top);
  const T target = std::max(u, std::numeric_limits<T>::min()) * acc;
  int count = 0;
  for (int k = 0; k < size; ++k) count += c[k] < target;
  return count;
}

// log psi_m(theta) = log sum_{k<=m} e^{-k theta} (generalized_mallows.log_psi).
template <typename T>
T log_psi(T theta, T m) {
  if (theta < T(1e-8)) return std::log(m + T(1)) - T(0.5) * m * theta;
  return std::log(-std::expm1(-(m + T(1)) * theta)) - std::log(-std::expm1(-theta));
}

template <typename T>
T theta_log_density(T theta, T a, T c, T m) {
  return -a * theta - c * log_psi(theta, m);
}

// d/dtheta log psi_m(theta) (generalized_mallows._dlog_psi).
template <typename T>
T dlog_psi(T theta, T m) {
  if (theta < T(1e-6)) return -(T(0.5) * m - m * (m + T(2)) * theta / T(12));
  return -(T(1) / std::expm1(theta) - (m + T(1)) / std::expm1((m + T(1)) * theta));
}

// generalized_mallows._trigamma.
template <typename T>
T trigamma(T x) {
  T near = 0;
  for (int i = 0; i < 6; ++i) near = near + T(1) / ((x + T(i)) * (x + T(i)));
  const T y = x + T(6);
  const T inv2 = T(1) / (y * y);
  return near + T(1) / y + T(0.5) * inv2 + inv2 / y * (T(1.0 / 6.0) - inv2 * (T(1.0 / 30.0) - inv2 / T(42)));
}

// generalized_mallows.theta_exact: one draw of theta ∝ exp(-a theta - c log psi_m(theta)) on [0, inf)
// by rejection from the tangent envelope at mode e^{tau g}, g = -4, -3.5, ..., 4; try i draws
// uniform(fold_in(key, i), (3,)) (piece, point in the piece, acceptance); at most 200 tries.
template <typename T>
T theta_exact(Key key, T a, T c, T m) {
  constexpr int G = 17;
  const T mode = std::log1p(c / a);
  const T sd = std::sqrt(std::max(trigamma(a) - trigamma(a + c + T(1)), T(1e-30)));
  const T tau = std::min(std::max(sd / mode, T(0.05)), T(3.0));
  T x[G], h[G], d[G], lo[G], hi[G], width[G], dsafe[G], log_mass[G];
  bool flat[G];
  for (int g = 0; g < G; ++g) {
    x[g] = mode * std::exp(tau * T(-4.0 + 0.5 * g));
    h[g] = theta_log_density(x[g], a, c, m);
    d[g] = -a - c * dlog_psi(x[g], m);
  }
  lo[0] = 0;
  hi[G - 1] = T(kInf);
  for (int g = 0; g + 1 < G; ++g) {
    const T dd = d[g] - d[g + 1];
    T z = (h[g + 1] - h[g] + d[g] * x[g] - d[g + 1] * x[g + 1]) / (dd > 0 ? dd : T(1));
    z = dd > 0 ? z : x[g];
    z = std::min(std::max(z, x[g]), x[g + 1]);
    hi[g] = lo[g + 1] = z;
  }
  for (int g = 0; g < G; ++g) {
    width[g] = hi[g] - lo[g];
    flat[g] = std::abs(d[g]) < T(1e-12);
    dsafe[g] = flat[g] ? T(1) : d[g];
    const T ratio = flat[g] ? width[g] : std::expm1(dsafe[g] * width[g]) / dsafe[g];
    log_mass[g] = h[g] + d[g] * (lo[g] - x[g]) + std::log(ratio);
  }
  T theta = mode;
  for (uint32_t i = 0; i < 200; ++i) {
    const Key k = key.child(i);
    const T u0 = unit<T>(k, 0), u1 = unit<T>(k, 1), u2 = unit<T>(k, 2);
    const int p = sample_index(log_mass, G, u0);
    const T step = flat[p] ? u1 * width[p] : std::log1p(u1 * std::expm1(dsafe[p] * width[p])) / dsafe[p];
    theta = lo[p] + step;
    const T envelope = h[p] + d[p] * (theta - x[p]);
    if (std::log(u2) < theta_log_density(theta, a, c, m) - envelope) break;
  }
  return theta;
}

// dpppl.core.numerics.slice_log_alpha (width 1, 32 steps out per side, 200 shrinks) of theta with
// the density -a theta - c log psi_m(theta) (0 outside theta > 0), on u = log theta.
template <typename T>
T slice_theta(Key key, T theta, T a, T c, T m) {
  auto target = [&](T u) {
    const T v = std::exp(u);
    return (v > 0 ? theta_log_density(v, a, c, m) : -std::numeric_limits<T>::infinity()) + u;
  };
  const Key k_level = key.child(0), k_pos = key.child(1);
  Key k_shrink = key.child(2);
  const T u0 = std::log(theta);
  const T target0 = target(u0);
  const T level = target0 + std::log(unit_in<T>(k_level, T(1e-300), T(1)));
  T left = u0 - T(1) * unit<T>(k_pos, 0);
  T right = left + T(1);
  for (int i = 0; i < 32 && target(left) >= level; ++i) left = left + T(-1) * T(1);
  for (int i = 0; i < 32 && target(right) >= level; ++i) right = right + T(1) * T(1);
  if (!std::isfinite(target0)) return std::exp(u0);
  for (int i = 0; i < 200; ++i) {
    const Key sub = k_shrink.child(1);
    k_shrink = k_shrink.child(0);
    const T u = unit_in<T>(sub, left, right);
    if (target(u) >= level) return std::exp(u);
    if (u < u0) left = u; else right = u;
  }
  return std::exp(u0);
}

// The problem's sizes and shared values.
template <typename T>
struct Shape {
  int N, n, C, G, S;  // points (rows), items, slots, T_Gibbs, T_Slices
  T nu, d, alpha;
  const T *r, *log_factorial;  // r (n - 1,), log k! (n + 1,)
  T m(int j) const { return T(n - 1 - j); }
};

// One chain's state (its results, updated in place).
template <typename T>
struct Chain {
  int32_t* z;
  T *cnt, *R, *Nj;  // n (C,), R (C, n-1, n, n), N_j (C, n-1)
  int32_t* pos;     // (C, n)
  T* theta;         // (C, n-1)
};

// generalized_mallows.ranking_lengths: min(t, n - 1).
inline int ranking_length(const int* r, int n) {
  int t = 0;
  for (int j = 0; j < n; ++j) t += r[j] >= 0;
  return std::min(t, n - 1);
}

// _GM.move_point: add (sign 1) or remove (-1) one ranking's statistics at slot k.
template <typename T>
void move_point(const Shape<T>& s, const Chain<T>& ch, int k, const int* r, T sign) {
  const int n = s.n, t = ranking_length(r, n);
  ch.cnt[k] += sign;
  std::vector<char> seen(n, 0);
  for (int j = 0; j < t; ++j) {
    seen[r[j]] = 1;
    ch.Nj[k * (n - 1) + j] += sign;
    T* row = ch.R + ((int64_t(k) * (n - 1) + j) * n + r[j]) * n;
    for (int b = 0; b < n; ++b)
      if (!seen[b]) row[b] += sign;
  }
}

// log GM(pi | sigma_c, theta_c) of one ranking against a slot (generalized_mallows.log_gm), lpsi its
// log psi_{m_j}(theta_j).
template <typename T>
T log_gm(int n, const int* r, const int32_t* pos, const T* theta, const T* lpsi) {
  const int t = ranking_length(r, n);
  T acc = 0;
  for (int j = 0; j < t; ++j) {
    const int p = pos[r[j]];
    int ahead = 0;
    for (int l = 0; l < j; ++l) ahead += pos[r[l]] < p;
    acc += theta[j] * T(p - ahead) + lpsi[j];
  }
  return -acc;
}

// mallows_draws._stagewise_pass on W (n, n): drawn with `u` (n,), or following `forced`; fills
// `order` and returns log q(order).
template <typename T>
T stagewise(int n, const T* W, const T* u, const int* forced, int* order) {
  std::vector<T> rho(n, 0), logits(n);
  std::vector<char> remaining(n, 1);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) rho[b] += W[a * n + b];
  T logq = 0;
  for (int k = 0; k < n; ++k) {
    T top = -std::numeric_limits<T>::infinity();
    for (int b = 0; b < n; ++b) {
      logits[b] = remaining[b] ? -rho[b] : -std::numeric_limits<T>::infinity();
      top = std::max(top, logits[b]);
    }
    const int i = forced == nullptr ? sample_index(logits.data(), n, u[k]) : forced[k];
    T total = 0;
    for (int b = 0; b < n; ++b) total += std::exp(logits[b] - top);
    logq += logits[i] - (std::log(total) + top);
    remaining[i] = 0;
    for (int b = 0; b < n; ++b) rho[b] -= W[i * n + b];
    order[k] = i;
  }
  return logq;
}

// -L_sigma(W) = -sum_{a,b} W[a, b] [pos[b] < pos[a]].
template <typename T>
T sigma_log_target(int n, const T* W, const int32_t* pos) {
  T acc = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (pos[b] < pos[a]) acc += W[a * n + b];
  return -acc;
}

// Stage 1 for slot c: T_Gibbs rounds of sigma | theta (MH + adjacent swaps) and theta | sigma (slice);
// returns the acceptance rate of the MH steps.
template <typename T>
T update_slot(const Shape<T>& s, const Chain<T>& ch, int c, Key key) {
  const int n = s.n, J = n - 1;
  int32_t* pos = ch.pos + c * n;
  T* theta = ch.theta + c * J;
  const T* R = ch.R + int64_t(c) * J * n * n;
  const T* Nj = ch.Nj + c * J;
  std::vector<T> W(n * n), u(2 * n), a_j(J);
  std::vector<int> order(n), old_order(n);
  std::vector<int32_t> fresh(n);
  T accepted = 0;
  for (int i = 0; i < s.G; ++i) {
    const Key k_sigma = key.child(2 * i), k_theta = key.child(2 * i + 1);
    for (int q = 0; q < n * n; ++q) {
      T w = 0;
      for (int j = 0; j < J; ++j) w += theta[j] * R[int64_t(j) * n * n + q];
      W[q] = w;
    }
    for (int q = 0; q < 2 * n; ++q) u[q] = unit<T>(k_sigma, q);
    const T logq_new = stagewise(n, W.data(), u.data(), nullptr, order.data());
    for (int k = 0; k < n; ++k) fresh[order[k]] = k;
    for (int l = 0; l < n; ++l) old_order[pos[l]] = l;
    const T logq_old = stagewise(n, W.data(), u.data(), old_order.data(), order.data());
    const T log_ratio = sigma_log_target(n, W.data(), fresh.data()) - sigma_log_target(n, W.data(), pos)
                        + logq_old - logq_new;
    const bool accept = std::log(u[n]) < log_ratio;
    if (accept) std::copy(fresh.begin(), fresh.end(), pos);
    accepted += accept;
    for (int l = 0; l < n; ++l) order[pos[l]] = l;  // item at each rank
    for (int k = 0; k + 1 < n; ++k) {
      const int a = order[k], b = order[k + 1];
      if (std::log(u[n + 1 + k]) < W[b * n + a] - W[a * n + b]) std::swap(order[k], order[k + 1]);
    }
    for (int k = 0; k < n; ++k) pos[order[k]] = k;
    for (int j = 0; j < J; ++j) {  // a_j = nu r_j + S_j(sigma), S_j = L_sigma(R_j) (a sum of counts: exact)
      T S = 0;
      const T* Rj = R + int64_t(j) * n * n;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (pos[b] < pos[a]) S += Rj[a * n + b];
      a_j[j] = s.nu * s.r[j] + S;
    }
    for (int q = 0; q < s.S; ++q)
      for (int j = 0; j < J; ++j)
        theta[j] = slice_theta(k_theta.child(q * J + j), theta[j], a_j[j], s.nu + Nj[j], s.m(j));
  }
  return accepted / T(s.G);
}

// mallows_draws.insert_code_given: sigma from the code of ranking r drawn with u[0..n-1) against
// logits -theta_j k (k <= m_j), the unranked items ordered by u[n-1..2n-1).
template <typename T>
void insert_code(int n, const int* r, const T* u, const T* theta, int32_t* pos_out) {
  const int t = ranking_length(r, n);
  std::vector<int> order(n, -1);
  std::vector<T> logits(n);
  for (int j = 0; j < n - 1; ++j) {
    for (int k = 0; k < n; ++k) logits[k] = k <= n - 1 - j ? -theta[j] * T(k) : -std::numeric_limits<T>::infinity();
    const int v = sample_index(logits.data(), n, u[j]);
    int free = 0, slot = 0;
    for (int q = 0; q < n; ++q) {
      free += order[q] < 0;
      if (order[q] < 0 && free == v + 1) {
        slot = q;
        break;
      }
    }
    if (j < t) order[slot] = r[j];
  }
  std::vector<char> placed(n, 0);
  for (int q = 0; q < n; ++q)
    if (order[q] >= 0) placed[order[q]] = 1;
  std::vector<int> rest;
  for (int l = 0; l < n; ++l)
    if (!placed[l]) rest.push_back(l);
  std::stable_sort(rest.begin(), rest.end(), [&](int x, int y) { return u[n - 1 + x] < u[n - 1 + y]; });
  int next = 0;
  for (int q = 0; q < n; ++q)
    if (order[q] < 0) order[q] = rest[next++];
  for (int q = 0; q < n; ++q) pos_out[order[q]] = q;
}

// Stage 2: the sweep over the points in `order` (its first `visits`).
template <typename T>
bool sweep(const Shape<T>& s, const Chain<T>& ch, const int* x, const int32_t* visit_order, int visits, Key k_u,
           Key k_theta) {
  const int n = s.n, J = n - 1, C = s.C;
  std::vector<T> lpsi(C * J), logits(C), new_theta(J), new_lpsi(J), u(2 * n);
  std::vector<int32_t> new_pos(n);
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < J; ++j) lpsi[c * J + j] = log_psi(ch.theta[c * J + j], s.m(j));
  bool overflow = false;
  for (int t = 0; t < visits; ++t) {
    const int i = visit_order[t];
    const int* r = x + int64_t(i) * n;
    u[0] = unit<T>(k_u, uint32_t(i) * 2 * n);  // the seat's; the other 2n - 1 build a new cluster's sigma
    int len = 0;
    for (int j = 0; j < n; ++j) len += r[j] >= 0;
    const T lemma = s.log_factorial[n - len] - s.log_factorial[n];

    move_point(s, ch, ch.z[i], r, T(-1));
    int K = 0, first_empty = -1;
    for (int c = 0; c < C; ++c) {
      K += ch.cnt[c] > 0;
      if (ch.cnt[c] < T(0.5) && first_empty < 0) first_empty = c;
    }
    for (int c = 0; c < C; ++c)
      logits[c] = ch.cnt[c] < T(0.5) ? -std::numeric_limits<T>::infinity()
                                     : std::log(ch.cnt[c] - s.d) + log_gm(n, r, ch.pos + c * n, ch.theta + c * J,
                                                                          lpsi.data() + c * J);
    if (first_empty >= 0) logits[first_empty] = std::log(s.alpha + s.d * T(K)) + lemma;
    else overflow = true;
    const int k = sample_index(logits.data(), C, u[0]);
    if (ch.cnt[k] < T(0.5)) {
      // the new cluster's theta and sigma: the JAX step's draws for this visit (it draws them for every
      // visit, vectorised; here only for the visits that open a cluster, from the same keys and uniforms)
      for (int j = 0; j < J; ++j) {
        new_theta[j] = theta_exact(k_theta.child(uint32_t(t) * J + j), s.nu * s.r[j], s.nu, s.m(j));
        new_lpsi[j] = log_psi(new_theta[j], s.m(j));
      }
      for (int q = 1; q < 2 * n; ++q) u[q] = unit<T>(k_u, uint32_t(i) * 2 * n + q);
      insert_code(n, r, u.data() + 1, new_theta.data(), new_pos.data());
      std::copy(new_pos.begin(), new_pos.end(), ch.pos + k * n);
      std::copy(new_theta.begin(), new_theta.end(), ch.theta + k * J);
      std::copy(new_lpsi.begin(), new_lpsi.end(), lpsi.begin() + k * J);
    }
    move_point(s, ch, k, r, T(1));
    ch.z[i] = k;
  }
  return overflow;
}

// Product of the leading `rank - base` dimensions: the batch size.
int64_t leading(ffi::AnyBuffer::Dimensions dims, size_t base) {
  int64_t b = 1;
  for (size_t i = 0; i + base < dims.size(); ++i) b *= dims[i];
  return b;
}

// Chain b's slice of an operand with `base` dimensions per chain (shared when its batch is 1).
template <typename P, typename Buf>
const P* chain_slice(const Buf& buf, size_t base, int64_t B, int64_t b) {
  const auto dims = buf.dimensions();
  int64_t size = 1;
  for (size_t i = dims.size() - base; i < dims.size(); ++i) size *= dims[i];
  return buf.typed_data() + (leading(dims, base) == B && B > 1 ? b * size : 0);
}

template <ffi::DataType DT>
ffi::Error SliceStep(ffi::Buffer<DT> x, ffi::Buffer<ffi::S32> visit_order, ffi::Buffer<ffi::S32> visits,
                     ffi::Buffer<ffi::S32> z_in, ffi::Buffer<DT> n_in, ffi::Buffer<DT> R_in, ffi::Buffer<DT> Nj_in,
                     ffi::Buffer<ffi::S32> pos_in, ffi::Buffer<DT> theta_in, ffi::Buffer<DT> scalars,
                     ffi::Buffer<DT> r, ffi::Buffer<DT> log_factorial, ffi::Buffer<ffi::U32> keys,
                     ffi::ResultBuffer<ffi::S32> z_out, ffi::ResultBuffer<DT> n_out, ffi::ResultBuffer<DT> R_out,
                     ffi::ResultBuffer<DT> Nj_out, ffi::ResultBuffer<ffi::S32> pos_out,
                     ffi::ResultBuffer<DT> theta_out, ffi::ResultBuffer<ffi::PRED> overflow_out,
                     ffi::ResultBuffer<DT> rate_out, int64_t num_gibbs, int64_t num_slices, int64_t num_threads) {
  using T = ffi::NativeType<DT>;
  const auto xd = x.dimensions(), nd = n_out->dimensions();
  if (xd.size() < 2 || nd.size() < 1) return ffi::Error::InvalidArgument("native mallows-slice: bad operand ranks");
  const int N = int(xd[xd.size() - 2]), n = int(xd[xd.size() - 1]), C = int(nd[nd.size() - 1]);
  const int64_t B = leading(z_out->dimensions(), 1);
  if (n < 2 || num_gibbs < 1 || num_slices < 1)
    return ffi::Error::InvalidArgument("native mallows-slice: n_items < 2 or num_gibbs, num_slices < 1");
  const int J = n - 1;
  // the visited points' labels index the slots: one outside [0, C) would read and write past the statistics
  for (int64_t b = 0; b < B; ++b) {
    const int32_t *zb = chain_slice<int32_t>(z_in, 1, B, b), *ob = chain_slice<int32_t>(visit_order, 1, B, b);
    const int v = *chain_slice<int32_t>(visits, 0, B, b);
    if (v < 0 || v > N) return ffi::Error::InvalidArgument("native mallows-slice: visits outside [0, N]");
    for (int t = 0; t < v; ++t)
      if (ob[t] < 0 || ob[t] >= N || zb[ob[t]] < 0 || zb[ob[t]] >= C)
        return ffi::Error::InvalidArgument("native mallows-slice: a visited point outside [0, N) or its label "
                                           "outside [0, capacity)");
  }
  auto work = [&](int64_t b) {
    Chain<T> ch{z_out->typed_data() + b * N, n_out->typed_data() + b * C, R_out->typed_data() + b * int64_t(C) * J * n * n,
                Nj_out->typed_data() + b * C * J, pos_out->typed_data() + b * C * n, theta_out->typed_data() + b * C * J};
    std::memcpy(ch.z, chain_slice<int32_t>(z_in, 1, B, b), sizeof(int32_t) * N);
    std::memcpy(ch.cnt, chain_slice<T>(n_in, 1, B, b), sizeof(T) * C);
    std::memcpy(ch.R, chain_slice<T>(R_in, 4, B, b), sizeof(T) * C * J * n * n);
    std::memcpy(ch.Nj, chain_slice<T>(Nj_in, 2, B, b), sizeof(T) * C * J);
    std::memcpy(ch.pos, chain_slice<int32_t>(pos_in, 2, B, b), sizeof(int32_t) * C * n);
    std::memcpy(ch.theta, chain_slice<T>(theta_in, 2, B, b), sizeof(T) * C * J);
    const T* sc = chain_slice<T>(scalars, 1, B, b);  // alpha, discount, nu
    const Shape<T> s{N, n, C, int(num_gibbs), int(num_slices), sc[2], sc[1], sc[0], chain_slice<T>(r, 1, B, b),
                     chain_slice<T>(log_factorial, 1, B, b)};
    const uint32_t* kw = chain_slice<uint32_t>(keys, 2, B, b);  // k_par, k_u, k_theta
    const Key k_par{kw[0], kw[1]}, k_u{kw[2], kw[3]}, k_theta{kw[4], kw[5]};
    const T* xf = chain_slice<T>(x, 2, B, b);
    std::vector<int> xi(int64_t(N) * n);
    for (int64_t q = 0; q < int64_t(N) * n; ++q) xi[q] = int(xf[q]);
    T acc = 0;
    int occupied = 0;
    for (int c = 0; c < C; ++c) {
      if (!(ch.cnt[c] > T(0.5))) continue;
      acc += update_slot(s, ch, c, k_par.child(c));
      ++occupied;
    }
    rate_out->typed_data()[b] = acc / T(std::max(occupied, 1));
    overflow_out->typed_data()[b] =
        sweep(s, ch, xi.data(), chain_slice<int32_t>(visit_order, 1, B, b), *chain_slice<int32_t>(visits, 0, B, b),
              k_u, k_theta);
  };
  const int64_t threads = std::min<int64_t>(B, std::max<int64_t>(1, num_threads));
  if (threads <= 1) {
    for (int64_t b = 0; b < B; ++b) work(b);
  } else {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { for (int64_t b = t; b < B; b += threads) work(b); });
    for (auto& th : pool) th.join();
  }
  return ffi::Error::Success();
}

#define DPPPL_MALLOWS_SLICE_BINDING(DT)                                                             \
  ffi::Ffi::Bind()                                                                                  \
      .Arg<ffi::Buffer<DT>>()        /* x (N, n): the rankings, item indices, -1 past t */        \
      .Arg<ffi::Buffer<ffi::S32>>()  /* order (N,): the visiting order */                          \
      .Arg<ffi::Buffer<ffi::S32>>()  /* visits (): the points visited, order[:visits] */          \
      .Arg<ffi::Buffer<ffi::S32>>()  /* z (N,) */                                                  \
      .Arg<ffi::Buffer<DT>>()        /* n (C,) */                                                  \
      .Arg<ffi::Buffer<DT>>()        /* R (C, n-1, n, n) */                                        \
      .Arg<ffi::Buffer<DT>>()        /* N_j (C, n-1) */                                            \
      .Arg<ffi::Buffer<ffi::S32>>()  /* pos (C, n) */                                              \
      .Arg<ffi::Buffer<DT>>()        /* theta (C, n-1) */                                          \
      .Arg<ffi::Buffer<DT>>()        /* scalars (3,): alpha, discount, nu */                       \
      .Arg<ffi::Buffer<DT>>()        /* r (n-1,) */                                                \
      .Arg<ffi::Buffer<DT>>()        /* log k!, k = 0..n (n+1,) */                                 \
      .Arg<ffi::Buffer<ffi::U32>>()  /* keys (3, 2): k_par, k_u, k_theta */                        \
      .Ret<ffi::Buffer<ffi::S32>>()  /* z */                                                       \
      .Ret<ffi::Buffer<DT>>()        /* n */                                                       \
      .Ret<ffi::Buffer<DT>>()        /* R */                                                       \
      .Ret<ffi::Buffer<DT>>()        /* N_j */                                                     \
      .Ret<ffi::Buffer<ffi::S32>>()  /* pos */                                                     \
      .Ret<ffi::Buffer<DT>>()        /* theta */                                                   \
      .Ret<ffi::Buffer<ffi::PRED>>() /* overflow: a point found no empty slot */                  \
      .Ret<ffi::Buffer<DT>>()        /* sigma_accept () */                                         \
      .Attr<int64_t>("num_gibbs")                                                                   \
      .Attr<int64_t>("num_slices")                                                                  \
      .Attr<int64_t>("num_threads")

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplMallowsSliceF64, SliceStep<ffi::F64>, DPPPL_MALLOWS_SLICE_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplMallowsSliceF32, SliceStep<ffi::F32>, DPPPL_MALLOWS_SLICE_BINDING(ffi::F32));
