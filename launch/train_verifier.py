"""Train the execution-free outcome verifier on graded trajectories (SWE-Gym recipe).

  python launch/train_verifier.py --config=configs/verifier_tiny.py --workdir=/tmp/verifier \\
      --trajectories=/tmp/eval_run/trajectories.jsonl [--config.verifier.lora_rank=64 ...]

Tasks are split into train and held-out (config.verifier.heldout_fraction, seeded, by task).
Training uses at most config.verifier.max_per_task resolved and unresolved trajectories per
task, balanced 1:1, with the loss on the answer token(s) only, on the sharded train step
(rl.train_step.Trainer with rl.sft's NLL); LoRA adapters when config.verifier.lora_rank > 0
(only they train), else full fine-tuning from config.init_from ('' = random init).
Held-out items are all graded trajectories of the held-out tasks, scored by
p(YES) / (p(YES) + p(NO)); their ROC AUC is logged every eval_every steps.

Writes <workdir>/metrics.jsonl, <workdir>/tensorboard/, <workdir>/verifier/ (Orbax parameters
with LoRA merged, tokenizer, prompt settings: load with verify.verifier.load_verifier) and
<workdir>/summary.json (held-out AUC, example counts).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import sys
from collections.abc import Sequence

# Run as a script (python launch/train_verifier.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.agent.trajectory import Trajectory, read_trajectories  # noqa: E402
from deepswe_jax.env.tasks import load_tasks  # noqa: E402
from deepswe_jax.experiment import train_verifier  # noqa: E402
from deepswe_jax.parallel import init_distributed  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Verifier config, e.g. configs/verifier_tiny.py; override with --config.x=y."
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Output directory (must not hold a verifier yet).")
_TRAJECTORIES = flags.DEFINE_list(
    "trajectories", None, "Graded trajectory jsonl files or globs (evaluate.py / train.py output)."
)
_TASKS = flags.DEFINE_string(
    "tasks", None, "Task file with the trajectories' problem statements (default config.env.tasks)."
)


def read_trajectory_files(patterns: Sequence[str]) -> list[Trajectory]:
    """Every trajectory in the files matching `patterns` (jsonl, one Trajectory per line)."""
    paths = sorted({path for pattern in patterns for path in glob.glob(pattern)})
    if not paths:
        raise FileNotFoundError(
            f"no trajectory files match {list(patterns)}; pass --trajectories=<run>/trajectories.jsonl"
        )
    return [t for path in paths for t in read_trajectories(path)]


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    init_distributed()
    config = _CONFIG.value
    tasks = load_tasks(_TASKS.value or config.env.tasks)
    summary = train_verifier(
        config,
        _WORKDIR.value,
        read_trajectory_files(_TRAJECTORIES.value),
        {task.instance_id: task.problem_statement for task in tasks},
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir", "trajectories"])
    cli.run(main)
