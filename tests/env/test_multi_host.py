"""One EnvPool over several Docker hosts: placement, health backoff, and a second dockerd on this
machine that dies mid-run (its episodes are retried on the first daemon and counted) and comes
back (re-admitted, its leftover containers removed)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker
import pytest

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.rollout import EpisodeSettings, RolloutContext, run_episode
from deepswe_jax.agent.scripted_policy import gold_patch_replies, reply_ids
from deepswe_jax.agent.trajectory import StopReason
from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.docker.hosts import (
    CLIENT_MAX_POOL_SIZE,
    CLIENT_NUM_POOLS,
    DockerHosts,
    NoDockerHostError,
    backoff_seconds,
    check_endpoint,
    default_client,
    default_endpoint,
)
from deepswe_jax.env.docker.settings import DockerSettings
from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"


class SecondDockerDaemon:
    """A dockerd with its own socket, data root, exec root, pid file and bridge interface, and no
    iptables rules, so it leaves the machine's main daemon alone. (`--bridge=none` would not:
    a daemon started with it deletes the shared docker0 bridge, breaking the main daemon's
    builds.)"""

    def __init__(self, root: Path):
        self.root = root  # short: unix socket paths are limited to 107 bytes
        self.endpoint = f"unix://{root}/docker.sock"
        self.log_path = root / "dockerd.log"
        self.bridge = f"dkd{uuid.uuid4().hex[:8]}"  # interface names are at most 15 bytes
        self.process: subprocess.Popen | None = None

    def _ensure_bridge(self) -> None:
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode:
            for command in (
                ["ip", "link", "add", "name", self.bridge, "type", "bridge"],
                ["ip", "addr", "add", "172.31.254.1/24", "dev", self.bridge],
                ["ip", "link", "set", self.bridge, "up"],
            ):
                subprocess.run(command, check=True, capture_output=True)

    def start(self) -> None:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            pytest.fail("dockerd is not on PATH; multi-host tests start a second daemon")
        self._ensure_bridge()
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [
                    dockerd,
                    f"--host={self.endpoint}",
                    f"--data-root={self.root / 'data'}",
                    f"--exec-root={self.root / 'exec'}",
                    f"--pidfile={self.root / 'docker.pid'}",
                    f"--bridge={self.bridge}",
                    "--iptables=false",
                    "--ip-masq=false",
                    "--log-level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                docker.DockerClient(base_url=self.endpoint, timeout=5).ping()
                return
            except Exception:
                if self.process.poll() is not None:
                    break
                time.sleep(0.3)
        pytest.fail(f"second dockerd did not come up:\n{self.log_path.read_text()[-3000:]}")

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.endpoint, timeout=60)

    def crash(self) -> None:
        """SIGKILL: the API vanishes at once, as when a host goes away."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@pytest.fixture
def second_daemon():
    daemon = SecondDockerDaemon(Path(tempfile.mkdtemp(prefix="dkd-", dir="/tmp")))
    daemon.start()
    yield daemon
    try:
        if daemon.process.poll() is not None:  # crashed: restart once so it removes its state
            daemon.start()
        client = daemon.client()
        for container in client.containers.list(all=True):
            container.remove(force=True)
    finally:
        daemon.stop()
        shutil.rmtree(daemon.root, ignore_errors=True)


def make_settings() -> EpisodeSettings:
    return EpisodeSettings(
        max_steps=8,
        max_prompt_tokens=4096,
        max_context=16384,
        trajectory_timeout=600.0,
        reward_timeout=120.0,
    )


