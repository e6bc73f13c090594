"""What a kernel's compiled programs are made of (issue 35): compile CPU per move and HLO per source line.

The one script for the parts of a compile; `benchmarks/bench_compile.py` measures whole first
calls (cold and warm cache, before and after, at several sizes with `--points`). Two kinds of job:

- `--jobs`: the README jobs with their default kernel (`gibbs+splitmerge`): `galaxies`
  (`models/galaxies.dp` on its bundled data, m, tau and alpha random) and `faithful`
  (`models/gaussian_niw.dp` on Old Faithful, alpha random);
- `--kernels K1,K2 --points N1,N2`: any kernel of `bench_compile.KERNELS` on the model file and
  the data (`bench_compile.data`, seed 0) that script gives it, at each number of points.

For each, in this process with an empty in-memory cache and the persistent cache off:

- **chunk**: the chunk program the runner compiles (`dpppl.run.runner._chunk_function`, 2 chains,
  the run's chunk length and initial capacity; one program for warmup and sampling), lowered and
  compiled with `jax.jit(...).lower(...).compile()`;
- **per move**: one vmapped step of each move of the kernel alone, and of its warmup step when it
  has one of its own (`subcluster`'s published step) (the partition moves, e.g.
  `gibbs`, `splitmerge`; the prior moves `alpha`, `hyperparameters`), on the chains' states with the
  move's own carried values (`Kernel.init`, as the runner starts them), and the recorded log joint
  `lp`, each its own program built the way the chunk builds it (`make(target)` inside the trace)
  and compiled with the chunk's XLA options (`dpppl.config.compiler_options()`);

each with the process CPU seconds of its XLA compile (`time.process_time()`, every thread of
this process: XLA's compiler threads count, the machine's other load does not) and of its
lowering, and the number of HLO instructions in the optimized program. With `--hlo`, the
optimized HLO of each program is broken down by the source line (`metadata={... source_file
source_line}`) each instruction came from: instructions per innermost line of dpppl's source and
per dpppl function anywhere on the stack, the top `--top` printed.

With `--programs`, instead: one first `dpppl.sample` call of `bench_compile.py`'s (5 + 5
iterations, 2 chains, seed 0) with `jax_log_compiles` on, and the process CPU seconds of each
program it traces, lowers and compiles.

    nice -n 10 python benchmarks/bench_move_compile.py --jobs galaxies,faithful --hlo
    nice -n 10 python benchmarks/bench_move_compile.py --repeats 3 --out /tmp/moves.json
    nice -n 10 python benchmarks/bench_move_compile.py --kernels subcluster --points 600,10000 --hlo
    nice -n 10 python benchmarks/bench_move_compile.py --kernels mallows-slice --programs

`--repeats` compiles each program that many times (the minimum CPU is reported; JAX's in-memory
compile cache is cleared between repeats).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import glob
import json
import logging
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("DPPPL_COMPILATION_CACHE", "off")  # no persistent cache: every compile is XLA's
DUMP = None
if "--hlo" in sys.argv:  # XLA reads its flags once, when the backend starts: set before JAX
    DUMP = tempfile.mkdtemp(prefix="dpppl-hlo-")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP}"
                               " --xla_dump_hlo_module_re=jit_(chunk|move_.*)").strip()
import jax  # noqa: E402

jax.config.update("jax_traceback_in_locations_limit", -1)  # every frame in the HLO's locations, not the last 10
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]  # this tree's dpppl, then harness
import bench_compile  # noqa: E402
from harness import load_average  # noqa: E402

JOBS = {"galaxies": ("models/galaxies.dp", None), "faithful": ("models/gaussian_niw.dp", "faithful")}
README_KERNEL = "gibbs+splitmerge"
_TABLE = re.compile(r"^(\d+) (.*)$")


def setup(spec: str, path: str, data):
    """Kernel `spec` on the model file `path` bound to `data`, as the runner compiles it: the target
    (padded to its point class), the kernel's `make`, the host kernel, its key, two chains' initial
    states with the kernel's carried values (`Kernel.init`) and their keys."""
    import dpppl  # noqa: PLC0415
    from dpppl.dsl.parser import bind_data  # noqa: PLC0415
    from dpppl.models.init import initial_states  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    _, target = bind_data(dpppl.load(os.path.join(ROOT, path)), data)
    program, (kern, key, make) = runner._program(spec, target, {})
    init_keys, chain_keys = runner._chain_keys(0, 2)
    states = initial_states(program, "sequential", init_keys, None)
    if kern.init is not None:
        states = jax.jit(lambda s, bound: jax.vmap(make(bound).init, in_axes=(0, None))(s, bound.x))(states, program)
    return target, program, make, kern, key, states, chain_keys


