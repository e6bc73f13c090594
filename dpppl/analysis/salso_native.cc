// One placement pass of the SALSO search for the exact expected VI (dpppl/analysis/salso_search.py,
// `_visit` with the "vi" loss) as a native function called through XLA's FFI; the JAX loop
// there is the same pass and runs where this library cannot be built.
//
// Table (salso_search.py's `_VI`): counts[r, k] = |C_{s,l} ∩ c_k| for the row r = s K_draws + l of
// draw s's cluster l. Point i joining cluster k changes N E[VI] (up to a constant) by
//     cost_k = g(|c_k|) - 2 sum_s w_s g(counts[rows[i, s], k]),   g(m) = f(m + 1) - f(m),
// f(m) = m log m, read from the table g; a placement reads one row of K counts per draw and a
// move writes one entry per draw. (The JAX pass also keeps g(counts) as a table; here the
// counts alone halve the memory a placement reads, which bounds its speed.)
// The order of the points, the tie rule (stay put unless another cluster is better by more
// than `tol`; otherwise the first cluster of least cost) and the free slot that stands for a
// new cluster (the point's own if it fell empty, else the first empty one) are salso_search.py's.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kAhead = 8;  // rows fetched ahead of the one read

template <ffi::DataType T>
void copy_in(const ffi::Buffer<T>& in, ffi::ResultBuffer<T>& out) {
  if (in.typed_data() != out->typed_data()) {
    std::memcpy(out->typed_data(), in.typed_data(), in.size_bytes());
  }
}

template <ffi::DataType CT>
ffi::Error Visit(ffi::Buffer<ffi::S32> rows, ffi::Buffer<ffi::F64> w, ffi::Buffer<ffi::F64> g,
                 ffi::Buffer<ffi::S32> order, ffi::Buffer<ffi::S32> num, ffi::Buffer<ffi::F64> tol_buf,
                 ffi::Buffer<ffi::S32> label_in, ffi::Buffer<ffi::S32> size_in, ffi::Buffer<CT> counts_in,
                 ffi::Buffer<ffi::PRED> full_in, ffi::ResultBuffer<ffi::S32> label_out,
                 ffi::ResultBuffer<ffi::S32> size_out, ffi::ResultBuffer<CT> counts_out,
                 ffi::ResultBuffer<ffi::PRED> full_out, ffi::ResultBuffer<ffi::S32> moved_out) {
  copy_in(label_in, label_out);
  copy_in(size_in, size_out);
  copy_in(counts_in, counts_out);
  copy_in(full_in, full_out);
  const int64_t S = rows.dimensions()[1];
  const int64_t K = size_in.dimensions()[0];
  const int32_t* row_of = rows.typed_data();
  const double* weight = w.typed_data();
  const double* gain = g.typed_data();
  const int32_t* visit = order.typed_data();
  const int32_t m = num.typed_data()[0];
  const double tol = tol_buf.typed_data()[0];
  int32_t* label = label_out->typed_data();
  int32_t* size = size_out->typed_data();
  using C = ffi::NativeType<CT>;
  C* counts = counts_out->typed_data();
  bool* full = full_out->typed_data();
  std::vector<double> acc(K);
  int32_t moved = 0;

  auto move = [&](const int32_t* r, int32_t k, int32_t sign) {
    size[k] += sign;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t at = static_cast<int64_t>(r[s]) * K + k;
      counts[at] += sign;
    }
  };

  for (int32_t j = 0; j < m; ++j) {
    const int32_t i = visit[j];
    const int32_t* r = row_of + static_cast<int64_t>(i) * S;
    const int32_t old = label[i];
    if (old >= 0) move(r, old, -1);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t s = 0; s < S; ++s) {
      if (s + kAhead < S) {  // the rows are scattered over the table: fetch ahead
        const C* next = counts + static_cast<int64_t>(r[s + kAhead]) * K;
        for (int64_t k = 0; k < K; k += 64 / sizeof(C)) __builtin_prefetch(next + k);
      }
      const double ws = weight[s];
      if (ws == 0.0) continue;
      const C* row = counts + static_cast<int64_t>(r[s]) * K;
      for (int64_t k = 0; k < K; ++k) acc[k] += ws * gain[row[k]];
    }
    int64_t new_slot = -1;
    if (old >= 0 && size[old] == 0) {
      new_slot = old;
    } else {
      for (int64_t k = 0; k < K; ++k) {
        if (size[k] == 0) { new_slot = k; break; }
      }
    }
    if (new_slot < 0) *full = true;
    int64_t best = -1;
    double best_cost = 0.0, old_cost = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      if (size[k] == 0 && k != new_slot) continue;
      const double cost = gain[size[k]] - 2.0 * acc[k];
      if (k == old) old_cost = cost;
      if (best < 0 || cost < best_cost) { best = k; best_cost = cost; }
    }
    const int32_t k = (old >= 0 && old_cost <= best_cost + tol) ? old : static_cast<int32_t>(best);
    move(r, k, +1);
    label[i] = k;
    moved += (k != old);
  }
  moved_out->typed_data()[0] = moved;
  return ffi::Error::Success();
}

}  // namespace

#define DPPPL_SALSO_VISIT_BINDING(CT) \
  ffi::Ffi::Bind() \
      .Arg<ffi::Buffer<ffi::S32>>() \
      .Arg<ffi::Buffer<ffi::F64>>() \
      .Arg<ffi::Buffer<ffi::F64>>() \
      .Arg<ffi::Buffer<ffi::S32>>() \
      .Arg<ffi::Buffer<ffi::S32>>() \
      .Arg<ffi::Buffer<ffi::F64>>() \
      .Arg<ffi::Buffer<ffi::S32>>() \
      .Arg<ffi::Buffer<ffi::S32>>() \
      .Arg<ffi::Buffer<CT>>() \
      .Arg<ffi::Buffer<ffi::PRED>>() \
      .Ret<ffi::Buffer<ffi::S32>>() \
      .Ret<ffi::Buffer<ffi::S32>>() \
      .Ret<ffi::Buffer<CT>>() \
      .Ret<ffi::Buffer<ffi::PRED>>() \
      .Ret<ffi::Buffer<ffi::S32>>()

// operands: rows (N, S), w (S,), g (N + 2,), order (N,), m, tol, label (N,), size (K,),
// counts (R, K), full; results: label, size, counts, full, moved
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSalsoVisitS16, Visit<ffi::S16>, DPPPL_SALSO_VISIT_BINDING(ffi::S16));
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplSalsoVisitS32, Visit<ffi::S32>, DPPPL_SALSO_VISIT_BINDING(ffi::S32));
