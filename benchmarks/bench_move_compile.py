"""What the README job's compiled chunk is made of (issue 35): compile CPU per move and HLO per source line.

For each job (`galaxies`: `models/galaxies.dp` on its bundled data, m, tau and alpha random;
`faithful`: `models/gaussian_niw.dp` on Old Faithful, alpha random) and its default kernel
(`gibbs+splitmerge`), in this process with an empty in-memory cache and the persistent cache off:

- **chunk**: the sampling chunk program the runner compiles (`dpppl.run.runner._chunk_function`,
  2 chains, the run's chunk length and initial capacity), lowered and compiled with
  `jax.jit(...).lower(...).compile()`;
- **per move**: one vmapped step of each move of the kernel alone (the partition moves `gibbs`,
  `splitmerge`; the prior moves `alpha`, `hyperparameters`) and the recorded log joint `lp`,
  each its own program built the way the chunk builds it (`make(target)` inside the trace) and
  compiled with the chunk's XLA options (`dpppl.config.compiler_options()`);

each with the process CPU seconds of its XLA compile (`time.process_time()`, every thread of
this process: XLA's compiler threads count, the machine's other load does not) and of its
lowering, and the number of HLO instructions in the optimized program. With `--hlo`, the
optimized HLO of the chunk is broken down by the source line (`metadata={... source_file
source_line}`) each instruction came from: instructions, and fusions among them, per line of
dpppl's source, the top `--top` lines printed.

    nice -n 10 python benchmarks/bench_move_compile.py --jobs galaxies,faithful --hlo
    nice -n 10 python benchmarks/bench_move_compile.py --repeats 3 --out /tmp/moves.json

`--repeats` compiles each program that many times (the minimum CPU is reported; JAX's in-memory
compile cache is cleared between repeats).
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
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
from harness import load_average  # noqa: E402

JOBS = {"galaxies": ("models/galaxies.dp", None), "faithful": ("models/gaussian_niw.dp", "faithful")}
SPEC = "gibbs+splitmerge"
_TABLE = re.compile(r"^(\d+) (.*)$")


def setup(job: str):
    """The job's target as the runner compiles it (padded to its point class), the kernel's `make`,
    the host kernel, its key and two chains' initial states."""
    import dpppl  # noqa: PLC0415
    from dpppl.dsl.parser import bind_data  # noqa: PLC0415
    from dpppl.models.init import initial_states  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    path, data = JOBS[job]
    model = dpppl.load(os.path.join(ROOT, path))
    _, target = bind_data(model, data)
    program, (kern, key, make) = runner._program(SPEC, target, {})
    init_keys, chain_keys = runner._chain_keys(0, 2)
    states = initial_states(program, "sequential", init_keys, None)
    return program, make, kern, key, states, chain_keys


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


def parts_of(kernel, prefix=""):
    """(name, kernel) for every move of `kernel`: its parts, recursively, and `kernel` itself when it
    has none."""
    if not kernel.parts:
        return [(prefix + kernel.name, kernel)]
    return [item for part in kernel.parts for item in parts_of(part, prefix)]


def measure(job: str, repeats: int, hlo: bool, top: int) -> dict:
    from dpppl.core.compiled import compiler_options  # noqa: PLC0415
    from dpppl.run import runner  # noqa: PLC0415

    program, make, kern, key, states, chain_keys = setup(job)
    capacity = int(states.stats.n.shape[-1])
    length = runner.chunk_length(2, program.num_points)
    out = {"points": program.num_points, "capacity": capacity, "moves": {}}
    chunk = runner._chunk_function(make, kern, key, False, length, capacity)
    args = (states, chain_keys, np.int32(0), np.int32(1), program)
    lower, cpu, compiled = compile_cpu(chunk.jitted, *args, repeats=repeats)
    text = compiled.as_text()
    out["chunk"] = {"lower_cpu_s": lower, "compile_cpu_s": cpu, "instructions": len(hlo_instructions(text))}
    if DUMP is not None:
        out["hlo"] = {"chunk": breakdown("chunk", top)}

    names = [name for name, _ in parts_of(kern)]
    programs = {}
    keys = jax.random.split(jax.random.key(1), 2)
    for index, name in enumerate(names):
        def one(keys, states, target, index=index):
            move = parts_of(make(target))[index][1]
            return jax.vmap(lambda k, s: move.step(k, s, target.x))(keys, states)
        programs[name] = (one, (keys, states, program))

    def lp(states, target):
        return jax.vmap(make(target).log_joint)(states)
    programs["lp (recorded)"] = (lp, (states, program))
    for name, (fn, fn_args) in programs.items():
        fn.__name__ = "move_" + re.sub(r"\W+", "_", name).strip("_")  # the dumped module's name
        jitted = jax.jit(fn, compiler_options=compiler_options() or None)  # the chunk's options
        lower, cpu, compiled = compile_cpu(jitted, *fn_args, repeats=repeats)
        out["moves"][name] = {"lower_cpu_s": lower, "compile_cpu_s": cpu,
                              "instructions": len(hlo_instructions(compiled.as_text()))}
        if DUMP is not None:
            out["hlo"][name] = breakdown(fn.__name__, top)
    return out


def breakdown(module: str, top: int) -> dict:
    """The top `top` source lines and functions of the last dumped optimized module `jit_<module>`."""
    dumped = sorted(glob.glob(os.path.join(DUMP, f"*jit_{module}.cpu_after_optimizations.txt")),
                    key=os.path.getmtime)
    with open(dumped[-1]) as f:
        innermost, inclusive = by_source_line(f.read())
    return {"by_line": innermost.most_common(top), "by_function": inclusive.most_common(top)}


def render(results: dict) -> str:
    rows = []
    for job, r in results["jobs"].items():
        rows.append(f"\n### {job} ({r['points']} rows, capacity {r['capacity']})\n")
        rows.append("| program | lower CPU s | compile CPU s | HLO instructions |\n|---|---|---|---|")
        c = r["chunk"]
        rows.append(f"| chunk ({SPEC}) | {c['lower_cpu_s']:.2f} | {c['compile_cpu_s']:.2f} | {c['instructions']} |")
        for name, m in r["moves"].items():
            rows.append(f"| {name} alone | {m['lower_cpu_s']:.2f} | {m['compile_cpu_s']:.2f} | {m['instructions']} |")
        for program, b in r.get("hlo", {}).items():
            rows.append(f"\n| innermost dpppl source line ({program}) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {n} |" for w, n in b["by_line"]]
            rows.append(f"\n| dpppl function on the stack ({program}, inclusive) | HLO instructions |\n|---|---|")
            rows += [f"| {w} | {n} |" for w, n in b["by_function"]]
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="galaxies,faithful")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--hlo", action="store_true", help="break the chunk's HLO down by source line")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    args = parser.parse_args(argv)
    from dpppl import config  # noqa: PLC0415

    results = {"load_before": load_average(), "jobs": {}}
    with config.x64():
        for job in args.jobs.split(","):
            results["jobs"][job] = measure(job, args.repeats, args.hlo, args.top)
    results["load_after"] = load_average()
    text = render(results)
    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
