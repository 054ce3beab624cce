"""Errors reported in one line: `one_line(error)` is `Type: first line of the message`.

Library errors (Orbax, tensorstore, Docker) carry long messages and tracebacks; logs and the
command-line handler (`deepswe_jax.cli`) show this line, and `--verbose` the rest."""

from __future__ import annotations


def one_line(error: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, cut to `limit` characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
