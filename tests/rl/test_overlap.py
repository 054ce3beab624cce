"""Overlapped rollouts: iteration k+1's rollouts run while iteration k trains, from a policy at
most max_staleness updates old; with max_staleness 0 the schedule is the synchronous loop.

The scripted run drives the real loop (rl.loop.train with config.rl.overlap) with a
ScriptedSampler and an in-memory environment pool whose steps and gradings take wall-clock
time (as containers do), and a real tiny train step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from pathlib import Path

import pytest

from configs import tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.trajectory import read_trajectories, trajectories_path
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment import train
from deepswe_jax.rl.metrics import read_metrics
from deepswe_jax.rl.overlap import RolloutScheduler
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_LATENCY_S = 0.4  # per tool call and per grading: what a container's round trip costs


def run_schedule(
    max_staleness: int, iterations: int, collect_s: float, train_s: float, wait_ahead: bool = False
):
    """Drives a RolloutScheduler with sleeping collect/train; returns (rollouts, train spans).
    wait_ahead: each update also waits for the next iteration's rollouts, so which policy
    version later rollouts sample does not depend on the machine's speed."""
    published = []
    collected = [threading.Event() for _ in range(iterations)]

    async def collect(iteration: int, version: int) -> tuple[int, int]:
        await asyncio.sleep(collect_s)
        collected[iteration].set()
        return iteration, version

    def update(iteration: int) -> tuple[float, float]:
        started = time.perf_counter()
        time.sleep(train_s)
        if wait_ahead and iteration + 1 < iterations:
            assert collected[iteration + 1].wait(timeout=60)  # a hang guard only
        return started, time.perf_counter()

    batches, spans = [], []
    with (
        asyncio.Runner() as runner,
        RolloutScheduler(
            runner, collect, published.append, max_staleness=max_staleness, start=0, stop=iterations
        ) as scheduler,
    ):
        scheduler.publish(0, {"version": 0})
        for iteration in range(iterations):
            batches.append(scheduler.next_batch(iteration))
            spans.append(scheduler.run_while_collecting(update, iteration))
            scheduler.publish(iteration + 1, {"version": iteration + 1})
    return batches, spans, published


def test_synchronous_schedule_samples_the_current_policy():
    batches, spans, published = run_schedule(0, 3, collect_s=0.01, train_s=0.01)
    assert [b.policy_version for b in batches] == [0, 1, 2]
    assert [b.result for b in batches] == [(0, 0), (1, 1), (2, 2)]
    assert published == [{"version": 0}, {"version": 1}, {"version": 2}]
    for iteration, batch in enumerate(batches):
        assert spans[iteration][0] >= batch.finished  # trains on finished rollouts
        if iteration:
            assert batch.started >= spans[iteration - 1][1]  # after the previous update


def test_staleness_one_collects_the_next_iteration_during_the_update():
    batches, spans, _ = run_schedule(1, 4, collect_s=0.05, train_s=0.05)
    assert [b.policy_version for b in batches] == [0, 0, 1, 2]
    for batch in batches[1:]:
        assert (
            batch.started < spans[batch.iteration - 1][1]
        )  # began before the previous update finished


def test_staleness_two_runs_two_iterations_ahead():
    batches, _, _ = run_schedule(2, 5, collect_s=0.01, train_s=0.05, wait_ahead=True)
    versions = [b.policy_version for b in batches]
    assert all(i - 2 <= v <= i for i, v in enumerate(versions))
    assert max(i - v for i, v in enumerate(versions)) == 2


def test_an_interrupt_while_rollouts_run_ahead_cancels_them():
    """Ctrl-C (or any error) in the loop body while the next iteration's rollouts are being
    collected: close() cancels them and the interrupt propagates (before: ValueError, a
    coroutine was expected, got <_GatheringFuture pending>)."""
    cancelled = []

    async def collect(iteration: int, version: int) -> int:
        if iteration:
            try:
                await asyncio.sleep(600)
            except asyncio.CancelledError:
                cancelled.append(iteration)
                raise
        return iteration

    with asyncio.Runner() as runner, pytest.raises(KeyboardInterrupt):
        with RolloutScheduler(runner, collect, print, max_staleness=1, start=0, stop=3) as s:
            s.publish(0, {"version": 0})
            assert s.next_batch(0).result == 0
            s.run_while_collecting(time.sleep, 0.05)  # iteration 1 starts collecting
            raise KeyboardInterrupt
    assert cancelled == [1]


def test_negative_staleness_is_refused():
    with asyncio.Runner() as runner, pytest.raises(ValueError, match="max_staleness"):
        RolloutScheduler(runner, None, print, max_staleness=-1, start=0, stop=1)


