"""The `dpppl` command line.

    dpppl sample MODEL [--data FILE|NAME] [--kernel auto] [--warmup 500] [--samples 1000]
                 [--chains 4] [--seed 0] [--init sequential] [--option NAME=VALUE ...] --out run.nc
                 [--checkpoint run.ckpt [--checkpoint-every 60]]
    dpppl resume run.ckpt [--samples N] --out run.nc    # continue a run saved with --checkpoint
    dpppl summary run.nc
    dpppl plot run.nc --kind trace|autocorr --out fig.png [--var num_clusters ...]
    dpppl plot run.nc --kind coclustering|clusters|k|lp --out fig.png [--estimate vi|dahl|best]
                 [--compare other.nc ...]    # lp: log joint against iteration, one line per chain
    dpppl plot run.nc --kind ppc --out ppc.png   # replicated data against the data (model read from the run)
    dpppl search MODEL [--data FILE|NAME] [--heuristic inadmissible] [--beam 100] [--order marginal]
                 [--out labels.csv]   # MAP clustering by search (Daume 2007)
    dpppl kernels            # registered kernels, exact or approximate
    dpppl datasets           # bundled and synthetic data sets

`--data` may be left out when the model file names its data
(`data x : real[N] = dataset("galaxies")`); given, it wins. A model file's `file("...")` is
read only inside the model file's directory tree; `--allow-path DIR` (repeatable) allows more.

Errors in the model, the data or the options are reported in one line (exit status 2)
before anything is sampled. Ctrl-C at any moment ends the command with one line and exit
status 130; an interrupted `sample` or `resume` first writes the draws it kept to `--out`,
and says how to continue when the run has a checkpoint. The draws are written before the
summary is printed; a Ctrl-C after the last iteration or during the write is held back until
`--out` is whole (`dpppl.run.interrupts`), and an `--out` that cannot be written at the end
sends the run to a fallback file, named in one line (exit status 1).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import itertools
import os
import shlex
import signal
import sys
import threading
import warnings

import jax
import numpy as np

import dpppl
from dpppl.config import x64
from dpppl.datasets.bundled import available as available_datasets
from dpppl.datasets.bundled import requirements as dataset_requirements
from dpppl.diagnostics.arviz_compat import arviz, group, has_group, partition_group
from dpppl.diagnostics.convergence import INTERVAL, explain, hdi, summary_table
from dpppl.diagnostics.summaries import LABEL_INVARIANT
from dpppl.dsl.parser import missing_data
from dpppl.errors import ArgumentError, DataError, DPPPLError
from dpppl.kernels import available as available_kernels
from dpppl.kernels import entry
from dpppl.run.checkpoint import DEFAULT_EVERY, Interrupted, check_output_path, write_atomically
from dpppl.run.distributed import initialize
from dpppl.run.interrupts import Completed, held
from dpppl.run.output import run_groups_only

SUMMARY_RANKS = 4  # cluster_sizes shown by `dpppl summary`: the largest few clusters (the largest is largest_cluster)
DEFAULT_CHAINS = 4  # `dpppl sample --chains`: R-hat needs two or more; docs/cli.md gives the timings
RHAT_LIMIT = 1.01  # `dpppl summary` names the quantities whose R-hat is above it
REDELIVERY_SECONDS = 0.05  # a Ctrl-C Python dropped is sent again after this long


def _option(text: str):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--option expects NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        pass  # a bare string such as uniform
    return name.strip(), value


class _Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" for a misspelt command or option (Python 3.11's
    argparse has no `suggest_on_error`)."""

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        super().error(message + "".join(self._hints(getattr(self, "_given", []))))

    def _hints(self, given: list) -> list:
        commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
        positional = [g for g in given if not g.startswith("-")]
        if commands and positional:  # the top level: the command, then its own options
            command = positional[0]
            if command in commands:
                rest = given[given.index(command) + 1:]
                return commands[command]._hints(rest)
            close = difflib.get_close_matches(command, list(commands), n=1)
            return [f" (did you mean {close[0]!r}?)"] if close else []
        options = [o for a in self._actions for o in a.option_strings]
        hints = []
        for token in given:
            name = token.split("=", 1)[0]
            if not name.startswith("--") or any(o.startswith(name) for o in options):
                continue  # a value, or an option (argparse takes unique prefixes)
            close = difflib.get_close_matches(name, options, n=1)
            if close:
                hints.append(f" ({name}: did you mean {close[0]}?)")
        return hints


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dpppl", description="Dirichlet-process mixture models on NumPyro/JAX")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sample", help="sample a model's posterior and write InferenceData (netCDF)")
    s.add_argument("model", help="model file (.dp)")
    _data_option(s)
    s.add_argument("--kernel", default="auto", help="kernel or hybrid, e.g. gibbs, gibbs+splitmerge, nuts; "
                   "default auto: chosen by the model and the number of points (the summary says which and why)")
    s.add_argument("--warmup", type=int, default=500, help="warmup iterations (default 500)")
    s.add_argument("--samples", type=int, default=1000, help="kept iterations (default 1000)")
    s.add_argument("--chains", type=int, default=DEFAULT_CHAINS,
                   help=f"independent chains, run side by side (default {DEFAULT_CHAINS}; R-hat needs 2 or more)")
    s.add_argument("--thinning", type=int, default=1,
                   help="keep every n-th of the --samples iterations (default 1: all; "
                   "--samples 1000 --thinning 5 keeps 200 draws)")
    s.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same draws (default 0)")
    s.add_argument("--init", default="sequential", help="sequential | single | prior | search")
    s.add_argument("--truncation", type=int, default=20, help="sticks for --kernel nuts (default 20)")
    s.add_argument("--option", type=_option, action="append", default=[], metavar="NAME=VALUE",
                   help="a kernel option, repeatable")
    s.add_argument("--out", default=None, help="netCDF file to write (default: print a summary only)")
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    s.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="save the run in this file (at the end of warmup, at the end, on Ctrl-C and every "
                   "--checkpoint-every seconds) to continue it with `dpppl resume PATH`; not with --kernel nuts")
    _checkpoint_every(s)
    _distributed(s, "reads its own rows and writes its own run (a '{process}' in --data and --out is this "
                 "process's index)")

    r = sub.add_parser("resume", help="continue a run saved with `dpppl sample --checkpoint`: the draws of the "
                       "run that was not stopped")
    r.add_argument("checkpoint", help="checkpoint file written by `dpppl sample --checkpoint`")
    r.add_argument("--samples", type=int, default=None,
                   help="kept iterations (default: the run's own); more extends the run")
    r.add_argument("--out", default=None, help="netCDF file to write (default: print a summary only)")
    r.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    _checkpoint_every(r)
    _distributed(r, "reads the run's file and its own part of the checkpoint and writes its own run (a "
                 "'{process}' in --out is this process's index); launched as the run was, on as many processes")

    m = sub.add_parser("summary", help="summarise a run: label-invariant statistics, ESS, R-hat")
    m.add_argument("run", help="netCDF file written by `dpppl sample`")

    pl = sub.add_parser("plot", help="plots of a run: traces, co-clustering, clusters, K, log joint")
    pl.add_argument("run", help="netCDF file written by `dpppl sample`")
    pl.add_argument("--kind", choices=("trace", "autocorr", "coclustering", "clusters", "k", "lp", "ppc"),
                    default="trace", help="trace/autocorr of label-invariant variables; co-clustering "
                    "heatmap; data coloured by clusters; histogram of K; log joint per iteration; posterior "
                    "predictive check (replicated data against the data, one panel per dimension)")
    pl.add_argument("--estimate", default="vi", choices=("vi", "dahl", "best"),
                    help="point estimate ordering/colouring coclustering and clusters (default vi)")
    pl.add_argument("--compare", action="append", default=[], metavar="RUN",
                    help="with --kind lp: further runs (e.g. other kernels) drawn beside the first")
    pl.add_argument("--var", action="append", default=None, help="variable(s) to plot")
    pl.add_argument("--out", required=True, help="image file (png, pdf, svg)")

    se = sub.add_parser("search", help="MAP clustering by A*/beam search (Daume 2007)")
    se.add_argument("model", help="model file (.dp)")
    _data_option(se)
    se.add_argument("--heuristic", default="inadmissible", choices=("inadmissible", "admissible", "trivial"),
                    help="score of the unclustered points: inadmissible (fast), admissible (a bound; "
                    "small data) or trivial (default inadmissible)")
    se.add_argument("--beam", default="100", help="queue size, or 'none' for an unbounded queue (default 100)")
    se.add_argument("--order", default="marginal", choices=("marginal", "descending", "given", "random"),
                    help="order the points are added in (default marginal: increasing marginal likelihood)")
    se.add_argument("--seed", type=int, default=0, help="seed of --order random")
    se.add_argument("--out", default=None, help="CSV file to write the labels to, one per line")

    sub.add_parser("kernels", help="list kernels")
    sub.add_parser("datasets", help="list data sets loadable by name")
    return p


