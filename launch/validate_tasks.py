"""Check every task: the gold patch resolves it and the empty patch does not.

Builds missing images first, grades on a small thread pool, prints a table and
exits with status 1 if any task fails either check.

    python launch/validate_tasks.py --tasks=tasks/tasks.jsonl
"""

import os
import sys

# Run as a script (python launch/validate_tasks.py), the repository root is not on sys.path;
# deepswe_jax/ lives there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

import time  # noqa: E402
import uuid  # noqa: E402

from absl import flags  # noqa: E402

from configs import common  # noqa: E402
from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.docker.docker_runtime import (  # noqa: E402
    DISK_LIMIT_MODES,
    DockerRuntimeFactory,
)
from deepswe_jax.env.docker.hosts import default_client  # noqa: E402
from deepswe_jax.env.docker.images import ensure_task_images  # noqa: E402
from deepswe_jax.env.grading.grading import GRADING_MEM_LIMIT  # noqa: E402
from deepswe_jax.env.grading.task_checks import check_tasks, format_checks  # noqa: E402
from deepswe_jax.env.tasks import load_tasks  # noqa: E402

_TASKS = flags.DEFINE_string(
    "tasks", "tasks/tasks.jsonl", "Task file (jsonl, json, parquet or a saved HF dataset)."
)
_WORKERS = flags.DEFINE_integer("workers", 2, "Tasks graded at once.")
_TIMEOUT = flags.DEFINE_float("timeout", 300.0, "Seconds allowed for one test run.")
_ENV_DEFAULTS = common.get_config().env
_DISK_LIMIT = flags.DEFINE_string(
    "disk_limit",
    _ENV_DEFAULTS.disk_limit,
    "What a grading container may write, as episodes' and gradings' config.env.disk_limit "
    "(e.g. 10g; '' = no limit).",
)
_DISK_LIMIT_MODE = flags.DEFINE_enum(
    "disk_limit_mode",
    _ENV_DEFAULTS.disk_limit_mode,
    DISK_LIMIT_MODES,
    "How the disk limit is applied (config.env.disk_limit_mode).",
)


def main(argv: list[str]) -> None:
    del argv
    started = time.monotonic()
    tasks = load_tasks(_TASKS.value)
    client = default_client()
    ensure_task_images(tasks, client)
    run_label = f"validate-{uuid.uuid4().hex[:8]}"
    try:
        # Grading containers as the env pool's: grading's memory and the disk limit.
        factory = DockerRuntimeFactory(
            client,
            mem_limit=GRADING_MEM_LIMIT,
            disk_limit=_DISK_LIMIT.value,
            disk_limit_mode=_DISK_LIMIT_MODE.value,
        )
        checks = check_tasks(
            tasks,
            runtime_factory=factory,
            workers=_WORKERS.value,
            timeout=_TIMEOUT.value,
            run_label=run_label,
        )
    finally:
        for container in client.containers.list(
            all=True, filters={"label": f"deepswe.run={run_label}"}
        ):
            container.remove(force=True)
    print(format_checks(checks))
    failed = [check.instance_id for check in checks if not check.ok]
    print(
        f"{len(checks) - len(failed)}/{len(checks)} tasks ok in {time.monotonic() - started:.0f} s"
    )
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    cli.run(main)
