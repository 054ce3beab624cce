"""Write a task file as the dataset mini-swe-agent's SWE-bench runner reads, images built.

    python launch/tasks_for_mini_swe_agent.py --tasks=tasks/tasks.jsonl --out_dir=/tmp/mini_tasks \
        [--instance_ids=confini-1,datewise-2]
    mini-extra swebench --subset=/tmp/mini_tasks --split=test ...   # README: "Evaluating an
                                                                    # exported checkpoint ..."

Reads any task file the project loads (ours, SWE-bench, SWE-Gym, R2E-Gym), builds the images
that are missing (as launch/evaluate.py would), and writes `<out_dir>/test.jsonl`: one row per
task with `instance_id`, `problem_statement` and `image_name`, the task's local image (without
it mini-swe-agent runs the public `swebench/sweb.eval.*` image of the instance id). Grade the
preds.json mini-swe-agent writes with `launch/evaluate.py --predictions=... --tasks=<same file>`.
"""

import os
import sys

# Run as a script (python launch/tasks_for_mini_swe_agent.py), the repository root is not on
# sys.path; deepswe_jax/ lives there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.docker.images import ensure_task_images  # noqa: E402
from deepswe_jax.verify.evaluation.run import load_eval_tasks  # noqa: E402

_TASKS = flags.DEFINE_string(
    "tasks", "tasks/tasks.jsonl", "Task file (jsonl, json, parquet or a saved HF dataset)."
)
_INSTANCE_IDS = flags.DEFINE_list("instance_ids", [], "Only these tasks (default: all).")
_OUT_DIR = flags.DEFINE_string(
    "out_dir", None, "Folder for test.jsonl (mini-extra swebench --subset=<out_dir> --split=test)."
)
SPLIT = "test"


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    tasks = load_eval_tasks(_TASKS.value, _INSTANCE_IDS.value)
    ensure_task_images(tasks)
    out_dir = Path(_OUT_DIR.value)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "instance_id": task.instance_id,
            "problem_statement": task.problem_statement,
            "image_name": task.image,
        }
        for task in tasks
    ]
    path = out_dir / f"{SPLIT}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(
        f"wrote {len(rows)} task(s) to {path}; run: mini-extra swebench --subset={out_dir} "
        f"--split={SPLIT} ..."
    )


if __name__ == "__main__":
    flags.mark_flags_as_required(["out_dir"])
    cli.run(main)