def compile_cpu(jitted, *args, repeats: int = 1):
    """(lower CPU s, min compile CPU s over `repeats`, the last compiled program)."""
    lower_cpu, best, compiled = None, None, None
    for _ in range(repeats):
        jax.clear_caches()
        t0 = time.process_time()
        lowered = jitted.lower(*args)
        t1 = time.process_time()
        compiled = lowered.compile()
        t2 = time.process_time()
        lower_cpu = t1 - t0 if lower_cpu is None else min(lower_cpu, t1 - t0)
        best = t2 - t1 if best is None else min(best, t2 - t1)
    return lower_cpu, best, compiled


def hlo_instructions(text: str) -> list[str]:
    """The instruction lines of an HLO module's text."""
    return [line for line in text.splitlines() if re.match(r"\s+(ROOT )?%?[\w.\-]+ = ", line)]


def _tables(text: str) -> tuple[dict, dict, dict, dict]:
    """The stack-frame tables at the head of a dumped HLO module: file names, function names, file
    locations (file id, function id, line) and stack frames (location id, parent frame id)."""
    tables, section = {"FileNames": {}, "FunctionNames": {}, "FileLocations": {}, "StackFrames": {}}, None
    for line in text.splitlines():
        if line.strip() in tables:
            section = line.strip()
            continue
        if line.startswith("%") or line.startswith("ENTRY"):
            break
        found = _TABLE.match(line)
        if section and found:
            ident, value = int(found.group(1)), found.group(2)
            if section in ("FileNames", "FunctionNames"):
                tables[section][ident] = value.strip('"')
            else:
                tables[section][ident] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", value)}
    return tables["FileNames"], tables["FunctionNames"], tables["FileLocations"], tables["StackFrames"]


def by_source_line(text: str) -> tuple[collections.Counter, collections.Counter]:
    """Instructions of the optimized HLO module `text` (an XLA dump, with its stack-frame tables) per
    innermost dpppl source line of the stack that made them (`file:line function`), and per dpppl
    function anywhere on that stack (inclusive: an instruction counts for every dpppl function it
    was made under)."""
    files, functions, locations, frames = _tables(text)

    def dpppl_frames(frame_id):
        out, seen = [], set()
        while frame_id and frame_id not in seen:
            seen.add(frame_id)
            frame = frames.get(frame_id)
            if frame is None:
                break
            loc = locations[frame["file_location_id"]]
            file = files[loc["file_name_id"]]
            cut = file.rfind("dpppl/")
            if cut >= 0 and "/benchmarks/" not in file:
                out.append((file[cut:], loc["line"], functions[loc["function_name_id"]]))
            frame_id = frame.get("parent_frame_id")
        return out

    innermost, inclusive = collections.Counter(), collections.Counter()
    for line in hlo_instructions(text):
        found = re.search(r"stack_frame_id=(\d+)", line)
        stack = dpppl_frames(int(found.group(1))) if found else []
        if not stack:
            innermost["(no dpppl frame)"] += 1
            continue
        file, number, function = stack[0]
        innermost[f"{file}:{number} {function}"] += 1
        for where in {f"{f} {fn}" for f, _, fn in stack}:
            inclusive[where] += 1
    return innermost, inclusive


def moves_of(kernel, extras):
    """(name, move, its own carried values) for every move of `kernel`: its parts, recursively (a
    hybrid that carries values holds each part's in `HybridExtras.parts`), and `kernel` itself when
    it has none."""
    if not kernel.parts:
        return [(kernel.name, kernel, extras)]
    own = getattr(extras, "parts", None)
    return [item for i, part in enumerate(kernel.parts)
            for item in moves_of(part, extras if own is None else own[i])]


def _compiled(jitted, args, repeats: int, hlo_module: str | None, top: int) -> dict:
    lower, cpu, compiled = compile_cpu(jitted, *args, repeats=repeats)
    out = {"lower_cpu_s": lower, "compile_cpu_s": cpu, "instructions": len(hlo_instructions(compiled.as_text()))}
    if hlo_module is not None:
        out["hlo"] = breakdown(hlo_module, top)
    return out


