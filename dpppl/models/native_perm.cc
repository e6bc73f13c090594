// The permutation move's dynamic program and backward draw of the segments (PermSegments,
// dpppl/kernels/perm/sampler.py), a library of its own (built on the move's first native call), with
// the families' mathematics and the FFI helpers of native_seating.h; dpppl/models/native_seating.py
// loads and calls it. Batching and threads as in native_seating.cc.

#include "native_seating.h"

namespace {


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

XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplPermF64, PermSegments<ffi::F64>, DPPPL_PERM_BINDING(ffi::F64));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplPermF32, PermSegments<ffi::F32>, DPPPL_PERM_BINDING(ffi::F32));