def _data_option(parser) -> None:
    parser.add_argument("--data", default=None, help="CSV/NPY/NPZ file, or a data set name (see `dpppl datasets`); "
                        "default: the data the model file names (data x : real[N] = dataset(\"galaxies\"))")
    parser.add_argument("--allow-path", action="append", default=None, metavar="DIR",
                        help="a directory outside the model file's own directory tree that its file(\"...\") "
                        "data may be read from, repeatable (default: only the model file's directory tree)")


def _data(args, model):
    """`--data`, or None when the model file names its data; DataError when neither gives data."""
    if args.data is None and model.data.source is None:
        raise DataError(missing_data(model, how="give --data FILE|NAME"))
    return args.data


def _checkpoint_every(parser) -> None:
    parser.add_argument("--checkpoint-every", type=float, default=DEFAULT_EVERY, metavar="SECONDS",
                        help=f"seconds between two checkpoints (default {DEFAULT_EVERY:g})")


def summary_text(idata) -> str:
    """A short summary of a run: model, kernel, draws, and label-invariant statistics.

    One table: the label-invariant summaries, the sizes of the next few clusters after the
    largest (`cluster_sizes[1]`, ...; the largest is `largest_cluster`) and `lp`, with R-hat to
    three decimals (1.014 is not 1.0) and ESS as whole draws, then a line per column saying what
    it is. Every interval holds `INTERVAL` (90%) of the draws. R-hat is shown for two or more
    chains; a quantity equal in every draw has no ESS or R-hat, shown as `-` and said."""
    post = group(idata, "posterior")
    part = partition_group(idata)
    attrs = dict(post.attrs)
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    exact = attrs.get("exact")
    lines = [f"model:  {attrs.get('model', '?')}",
             f"kernel: {attrs.get('kernel', '?')} ({'exact' if exact else 'approximate'}), "
             f"{chains} chain(s) x {draws} draws, {part.sizes.get('point', '?')} points"]
    if attrs.get("kernel_reason"):
        lines.append(f"        chosen by kernel={attrs.get('kernel_requested')}: {attrs['kernel_reason']}")
    if attrs.get("interrupted"):
        lines.append("note:   the run was interrupted; these are the draws it kept")
    lines += _headline(post)
    shown = post[[v for v in LABEL_INVARIANT if v in post] + _other_scalars(post)]
    if "cluster_sizes" in part and part.sizes.get("cluster", 0) > 1:
        shown = shown.assign(cluster_sizes=part["cluster_sizes"].isel(cluster=slice(1, SUMMARY_RANKS)))
    shown = shown.assign(lp=post["lp"] if "lp" in post else group(idata, "sample_stats")["lp"])
    table = summary_table(shown.astype(float))
    if chains < 2:
        table = table.drop(columns="r_hat")
    lines += ["", _diagnostics_table(table), ""]
    lines += explain()[:len(explain()) - (chains < 2)]
    if "cluster_sizes" in shown:
        lines.append("cluster_sizes[r]: the size of the (r+1)-th largest cluster ([0], the largest: largest_cluster)")
    lines.append("lp: the log joint of each draw (docs/inference-data.md)")
    if chains < 2:
        lines.append("r_hat: not shown for one chain (it compares chains): run 2 or more (--chains, default "
                     f"{DEFAULT_CHAINS})")
    lines += _undefined(table)
    lines.append("")
    high = [str(name) for name, value in table["r_hat"].items() if value > RHAT_LIMIT] if "r_hat" in table else []
    if high:
        lines.append(f"R-hat above {RHAT_LIMIT}: {', '.join(high)}: the chains disagree; run longer or more chains")
    k = np.asarray(post["num_clusters"]).ravel()
    values, counts = np.unique(k, return_counts=True)
    order = np.argsort(-counts)[:8]
    lines.append("posterior of the number of clusters: " + ", ".join(
        f"P(K={values[i]})={counts[i] / k.size:.3f}" for i in sorted(order, key=lambda i: values[i])))
    return "\n".join(lines)