def measure(spec: str, path: str, data, repeats: int, top: int) -> dict:
    """The chunk programs, every move alone and the recorded `lp` of kernel `spec` on `path` and `data`."""
    from dpppl.core.compiled import compiler_options  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    target, program, make, kern, key, states, chain_keys = setup(spec, path, data)
    capacity = int(states.stats.n.shape[-1])
    length = runner.chunk_length(2, program.num_points)
    hlo = DUMP is not None
    out = {"kernel": spec, "points": int(target.num_points), "rows": int(program.num_points), "capacity": capacity,
           "note": kern.note, "programs": {}}
    chunk = runner._chunk_function(make, kern, key, length, capacity)
    out["programs"]["chunk"] = _compiled(chunk.jitted, (states, chain_keys, np.int32(0), np.int32(1), np.bool_(False),
                                                        program), repeats, "chunk" if hlo else None, top)

    keys = jax.random.split(jax.random.key(1), 2)
    programs = {}
    for index, (name, _, _) in enumerate(moves_of(kern, states.extras)):
        for phase in ("step", "warmup") if moves_of(kern, states.extras)[index][1].warmup_step else ("step",):
            def one(keys, states, target, index=index, phase=phase):
                _, move, extras = moves_of(make(target), states.extras)[index]
                return jax.vmap(lambda k, s: getattr(move, phase)(k, s, target.x))(keys,
                                                                                    states._replace(extras=extras))
            programs[f"{name} alone" + (" (warmup)" if phase == "warmup" else "")] = (one, (keys, states, program))

    def lp(states, target):
        return jax.vmap(make(target).log_joint)(states)
    programs["lp (recorded)"] = (lp, (states, program))
    for name, (fn, fn_args) in programs.items():
        fn.__name__ = "move_" + re.sub(r"\W+", "_", name).strip("_")  # the dumped module's name
        jitted = jax.jit(fn, compiler_options=compiler_options() or None)  # the chunk's options
        out["programs"][name] = _compiled(jitted, fn_args, repeats, fn.__name__ if hlo else None, top)
    return out


def breakdown(module: str, top: int) -> dict:
    """The top `top` source lines and functions of the last dumped optimized module `jit_<module>`."""
    dumped = sorted(glob.glob(os.path.join(DUMP, f"*jit_{module}.cpu_after_optimizations.txt")),
                    key=os.path.getmtime)
    with open(dumped[-1]) as f:
        innermost, inclusive = by_source_line(f.read())
    return {"by_line": innermost.most_common(top), "by_function": inclusive.most_common(top)}


class ProgramTimes(logging.Handler):
    """Per compiled program, from `jax_log_compiles`' "Finished ..." messages: the wall seconds JAX
    reports for its tracing, lowering to MLIR and XLA compile, and the process CPU seconds (every
    thread: XLA's compiler threads count) at which its compile finished. A message is matched to the
    latest program of its name still missing that phase, so programs compiled in background threads
    are counted right."""

    _FINISHED = re.compile(r"Finished (tracing|jaxpr to MLIR module conversion|XLA compilation of) "
                           r"(?:jit\()?(.+?)\)?(?: for jit)? in ([\d.e+-]+) sec")
    _PHASES = {"tracing": "tracing", "jaxpr to MLIR module conversion": "lower", "XLA compilation of": "XLA"}

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.rows, self.start = [], time.process_time()

    def emit(self, record):
        found = self._FINISHED.search(record.getMessage())
        if not found:
            return
        phase, name, seconds = self._PHASES[found.group(1)], found.group(2), float(found.group(3))
        if phase == "tracing":
            self.rows.append({"program": name, "tracing": seconds, "lower": None, "XLA": None, "cpu_at_end": None})
            return
        for row in reversed(self.rows):
            if row["program"] == name and row[phase] is None:
                row[phase] = seconds
                if phase == "XLA":
                    row["cpu_at_end"] = time.process_time() - self.start
                return


