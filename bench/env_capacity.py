"""How many environments one Docker host holds at once before calls fail: a ramp of N live
environments (default 8, 16, 32, 64), all started and then all making the same few tool calls.

Per level and way: environments that made every call (ok), ones that failed (start failure, env
error, non-zero exit), p50/p95 tool-call latency, p50 start-to-ready time and wall time.
  ours: EnvPool over the given Docker endpoint (tool server as PID 1, one JSON line per call);
  peer: R2E-Gym's way, `sleep infinity` containers and a fresh `docker exec` per call, one
        thread per environment.
Both ways start all N environments at once and hold them alive until every one is up (a
barrier) before the first call, so N is the number of live environments on the host.

    python bench/env_capacity.py --tasks=tasks/tasks.jsonl --levels=8,16,32,64 [--no-peer]
        [--docker_host=unix:///var/run/docker.sock]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

# Run as a script, the repository root is not on sys.path; bench/ and deepswe_jax/ live there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import docker  # noqa: E402

from bench.env_tools import per_call_exec, percentiles  # noqa: E402
from deepswe_jax.env.docker.docker_api import remove_stale_containers  # noqa: E402
from deepswe_jax.env.docker.hosts import connect_client, default_endpoint  # noqa: E402
from deepswe_jax.env.docker.images import ensure_task_image  # noqa: E402
from deepswe_jax.env.docker.settings import DockerSettings  # noqa: E402
from deepswe_jax.env.pool import EnvPool  # noqa: E402
from deepswe_jax.env.tasks import Task, load_tasks  # noqa: E402
from deepswe_jax.env.tools import install_archive  # noqa: E402

CALLS = (
    ("file_editor", {"command": "view", "path": "/testbed"}),
    ("search", {"search_term": "def ", "path": "/testbed"}),
    ("execute_bash", {"cmd": "git status --porcelain && ls"}),
    (
        "file_editor",
        {"command": "create", "path": "/testbed/reproduce.py", "file_text": "print(1)\n"},
    ),
    ("execute_bash", {"cmd": "python3 reproduce.py"}),
)
BARRIER_TIMEOUT_S = 900.0
WAYS = ("EnvPool tool server (ours)", "docker exec per call (R2E-Gym)")


@dataclass(frozen=True)
class LevelResult:
    """One way at one level: environments ok / failed, call latencies and start times (seconds)."""

    ok: int
    failed: int
    call_seconds: tuple[float, ...]
    start_seconds: tuple[float, ...]
    wall_s: float
    first_error: str = ""


async def ours(task: Task, endpoint: str, envs: int) -> LevelResult:
    """`envs` environments of an EnvPool alive at once, then each makes CALLS."""
    calls: list[float] = []
    errors: list[str] = []
    settled = 0
    everyone_up = asyncio.Event()

    def settle() -> None:
        nonlocal settled
        settled += 1
        if settled == envs:
            everyone_up.set()

    async def environment(pool: EnvPool) -> bool:
        try:
            async with pool.acquire(task) as env:
                settle()
                await asyncio.wait_for(everyone_up.wait(), BARRIER_TIMEOUT_S)
                for tool, params in CALLS:
                    started = time.perf_counter()
                    result = await env.step(tool, params)
                    calls.append(time.perf_counter() - started)
                    if result.env_error or result.exit_code != 0:
                        errors.append(f"{tool}: {result.observation[-300:]}")
                        return False
                return True
        except Exception as error:  # a start failure counts as a failed environment
            errors.append(repr(error))
            if not everyone_up.is_set():
                settle()
            return False

    started = time.perf_counter()
    async with EnvPool(
        max_envs=envs,
        start_concurrency=envs,  # as the peer: all starts at once
        docker_settings=DockerSettings(hosts=(endpoint,)),
        build_images=False,
        step_timeout=90,
        episode_attempts=1,
    ) as pool:
        outcomes = await asyncio.gather(*(environment(pool) for _ in range(envs)))
        start_seconds = tuple(pool.stats.start_seconds)
    ok = sum(outcomes)
    return LevelResult(
        ok,
        envs - ok,
        tuple(calls),
        start_seconds,
        time.perf_counter() - started,
        errors[0] if errors else "",
    )


def peer(task: Task, endpoint: str, envs: int, label: str) -> LevelResult:
    """`envs` R2E-Gym-style containers alive at once, each making CALLS by `docker exec`."""
    client = connect_client(endpoint, timeout=300)  # the same client settings as ours
    barrier = threading.Barrier(envs, timeout=BARRIER_TIMEOUT_S)
    calls: list[float] = []
    starts: list[float] = []
    errors: list[str] = []

    def environment() -> bool:
        container = None
        try:
            started = time.perf_counter()
            container = client.containers.run(
                task.image,
                ["sleep", "infinity"],
                detach=True,
                network_mode="none",
                mem_limit="1g",
                nano_cpus=1_000_000_000,
                pids_limit=256,
                labels={"deepswe.run": label},
            )
            container.put_archive("/", install_archive())
            starts.append(time.perf_counter() - started)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
            for tool, params in CALLS:
                started = time.perf_counter()
                exit_code, output = per_call_exec(container, tool, params)
                calls.append(time.perf_counter() - started)
                if exit_code != 0:
                    errors.append(f"{tool}: exit {exit_code}: {output[-300:]!r}")
                    return False
            return True
        except Exception as error:  # a start or exec failure counts as a failed environment
            errors.append(repr(error))
            barrier.abort()
            return False
        finally:
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.APIError:
                    pass

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=envs) as workers:
        outcomes = list(workers.map(lambda _: environment(), range(envs)))
    ok = sum(outcomes)
    return LevelResult(
        ok,
        envs - ok,
        tuple(calls),
        tuple(starts),
        time.perf_counter() - started,
        errors[0] if errors else "",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default="tasks/tasks.jsonl", help="its first task's image is used"
    )
    parser.add_argument("--levels", default="8,16,32,64", help="comma-separated environment counts")
    parser.add_argument("--docker_host", default=default_endpoint(), help="Docker endpoint to fill")
    parser.add_argument(
        "--peer", action=argparse.BooleanOptionalAction, default=True, help="also run R2E-Gym's way"
    )
    args = parser.parse_args()

    task = load_tasks(args.tasks)[0]
    client = connect_client(args.docker_host, timeout=300)
    ensure_task_image(task, client)
    info = client.info()
    print(
        f"\nhost {args.docker_host}: {info['NCPU']} CPUs, {info['MemTotal'] / 2**30:.1f} GiB; "
        f"image {task.image}; {len(CALLS)} tool calls per environment\n"
    )
    header = (
        f"{'envs':>5} {'way':<30} {'ok':>4} {'failed':>6} {'call p50 ms':>11} {'call p95 ms':>11} "
        f"{'start p50 s':>11} {'wall s':>7}"
    )
    print(header, flush=True)
    failures = []
    for envs in (int(n) for n in args.levels.split(",")):
        label = f"bench-capacity-{uuid.uuid4().hex[:8]}"
        for way in WAYS if args.peer else WAYS[:1]:
            try:
                if way == WAYS[0]:
                    result = asyncio.run(ours(task, args.docker_host, envs))
                else:
                    result = peer(task, args.docker_host, envs, label)
            finally:
                remove_stale_containers(client, run_labels=(label,))
            call_p50, call_p95 = percentiles(list(result.call_seconds) or [float("nan")])
            start_p50 = statistics.median(result.start_seconds or [float("nan")])
            print(
                f"{envs:>5} {way:<30} {result.ok:>4} {result.failed:>6} {call_p50:11.1f} "
                f"{call_p95:11.1f} {start_p50:11.2f} {result.wall_s:7.1f}",
                flush=True,
            )
            if result.first_error:
                failures.append(f"{envs} envs, {way}: {result.first_error}")
    for failure in failures:
        print(f"first failure at {failure}")


if __name__ == "__main__":
    main()
