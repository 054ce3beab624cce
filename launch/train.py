"""Train a policy with GRPO++ on software-engineering tasks (deepswe_jax.rl.loop, built from the
config by deepswe_jax.experiment.train).

  python launch/train.py --config=configs/tiny.py --workdir=/tmp/tiny_run \
      [--config.rl.total_steps=5 --config.rl.lr=3e-4 ...]

Run again with the same --workdir to resume from its latest checkpoint. Metrics go to
<workdir>/metrics.jsonl and <workdir>/tensorboard (tensorboard --logdir=<workdir>/tensorboard).

Several processes (one per host) form one job from --coordinator_address/--num_processes/
--process_id, the JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/JAX_PROCESS_ID variables, or a
SLURM step (srun); all use the same --workdir on a shared filesystem. On one machine:

  launch/multihost_local.sh 2 4 python launch/train.py --config=configs/tiny.py --workdir=/tmp/mh
"""

import logging
import os
import sys

# Run as a script (python launch/train.py), the repository root is not on sys.path; configs/
# and deepswe_jax/ live there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.experiment import apply_jax_memory_settings, train  # noqa: E402
from deepswe_jax.parallel.distributed import initialize_distributed  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Experiment config file, e.g. configs/tiny.py; override fields with --config.x=y.",
)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Run directory: checkpoints, metrics, trajectories."
)
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0 (default: $JAX_COORDINATOR_ADDRESS)."
)
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Processes in the job (default: $JAX_NUM_PROCESSES, SLURM, or 1)."
)
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "This process's index (default: $JAX_PROCESS_ID or SLURM)."
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    # Our progress at INFO; libraries (Orbax logs every save at INFO) at WARNING.
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    apply_jax_memory_settings(_CONFIG.value)  # before JAX initializes: room for a vLLM engine
    initialize_distributed(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
    train(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    cli.run(main)
