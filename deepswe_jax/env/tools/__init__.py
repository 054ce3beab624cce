"""The agent's tools as they run inside a container, and how the host installs and calls them.

The scripts in this folder (file_editor, execute_bash, search, finish) are pure-stdlib
Python programs with R2E-Gym's command-line interface; `tool_server.py` is the
container's PID 1 that runs them (see `deepswe_jax.env.docker.docker_runtime`). They are
installed as `/usr/local/bin/<name>`, so the agent can also call them from bash.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
INSTALL_DIR = "/usr/local/bin"
SERVER_PATH = "/opt/deepswe/tool_server.py"
# The grader's pytest entry (harness.PYTEST_ENTRY runs it).
PYTEST_RECORD_PATH = "/opt/deepswe/pytest_record.py"
# Interpreters the tool server may run on, in order: the image's own python3 first (conda's base
# in SWE-bench images), then places official images keep one. Never an activated repository
# environment: the server and the tools must not depend on the repository's Python version.
SERVER_PYTHONS = (
    "python3",
    "/usr/bin/python3",
    "/opt/miniconda3/bin/python3",
    "/usr/local/bin/python3",
    "/testbed/.venv/bin/python3",
)

# Function name the model calls -> script in this folder.
TOOL_SCRIPTS = {
    "file_editor": "file_editor.py",
    "execute_bash": "execute_bash.py",
    "search": "search.py",
    "finish": "finish.py",
    "submit": "finish.py",
}
FINISH_TOOLS = frozenset({"finish", "submit"})
# Parameters passed as the first positional argument instead of `--name=value`.
POSITIONAL_PARAMETERS = {"file_editor": "command", "finish": "command", "submit": "command"}
# Parameter spellings other R2E-Gym prompts use -> the flag the script takes.
PARAMETER_ALIASES = {"execute_bash": {"command": "cmd"}}


def parameter_text(value: object) -> str:
    """A parameter value as the command-line string the tools parse ([a, b] lists, True/False)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def tool_argv(name: str, params: Mapping[str, object]) -> list[str]:
    """Arguments (after the program name) for calling tool `name` with `params`.

    Values travel verbatim as `--key=value` (the `=` form keeps values that start with
    `-` from being read as flags); nothing goes through a shell.

    Raises:
      KeyError: `name` is not one of TOOL_SCRIPTS.
    """
    if name not in TOOL_SCRIPTS:
        raise KeyError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_SCRIPTS)}")
    aliases = PARAMETER_ALIASES.get(name, {})
    positional = POSITIONAL_PARAMETERS.get(name)
    argv: list[str] = []
    for key, value in params.items():
        key = aliases.get(key, key)
        if key == positional:
            argv.insert(0, parameter_text(value))
        else:
            argv.append(f"--{key}={parameter_text(value)}")
    return argv


def python_command(args: Sequence[str]) -> list[str]:
    """A command running `python3 <args>` on the first of SERVER_PYTHONS present (`exec`, so it
    keeps the process: PID 1 in a container), for images without python3 on PATH; exit 127
    with a message naming the places looked at when there is none. The arguments travel as
    the shell's positional parameters, never through its parser."""
    candidates = " ".join(SERVER_PYTHONS)
    script = (
        f"for p in {candidates}; do "
        f'if command -v "$p" >/dev/null 2>&1; then exec "$p" "$@"; fi; done; '
        f"echo 'no python3 in this image (looked for {candidates})' >&2; exit 127"
    )
    return ["/bin/sh", "-c", script, "python3", *args]


def server_command(server_args: Sequence[str] = ()) -> list[str]:
    """The container command that runs the tool server (with `server_args`, e.g. its
    --disk-limit) on the first of SERVER_PYTHONS present (`python_command`)."""
    return python_command(["-u", SERVER_PATH, *server_args])


def install_archive() -> bytes:
    """A tar archive, to extract at `/`, holding the tools (mode 755), the tool server and the
    grader's pytest entry."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        directory = tarfile.TarInfo("opt/deepswe")
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o755
        tar.addfile(directory)
        files = {f"{INSTALL_DIR}/{name}": script for name, script in TOOL_SCRIPTS.items()}
        files[SERVER_PATH] = "tool_server.py"
        files[PYTEST_RECORD_PATH] = "pytest_record.py"
        for target, script in files.items():
            data = (SOURCE_DIR / script).read_bytes()
            info = tarfile.TarInfo(target.lstrip("/"))
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
