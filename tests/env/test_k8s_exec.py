"""K8sRuntime's commands and files over exec against `FakeCoreV1Api`'s scripted sessions
(tests/env/k8s_fakes.py): the exec command line, exit statuses, broken streams, and files
as tar archives.
"""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from websocket import WebSocketConnectionClosedException

from deepswe_jax.env.k8s import k8s_exec
from deepswe_jax.env.k8s.k8s_exec import EXEC_WRAPPER, exec_argv, file_archive, file_from_archive
from deepswe_jax.env.runtime import EnvironmentUnavailableError
from deepswe_jax.env.tools import python_command
from tests.env.k8s_fakes import (
    FakeCoreV1Api,
    ScriptedExec,
    exit_status,
    make_runtime,
)

# ---------------------------------------------------------------- exec and files (scripted)


def test_exec_commands_run_under_timeout_kill_in_the_workdir():
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(b"hi\n", exit_status(3))])
    runtime = make_runtime(api)
    runtime.start()
    install = api.called("connect_get_namespaced_pod_exec")[0]
    assert install["stdin"] is True and install["command"][:4] == ["timeout", "-s", "KILL", "30"]
    result = runtime.run("echo hi; exit 3", timeout=7, workdir="/tmp")
    call = api.called("connect_get_namespaced_pod_exec")[1]
    assert call["command"] == ["sh", "-c", EXEC_WRAPPER, "sh", "7.000", "/tmp"] + [
        "bash",
        "-c",
        "echo hi; exit 3",
    ]
    assert "timeout -s KILL" in EXEC_WRAPPER
    assert (call["name"], call["container"], call["stdin"], call["tty"]) == (
        runtime.name,
        "env",
        False,
        False,
    )
    assert (result.exit_code, result.output, result.timed_out) == (3, "hi\n", False)

    runtime.call_tool("file_editor", {"command": "view", "path": "/testbed"}, timeout=90)
    tool = api.called("connect_get_namespaced_pod_exec")[2]["command"]
    # On the first Python found, as the Docker tool server (not the tool's shebang).
    assert tool == exec_argv(
        python_command(["/usr/local/bin/file_editor", "view", "--path=/testbed"]),
        timeout=90,
        workdir="/testbed",
    )
    runtime.close()


def test_sigkill_before_the_deadline_is_not_a_timeout():
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(b"", exit_status(137))])
    runtime = make_runtime(api)
    runtime.start()
    result = runtime.run("kill -9 $$", timeout=60)
    assert (result.exit_code, result.timed_out) == (137, False)
    runtime.close()


def test_exec_without_an_exit_status_is_an_environment_error():
    internal = json.dumps({"status": "Failure", "reason": "InternalError", "message": "boom"})
    api = FakeCoreV1Api(
        exec_answers=[ScriptedExec(), ScriptedExec(b"", b""), ScriptedExec(b"", internal.encode())]
    )
    runtime = make_runtime(api)
    runtime.start()
    with pytest.raises(EnvironmentUnavailableError, match="without a status"):
        runtime.run("true", timeout=5)
    with pytest.raises(EnvironmentUnavailableError, match="boom"):
        runtime.run("true", timeout=5)
    runtime.close()
    with pytest.raises(EnvironmentUnavailableError, match="not running"):
        runtime.run("true", timeout=5)


def test_a_broken_exec_stream_is_an_environment_error():
    broken = WebSocketConnectionClosedException("socket is already closed.")
    api = FakeCoreV1Api(exec_answers=[ScriptedExec(), ScriptedExec(broken=broken)])
    runtime = make_runtime(api)
    runtime.start()
    api.pods.clear()  # e.g. the node went away
    with pytest.raises(EnvironmentUnavailableError, match="the pod no longer exists"):
        runtime.run("sleep 5", timeout=60)
    runtime.close()


def test_files_travel_as_tar_archives_over_exec():
    data = "naïve ✓\n".encode() + bytes(range(256))
    read_back = io.BytesIO()
    with tarfile.open(fileobj=read_back, mode="w") as tar:
        info = tarfile.TarInfo("srv/data.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    api = FakeCoreV1Api(
        exec_answers=[
            ScriptedExec(),
            ScriptedExec(),
            ScriptedExec(read_back.getvalue()),
            ScriptedExec(b"", exit_status(k8s_exec.READ_MISSING)),
        ]
    )
    runtime = make_runtime(api)
    runtime.start()
    runtime.write_file("/srv/new/data.bin", data)
    session = api.exec_sessions[1]
    command = api.called("connect_get_namespaced_pod_exec")[1]["command"]
    assert command[-1] == str(len(session.stdin))  # head -c <archive size> | tar -x
    assert file_from_archive(bytes(session.stdin), "/srv/new/data.bin") == data
    with tarfile.open(fileobj=io.BytesIO(bytes(session.stdin))) as tar:
        assert tar.getnames() == ["srv/new/data.bin"]
    assert runtime.read_file("/srv/data.bin") == data
    with pytest.raises(FileNotFoundError):
        runtime.read_file("/srv/missing")
    runtime.close()


def test_file_archive_round_trip():
    data = b"\x00\xffbinary\n" * 1000
    assert file_from_archive(file_archive("/a/b/c.bin", data), "/a/b/c.bin") == data
