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
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# Run as a script (python launch/train_verifier.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ml_collections  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from flax import nnx  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax.agent.chat import ChatTokenizer  # noqa: E402
from deepswe_jax.agent.trajectory import Trajectory, read_trajectories  # noqa: E402
from deepswe_jax.env.tasks import load_tasks  # noqa: E402
from deepswe_jax.model.lora import LoRAConfig, apply_lora, freeze_non_adapters, merge_lora  # noqa: E402
from deepswe_jax.parallel import init_distributed, make_mesh  # noqa: E402
from deepswe_jax.rl.loop import initial_params, model_factory, sharding_rules  # noqa: E402
from deepswe_jax.rl.metrics import MetricsWriter  # noqa: E402
from deepswe_jax.rl.sft import NegativeLogLikelihoodLoss  # noqa: E402
from deepswe_jax.rl.train_step import (  # noqa: E402
    LossSettings,
    Trainer,
    learning_rate_schedule,
    make_optimizer,
)
from deepswe_jax.verify.verifier import (  # noqa: E402
    VerifierExample,
    VerifierPrompt,
    VerifierScorer,
    roc_auc,
    save_verifier,
    select_verifier_trajectories,
    verifier_examples,
    verifier_micro_batch,
)

logger = logging.getLogger("deepswe_jax.train_verifier")

SUMMARY_FILE = "summary.json"
VERIFIER_DIR = "verifier"


def split_by_task(
    trajectories: Sequence[Trajectory], heldout_fraction: float, seed: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """(train, held-out): a seeded random ceil(fraction * tasks) tasks are held out whole."""
    task_ids = sorted({t.task_id for t in trajectories})
    count = math.ceil(heldout_fraction * len(task_ids)) if heldout_fraction > 0 else 0
    heldout = set(np.random.default_rng(seed).permutation(task_ids)[:count].tolist())
    return (
        [t for t in trajectories if t.task_id not in heldout],
        [t for t in trajectories if t.task_id in heldout],
    )


def example_stream(examples: Sequence[VerifierExample], seed: int) -> Iterator[VerifierExample]:
    """Examples forever, a fresh seeded permutation each epoch."""
    rng = np.random.default_rng(seed)
    while True:
        for index in rng.permutation(len(examples)):
            yield examples[index]


def verifier_model(config: ml_collections.ConfigDict, mesh, rules):
    """The model to train: config.init_from (or random init), with LoRA adapters when
    config.verifier.lora_rank > 0."""
    graphdef, _ = nnx.split(nnx.eval_shape(model_factory(config)), nnx.Param)
    model = nnx.merge(graphdef, initial_params(config, mesh, rules))
    if config.verifier.lora_rank > 0:
        lora = LoRAConfig(
            rank=config.verifier.lora_rank,
            alpha=config.verifier.lora_alpha,
            targets=tuple(config.verifier.lora_targets),
        )
        apply_lora(model, lora, rngs=nnx.Rngs(config.seed + 1))
    return model


def heldout_metrics(scores: np.ndarray, labels: Sequence[bool]) -> dict[str, float]:
    """AUC (nan without both classes), accuracy at 0.5, mean score of each class."""
    labels = np.asarray(labels, bool)
    both = labels.any() and (~labels).any()
    return {
        "heldout/auc": roc_auc(scores, labels) if both else float("nan"),
        "heldout/accuracy": float(((scores > 0.5) == labels).mean()),
        "heldout/mean_score_resolved": float(scores[labels].mean()) if labels.any() else 0.0,
        "heldout/mean_score_unresolved": float(scores[~labels].mean()) if (~labels).any() else 0.0,
    }


def train_verifier(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    trajectories: Sequence[Trajectory],
    problem_statements: Mapping[str, str],
) -> dict:
    """Trains, evaluates and saves a verifier (see the module docstring); returns the summary."""
    workdir = Path(workdir)
    settings = config.verifier
    prompt = VerifierPrompt(
        ChatTokenizer.from_directory(config.tokenizer),
        max_prompt_tokens=settings.max_prompt_tokens,
    )
    train_set, heldout_set = split_by_task(trajectories, settings.heldout_fraction, config.seed)
    chosen = select_verifier_trajectories(
        train_set, max_per_task=settings.max_per_task, seed=config.seed
    )
    train_examples = verifier_examples(chosen, problem_statements, prompt)
    heldout_examples = verifier_examples(heldout_set, problem_statements, prompt)
    if not train_examples:
        raise ValueError(
            f"no verifier training examples among {len(train_set)} training trajectories: "
            "training needs tasks with both resolved and unresolved graded trajectories"
        )
    logger.info(
        "verifier data: %d training examples (%d resolved) from %d trajectories; %d held out",
        len(train_examples),
        sum(e.resolved for e in train_examples),
        len(train_set),
        len(heldout_examples),
    )

    rules = sharding_rules(config)
    mesh = make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
    model = verifier_model(config, mesh, rules)
    optimizer = make_optimizer(config.rl)
    if settings.lora_rank > 0:
        optimizer = freeze_non_adapters(optimizer)
    trainer = Trainer(
        model,
        optimizer,
        LossSettings(logprob_chunk=config.rl.logprob_chunk),
        mesh=mesh,
        rules=rules,
        learning_rate=learning_rate_schedule(config.rl),
        loss_fn=NegativeLogLikelihoodLoss(),
    )
    state = trainer.init_state(nnx.state(model, nnx.Param))
    del model  # its arrays were donated to the train state
    scorer = VerifierScorer(
        trainer.graphdef, prompt, mesh=mesh, rules=rules, batch_size=settings.eval_batch_size
    )
    heldout_prompts = [example.prompt_ids for example in heldout_examples]
    heldout_labels = [example.resolved for example in heldout_examples]

    def evaluate() -> dict[str, float]:
        if not heldout_examples:
            return {}
        return heldout_metrics(scorer(state.params, heldout_prompts), heldout_labels)

    stream = example_stream(train_examples, config.seed)
    rows = config.rl.micro_batch_size
    last_eval: dict[str, float] = {}
    with MetricsWriter(workdir) as writer:
        writer.write(0, evaluate())
        for step in range(1, settings.steps + 1):
            examples = [next(stream) for _ in range(settings.batch_size)]
            micro_batches = [
                verifier_micro_batch(examples[start : start + rows], rows)
                for start in range(0, len(examples), rows)
            ]
            state, metrics = trainer.step(state, micro_batches)
            metrics = {f"train/{key}": value for key, value in metrics.items()}
            if step % settings.eval_every == 0 or step == settings.steps:
                last_eval = evaluate()
                metrics.update(last_eval)
                logger.info("step %d: loss %.4f %s", step, metrics["train/loss"], last_eval)
            writer.write(step, metrics)

    params = state.params
    if settings.lora_rank > 0:
        params = nnx.state(merge_lora(nnx.merge(trainer.graphdef, params)), nnx.Param)
    save_verifier(
        workdir / VERIFIER_DIR,
        params,
        model_config=config.model.to_dict(),
        tokenizer_dir=config.tokenizer,
        max_prompt_tokens=settings.max_prompt_tokens,
        compute_dtype=config.compute_dtype,
    )
    summary = {
        "steps": settings.steps,
        "train_examples": len(train_examples),
        "train_resolved": sum(e.resolved for e in train_examples),
        "heldout_examples": len(heldout_examples),
        "heldout_resolved": sum(heldout_labels),
        **{key.removeprefix("heldout/"): value for key, value in last_eval.items()},
        "verifier": str(workdir / VERIFIER_DIR),
    }
    (workdir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


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
    app.run(main)
