"""How every `launch/` script ends: an error in two lines, Ctrl-C as one line and status 130.

    if __name__ == "__main__":
        cli.run(main)                      # instead of absl.app.run(main)

An exception leaving `main` prints

    error: <Type>: <first line of its message>
    (--verbose prints the full traceback)

and exits 1; `--verbose` lets the traceback through instead. Ctrl-C (SIGINT) or SIGTERM, at
any moment, prints one line and exits 130, after the cleanups on its way out have run
(containers removed, a checkpoint being written finished: see `interrupts`); an error raised
while stopping counts as the interruption. Without `--verbose`, records logged with a
traceback (Orbax logs hundreds of lines for one failed write) keep their first line, Orbax's
errors (and TensorStore's "Event loop is closed" callbacks once a write failed) are left to
the exception that reports them, and library threads' errors after the run's own error or
interruption are not printed. Usage errors stay absl's (the message and
--help).

Flags are parsed by `parse_flags`: absl's parsing, after refusing a `--config.<field>` override
of a field the config does not declare, with the field's name and the closest one, and a
--config file that does not exist, with the closest file name (an override of a missing file
ended in a 59-line traceback), before `main` (and any work) starts. ml_collections'
config_flags already parses each override with the field's type (`--config.rl.lr=abc` fails
with "flag --config.rl.lr=abc: could not convert string to float") and locks the config; an
override naming no field, though, ends there in a traceback about a KeyError.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import os
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from pathlib import Path

import ml_collections
from absl import app, flags

from deepswe_jax import interrupts
from deepswe_jax.errors import one_line

_VERBOSE = flags.DEFINE_bool(
    "verbose", False, "On an error, print the full traceback (and library logs' tracebacks)."
)
INTERRUPTED = interrupts.interrupted_line("SIGINT")
HINT = "(--verbose prints the full traceback)"
CONFIG_FLAG = "config"


class _FirstLineOnly(logging.Filter):
    """Log records lose their traceback and keep the first line of their message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = record.exc_text = record.stack_info = None
        message = record.getMessage().strip()
        record.msg, record.args = message.splitlines()[0] if message else message, None
        return True


def _from_orbax(tb: types.TracebackType | None) -> bool:
    return any(f"{os.sep}orbax{os.sep}" in frame.filename for frame in traceback.extract_tb(tb))


class _NoOrbaxErrors(logging.Filter):
    """Drops Orbax's error records, and asyncio's "Task exception was never retrieved" for
    Orbax's tasks: a failed save or restore reaches the run as an exception
    (CheckpointSaveError names the step and the cause) and is printed once, as the error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if f"{os.sep}orbax{os.sep}" in record.pathname:
            return False
        return not (record.exc_info and _from_orbax(record.exc_info[2]))


def _closed_loop_callback(unraisable) -> bool:
    """Whether an unraisable error is an "Event loop is closed" error of a late callback.

    When a checkpoint write fails, Orbax closes its event loop while TensorStore's C++ threads
    still finish the other writes; each then calls loop.call_soon_threadsafe, which raises, and
    TensorStore reports that as unraisable without an object (a bare traceback): dozens of
    6-line tracebacks before the run's own error, as many as the race allows."""
    value = unraisable.exc_value
    return isinstance(value, RuntimeError) and str(value) == "Event loop is closed"


def _flag_arguments(argv: Sequence[str], name: str) -> tuple[str | None, list[str]]:
    """(the value of --name, the dotted fields of the --name.<field> overrides) in `argv`."""
    path, fields = None, []
    for index, argument in enumerate(argv):
        if argument == "--":
            break
        if not argument.startswith("-"):
            continue
        key, has_value, value = argument.lstrip("-").partition("=")
        if key == name:
            path = value if has_value else (argv[index + 1] if index + 1 < len(argv) else None)
        elif key.startswith(f"{name}.") or key.startswith(f"no{name}."):
            fields.append(key.removeprefix("no").removeprefix(f"{name}."))
    return path, fields


