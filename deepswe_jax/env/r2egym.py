"""R2E-Gym's tools on our environments, installed, called and answered as DeepSWE-Preview saw them.

The model was trained through rLLM v0.1 driving R2E-Gym (agentica-project/R2E-Gym@353348a):
`RepoEnv.add_commands` copies four scripts to /usr/local/bin, `Action.to_bashcmd` turns a call
into a command line and `DockerRuntime.run` executes it. This module does the same on an `Env`
of our pool, with our own scripts (`env/tools/r2egym/`):

    file_editor(command=view, path=/testbed/a.py)
    -> /bin/sh -c "timeout 90 file_editor view --path /testbed/a.py "
       (in /testbed, with PATH=R2EGYM_PATH)

Values are shell-quoted and passed as `--key value` (a value starting with `-` is read as an
option, as in the original); `command` comes first without a flag. The answer is R2E-Gym's
(output, error_code) pair: exit status 0 -> the output without ANSI colour codes and carriage
returns, error_code "0"; another status N -> the raw output, "Error: Exit code N"; status 124
(the `timeout` wrapper) or no answer within timeout + 5 s -> "The command took too long to
execute (>Ts)", "-1". A function that is not one of TOOL_NAMES runs nothing: "", "-1".

The rendering of that pair for the model lives with the agent (`agent.r2egym`).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import re
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Protocol

from deepswe_jax.env.runtime import ExecResult
from deepswe_jax.env.tasks import Task

SCRIPTS_DIR = Path(__file__).resolve().parent / "tools" / "r2egym"
INSTALL_DIR = "/usr/local/bin"
# The functions R2E-Gym's command files define (rLLM's R2EGYM_COMMAND_FILES).
TOOL_NAMES = ("file_editor", "search", "execute_bash", "finish")
# R2E-Gym's DOCKER_PATH: the repository's virtualenv first.
R2EGYM_PATH = (
    "/root/.venv/bin:/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:"
    "/usr/sbin:/usr/bin:/sbin:/bin"
)
TIMEOUT_STATUS = 124
# R2E-Gym waits this long past the `timeout` wrapper for docker exec to return.
EXEC_GRACE_S = 5.0
INSTALL_TIMEOUT_S = 60.0
ANSI_AND_CR = re.compile(r"\x1b\[[0-9;]*m|\r")
FINISH_COMMAND = "echo '<<<Finished>>>'"
# R2E-Gym's editor decodes files with chardet, which R2E-Gym's images have in the repository's
# environment; ours get the host's chardet (this version) where the editor finds it.
CHARDET_VERSION = "5.2.0"
VENDOR_DIR = "/usr/local/lib/r2egym-tools"  # the editor script's VENDOR_DIR
CHARDET_ARCHIVE = "/tmp/r2egym-chardet.tar.gz"


class CommandEnv(Protocol):
    """What R2E-Gym's tools need of an environment: commands and files (`environment.Env`)."""

    task: Task
    step_timeout: float

    async def run(self, cmd: str, *, timeout: float | None = None) -> ExecResult: ...

    async def write_file(self, path: str, data: bytes | str) -> None: ...


class ToolInstallError(RuntimeError):
    """The R2E-Gym tools could not be installed in a container."""


@dataclass(frozen=True)
class ToolAnswer:
    """R2E-Gym's answer to one call: output text, error_code ("0", "Error: Exit code N" or
    "-1") and the call's wall time (0 when nothing ran)."""

    output: str
    error_code: str
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int | None:
        """The exit status as a number; None for a timeout or a call that did not run."""
        if self.error_code == "0":
            return 0
        if self.error_code.startswith("Error: Exit code "):
            return int(self.error_code.removeprefix("Error: Exit code "))
        return None


def command_line(name: str, params: Mapping[str, str]) -> str:
    """The shell command line of a call (R2E-Gym's Action.to_bashcmd)."""
    if name in ("finish", "submit"):
        return FINISH_COMMAND
    parts = [shlex.quote(name)]
    if "command" in params:
        parts.append(shlex.quote(params["command"]))
    for key, value in params.items():
        if key != "command":
            parts += [f"--{key}", shlex.quote(value)]
    return " ".join(parts)


