"""Build the base image and every missing or outdated task image.

python launch/build_images.py --tasks=tasks/tasks.jsonl
"""

from absl import app, flags

from deepswe_jax.env.images import ensure_task_images
from deepswe_jax.env.tasks import load_tasks

_TASKS = flags.DEFINE_string(
    "tasks", "tasks/tasks.jsonl", "Task file (jsonl, json, parquet or a saved HF dataset)."
)


def main(argv: list[str]) -> None:
    del argv
    tasks = load_tasks(_TASKS.value)
    tags = ensure_task_images(tasks)
    print(f"{len(tags)} image(s) up to date for {len(tasks)} task(s): {', '.join(tags)}")


if __name__ == "__main__":
    app.run(main)
