"""Print the main job's one-screen summary and draw its training curve (rewards.png).

    python launch/summarize_run.py --rl_dir=runs/learn_tiny/rl --eval_dir=runs/learn_tiny/eval \
        --stage_seconds=sft=61 --stage_seconds=rl=540 --stage_seconds=eval=95

./run.sh prints it after the three stages; run it on any RL run directory and its evaluation.
"""

import os
import sys

# Run as a script (python launch/summarize_run.py), the repository root is not on sys.path;
# deepswe_jax/ lives there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.verify.run_summary import main_job_summary  # noqa: E402

_RL_DIR = flags.DEFINE_string("rl_dir", None, "The RL run's --workdir (holds metrics.jsonl).")
_EVAL_DIR = flags.DEFINE_string(
    "eval_dir", None, "The held-out evaluation's --output_dir (holds summary.json)."
)
_STAGE_SECONDS = flags.DEFINE_multi_string(
    "stage_seconds", [], "NAME=SECONDS: the wall time of a stage, e.g. --stage_seconds=rl=540."
)
flags.mark_flags_as_required(["rl_dir", "eval_dir"])


def stage_seconds(pairs: list[str]) -> dict[str, float]:
    seconds = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            seconds[name] = float(value)
        except ValueError:
            raise app.UsageError(
                f"--stage_seconds={pair!r}: write NAME=SECONDS, e.g. rl=540"
            ) from None
    return seconds


def main(argv: list[str]) -> None:
    del argv
    print(
        main_job_summary(
            _RL_DIR.value, _EVAL_DIR.value, stage_seconds=stage_seconds(_STAGE_SECONDS.value)
        )
    )


if __name__ == "__main__":
    cli.run(main)