@dataclasses.dataclass(frozen=True)
class Step:
    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool = False


class SlowEnv:
    """A repository that is fixed once the agent calls file_editor; finish ends the episode."""

    def __init__(self, task: Task):
        self.task = task
        self.edited = False

    async def step(self, tool: str, params: dict[str, str]) -> Step:
        await asyncio.sleep(ENV_LATENCY_S)
        self.edited |= tool == "file_editor"
        return Step(f"Execution output of [{tool}]:\nok", tool == "finish", 0, ENV_LATENCY_S)

    async def patch(self) -> str:
        return "--- a/calc.py\n+++ b/calc.py\n" if self.edited else ""


class SlowPool:
    """EnvPool's interface in memory, with container-like latency; a patch resolves the task."""

    @contextlib.asynccontextmanager
    async def acquire(self, task: Task):
        yield SlowEnv(task)

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        await asyncio.sleep(ENV_LATENCY_S)
        resolved = bool(patch)
        status = "resolved" if resolved else "unresolved"
        return GradeResult(task.instance_id, status, float(resolved), True, resolved)

    async def run_with_retries(self, episode, *, failed, name: str = "episode"):
        return await episode()  # no infrastructure to fail

    def metrics(self) -> dict[str, float]:
        return {}

    async def close(self) -> None:
        pass


def alternating_sampler(tokenizer: ChatTokenizer) -> ScriptedSampler:
    """Every other episode edits the file then finishes (reward 1); the rest finish at once."""
    end = [tokenizer.im_end_id]
    edit = render_function_call(
        "file_editor",
        {"command": "str_replace", "path": "/testbed/calc.py", "old_str": "-", "new_str": "+"},
    )
    fix = [tokenizer.encode_text(edit) + end]
    finish = [tokenizer.encode_text(render_function_call("finish", {"command": "submit"})) + end]
    started = []

    def script(prompt: tuple[int, ...]) -> list[list[int]]:
        started.append(prompt)
        return fix + finish if len(started) % 2 else finish

    return ScriptedSampler(script)


def make_task(index: int) -> Task:
    return Task(
        instance_id=f"calc-{index}",
        repo="calc",
        base_commit="0" * 40,
        problem_statement=f"add() subtracts (report {index}).",
        patch="",
        test_patch="",
        FAIL_TO_PASS=("tests/test_calc.py::test_add",),
        PASS_TO_PASS=(),
        image="deepswe/calc:base",
    )


def test_overlapped_training_run(tmp_path: Path):
    config = tiny.get_config()
    config.tokenizer = str(REPO_ROOT / "tests" / "assets" / "tokenizer")
    config.model.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1)
    config.model.update(num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    config.rl.update(
        total_steps=3, tasks_per_step=2, n_rollouts=2, micro_batch_size=8, overlap=True
    )
    # rows of at most 1,408 tokens: the ~1,100-token prompt and two short turns
    config.rl.update(max_staleness=1, lr=1e-3, length_buckets=(1280, 1408))
    config.agent.update(max_steps=2, max_prompt_tokens=1200, max_context=200)
    config.checkpoint.update(every=1, keep=2)
    sampler = alternating_sampler(ChatTokenizer.from_directory(config.tokenizer))

    train(
        config,
        tmp_path,
        sampler=sampler,
        env_pool=SlowPool(),
        tasks=[make_task(i) for i in range(4)],
        show_progress=False,
    )

    metrics = read_metrics(tmp_path)
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for iteration, step_metrics in enumerate(metrics):
        versions = {
            t.policy_version for t in read_trajectories(trajectories_path(tmp_path, iteration))
        }
        # trained at trainer version `iteration`: within max_staleness=1 of it
        assert versions <= {iteration - 1, iteration}, (iteration, versions)
        assert step_metrics["rollout/policy_lag"] == iteration - min(versions)
        assert step_metrics["train/skipped"] == 0.0
        assert step_metrics["train/grad_norm"] > 0.0  # resolved and unresolved in each group
        # the ratio is against the trainer's own recomputed log-probs (exactly 1 at the one
        # update per batch), not the stale sampler's, whose mismatch is only measured
        assert step_metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
        assert step_metrics["train/sampler_approx_kl"] != 0.0
    # Lag 1: rollouts of k+1 sampled version k, so they ran during the update of k (the time
    # that saves is measured by bench/overlap.py, not asserted: load would decide it).
    assert [m["rollout/policy_lag"] for m in metrics[1:]] == [1.0, 1.0]
