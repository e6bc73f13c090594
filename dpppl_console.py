"""The `dpppl` console script.

It lives outside the `dpppl` package so that it runs before `dpppl` and JAX are imported
(about a second): a Ctrl-C in that time ends the process with status 130 and one line, as it
does once [`dpppl.cli.main`][dpppl.cli.main] runs, instead of a traceback from inside the
imports.

When the command is done (its files written and closed, its output printed), the process ends at
once with the command's status (`os._exit` after flushing stdout and stderr) instead of tearing the
interpreter down: with JAX and XLA loaded that teardown (freeing every module, array and compiled
program, joining XLA's threads) took 0.5-0.8 CPU s of a `dpppl sample` process and changed nothing
on disk.
"""

import os
import signal
import sys
from typing import NoReturn

INTERRUPTED_WHILE_STARTING = "dpppl: interrupted while starting\n"


def _exit_while_starting(signum, frame):
    sys.stderr.write(INTERRUPTED_WHILE_STARTING)
    sys.stderr.flush()
    os._exit(130)  # 128 + SIGINT; no teardown of half-imported modules


def main() -> NoReturn:
    """Import the command line with Ctrl-C ending the process, then run it with Python's
    own Ctrl-C handling (`dpppl.cli.main` turns it into one line and status 130), then end the
    process with its status without the interpreter's teardown (module docstring)."""
    signal.signal(signal.SIGINT, _exit_while_starting)
    from dpppl.cli import main as run_command  # noqa: PLC0415  (after the handler, by design)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    _exit_now(run_command())


def _exit_now(status) -> NoReturn:
    """End the process with `status` (an int, or None for 0) once stdout and stderr are flushed
    (a reader that went away, `dpppl ... | head`, is no error of the command's)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status or 0)


if __name__ == "__main__":
    sys.exit(main())
