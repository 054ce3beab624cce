"""Commands and files in a pod over the API server's exec websocket: the command lines
`k8s_runtime.K8sRuntime` sends, the tar archives files travel in, and how an exec session's
output and exit status are read.

Every command is one exec:
    sh -c EXEC_WRAPPER sh <timeout> <workdir> <argv...>
runs argv under `timeout -s KILL` in its own process group, stdin from /dev/null, stderr merged
into stdout; when it exits or is killed, everything left in its group is SIGKILLed too. Files
travel as tar archives over exec stdin, read with `head -c <size> | tar -x` so no end-of-input
signal is needed (the v4 exec protocol has none). Arguments travel in the exec URL, so one
argument is limited to 128 KiB (Linux MAX_ARG_STRLEN); write larger contents as files.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from kubernetes import stream as k8s_stream

from deepswe_jax.env.k8s.k8s_pods import CONTAINER_NAME, retry_api
from deepswe_jax.env.runtime import TESTBED
from deepswe_jax.env.tools.tool_server import BoundedOutput

STDIN_CHUNK = 1 << 20
STDOUT_CHANNEL, STDERR_CHANNEL, ERROR_CHANNEL = 1, 2, 3
# Exit codes of READ_SCRIPT for a path that is missing or a directory.
READ_MISSING, READ_IS_DIRECTORY = 102, 121

# $1 timeout seconds, $2 working directory, then the command's argv.
EXEC_WRAPPER = (
    't="$1"; cd "$2" 2>&1 || exit 126; shift 2\n'
    'timeout -s KILL "$t" "$@" </dev/null 2>&1 &\n'
    "pid=$!\n"
    'wait "$pid" 2>/dev/null; status=$?\n'
    'kill -s KILL -- "-$pid" 2>/dev/null\n'
    'exit "$status"\n'
)
# $1 size of the tar archive on stdin, extracted at /.
UNTAR_SCRIPT = 'head -c "$1" | tar -x -o -f - -C /'
# $1 absolute path; a tar archive of the file (symlinks followed) on stdout.
READ_SCRIPT = (
    f'if [ -d "$1" ]; then exit {READ_IS_DIRECTORY}; fi\n'
    f'if [ ! -e "$1" ]; then exit {READ_MISSING}; fi\n'
    'cd / && exec tar -c -h -f - -- "${1#/}"\n'
)


class ExecStatusError(RuntimeError):
    """An exec ended without an exit code: no status message, or a failure of the exec itself."""


def exec_argv(argv: list[str], *, timeout: float, workdir: str = TESTBED) -> list[str]:
    """The exec command that runs `argv` in `workdir` and SIGKILLs it (and everything it
    started) after `timeout` seconds; see EXEC_WRAPPER."""
    return ["sh", "-c", EXEC_WRAPPER, "sh", f"{max(timeout, 0.001):.3f}", workdir, *argv]


def file_archive(path: str, data: bytes, *, mode: int = 0o644) -> bytes:
    """A tar archive, to extract at /, holding `data` at absolute `path`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size = len(data)
        info.mode = mode
        info.mtime = int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def file_from_archive(archive: bytes, path: str) -> bytes:
    """The contents of the one regular file in a tar archive made by READ_SCRIPT."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            if member.isfile():
                return tar.extractfile(member).read()
    raise OSError(f"reading {path}: the pod sent no regular file (special file?)")


def untar_argv(size: int, timeout: float) -> list[str]:
    """The exec command that extracts a tar archive of `size` bytes from stdin at /, killed
    after `timeout` seconds."""
    return ["timeout", "-s", "KILL", f"{timeout:.0f}", "sh", "-c", UNTAR_SCRIPT, "sh", str(size)]


def open_exec(
    api: k8s.CoreV1Api,
    pod: str,
    namespace: str,
    command: list[str],
    *,
    stdin: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """An exec session of `command` in the env container of `pod` (stdout and stderr apart, no
    tty, binary), its start retried while the API fails transiently (`k8s_pods.retry_api`)."""
    return retry_api(
        lambda: k8s_stream.stream(
            api.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=command,
            container=CONTAINER_NAME,
            stdin=stdin,
            stdout=True,
            stderr=True,
            tty=False,
            binary=True,
            _preload_content=False,
        ),
        f"exec in pod {pod}",
        attempts=3,
        sleep=sleep,
    )


def exchange(
    session: Any, *, stdin: bytes | None, deadline: float, max_output: int | None
) -> tuple[bytes | str, str, bytes | str]:
    """Writes `stdin` to an open exec session, then reads its output until it ends.

    Returns (stdout, stderr, status message): stdout as text with head and tail kept when
    `max_output` is given, else bytes; the last 8,000 bytes of stderr as text.
    Raises TimeoutError when the session is still open at `deadline` (time.monotonic());
    OSError / WebSocketException when the stream breaks.
    """
    stdout = BoundedOutput(max_output) if max_output else bytearray()
    stderr = bytearray()
    if stdin is not None:
        for offset in range(0, len(stdin), STDIN_CHUNK):
            session.write_stdin(stdin[offset : offset + STDIN_CHUNK])
    while True:
        data = session.read_channel(STDOUT_CHANNEL)
        if data:
            if isinstance(stdout, BoundedOutput):
                stdout.add(data)
            else:
                stdout += data
        stderr += session.read_channel(STDERR_CHANNEL) or b""
        del stderr[:-8000]
        if not session.is_open():
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        session.update(timeout=min(remaining, 1.0))
    status = session.read_channel(ERROR_CHANNEL)
    text = stdout.text() if isinstance(stdout, BoundedOutput) else bytes(stdout)
    return text, stderr.decode("utf-8", "replace"), status


def exec_exit_code(status: bytes | str) -> int:
    """The exit code in an exec's status message (channel 3); ExecStatusError when it has none."""
    try:
        message = json.loads(status)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise ExecStatusError("ended without a status")
    if message.get("status") == "Success":
        return 0
    for cause in (message.get("details") or {}).get("causes") or ():
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    raise ExecStatusError(f"failed: {message.get('message')}")
