"""DockerRuntime against a real engine: limits, timeouts that kill, files, diffs, cleanup."""

import docker
import pytest

from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.ownership import OWNER_LABEL, RUN_LABEL, owner_is_alive, owner_label
from deepswe_jax.env.runtime import GitDiffError, MissingImageError

TIMEOUT = 30


@pytest.fixture(scope="module")
def runtime(tiny_task, docker_client, run_label):
    with DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client) as rt:
        yield rt


def processes(runtime):
    return runtime.run("ps -eo args=", timeout=TIMEOUT).output


def test_container_is_isolated_limited_and_labelled(runtime, docker_client, run_label):
    attrs = docker_client.containers.get(runtime.container_id).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == 1 << 30 and host["NanoCpus"] == 1_000_000_000
    assert host["PidsLimit"] == 256
    labels = attrs["Config"]["Labels"]
    assert labels[RUN_LABEL] == run_label and owner_is_alive(labels[OWNER_LABEL]) is True


def test_run_merges_output_and_reports_exit_code(runtime):
    result = runtime.run("echo out; echo err >&2; exit 7", timeout=TIMEOUT)
    assert (result.exit_code, result.output, result.timed_out) == (7, "out\nerr\n", False)
    assert runtime.run("pwd", timeout=TIMEOUT, workdir="/tmp").output == "/tmp\n"


def test_timeout_kills_the_command_and_its_children(runtime):
    result = runtime.run("echo started; sleep 1000 & sleep 1001; echo never", timeout=5)
    assert result.timed_out and result.exit_code is None
    assert result.output == "started\n"
    left = processes(runtime)
    assert "sleep 1000" not in left and "sleep 1001" not in left


def test_processes_left_in_the_background_are_killed_when_the_command_ends(runtime):
    result = runtime.run("(sleep 1002 &); echo done", timeout=TIMEOUT)
    assert result.exit_code == 0 and result.output == "done\n"
    assert "sleep 1002" not in processes(runtime)


def test_tool_timeout_kills_what_the_tool_started(runtime):
    result = runtime.call_tool("execute_bash", {"cmd": "sleep 1003"}, timeout=1)
    assert result.timed_out
    assert "sleep 1003" not in processes(runtime)


def test_output_keeps_head_and_tail_within_the_limit(runtime):
    result = runtime.run("seq 1 200000", timeout=TIMEOUT, max_output=2000)
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("199999\n200000\n")
    assert "bytes of output omitted" in result.output and len(result.output) < 2100


def test_write_and_read_files_byte_exact(runtime):
    data = bytes(range(256)) * 3
    runtime.write_file("/tmp/deep/er/blob.bin", data)
    assert runtime.read_file("/tmp/deep/er/blob.bin") == data
    with pytest.raises(FileNotFoundError):
        runtime.read_file("/tmp/does-not-exist")


def test_tool_server_survives_the_agent_killing_everything(runtime):
    runtime.run("kill -9 -1; pkill -9 python3", timeout=TIMEOUT)
    assert runtime.run("echo alive", timeout=TIMEOUT).output == "alive\n"


def test_diff_holds_edits_and_new_files_and_applies_to_a_fresh_container(
    tiny_task, docker_client, run_label
):
    with DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client) as agent:
        agent.run(
            "sed -i 's/a - b/a + b/' tinycalc/__init__.py && mkdir -p new && "
            "printf 'x = 1\\n' > new/mod.py && python3 -c 'import tinycalc' && "
            "mkdir -p .pytest_cache && touch .pytest_cache/junk",
            timeout=TIMEOUT,
        )
        patch = agent.diff(tiny_task.base_commit)
        assert agent.run("git status --porcelain", timeout=TIMEOUT).output == (
            " M tinycalc/__init__.py\n?? .pytest_cache/\n?? new/\n?? tinycalc/__pycache__/\n"
        )  # the repository's own index is untouched
    assert "+    return a + b" in patch and "new file mode 100644" in patch
    assert "b/new/mod.py" in patch and "pycache" not in patch and "pytest_cache" not in patch
    with DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client) as fresh:
        fresh.write_file("/tmp/agent.patch", patch)
        applied = fresh.run("git apply /tmp/agent.patch && cat new/mod.py", timeout=TIMEOUT)
        assert applied.exit_code == 0 and applied.output == "x = 1\n"
        assert fresh.diff(tiny_task.base_commit) == patch


def test_diff_without_a_repository_is_a_clear_error(tiny_task, docker_client, run_label):
    with DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client) as rt:
        assert rt.diff(tiny_task.base_commit) == ""
        rt.run("rm -rf /testbed/.git", timeout=TIMEOUT)
        with pytest.raises(GitDiffError, match="git diff against"):
            rt.diff(tiny_task.base_commit)


def test_missing_image_says_how_to_build_it(docker_client, run_label):
    runtime = DockerRuntime("deepswe/no-such-image:base", run_label=run_label, client=docker_client)
    with pytest.raises(MissingImageError, match="launch/build_images.py"):
        runtime.start()


def test_close_removes_the_container(tiny_task, docker_client, run_label):
    rt = DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client)
    rt.start()
    container_id = rt.container_id
    rt.close()
    rt.close()
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container_id)


def test_owner_label_detects_dead_processes():
    assert owner_is_alive(owner_label()) is True
    host, pid, start = owner_label().split(":")
    assert owner_is_alive(f"{host}:{pid}:{int(start) + 1}") is False  # same pid, another process
    assert owner_is_alive(f"{host}:999999999:1") is False
    assert owner_is_alive(f"another-host:{pid}:{start}") is None
