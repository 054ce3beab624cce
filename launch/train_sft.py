"""Rejection-sampling fine-tuning (SWE-Gym): supervised training on resolved trajectories.

  # on the policy's own rollouts (e.g. an RL run's trajectories/ or evaluate.py's output)
  python launch/train_sft.py --config=configs/sft_tiny.py --workdir=/tmp/sft \
      --trajectories=/tmp/rl_run/trajectories/iter_000000.jsonl,/tmp/eval/trajectories.jsonl

  # bootstrapping from the scripted expert (gold patch through real tool calls, in Docker)
  python launch/train_sft.py --config=configs/sft_tiny.py --workdir=/tmp/sft \
      --expert_tasks=tasks/tasks.jsonl [--expert_instance_ids=confini-1,datewise-2]

Trajectories are filtered by `verify.rejection_sampling.select_for_sft` (resolved only, at most
config.sft.max_per_task per task, fewest steps first) and written to <workdir>/sft_data.jsonl;
expert episodes also go to <workdir>/expert_trajectories.jsonl. Run again with the same
--workdir to resume (the saved data is reused). The result, <workdir>/checkpoints, is a
`--config.init_from` for launch/train.py and a `--policy` for launch/evaluate.py.
"""

import logging
import os
import sys
from pathlib import Path

# Run as a script (python launch/train_sft.py), the repository root is not on sys.path;
# configs/ and deepswe_jax/ live there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

import jax  # noqa: E402
from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.agent.trajectory import (  # noqa: E402
    Trajectory,
    read_trajectories,
    write_trajectories,
)
from deepswe_jax.env.tasks import load_tasks  # noqa: E402
from deepswe_jax.experiment import check_sft_config, run_expert, train_sft  # noqa: E402
from deepswe_jax.parallel import init_distributed  # noqa: E402
from deepswe_jax.parallel.distributed import is_primary_process  # noqa: E402
from deepswe_jax.verify.rejection_sampling import select_for_sft  # noqa: E402

logger = logging.getLogger("deepswe_jax.launch.train_sft")

SFT_DATA_FILE = "sft_data.jsonl"
EXPERT_FILE = "expert_trajectories.jsonl"

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config with an sft section, e.g. configs/sft_tiny.py."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory: data, checkpoints, metrics.")
_TRAJECTORIES = flags.DEFINE_list(
    "trajectories", [], "Trajectory jsonl files (Trajectory.to_json lines) to select from."
)
_EXPERT_TASKS = flags.DEFINE_string(
    "expert_tasks", None, "Task file whose tasks the scripted gold-patch expert solves in Docker."
)
_EXPERT_INSTANCE_IDS = flags.DEFINE_list(
    "expert_instance_ids", [], "Only these tasks of --expert_tasks (default: all)."
)


def candidate_trajectories(config, workdir: Path) -> list[Trajectory]:
    """Everything --trajectories and --expert_tasks provide, before selection."""
    candidates = [t for path in _TRAJECTORIES.value for t in read_trajectories(path)]
    if _EXPERT_TASKS.value:
        tasks = load_tasks(_EXPERT_TASKS.value)
        wanted = set(_EXPERT_INSTANCE_IDS.value)
        unknown = wanted - {task.instance_id for task in tasks}
        if unknown:
            raise app.UsageError(
                f"--expert_instance_ids {sorted(unknown)} are not in {_EXPERT_TASKS.value}"
            )
        tasks = [task for task in tasks if not wanted or task.instance_id in wanted]
        candidates += run_expert(
            config, tasks, output_path=workdir / EXPERT_FILE, run_label=f"sft-{workdir.name}"
        )
    return candidates


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    config = _CONFIG.value
    init_distributed()
    if _EXPERT_TASKS.value and jax.process_count() > 1:
        raise app.UsageError(
            "collect expert trajectories in a single process first (--expert_tasks writes "
            "<workdir>/expert_trajectories.jsonl), then train on several with --trajectories"
        )
    check_sft_config(config)  # before the work directory: an invalid config leaves none
    workdir = Path(_WORKDIR.value).resolve()
    data_path = workdir / SFT_DATA_FILE
    if data_path.exists():
        logger.info("resuming on the data in %s", data_path)
        trajectories = read_trajectories(data_path)
    else:
        if not _TRAJECTORIES.value and not _EXPERT_TASKS.value:
            raise app.UsageError(
                "give --trajectories=a.jsonl,... and/or --expert_tasks=tasks.jsonl"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        selection = select_for_sft(
            candidate_trajectories(config, workdir), max_per_task=config.sft.max_per_task
        )
        logger.info(
            "selected %d trajectories of %d tasks from %d candidates (%d resolved, %d duplicates, "
            "%d over the cap of %d per task)",
            len(selection.trajectories),
            selection.num_tasks,
            selection.num_candidates,
            selection.num_resolved,
            selection.num_duplicates,
            selection.num_over_cap,
            config.sft.max_per_task,
        )
        if not selection.trajectories:
            raise SystemExit(
                "no resolved trajectories to train on; check the inputs' rewards (only resolved, "
                "finished episodes are kept) or the expert's stop reasons (a context budget "
                "too small for the task stops it as max_context)"
            )
        trajectories = list(selection.trajectories)
        check_sft_config(config, num_trajectories=len(trajectories))  # before sft_data.jsonl
        if is_primary_process():
            write_trajectories(data_path, trajectories)
    train_sft(config, workdir, trajectories)


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    cli.run(main)
