"""The `dpppl` console script.

It lives outside the `dpppl` package so that it runs before `dpppl` and JAX are imported
(about a second): a Ctrl-C in that time ends the process with status 130 and one line, as it
does once [`dpppl.cli.main`][dpppl.cli.main] runs, instead of a traceback from inside the
imports.
"""

import os
import signal
import sys

INTERRUPTED_WHILE_STARTING = "dpppl: interrupted while starting\n"


def _exit_while_starting(signum, frame):
    sys.stderr.write(INTERRUPTED_WHILE_STARTING)
    sys.stderr.flush()
    os._exit(130)  # 128 + SIGINT; no teardown of half-imported modules


def main() -> int:
    """Import the command line with Ctrl-C ending the process, then run it with Python's
    own Ctrl-C handling (`dpppl.cli.main` turns it into one line and status 130)."""
    signal.signal(signal.SIGINT, _exit_while_starting)
    from dpppl.cli import main as run_command  # noqa: PLC0415  (after the handler, by design)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    return run_command()


if __name__ == "__main__":
    sys.exit(main())
