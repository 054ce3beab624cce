"""Train a policy with GRPO++ on software-engineering tasks (the RL loop of deepswe_jax.rl.loop).

  python launch/train.py --config=configs/tiny.py --workdir=/tmp/tiny_run \
      [--config.rl.total_steps=5 --config.rl.lr=3e-4 ...]

Run again with the same --workdir to resume from its latest checkpoint. Metrics go to
<workdir>/metrics.jsonl and <workdir>/tensorboard (tensorboard --logdir=<workdir>/tensorboard).
"""

import logging
import os
import sys

# Run as a script (python launch/train.py), the repository root is not on sys.path; configs/
# and deepswe_jax/ live there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax.parallel import init_distributed  # noqa: E402
from deepswe_jax.rl.loop import train  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Experiment config file, e.g. configs/tiny.py; override fields with --config.x=y.",
)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Run directory: checkpoints, metrics, trajectories."
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    # Our progress at INFO; libraries (Orbax logs every save at INFO) at WARNING.
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    init_distributed()
    train(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
