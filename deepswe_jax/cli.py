"""How every `launch/` script ends: an error in two lines, Ctrl-C as one line and status 130.

    if __name__ == "__main__":
        cli.run(main)                      # instead of absl.app.run(main)

An exception leaving `main` prints

    error: <Type>: <first line of its message>
    (--verbose prints the full traceback)

and exits 1; `--verbose` lets the traceback through instead. KeyboardInterrupt (Ctrl-C,
SIGINT) prints one line and exits 130, after the cleanups on its way out have run (containers
removed, a checkpoint being written finished: see `interrupts`). Without `--verbose`, records
logged with a traceback (Orbax logs hundreds of lines for one failed write) keep their first
line. Usage errors stay absl's (the message and --help).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable

from absl import app, flags

from deepswe_jax.errors import one_line

_VERBOSE = flags.DEFINE_bool(
    "verbose", False, "On an error, print the full traceback (and library logs' tracebacks)."
)
INTERRUPTED = "interrupted (SIGINT): stopped cleanly, nothing half-written; exit status 130"


class _FirstLineOnly(logging.Filter):
    """Log records lose their traceback and keep the first line of their message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = record.exc_text = record.stack_info = None
        message = record.getMessage().strip()
        record.msg, record.args = message.splitlines()[0] if message else message, None
        return True


def run(main: Callable[[list[str]], object]) -> None:
    """absl's app.run(main) with the error and interrupt handling of the module docstring."""

    def guarded(argv: list[str]) -> None:
        if not _VERBOSE.value:
            for handler in logging.getLogger().handlers:
                handler.addFilter(_FirstLineOnly())
        try:
            main(argv)
        except KeyboardInterrupt:
            # Stopping already: a second Ctrl-C must not cut short the interpreter's exit
            # (threads still removing containers are joined there).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            print(INTERRUPTED, file=sys.stderr, flush=True)
            sys.exit(130)
        except app.UsageError:
            raise
        except Exception as error:
            if _VERBOSE.value:
                raise
            print(f"error: {one_line(error, limit=2000)}", file=sys.stderr)
            print("(--verbose prints the full traceback)", file=sys.stderr, flush=True)
            sys.exit(1)

    app.run(guarded)