def _undefined(table) -> list[str]:
    """The lines that say why a cell of the summary table is `-` (not a number): a quantity equal in
    every draw has no between- or within-chain variance to compare (R-hat), and fewer than 4 draws
    per chain give no diagnostics at all (ArviZ's minimum)."""
    constant = [str(name) for name, sd in table["sd"].items() if sd == 0]
    other = [str(name) for name, row in table.iterrows()
             if str(name) not in constant and not np.isfinite(row.to_numpy(dtype=float)).all()]
    lines = []
    if constant:
        lines.append(f"-: {', '.join(constant)} took one value in every draw: no variance for R-hat to compare")
    if other:
        lines.append(f"-: {', '.join(other)}: too few draws per chain for ESS and R-hat (4 at least)")
    return lines


def _other_scalars(post) -> list[str]:
    """The posterior's other scalars per draw beside `LABEL_INVARIANT` and `lp`: the random
    hyperparameters of the base measure (`m`, `itau`, ...), recorded under their names."""
    return [str(v) for v in post.data_vars
            if v not in LABEL_INVARIANT and v != "lp" and post[v].dims == ("chain", "draw")]


def _headline(post) -> list[str]:
    """The number of clusters K, the concentration alpha and each random hyperparameter: posterior
    mean and the narrowest interval holding `INTERVAL` of the draws, the table's HDI (alpha only
    when it was sampled)."""
    lines = []
    rows = (("num_clusters", "K:      ", ".0f"), ("alpha", "alpha:  ", ".3g"),
            *((name, f"{name + ':':<8}", ".3g") for name in _other_scalars(post)))
    for name, label, fmt in rows:
        if name in post:
            draws = np.asarray(post[name], dtype=float).ravel()
            a, b = hdi(draws, INTERVAL)
            lines.append(f"{label}posterior mean {draws.mean():.3g}, {INTERVAL:.0%} interval "
                         f"[{a:{fmt}}, {b:{fmt}}]")
    return lines