def load_config_module(path: str | os.PathLike) -> types.ModuleType:
    """The config file at `path` as a module (it may import `configs.common` etc. from the
    repository); FileNotFoundError when there is no such file, and whatever running the file
    raises."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"config file {str(path)!r} does not exist; pass e.g. configs/tiny.py"
        )
    spec = importlib.util.spec_from_file_location(f"deepswe_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_config(argument: str) -> ml_collections.ConfigDict | None:
    """get_config() of `path[:arg]` as config_flags calls it; None when it cannot be loaded
    (config_flags then reports the problem itself)."""
    path, *config_string = argument.split(":", 1)
    try:
        config = load_config_module(path).get_config(*config_string)
    except Exception:  # config_flags reports load errors with their traceback
        return None
    return config if isinstance(config, ml_collections.ConfigDict) else None


def unknown_field(config: ml_collections.ConfigDict, field: str) -> str | None:
    """Why `field` (dotted) names no field of `config`, with the closest field, or None when it
    does."""
    node = config
    parts = field.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            known = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
            section = ".".join(parts[:depth])
            close = difflib.get_close_matches(part, known, n=1)
            hint = f" (did you mean {'.'.join([*parts[:depth], close[0]])}?)" if close else ""
            where = f"section {section}" if section else "the config"
            return (
                f"{where} has no field {part!r}{hint}; "
                "configs/common.py declares every field with its meaning"
            )
        node = node[part]
    return None


def missing_config_file(argument: str) -> str | None:
    """Why `--config=argument` names no file (with the closest one), or None when it does."""
    path = Path(argument.split(":", 1)[0])
    if path.is_file():
        return None
    siblings = sorted(p.name for p in path.parent.glob("*.py")) if path.parent.is_dir() else []
    close = difflib.get_close_matches(path.name, siblings, n=1)
    hint = f" (did you mean {path.parent / close[0]}?)" if close else ""
    return f"FileNotFoundError: --{CONFIG_FLAG}={argument}: no such config file{hint}"


def _refuse(message: str) -> None:
    sys.stderr.write(f"error: {message}\n{HINT}\n")
    sys.exit(1)


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, after refusing a --config file that does not exist and a
    `--config.<field>` override of a field the config does not declare (the module docstring)."""
    path, fields = _flag_arguments(argv[1:], CONFIG_FLAG)
    if path:
        missing = missing_config_file(path)
        if missing is not None:
            _refuse(missing)
    config = _load_config(path) if path else None
    if config is not None:
        for field in fields:
            error = unknown_field(config, field)
            if error is not None:
                sys.stderr.write(
                    f"FATAL Flags parsing error: --{CONFIG_FLAG}.{field}: {error}\n"
                    "Pass --helpshort or --helpfull to see help on flags.\n"
                )
                sys.exit(1)
    return app.parse_flags_with_usage(argv)


def _stop(verbose: bool) -> None:
    """The end of an interrupted run: one line, exit status 130."""
    if not verbose:
        interrupts.quiet_exit_noise()
    print(interrupts.interrupted_line(), file=sys.stderr, flush=True)
    interrupts.exit_process(interrupts.EXIT_STATUS)


def run(main: Callable[[list[str]], object]) -> None:
    """absl's app.run(main) with the error and interrupt handling of the module docstring and
    the flag parsing of `parse_flags`."""
    interrupts.install()  # scripts install it before their imports already; this is the rest

    def guarded(argv: list[str]) -> None:
        verbose = _VERBOSE.value
        if not verbose:
            for handler in logging.getLogger().handlers:
                handler.addFilter(_NoOrbaxErrors())
                handler.addFilter(_FirstLineOnly())
            interrupts.ignore_unraisable(_closed_loop_callback)
        # An interrupted run exits inside the except block: the exception's traceback keeps the
        # frames (and the containers' runtimes they hold) alive for the atexit functions that
        # remove what a cancelled start created late (env.ownership.close_all_runtimes). A
        # failed one exits after it, once the frames (Orbax's pending writes) are released.
        try:
            with interrupts.stop_gracefully():
                main(argv)
            if interrupts.stop_requested():  # main ended before a swallowed stop came back
                _stop(verbose)
            return
        except app.UsageError:
            raise
        except KeyboardInterrupt:
            _stop(verbose)
        except Exception as error:
            if interrupts.stop_requested():
                if verbose:  # the interruption's side effect, shown on request
                    traceback.print_exc()
                _stop(verbose)
            if verbose:
                raise
            message = one_line(error, limit=2000)
        interrupts.quiet_exit_noise()
        print(f"error: {message}", file=sys.stderr)
        print(HINT, file=sys.stderr, flush=True)
        interrupts.exit_process(1)

    app.run(guarded, flags_parser=parse_flags)
