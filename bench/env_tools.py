"""Environment runtime benchmark: our tool server vs R2E-Gym's fresh `docker exec` per call.

Side by side on the same task image (the first task of --tasks):
  (a) tool-call round trip, p50/p95: `file_editor view` and `execute_bash echo`;
      ours = DockerRuntime.call_tool (one JSON line over the attached PID 1 server);
      peer = R2E-Gym's way, `exec_run("timeout N python3 /usr/local/bin/<tool> ...")`
      per call through the Docker SDK, in the very same container.
  (b) container start to ready: ours = create + install tools + start + first answer;
      peer = `containers.run(..., "sleep infinity")` + install tools + a first exec.
  (d) EnvPool throughput: 16 and 32 environments in parallel, a scripted agent doing
      a few tool calls per episode; episodes per minute and failures.

    python bench/env_tools.py --tasks=tasks/tasks.jsonl --calls=100 --starts=10 --episodes=64
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import time
import uuid

import docker

from deepswe_jax.env.docker.docker_api import remove_stale_containers
from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.docker.images import ensure_task_image
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.env.tools import install_archive, tool_argv

STEP_TIMEOUT = 90


def percentiles(seconds: list[float]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p95 * 1e3


def per_call_exec(container, tool: str, params: dict[str, str]) -> tuple[int, bytes]:
    """R2E-Gym's runtime: a shell command line per call, run by a fresh `docker exec`."""
    argv = ["python3", f"/usr/local/bin/{tool}", *tool_argv(tool, params)]
    command = f"timeout {STEP_TIMEOUT} {shlex.join(argv)}"
    result = container.exec_run(["/bin/sh", "-c", command], workdir="/testbed")
    return result.exit_code, result.output


def round_trips(task: Task, client, calls: int, label: str) -> list[tuple[str, str, float, float]]:
    view = {"command": "view", "path": "/testbed/README.md"}
    echo = {"cmd": "echo hello"}
    rows = []
    with DockerRuntime(task.image, run_label=label, client=client) as runtime:
        container = client.containers.get(runtime.container_id)
        for tool, params in (("file_editor", view), ("execute_bash", echo)):
            ours, peer = [], []
            for _ in range(calls):  # interleaved, so both see the same machine load
                started = time.perf_counter()
                ours_result = runtime.call_tool(tool, params, timeout=STEP_TIMEOUT)
                ours.append(time.perf_counter() - started)
                started = time.perf_counter()
                peer_code, peer_output = per_call_exec(container, tool, params)
                peer.append(time.perf_counter() - started)
            assert ours_result.exit_code == peer_code == 0
            assert ours_result.output == peer_output.decode(), "both ways must print the same"
            rows.append((f"{tool} round trip", "tool server (ours)", *percentiles(ours)))
            rows.append(
                (f"{tool} round trip", "docker exec per call (R2E-Gym)", *percentiles(peer))
            )
    return rows


def start_times(task: Task, client, starts: int, label: str) -> list[tuple[str, str, float, float]]:
    ours, peer = [], []
    for _ in range(starts):
        started = time.perf_counter()
        runtime = DockerRuntime(task.image, run_label=label, client=client)
        runtime.start()
        ours.append(time.perf_counter() - started)
        runtime.close()
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
        assert container.exec_run(["true"]).exit_code == 0
        peer.append(time.perf_counter() - started)
        container.remove(force=True)
    return [
        ("start to ready", "tool server (ours)", *percentiles(ours)),
        ("start to ready", "sleep + docker exec (R2E-Gym)", *percentiles(peer)),
    ]


async def scripted_episode(pool: EnvPool, task: Task) -> bool:
    """A few typical agent calls; True when every call answered without an env error."""
    calls = [
        ("file_editor", {"command": "view", "path": "/testbed"}),
        ("search", {"search_term": "def ", "path": "/testbed"}),
        ("execute_bash", {"cmd": "git status --porcelain && ls"}),
        (
            "file_editor",
            {"command": "create", "path": "/testbed/reproduce.py", "file_text": "print(1)\n"},
        ),
        ("execute_bash", {"cmd": "python3 reproduce.py"}),
        ("finish", {"command": "submit"}),
    ]
    async with pool.acquire(task) as env:
        for tool, params in calls:
            result = await env.step(tool, params)
            if result.env_error or (tool != "finish" and result.exit_code != 0):
                return False
        return "reproduce.py" in await env.patch()


async def throughput(task: Task, client, envs: int, episodes: int) -> tuple[float, int, float]:
    """(episodes per minute, failures, wall seconds) for `episodes` episodes on `envs` envs."""
    async with EnvPool(max_envs=envs, client=client, build_images=False) as pool:
        started = time.perf_counter()
        outcomes = await asyncio.gather(
            *(scripted_episode(pool, task) for _ in range(episodes)), return_exceptions=True
        )
        wall = time.perf_counter() - started
    failures = sum(outcome is not True for outcome in outcomes)
    return episodes / wall * 60, failures, wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default="tasks/tasks.jsonl", help="task file; its first task's image is used"
    )
    parser.add_argument("--calls", type=int, default=100, help="round trips per tool and way")
    parser.add_argument("--starts", type=int, default=10, help="container starts per way")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per parallelism level")
    parser.add_argument("--parallel", default="16,32", help="comma-separated environment counts")
    args = parser.parse_args()

    client = docker.from_env(timeout=300)
    task = load_tasks(args.tasks)[0]
    ensure_task_image(task, client)
    label = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        rows = round_trips(task, client, args.calls, label)
        rows += start_times(task, client, args.starts, label)
    finally:
        remove_stale_containers(client, run_labels=(label,))
    print(f"\nimage {task.image}; {args.calls} calls, {args.starts} starts per way\n")
    print(f"{'measure':<28} {'way':<34} {'p50 ms':>9} {'p95 ms':>9}")
    for measure, way, p50, p95 in rows:
        print(f"{measure:<28} {way:<34} {p50:9.1f} {p95:9.1f}")
    for measure in ("file_editor round trip", "execute_bash round trip", "start to ready"):
        ours, peer = (row[2] for row in rows if row[0] == measure)
        print(f"{measure}: tool server is {peer / ours:.1f}x faster at p50")

    print(f"\n{'envs':>5} {'episodes':>9} {'wall s':>8} {'episodes/min':>13} {'failures':>9}")
    for envs in (int(n) for n in args.parallel.split(",")):
        per_minute, failures, wall = asyncio.run(throughput(task, client, envs, args.episodes))
        print(f"{envs:>5} {args.episodes:>9} {wall:8.1f} {per_minute:13.1f} {failures:>9}")


if __name__ == "__main__":
    main()