def labelled(client: docker.DockerClient, label: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={label}"})


def test_endpoints_are_checked_with_a_clear_error():
    assert check_endpoint(" ssh://ci@worker-2 ") == "ssh://ci@worker-2"
    for bad in ("/var/run/docker.sock", "http://host:2375", "tcp://"):
        with pytest.raises(ValueError, match="unix:///path/docker.sock, tcp://host:port"):
            check_endpoint(bad)
    with pytest.raises(ValueError, match="listed twice"):
        DockerHosts(["unix:///a.sock", "unix:///a.sock"])
    with pytest.raises(NoDockerHostError, match="unix:///nonexistent/docker.sock: down"):
        DockerHosts(["unix:///nonexistent/docker.sock"]).connect_all()


def test_default_client_is_shared_with_the_pool_sizes_of_the_env_pool(docker_client):
    client = default_client()
    assert default_client() is client
    assert DockerRuntime("deepswe/base:any", run_label="unused").client is client
    adapter = client.api.get_adapter("http+docker://localhost/containers/json")
    assert adapter.max_pool_size == CLIENT_MAX_POOL_SIZE
    assert adapter.pools._maxsize == CLIENT_NUM_POOLS
    assert client.ping()


def test_default_client_without_an_engine_raises_a_docker_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(docker.errors.DockerException):
        default_client()


def test_placement_prefers_the_image_then_free_capacity_and_respects_caps():
    hosts = DockerHosts(["unix:///a.sock", "unix:///b.sock", "unix:///c.sock"])
    a, b, c = hosts.hosts
    for host, capacity, active in ((a, 4, 3), (b, 8, 2), (c, 8, 0)):
        host.healthy, host.capacity, host.active = True, capacity, active
    a.images.add("img:1")
    assert hosts.choose("img:1") is a  # holds the image and has room
    a.active = 4
    assert hosts.choose("img:1") is c  # a is full: the most free capacity
    b.images.add("img:1")
    assert hosts.choose("img:1") is b
    c.healthy = False
    a.active, b.active = 20, 25  # soft capacities exceeded: still placed, most free first
    assert hosts.choose("img:1") is a  # free: a 4 - 20 = -16, b 8 - 25 = -17
    capped = DockerHosts(["unix:///a.sock"], envs_per_host=2)
    (only,) = capped.hosts
    only.healthy, only.capacity, only.active = True, 2, 2
    assert capped.choose("img:1") is None  # a hard cap: wait for room


def test_down_hosts_are_probed_after_a_growing_backoff():
    hosts = DockerHosts(["unix:///a.sock", "unix:///b.sock"])
    a, b = hosts.hosts
    a.healthy = b.healthy = True
    hosts.mark_down(b, "connection refused", now=100.0)
    assert (a.failures, b.failures) == (0, 1) and not b.healthy
    assert hosts.choose("img:1") is a
    assert hosts.due_for_probe(now=104.9) == [] and hosts.due_for_probe(now=105.0) == [b]
    assert hosts.seconds_until_probe(now=101.0) == 4.0
    hosts.mark_down(b, "still refused", now=105.0)  # a failed probe: wait twice as long
    assert b.next_probe_at == 105.0 + backoff_seconds(1) == 115.0 and b.failures == 1
    assert backoff_seconds(20) == 300.0


def test_pool_survives_a_docker_host_dying_mid_run(tiny_task, docker_client, second_daemon):
    label = f"pytest-multihost-{uuid.uuid4().hex[:8]}"
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    # The first call keeps each episode busy in its container while the second host dies.
    replies = [
        render_function_call("execute_bash", {"cmd": "sleep 10"}),
        *gold_patch_replies(tiny_task),
    ]
    script = [reply_ids(tokenizer, reply) for reply in replies]
    second_client = second_daemon.client()
    settings = make_settings()

    async def main():
        sampler = ScriptedSampler(script)
        async with EnvPool(
            max_envs=4,
            run_label=label,
            docker_settings=DockerSettings(
                hosts=(default_endpoint(), second_daemon.endpoint), envs_per_host=2
            ),
            step_timeout=60,
        ) as pool:
            first, second = pool.placement.hosts.hosts

            async def crash_second_host():
                # Both of its episodes are in their `sleep 10`, even if they started seconds apart.
                while second.started < 2:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.5)
                await asyncio.to_thread(second_daemon.crash)

            episodes = [
                pool.run_with_retries(
                    lambda i=i: run_episode(
                        RolloutContext(pool, sampler, tokenizer, settings), tiny_task, i, 0
                    ),
                    failed=lambda trajectory: trajectory.infra_error,
                    name=f"episode {i}",
                )
                for i in range(4)
            ]
            trajectories, _ = await asyncio.gather(asyncio.gather(*episodes), crash_second_host())
            during = pool.metrics()

            await asyncio.to_thread(second_daemon.start)
            assert await pool.probe_down_hosts() == 2
            async with pool.acquire(tiny_task), pool.acquire(tiny_task):
                async with pool.acquire(tiny_task), pool.acquire(tiny_task):
                    after = pool.metrics()
                    held_on_second = len(labelled(second_client, label))
            return trajectories, during, after, held_on_second

    trajectories, during, after, held_on_second = asyncio.run(main())

    # No trajectory was lost: all four finished and were graded resolved.
    assert [t.rollout_index for t in trajectories] == [0, 1, 2, 3]
    for trajectory in trajectories:
        assert not trajectory.infra_error, trajectory.steps
        assert trajectory.stop_reason is StopReason.finished
        assert trajectory.grade.status == "resolved" and trajectory.reward == 1.0
    # The second host's two episodes failed with env_error and ran again on the first host.
    assert during["envs/episode_retries"] == 2 and during["envs/episodes_given_up"] == 0
    assert during["envs/env_errors"] == 2 and during["envs/host_failures"] == 1
    assert during["envs/hosts_up"] == 1
    assert during["envs/host1_started"] == 2 and during["envs/host0_started"] == 4
    assert during["envs/image_copies"] == 1  # the task image went to the empty daemon once
    # Restarted, the second host is re-admitted and the killed episodes' containers are removed
    # (by the pool's background retries or on re-admission, whichever comes first: so only the
    # two containers acquired afterwards are on it).
    assert after["envs/hosts_up"] == 2
    assert after["envs/host0_active"] == 2 and after["envs/host1_active"] == 2
    assert held_on_second == 2
    assert labelled(docker_client, label) == [] and labelled(second_client, label) == []
    assert os.path.exists(second_daemon.root / "docker.sock")