@contextlib.contextmanager
def logged_programs():
    """`ProgramTimes` on JAX's logger, with `jax_log_compiles` on, while in use: the programs traced,
    lowered and compiled inside the `with` (its CPU clock started when it is entered)."""
    handler = ProgramTimes()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    jax.config.update("jax_log_compiles", True)
    handler.start = time.process_time()
    try:
        yield handler
    finally:
        jax.config.update("jax_log_compiles", False)
        logger.removeHandler(handler)


def first_call_programs(spec: str, path: str, data) -> dict:
    """The first `dpppl.sample` call of `benchmarks/bench_compile.py` (5 + 5 iterations, 2 chains,
    seed 0) in this process: the CPU seconds of each program it traces, lowers and compiles, and of
    the call."""
    import dpppl  # noqa: PLC0415

    with logged_programs() as handler:
        dpppl.sample(os.path.join(ROOT, path), data, kernel=spec, num_warmup=5, num_samples=5, num_chains=2, seed=0,
                     progress_bar=False)
    return {"kernel": spec, "call_cpu_s": time.process_time() - handler.start, "programs": handler.rows}


def render(job: str, r: dict) -> str:
    """One job's tables: its programs, then (with `--hlo`) each program's HLO by source line."""
    if "call_cpu_s" in r:
        def cell(value):
            return "-" if value is None else f"{value:.2f}"
        rows = [f"\n### {job}: the first call's programs (call: {r['call_cpu_s']:.2f} CPU s)\n",
                "| program | tracing wall s | lowering wall s | XLA compile wall s | CPU s at compile end |",
                "|---|---|---|---|---|"]
        rows += [f"| {p['program']} | {cell(p['tracing'])} | {cell(p['lower'])} | {cell(p['XLA'])} | "
                 f"{cell(p['cpu_at_end'])} |" for p in r["programs"]]
        return "\n".join(rows)
    rows = [f"\n### {job}: {r['kernel']}, {r['points']} points ({r['rows']} rows, capacity {r['capacity']})\n"]
    if r.get("note"):
        rows.append(f"{r['note']}\n")
    rows.append("| program | lower CPU s | compile CPU s | HLO instructions |\n|---|---|---|---|")
    rows += [f"| {name} | {p['lower_cpu_s']:.2f} | {p['compile_cpu_s']:.2f} | {p['instructions']} |"
             for name, p in r["programs"].items()]
    for name, p in r["programs"].items():
        if "hlo" in p:
            rows.append(f"\n| innermost dpppl source line ({name}) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {n} |" for w, n in p["hlo"]["by_line"]]
            rows.append(f"\n| dpppl function on the stack ({name}, inclusive) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {n} |" for w, n in p["hlo"]["by_function"]]
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", help=f"comma-separated README jobs of {README_KERNEL}: {', '.join(JOBS)} "
                                       "(default: both, unless --kernels is given)")
    parser.add_argument("--kernels", help=f"comma-separated kernels of {', '.join(bench_compile.KERNELS)}, each "
                                          "on bench_compile.py's model file and data")
    parser.add_argument("--points", default="600", help="numbers of points for --kernels (default: %(default)s)")
    parser.add_argument("--programs", action="store_true",
                        help="instead: the CPU of each program of a first dpppl.sample call")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--hlo", action="store_true", help="break each program's HLO down by source line")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    args = parser.parse_args(argv)
    jobs = {}
    for job in (args.jobs or ("" if args.kernels else ",".join(JOBS))).split(","):
        if job:
            if job not in JOBS:
                parser.error(f"unknown job {job!r}; choose from {', '.join(JOBS)}")
            jobs[job] = (README_KERNEL, *JOBS[job])
    for spec in (args.kernels or "").split(","):
        if spec:
            if spec not in bench_compile.KERNELS:
                parser.error(f"unknown kernel {spec!r}; choose from {', '.join(bench_compile.KERNELS)}")
            path = bench_compile.KERNELS[spec]
            for n in map(int, args.points.split(",")):
                jobs[f"{spec} N={n}"] = (spec, path, bench_compile.data(path, 0, n))
    from dpppl import config  # noqa: PLC0415

    results = {"load_before": load_average(), "jobs": {}}
    with config.x64():  # as `dpppl.sample` runs
        for job, (spec, path, data) in jobs.items():
            results["jobs"][job] = (first_call_programs(spec, path, data) if args.programs else
                                    measure(spec, path, data, args.repeats, args.top))
            print(render(job, results["jobs"][job]), flush=True)
    results["load_after"] = load_average()
    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