def _diagnostics_table(table) -> str:
    """The summary table (`dpppl.diagnostics.convergence`, ArviZ's columns) as text: estimates to
    3 decimals, ESS as whole draws, R-hat to 3 decimals (so that 1.014, above the 1.01 limit, does
    not print as 1.01 or 1.0)."""
    def fmt(column, value):
        if not np.isfinite(value):
            return "-"  # said in a line under the table (`_undefined`)
        if column.startswith("ess"):
            return f"{value:.0f}"
        return f"{value:.3f}"

    return table.apply(lambda col: col.map(lambda v: fmt(str(col.name), float(v)))).to_string()


def main(argv=None) -> int:
    args, hook = None, sys.unraisablehook
    sys.unraisablehook = functools.partial(_redeliver_interrupt, hook)
    try:
        args = _parser().parse_args(argv)
        with x64():  # dpppl's precision for the whole command (docs/configuration.md)
            return _run(args)
    except (DPPPLError, OSError, ValueError) as e:
        print(f"dpppl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        resumable = isinstance(e, Interrupted) and e.checkpoint is not None
        _exit_interrupted(f"dpppl: interrupted after {e.iteration} iterations, before any draw was kept; the run is "
                          f"saved in {e.checkpoint}: continue it with {_resume_command(e.checkpoint, args.out)}"
                          if resumable else "dpppl: interrupted")
    finally:
        sys.unraisablehook = hook


def _redeliver_interrupt(hook, unraisable) -> None:
    """`sys.unraisablehook` while the command runs: a Ctrl-C whose KeyboardInterrupt was raised
    where Python drops exceptions (JAX's garbage-collector callback, a `__del__`) is sent again,
    to stop the command, instead of being printed as "Exception ignored" and lost. A timer
    thread sends it to the main thread a moment later, once out of the callback (sent at once,
    it would be raised here, in the hook, and dropped again)."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        again = threading.Timer(REDELIVERY_SECONDS, signal.pthread_kill,
                                args=(threading.main_thread().ident, signal.SIGINT))
        again.daemon = True
        again.start()
    else:
        hook(unraisable)


def _exit_interrupted(message: str):
    """Print `message` and end the process with status 130 (128 + SIGINT) at once. Python's
    own teardown is skipped: after a Ctrl-C during the first XLA compilation of a run it
    crashed with SIGSEGV (7 of 8 `dpppl sample` runs stopped 5-7 s after they started), with no
    Python frame left: XLA's threads outlive the interpreter."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while exiting
    print(message, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _resume_command(checkpoint: str, out: str | None) -> str:
    return f"`dpppl resume {shlex.quote(checkpoint)} --out {shlex.quote(out or 'run.nc')}`"


def read_run(path: str):
    """The InferenceData of a netCDF file written by `dpppl sample --out`; ArgumentError for a
    missing file, a directory, a file that is not netCDF or a netCDF file with no posterior."""
    if os.path.isdir(path):
        raise ArgumentError(f"{path}: is a directory, not a run file (a netCDF file written by "
                            "`dpppl sample --out`)")
    if not os.path.exists(path):
        raise ArgumentError(f"{path}: no such run file")
    try:
        idata = arviz().from_netcdf(path)
    except (OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ArgumentError(f"{path}: not a netCDF file written by `dpppl sample --out` ({reason})") from None
    if not has_group(idata, "posterior"):
        raise ArgumentError(f"{path}: a netCDF file with no posterior group, not a run written by "
                            "`dpppl sample --out`")
    return idata


def _report(idata, late: bool, args) -> int:
    """Write a run to `--out`, then print its summary. Nothing that can be interrupted or fail
    comes before the write: a Ctrl-C during it is held back until the file is whole, and an
    `--out` that cannot be written sends the run to a fallback file (`_fallback`, exit status 1).
    An interrupted run (Ctrl-C while sampling, or `late`: after the last iteration, during the
    write or the summary) then ends the process (status 130) with one line saying where its
    draws are and how to continue it."""
    written, failure = None, None
    if args.out:
        with held() as caught:
            written, failure = _write(idata, args)
        late = late or bool(caught)
    if not late:
        try:
            print(summary_text(idata))
            if written is not None and written == args.out:  # not "wrote None" for a run with no --out
                print(f"\nwrote {args.out}")
        except KeyboardInterrupt:
            late = True
    if failure:
        print(f"dpppl: error: {failure}", file=sys.stderr)
    partial = bool(group(idata, "posterior").attrs.get("interrupted"))
    if not (partial or late):
        return 1 if failure else 0
    _exit_interrupted(_interrupted_line(idata, args, written, partial))


def _write(idata, args) -> tuple[str | None, str | None]:
    """Write the run to `--out`, or to a fallback file when that fails: (the file written or
    None, what went wrong or None)."""
    try:
        write_atomically(args.out, idata.to_netcdf)
        return args.out, None
    except (OSError, ValueError) as e:
        cannot = f"cannot write --out {args.out} ({_reason(e)})"
    fallback = _fallback(args)
    try:
        write_atomically(fallback, idata.to_netcdf)
    except (OSError, ValueError) as e:
        os.remove(fallback)
        saved = (f"; the run is saved in {args.checkpoint}: write it with {_resume_command(args.checkpoint, None)}"
                 if args.checkpoint else ": the draws are lost")
        return None, f"{cannot}, nor the fallback file {fallback} ({_reason(e)}){saved}"
    return fallback, f"{cannot}; the run is written to {fallback} instead"


def _fallback(args) -> str:
    """A new file for a run whose `--out` could not be written, reserved (created empty) so
    that nothing is overwritten: `--out`'s name beside the checkpoint when the run has one,
    else in the working directory, numbered (`run-1.nc`, ...) past the names taken."""
    folder = os.path.dirname(os.path.abspath(args.checkpoint)) if args.checkpoint else os.getcwd()
    stem, suffix = os.path.splitext(os.path.basename(args.out) or "run.nc")
    for i in itertools.count():
        path = os.path.join(folder, f"{stem}-{i}{suffix}" if i else f"{stem}{suffix}")
        if path == os.path.abspath(args.out):
            continue
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            continue


def _reason(error: Exception) -> str:
    return (str(error).splitlines() or [""])[0] or type(error).__name__


def _interrupted_line(idata, args, written: str | None, partial: bool) -> str:
    """The line an interrupted command ends with: where the run's draws are, and how to
    continue (a run stopped while sampling) or write (a finished run not written) it."""
    if not partial:
        if written:
            return f"dpppl: interrupted after the last iteration; the run is complete in {written}"
        if args.checkpoint:
            return (f"dpppl: interrupted after the last iteration; the run is saved in {args.checkpoint}: "
                    f"write it with {_resume_command(args.checkpoint, args.out)}")
        return "dpppl: interrupted after the last iteration" + ("" if args.out else " (no --out: nothing written)")
    draws = group(idata, "posterior").sizes["draw"]
    where = f"; the {draws} draws kept per chain are in {written}" if written else ""
    how = (f"; the run is saved in {args.checkpoint}: continue it with {_resume_command(args.checkpoint, args.out)}"
           if args.checkpoint else "; give --checkpoint PATH to be able to continue an interrupted run")
    return f"dpppl: interrupted{where}{how}"


def _distributed(parser, what: str) -> None:
    """The `--distributed` option of `parser` (`dpppl sample`, `dpppl resume`); `what` says what each
    process does."""
    parser.add_argument("--distributed", nargs="?", const="detect", default=None, metavar="ADDRESS:PORT,NUM,ID",
                        help="one of several processes of a jax.distributed run (docs/distributed.md): the cluster "
                        "detected (SLURM, Open MPI, ...) or given as coordinator,processes,this process's id; each "
                        f"process {what}")


def _join(args) -> None:
    """`dpppl sample --distributed`, `dpppl resume --distributed`: join the run's processes; this
    process's rows (`--data`, sample only) and output file."""
    initialize(None if args.distributed == "detect" else args.distributed)
    for name in ("data", "out"):
        if getattr(args, name, None):
            setattr(args, name, getattr(args, name).replace("{process}", str(jax.process_index())))


def _sampled(run):
    """`run()` (`dpppl.sample` or `dpppl.resume`), and whether a Ctrl-C landed after its last
    iteration (`Completed`: the run is whole, and written before the command stops)."""
    try:
        return run(), False
    except Completed as e:
        return e.result, True


def _run(args) -> int:
    if args.command == "kernels":
        print(f"{'auto':<14} {'exact      '}  the default: chosen by the model and the number of points "
              "(dpppl.kernels.auto); exact unless no exact kernel applies and it falls back to nuts")
        for name in available_kernels():
            e = entry(name)
            print(f"{name:<14} {'exact      ' if e.exact else 'approximate'}  {e.description}")
        return 0
    if args.command == "datasets":
        described = available_datasets()
        needs = dataset_requirements()
        width = max(map(len, described))
        for name, text in described.items():
            print(f"{name:<{width}}  {text}" + (f" [needs: {needs[name]}]" if needs[name] else ""))
        return 0
    if getattr(args, "out", None):
        check_output_path(args.out)
    if args.command == "search":
        beam = None if args.beam.lower() == "none" else int(args.beam)
        model = dpppl.load(args.model, allow_paths=args.allow_path)
        result = dpppl.map_search(model, _data(args, model), heuristic=args.heuristic,
                                  beam=beam, order=args.order, seed=args.seed)
        print(f"log joint {result.log_joint:.6g}, K = {result.num_clusters}, {result.seconds:.2f} s "
              f"({result.states_enqueued} states enqueued, {result.states_dequeued} dequeued; "
              f"greedy pass {result.greedy_log_joint:.6g})"
              + ("; exact MAP" if result.proved_optimal else ""))
        if args.out:
            np.savetxt(args.out, result.labels, fmt="%d")
            print(f"wrote {args.out}")
        return 0
    if args.command == "sample" and args.checkpoint:
        check_output_path(args.checkpoint, "--checkpoint")
    with warnings.catch_warnings(), run_groups_only():  # an interrupted run is reported below, in one line
        warnings.filterwarnings("ignore", message="interrupted after", category=RuntimeWarning)
        if args.command == "resume":
            if args.distributed:
                _join(args)
            return _report(*_sampled(lambda: dpppl.resume(
                args.checkpoint, num_samples=args.samples, progress_bar=not args.no_progress,
                checkpoint_every=args.checkpoint_every)), args)
        if args.command == "sample":
            if args.distributed:
                _join(args)
            model = dpppl.load(args.model, allow_paths=args.allow_path)
            data = _data(args, model)
            return _report(*_sampled(lambda: dpppl.sample(
                model, data, kernel=args.kernel, num_warmup=args.warmup, num_samples=args.samples,
                num_chains=args.chains, seed=args.seed, init=args.init, thinning=args.thinning,
                truncation=args.truncation, progress_bar=not args.no_progress, checkpoint=args.checkpoint,
                checkpoint_every=args.checkpoint_every, **dict(args.option))), args)
    idata = read_run(args.run)
    if args.command == "summary":
        print(summary_text(idata))
        return 0
    import matplotlib

    matplotlib.use("Agg")
    runs = {args.run: idata, **{path: read_run(path) for path in args.compare}}
    # dpppl.analysis is imported here, on first use (`dpppl.ON_FIRST_USE`): a run does not need it
    dpppl.analysis.plots.plot_command(args.kind, runs, args.out, estimate=args.estimate, var_names=args.var)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