def shell_command(name: str, params: Mapping[str, str], timeout: float) -> str:
    """The bash command that runs a call the way R2E-Gym's DockerRuntime.run does: through
    `/bin/sh -c "timeout T <command line> "` with PATH=R2EGYM_PATH. SHLVL, which the bash
    running this exports, is removed: docker exec starts /bin/sh without it."""
    line = f"timeout {timeout:g} {command_line(name, params)} "
    return f"exec env -u SHLVL PATH={R2EGYM_PATH} /bin/sh -c {shlex.quote(line)}"


def answer(result: ExecResult, timeout: float) -> ToolAnswer:
    """R2E-Gym's (output, error_code) for a finished command (see the module docstring)."""
    if result.timed_out or result.exit_code == TIMEOUT_STATUS:
        return ToolAnswer(
            f"The command took too long to execute (>{timeout:g}s)", "-1", result.duration_s
        )
    if result.exit_code is None:
        return ToolAnswer(f"Error: {result.output}", "-1", result.duration_s)
    if result.exit_code != 0:
        return ToolAnswer(result.output, f"Error: Exit code {result.exit_code}", result.duration_s)
    return ToolAnswer(ANSI_AND_CR.sub("", result.output), "0", result.duration_s)


@functools.cache
def chardet_archive() -> bytes:
    """A tar of the host's chardet package (pure Python), to be unpacked in VENDOR_DIR.

    Raises:
      ToolInstallError: chardet is missing, or not the version R2E-Gym's editor ran with.
    """
    try:
        version = metadata.version("chardet")
    except metadata.PackageNotFoundError:
        version = None
    spec = importlib.util.find_spec("chardet")
    if version != CHARDET_VERSION or spec is None or spec.origin is None:
        raise ToolInstallError(
            f"the R2E-Gym interface decodes files with chardet {CHARDET_VERSION}, as R2E-Gym's "
            f"editor did (found {version}); install it: pip install chardet=={CHARDET_VERSION}"
        )
    package = Path(spec.origin).parent
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(package.rglob("*.py")):
            archive.add(path, arcname=f"chardet/{path.relative_to(package)}")
    return buffer.getvalue()


async def install_tools(env: CommandEnv) -> None:
    """Install the R2E-Gym tools in `env`'s container as /usr/local/bin/<name> (mode 755) in
    place of ours (RepoEnv.add_commands), and chardet (`chardet_archive`) in VENDOR_DIR;
    `submit`, which R2E-Gym does not install, is removed.

    Raises:
      ToolInstallError: chardet is missing on this host, or making the tools executable failed.
      EnvironmentUnavailableError: the container stopped answering.
    """
    targets = [f"{INSTALL_DIR}/{name}" for name in TOOL_NAMES]
    for name, target in zip(TOOL_NAMES, targets, strict=True):
        await env.write_file(target, (SCRIPTS_DIR / f"{name}.py").read_bytes())
    await env.write_file(CHARDET_ARCHIVE, chardet_archive())
    command = (
        f"chmod 755 {' '.join(targets)} && rm -f {INSTALL_DIR}/submit && mkdir -p {VENDOR_DIR} "
        f"&& tar -xzf {CHARDET_ARCHIVE} -C {VENDOR_DIR} && rm -f {CHARDET_ARCHIVE}"
    )
    result = await env.run(command, timeout=INSTALL_TIMEOUT_S)
    if result.exit_code != 0:
        raise ToolInstallError(
            f"installing the R2E-Gym tools in {env.task.image} failed (exit code "
            f"{result.exit_code}): {result.output[-2000:]}"
        )


async def call_tool(
    env: CommandEnv, name: str, params: Mapping[str, str], *, timeout: float
) -> ToolAnswer:
    """Run one call in `env` as R2E-Gym would (a name outside TOOL_NAMES runs nothing).

    Raises:
      EnvironmentUnavailableError: the container stopped answering.
    """
    if name not in TOOL_NAMES:
        return ToolAnswer("", "-1")
    result = await env.run(shell_command(name, params, timeout), timeout=timeout + EXEC_GRACE_S)
    return answer(result, timeout)
