"""Evaluate a policy on a task set: k runs per task, SWE-bench outputs, Pass@1 / pass@k / Best@k.

  # the task set and the grader: every gold patch resolves, no patch resolves nothing
  python launch/evaluate.py --policy=gold --output_dir=/tmp/eval_gold
  python launch/evaluate.py --policy=empty --output_dir=/tmp/eval_empty

  # any agent's SWE-bench predictions (.jsonl, or .json: a list, or mini-swe-agent's preds.json)
  python launch/evaluate.py --predictions=preds.json --tasks=tasks/tasks.jsonl \
      --output_dir=/tmp/eval_preds

  # a policy (Orbax checkpoint, training checkpoints/ folder or HF directory) in the JaxSampler
  python launch/evaluate.py --policy=/tmp/tiny_run/checkpoints --config=configs/tiny.py \\
      --num_runs=8 --temperature=1.0 --max_steps=100 --output_dir=/tmp/eval_tiny

  # Best@k next to pass@k: execution-free verifier, execution checks, and the hybrid of both
  python launch/evaluate.py --policy=... --config=... --num_runs=16 \
      --select=verifier,execution,hybrid --verifier=/tmp/verifier_run/verifier --output_dir=...

Several processes (--num_processes/--process_id, JAX_NUM_PROCESSES/JAX_PROCESS_ID, or a SLURM
step) split the tasks: process i of n evaluates every n-th task from i into
<output_dir>/shard_i-of-n on its own devices. Episodes need no collectives, so the processes
do not join one JAX job (a policy then samples on each host's devices, not a global mesh).
When all of them have finished, merge the shards into the outputs of the whole task set at
<output_dir> (one set of numbers, as one process would have written; a missing or unfinished
shard is named, with the process to run or resume):

  python launch/evaluate.py --merge_shards --output_dir=/tmp/eval_gold

Run again with the same --output_dir to resume an interrupted evaluation. Outputs (see
deepswe_jax.verify.evaluation): run_XX/predictions.jsonl for the SWE-bench harness,
run_XX/report.json, run_XX/run_report.json, trajectories.jsonl, summary.json and curves.png
(pass@k, and with --select the Best@k curves). The exit status is 1 when every grade was an
infrastructure failure (no verdict on any patch), with the first failure's reason.
"""

import logging
import os
import sys

