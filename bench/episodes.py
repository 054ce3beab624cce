"""Episodes/minute of the full agent loop with the scripted gold-patch policy, and grading overhead.

Runs every shipped task (or --num_tasks of them) through the real EnvPool, tools and
grader with `--concurrency` environments at once; the policy is `ScriptedSampler`
replaying the gold patch as tool calls (view, str_replace per hunk, finish), so the
figure measures the environment side of a rollout, not the model.

Then grades `--serial_grades` gold patches one at a time with `grade_patch` and
compares each grade's wall time with the test time inside it (pytest's own
"in X.XXs"): the overhead of grading in a fresh container. (Grading time inside the
episodes also includes waiting for a grading slot, so it is reported separately.)

    PYTHONPATH=. python bench/episodes.py --concurrency=16
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
import uuid
from pathlib import Path

from absl import app, flags

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.rollout import (
    EpisodeSettings,
    RolloutContext,
    collect_rollouts,
    initial_messages,
)
from deepswe_jax.agent.scripted_policy import gold_patch_replies, reply_ids
from deepswe_jax.env.grading.grading import grade_patch
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import load_tasks
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[1]

_TASKS = flags.DEFINE_string("tasks", str(REPO_ROOT / "tasks" / "tasks.jsonl"), "Task file.")
_TOKENIZER = flags.DEFINE_string(
    "tokenizer", str(REPO_ROOT / "tests" / "assets" / "tokenizer"), "Tokenizer directory."
)
_CONCURRENCY = flags.DEFINE_integer("concurrency", 16, "Environments at once.")
_NUM_TASKS = flags.DEFINE_integer("num_tasks", 0, "Tasks to run (0 = all).")
_ROLLOUTS = flags.DEFINE_integer("rollouts", 1, "Episodes per task.")
_SERIAL_GRADES = flags.DEFINE_integer("serial_grades", 6, "Gold patches graded one at a time.")

_PYTEST_TIME = re.compile(r"\bin (\d+(?:\.\d+)?)s\b")


def _episode_settings() -> EpisodeSettings:
    return EpisodeSettings(
        max_steps=20,
        max_prompt_tokens=4096,
        max_context=32768,
        trajectory_timeout=900.0,
        reward_timeout=300.0,
    )


def main(argv):
    del argv
    tasks = load_tasks(_TASKS.value)
    if _NUM_TASKS.value:
        tasks = tasks[: _NUM_TASKS.value]
    tokenizer = ChatTokenizer.from_directory(_TOKENIZER.value)
    scripts = {
        tuple(tokenizer.prompt_ids(initial_messages(task))): [
            reply_ids(tokenizer, reply) for reply in gold_patch_replies(task)
        ]
        for task in tasks
    }
    sampler = ScriptedSampler(lambda prompt: scripts[prompt])
    settings = _episode_settings()

    async def run():
        async with EnvPool(
            max_envs=_CONCURRENCY.value,
            run_label=f"bench-episodes-{uuid.uuid4().hex[:8]}",
            grade_concurrency=max(2, _CONCURRENCY.value // 4),
        ) as pool:
            # Build images before the clock starts.
            async with pool.acquire(tasks[0]):
                pass
            started = time.monotonic()
            trajectories = await collect_rollouts(
                RolloutContext(pool, sampler, tokenizer, settings), tasks, _ROLLOUTS.value, 0
            )
            return trajectories, time.monotonic() - started

    trajectories, wall = asyncio.run(run())
    resolved = sum(t.reward == 1.0 for t in trajectories)
    failures = sum(t.infra_error or t.reward != 1.0 for t in trajectories)
    in_episode_grading = statistics.median(t.timings.get("grading_s", 0.0) for t in trajectories)
    print(
        "| concurrency | episodes | wall (s) | episodes/min | resolved | failures | grading in episode p50 (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {_CONCURRENCY.value} | {len(trajectories)} | {wall:.1f} | "
        f"{60 * len(trajectories) / wall:.1f} | {resolved} | {failures} | {in_episode_grading:.1f} |"
    )

    grade_times, test_times = [], []
    for task in tasks[: _SERIAL_GRADES.value]:
        started = time.monotonic()
        result = grade_patch(task, task.patch, run_label=f"bench-grade-{uuid.uuid4().hex[:8]}")
        grade_times.append(time.monotonic() - started)
        found = _PYTEST_TIME.findall(result.test_log)
        test_times.append(float(found[-1]) if found else float("nan"))
    print()
    print("| serial grades | grading p50 (s) | pytest time inside p50 (s) | grading / test time |")
    print("|---|---|---|---|")
    g50, t50 = statistics.median(grade_times), statistics.median(test_times)
    print(f"| {len(grade_times)} | {g50:.2f} | {t50:.2f} | {g50 / t50:.1f}x |")


if __name__ == "__main__":
    app.run(main)
