"""Where a kernel's first call spends its CPU, program by program (issue 35): in this process, with the
persistent compilation cache off, one `dpppl.sample` (5 + 5 iterations, 2 chains, seed 0) on
`bench_compile.py`'s data for the kernel's model file, with `jax_log_compiles` on. Every program JAX
traces and compiles is listed with its tracing and XLA compile wall seconds (JAX's own log lines) and
the process CPU seconds (`time.process_time`, XLA's threads included) at which its compile finished,
counted from the start of the call; the call's total CPU closes the list.

    nice -n 10 python benchmarks/bench_compile_programs.py mallows-slice --points 600
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time

os.environ["DPPPL_COMPILATION_CACHE"] = "off"  # every program is compiled by XLA here
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree's dpppl
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax  # noqa: E402
from bench_compile import data  # noqa: E402
from bench_kernel_compile import MODELS  # noqa: E402
from harness import load_average  # noqa: E402

_FINISHED = re.compile(r"Finished (tracing|XLA compilation of) (?:jit\()?([^\s)]+)\)? (?:for jit )?in ([\d.e-]+) sec")


class _Log(logging.Handler):
    """JAX's "Finished tracing ..." and "Finished XLA compilation of ..." lines, with the CPU clock."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.events = []

    def emit(self, record):
        found = _FINISHED.search(record.getMessage())
        if found:
            self.events.append((time.process_time(), found.group(1), found.group(2), float(found.group(3))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", choices=list(MODELS))
    parser.add_argument("--points", type=int, default=600)
    args = parser.parse_args(argv)
    import dpppl  # noqa: PLC0415

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), MODELS[args.kernel])
    x = data(MODELS[args.kernel], 0, args.points)
    log = _Log()
    logger = logging.getLogger("jax")
    logger.addHandler(log)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    jax.config.update("jax_log_compiles", True)
    load, cpu0 = load_average(), time.process_time()
    dpppl.sample(path, x, kernel=args.kernel, num_warmup=5, num_samples=5, num_chains=2, seed=0, progress_bar=False)
    total = time.process_time() - cpu0
    print(f"{args.kernel} on {MODELS[args.kernel]}, {args.points} points; load average {load} -> {load_average()}\n")
    print("| program | tracing wall s | XLA compile wall s | process CPU s at its end |\n|---|---|---|---|")
    traced = {}
    for cpu, kind, name, seconds in log.events:
        if cpu < cpu0:
            continue
        if kind == "tracing":
            traced[name] = seconds
        elif seconds >= 0.05:  # the eager one-operation programs are left out
            print(f"| {name} | {traced.pop(name, float('nan')):.2f} | {seconds:.2f} | {cpu - cpu0:.2f} |")
    print(f"\nthe call: {total:.2f} process CPU s")


if __name__ == "__main__":
    main()
