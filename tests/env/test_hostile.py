"""Hostile agent commands stay inside their container, and the pool keeps serving afterwards:
fork bombs, loops, network, floods of output, rm -rf, writes to the tool server's own stdout and
stdin, setsid daemons, and disk fills."""

import pytest

from deepswe_jax.env import observation
from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.runtime import ResourceLimitError
from tests.env.env_pair import assert_serving, bash, env_pair

# Long enough for the 100 MB output steps under load (a container has one CPU), short enough
# for the fork bomb and the loops, which must end by it.
STEP_TIMEOUT = 8


@pytest.fixture(scope="module")
def envs(tiny_task, docker_client):
    """Two environments of one pool on a private event loop: (run, victim, bystander)."""
    with env_pair(tiny_task, docker_client, STEP_TIMEOUT) as pair:
        yield pair


def process_count(run, env):
    return int(run(env.run("ps -e --no-headers | wc -l")).output)


def test_fork_bomb_is_capped_by_the_pids_limit_and_killed(envs):
    run, victim, bystander = envs
    result = bash(run, victim, ":(){ :|:& };:")
    assert result.exit_code is None and not result.env_error
    assert result.observation.startswith("Exit code: -1\nExecution output of [execute_bash]:\n")
    assert "took too long" in result.observation
    assert process_count(run, victim) < 5  # server, bash, ps, wc
    assert_serving(run, victim, bystander)


def test_infinite_loops_time_out(envs):
    run, victim, bystander = envs
    for cmd in ("while true; do :; done", "python3 -c 'while True: pass'"):
        result = bash(run, victim, cmd)
        assert result.exit_code is None and "took too long" in result.observation
    assert "python3 -c" not in run(victim.run("ps -eo args=")).output
    assert_serving(run, victim, bystander)


def test_there_is_no_network(envs):
    run, victim, _ = envs
    result = bash(
        run,
        victim,
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
    )
    assert result.exit_code != 0 and "Network is unreachable" in result.observation
    lookup = bash(run, victim, "getent hosts deb.debian.org")
    assert lookup.exit_code != 0


def test_100mb_of_output_is_truncated_not_buffered(envs):
    run, victim, bystander = envs
    step = bash(run, victim, "head -c 100000000 /dev/zero | tr '\\0' 'x'; echo; echo the-end")
    assert step.exit_code == 0 and "xxxxxxxx\nthe-end" in step.observation
    assert len(step.observation) <= observation.MAX_OBSERVATION_CHARS + 100
    raw = run(victim.run("yes | head -c 100000000"))
    assert raw.exit_code == 0 and len(raw.output) < 2_100_000  # DEFAULT_MAX_OUTPUT, head and tail
    assert "bytes of output omitted" in raw.output
    assert_serving(run, victim, bystander)


def test_rm_rf_testbed_only_hurts_its_own_episode(envs):
    run, victim, bystander = envs
    bash(run, victim, "rm -rf /testbed")
    gone = bash(run, victim, "ls /testbed")
    assert not gone.env_error and gone.exit_code != 0
    assert run(victim.patch()) == ""
    intact = bash(run, bystander, "git status --porcelain && cat tinycalc/__init__.py")
    assert intact.exit_code == 0 and "def add(a, b):" in intact.observation
    assert_serving(run, victim, bystander)


def test_writing_to_the_servers_stdout_and_stdin_cannot_desync_its_channel(envs):
    """Before: `echo 'not json' > /proc/1/fd/1` made every later step an env_error (issue 17)."""
    run, victim, bystander = envs
    forged = '{"id": 99, "exit_code": 0, "output": "forged", "timed_out": false}'
    result = bash(
        run,
        victim,
        f"echo 'not json' > /proc/1/fd/1; echo '{forged}' > /proc/1/fd/1; "
        "printf 'DEEPSWE 0123 5\\n{}' > /proc/1/fd/1; printf 'no newline' > /proc/1/fd/1; "
        "printf 'garbage {\\n' > /proc/1/fd/0; echo done",
    )
    assert not result.env_error and result.exit_code == 0
    assert "\ndone" in result.observation and "forged" not in result.observation
    assert_serving(run, victim, bystander)
    listing = bash(run, victim, "ls /usr/local/bin")
    assert listing.exit_code == 0 and "file_editor" in listing.observation


def test_a_setsid_daemon_started_in_a_step_is_gone_after_it(envs):
    """A double-forked, setsid daemon left its command's session; it is killed when the step
    ends like any background job (before: it kept a core busy for the rest of the episode)."""
    run, victim, bystander = envs
    started = bash(
        run,
        victim,
        "(setsid bash -c 'exec -a stray-daemon-17 sleep 1000' > /dev/null 2>&1 &); "
        "for i in $(seq 50); do ps -eo args | grep -q '^stray-daemon-17' && break; sleep 0.1; "
        "done; echo running=$(ps -eo args | grep -c '^stray-daemon-17')",
    )
    assert started.exit_code == 0 and "running=1" in started.observation
    assert "stray-daemon-17" not in run(victim.run("ps -eo args=")).output
    assert_serving(run, victim, bystander)


def test_writing_past_the_disk_limit_stops_the_container(tiny_task, docker_client, run_label):
    """A 64 MB file against a 16 MB limit: the write stops at the limit inside the container
    (no file grows past it, or the quota is full), the host measures the writable layer and
    stops the container (a ResourceLimitError: the policy's doing, not an infrastructure
    error); what it holds on the host's disk stays within the limit and one poll's worth of
    writing (before issue 17: a tool call wrote 3 GB into /var/lib/docker at 1.3 GB/s)."""
    limit = 16 * 2**20
    runtime = DockerRuntime(
        tiny_task.image, run_label=run_label, client=docker_client, disk_limit="16m"
    )
    with runtime:
        # overlay2 on ext4 here: Docker cannot limit the writable layer, the tool server does.
        by_server = runtime.disk_limit_applied == "tool_server"
        assert by_server or runtime.disk_limit_applied == "storage_opt"
        assert runtime.run("echo under-the-limit", timeout=10).exit_code == 0
        with pytest.raises(ResourceLimitError, match="disk limit of 16m"):
            runtime.run("dd if=/dev/zero of=/testbed/big bs=1M count=64", timeout=60)
        with pytest.raises(ResourceLimitError):
            runtime.run("echo stopped", timeout=10)
        [summary] = docker_client.api.containers(
            all=True, filters={"id": runtime.container_id}, size=True
        )
        held = summary["SizeRw"]  # what the container holds on the host's disk
        assert held <= limit + 32 * 2**20, held
    if by_server:  # the setting that insists on Docker's limit says why it cannot have it
        strict = DockerRuntime(
            tiny_task.image,
            run_label=run_label,
            client=docker_client,
            disk_limit="16m",
            disk_limit_mode="storage_opt",
        )
        with pytest.raises(ValueError, match="does not support --storage-opt size="):
            strict.start()
