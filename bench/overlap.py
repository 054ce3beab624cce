"""Iteration wall time of the RL loop, synchronous vs overlapped rollouts (config.rl.overlap).

Runs experiment.train twice in this process on the same settings, config.rl.overlap off then on
(max_staleness=1), and prints per-iteration rollout, train and wall seconds. The first
iteration of each run (compilation, no rollouts to overlap with yet) is left out of the means.

  --mode=main: the tiny main job, configs/tiny.py as `launch/train.py` runs it: shipped tasks,
    Docker environments and grading, the in-process JaxSampler (needs Docker and the task
    images, launch/build_images.py).
  --mode=scripted: the tiny model's real train step, with a ScriptedSampler and an in-memory
    environment pool whose tool calls and gradings each take --env_latency_s (no Docker).

    PYTHONPATH=. python bench/overlap.py --mode=scripted --steps=5
    PYTHONPATH=. python bench/overlap.py --mode=main --steps=4
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import tempfile
from pathlib import Path

import ml_collections
from absl import app, flags
from absl import logging as absl_logging

from configs import tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment import train
from deepswe_jax.rl.metrics import read_metrics
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[1]

_MODE = flags.DEFINE_enum("mode", "scripted", ["scripted", "main"], "What runs (see above).")
_STEPS = flags.DEFINE_integer("steps", 5, "RL iterations per run.")
_ENV_LATENCY = flags.DEFINE_float(
    "env_latency_s", 2.0, "Scripted mode: seconds per tool call and per grading."
)
_LAYERS = flags.DEFINE_integer("layers", 4, "Model layers (tiny: 4).")


@dataclasses.dataclass(frozen=True)
class Step:
    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool = False


class LatencyEnv:
    def __init__(self, task: Task, latency_s: float):
        self.task, self.latency_s, self.edited = task, latency_s, False

    async def step(self, tool: str, params: dict[str, str]) -> Step:
        await asyncio.sleep(self.latency_s)
        self.edited |= tool == "file_editor"
        return Step(f"Execution output of [{tool}]:\nok", tool == "finish", 0, self.latency_s)

    async def patch(self) -> str:
        return "--- a/calc.py\n+++ b/calc.py\n" if self.edited else ""


class LatencyPool:
    """EnvPool's interface in memory: each tool call and grading takes `latency_s`."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    @contextlib.asynccontextmanager
    async def acquire(self, task: Task):
        yield LatencyEnv(task, self.latency_s)

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        await asyncio.sleep(self.latency_s)
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
    """Every other episode edits then finishes (reward 1); the others finish at once."""
    end = [tokenizer.im_end_id]
    edit = render_function_call(
        "file_editor", {"command": "str_replace", "path": "/testbed/calc.py", "old_str": "-"}
    )
    fix = [tokenizer.encode_text(edit) + end]
    finish = [tokenizer.encode_text(render_function_call("finish", {"command": "submit"})) + end]
    started = []

    def script(prompt: tuple[int, ...]) -> list[list[int]]:
        started.append(prompt)
        return fix + finish if len(started) % 2 else finish

    return ScriptedSampler(script)


def scripted_task(index: int) -> Task:
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


def run(config: ml_collections.ConfigDict, workdir: Path) -> list[dict]:
    if _MODE.value == "main":
        train(config, workdir, show_progress=False)
    else:
        tokenizer = ChatTokenizer.from_directory(config.tokenizer)
        train(
            config,
            workdir,
            sampler=alternating_sampler(tokenizer),
            env_pool=LatencyPool(_ENV_LATENCY.value),
            tasks=[scripted_task(i) for i in range(8)],
            show_progress=False,
        )
    return read_metrics(workdir)


def main(argv: list[str]) -> None:
    del argv
    absl_logging.set_verbosity(absl_logging.WARNING)  # Orbax logs every save at INFO
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for overlap in (False, True):
            config = tiny.get_config()
            config.tokenizer = str(REPO_ROOT / "tests" / "assets" / "tokenizer")
            config.model.num_hidden_layers = _LAYERS.value
            config.rl.update(total_steps=_STEPS.value, overlap=overlap, max_staleness=1)
            if _MODE.value == "scripted":
                config.agent.update(max_steps=2, max_prompt_tokens=1536, max_context=200)
            name = "overlapped" if overlap else "synchronous"
            metrics = run(config, Path(root) / name)
            for m in metrics:
                print(
                    f"{name:12s} step {m['step']}: wall {m['time/iteration_s']:6.2f}s  rollout "
                    f"{m['time/rollout_s']:6.2f}s  train {m['time/train_s']:6.2f}s  waited "
                    f"{m['time/rollout_wait_s']:6.2f}s  lag {m['rollout/policy_lag']:.0f}"
                )
            steady = metrics[1:]
            rows.append(
                (
                    name,
                    statistics.mean(m["time/rollout_s"] for m in steady),
                    statistics.mean(m["time/train_s"] for m in steady),
                    statistics.mean(m["time/iteration_s"] for m in steady),
                    max(m["rollout/policy_lag"] for m in metrics),
                )
            )
    print(f"\nmode={_MODE.value}, {_STEPS.value} iterations, means over iterations 2..")
    print(
        "| schedule | rollout (s) | train (s) | rollout + train (s) | iteration wall (s) "
        "| rollout time hidden (s) | max policy lag |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, rollout, train_s, wall, lag in rows:
        print(
            f"| {name} | {rollout:.2f} | {train_s:.2f} | {rollout + train_s:.2f} | {wall:.2f} "
            f"| {rollout + train_s - wall:.2f} | {lag:.0f} |"
        )


if __name__ == "__main__":
    app.run(main)
