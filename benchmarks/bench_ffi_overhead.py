"""The cost of one XLA FFI custom call on CPU (issue 18, item 1: is a native sweep behind
`jax.ffi` cheap enough to call once per sweep?).

A trivial C++ handler (one add) is built and registered the way dpppl builds its native
sweep (`dpppl.core.native.load`), and called once per iteration of a jitted `lax.fori_loop`
of 100,000 iterations, beside the same loop doing the add in XLA. Reports microseconds per
iteration (best of 3) and the load average; writes `benchmarks/results/ffi_overhead.json`.

Usage::

    PYTHONPATH=. python benchmarks/bench_ffi_overhead.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

import dpppl  # noqa: F401  (x64, as dpppl runs)
from dpppl.core import native
from harness import load_average, write_json

SOURCE = r"""
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error AddOne(ffi::Buffer<ffi::F64> x, ffi::ResultBuffer<ffi::F64> y) {
  y->typed_data()[0] = x.typed_data()[0] + 1.0;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(DppplBenchAddOne, AddOne,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F64>>().Ret<ffi::Buffer<ffi::F64>>());
"""
ITERATIONS = 100_000


def main():
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "bench_ffi_add_one.cc"
        source.write_text(SOURCE)
        native.load(source, {"dpppl_bench_add_one": "DppplBenchAddOne"}, required=True)

    def add_one(v):
        return jax.ffi.ffi_call("dpppl_bench_add_one", jax.ShapeDtypeStruct(v.shape, v.dtype))(v)

    loops = {"ffi_call": jax.jit(lambda v: jax.lax.fori_loop(0, ITERATIONS, lambda i, w: add_one(w), v)),
             "xla_add": jax.jit(lambda v: jax.lax.fori_loop(0, ITERATIONS, lambda i, w: w + 1.0, v))}
    x = jnp.zeros((1,))
    out = {}
    for name, fn in loops.items():
        assert float(fn(x)[0]) == ITERATIONS
        best = float("inf")
        for _ in range(3):
            tic = time.perf_counter()
            jax.block_until_ready(fn(x))
            best = min(best, time.perf_counter() - tic)
        out[f"{name}_us_per_iteration"] = 1e6 * best / ITERATIONS
        print(f"{name:8s} {out[f'{name}_us_per_iteration']:.3f} us per iteration", flush=True)
    out["load_average"] = load_average()
    print(f"wrote {write_json('ffi_overhead', out)}")


if __name__ == "__main__":
    main()