# Run as a script (python launch/evaluate.py), the repository root is not on sys.path; configs/
# and deepswe_jax/ live there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from configs import common  # noqa: E402
from deepswe_jax import cli, experiment  # noqa: E402
from deepswe_jax.parallel.distributed import launched_process_shard  # noqa: E402
from deepswe_jax.verify.evaluation.predictions import (  # noqa: E402
    predicted_tasks,
    read_predictions,
)
from deepswe_jax.verify.evaluation.run import (  # noqa: E402
    FIXED_PATCH_POLICIES,
    load_eval_tasks,
)
from deepswe_jax.verify.evaluation.shards import merge_shards  # noqa: E402
from deepswe_jax.verify.evaluation.summary import check_some_graded  # noqa: E402
from deepswe_jax.verify.select import SELECTORS  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config",
    None,
    "Experiment config (agent limits, sampler, mesh, dtypes, env); required for a model policy. "
    "Default for gold/empty: configs/common.py.",
)
_POLICY = flags.DEFINE_string(
    "policy", None, "'gold', 'empty', or a policy directory (Orbax checkpoint or HF model)."
)
_PREDICTIONS = flags.DEFINE_string(
    "predictions",
    None,
    "Grade a SWE-bench predictions file instead of running a policy: .jsonl rows, or .json (a "
    "list, or an object keyed by instance_id) with instance_id, model_name_or_path and "
    "model_patch. Its tasks must be in --tasks.",
)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where outputs go; reuse it to resume.")
_TASKS = flags.DEFINE_string("tasks", None, "Task file (default: config.env.tasks).")
_INSTANCE_IDS = flags.DEFINE_list("instance_ids", [], "Evaluate only these tasks.")
_NUM_RUNS = flags.DEFINE_integer("num_runs", 1, "Runs (candidates) per task: the k of pass@k.")
_TEMPERATURE = flags.DEFINE_float("temperature", None, "Sampling temperature (config.sampler).")
_MAX_STEPS = flags.DEFINE_integer("max_steps", None, "Steps per episode (config.agent).")
_MAX_CONTEXT = flags.DEFINE_integer(
    "max_context", None, "Token budget after the prompt per episode (config.agent)."
)
_MODEL_NAME = flags.DEFINE_string(
    "model_name", None, "model_name_or_path in predictions (default: the policy's name)."
)
_SELECT = flags.DEFINE_list(
    "select", [], f"Best@k selectors to report, any of {sorted(SELECTORS)}."
)
_VERIFIER = flags.DEFINE_string(
    "verifier",
    None,
    "Execution-free verifier directory, launch/train_verifier.py's <workdir>/verifier "
    "(for --select=verifier or hybrid).",
)
_MAX_ENVS = flags.DEFINE_integer("max_envs", None, "Containers at once (config.env.max_envs).")
_GRADE_CONCURRENCY = flags.DEFINE_integer(
    "grade_concurrency", 2, "Gradings (and execution checks) at once."
)
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Processes sharing the tasks (default: $JAX_NUM_PROCESSES, SLURM, 1)."
)
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "This process's share (default: $JAX_PROCESS_ID or $SLURM_PROCID)."
)
_MERGE_SHARDS = flags.DEFINE_bool(
    "merge_shards",
    False,
    "Evaluate nothing: merge the finished shard_i-of-n folders under --output_dir into the "
    "outputs of the whole task set there. The shards record what they evaluated, so only "
    "--output_dir is read.",
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    if _MERGE_SHARDS.value:
        merge_shards(_OUTPUT_DIR.value)
        return
    policy = _POLICY.value
    if (policy is None) == (_PREDICTIONS.value is None):
        raise app.UsageError(
            "pass either --policy ('gold', 'empty' or a policy directory) or --predictions=FILE"
        )
    if _PREDICTIONS.value is not None and _NUM_RUNS.value != 1:
        raise app.UsageError("--predictions grades one run per task; leave --num_runs at 1")
    if _CONFIG.value is None and policy not in (*FIXED_PATCH_POLICIES, None):
        raise app.UsageError(
            "a model policy needs --config=configs/<experiment>.py (agent limits, sampler, mesh)"
        )
    config = _CONFIG.value if _CONFIG.value is not None else common.get_config()
    if _TEMPERATURE.value is not None:
        config.sampler.temperature = _TEMPERATURE.value
    if _MAX_STEPS.value is not None:
        config.agent.max_steps = _MAX_STEPS.value
    if _MAX_CONTEXT.value is not None:
        config.agent.max_context = _MAX_CONTEXT.value
        config.agent.submit_notice_tokens = min(
            config.agent.submit_notice_tokens, _MAX_CONTEXT.value
        )
    if _MAX_ENVS.value is not None:
        config.env.max_envs = _MAX_ENVS.value
    tasks = load_eval_tasks(_TASKS.value or config.env.tasks, _INSTANCE_IDS.value)
    if _PREDICTIONS.value is not None:
        policy = read_predictions(_PREDICTIONS.value)
        tasks = predicted_tasks(tasks, policy, only=bool(_INSTANCE_IDS.value))
    process_id, num_processes = launched_process_shard(_NUM_PROCESSES.value, _PROCESS_ID.value)
    summary = experiment.run_evaluation(
        config,
        policy,
        _OUTPUT_DIR.value,
        tasks=tasks,
        num_runs=_NUM_RUNS.value,
        model_name=_MODEL_NAME.value,
        selectors=_SELECT.value,
        verifier_dir=_VERIFIER.value,
        grade_concurrency=_GRADE_CONCURRENCY.value,
        process_id=process_id,
        num_processes=num_processes,
    )
    check_some_graded(summary)
    if num_processes > 1:
        print(
            f"shard {process_id} of {num_processes} done; once every process has finished: "
            f"python launch/evaluate.py --merge_shards --output_dir={_OUTPUT_DIR.value}"
        )


if __name__ == "__main__":
    flags.mark_flags_as_required(["output_dir"])
    cli.run(main)
