"""Build the base image and every missing or outdated task image.

python launch/build_images.py --tasks=tasks/tasks.jsonl
"""

import os
import sys

# Run as a script (python launch/build_images.py), the repository root is not on sys.path;
# deepswe_jax/ lives there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.images import ensure_task_images  # noqa: E402
from deepswe_jax.env.tasks import load_tasks  # noqa: E402

_TASKS = flags.DEFINE_string(
    "tasks", "tasks/tasks.jsonl", "Task file (jsonl, json, parquet or a saved HF dataset)."
)


def main(argv: list[str]) -> None:
    del argv
    tasks = load_tasks(_TASKS.value)
    tags = ensure_task_images(tasks)
    print(f"{len(tags)} image(s) up to date for {len(tasks)} task(s): {', '.join(tags)}")


if __name__ == "__main__":
    cli.run(main)
