"""Training the execution-free outcome verifier on graded trajectories (SWE-Gym recipe).

Tasks are split into train and held-out (`heldout_fraction`, seeded, by task). Training uses
at most `max_per_task` resolved and unresolved trajectories per task, balanced 1:1, with the
loss on the answer token(s) only, on the sharded train step (rl.train_step.Trainer with
rl.sft's NLL); with LoRA adapters on the model only they train (the trainer's `trainable`),
else the whole model. Held-out items are all graded trajectories of the held-out tasks, scored
by p(YES) / (p(YES) + p(NO)); their ROC AUC is logged every `eval_every` steps.

    data = verifier_data(trajectories, problem_statements, prompt, settings)   # fails early
    summary = train_verifier(workdir, trainer, params, prompt, data, settings, ...)

experiment.train_verifier builds prompt, model (config.init_from, LoRA per
config.verifier.lora_rank) and trainer from a config; the command line is
launch/train_verifier.py.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.model.lora import merge_lora
from deepswe_jax.rl.metrics import MetricsWriter
from deepswe_jax.rl.train_step import Trainer
from deepswe_jax.verify.verifier import (
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


@dataclasses.dataclass(frozen=True)
class VerifierTrainingSettings:
    """config.verifier's data and schedule (with rl.micro_batch_size and the seed):
    `steps` optimizer steps of `batch_size` examples in micro-batches of `micro_batch_size`
    rows; held-out scoring every `eval_every` steps, `eval_batch_size` prompts per pass."""

    max_per_task: int = 2
    heldout_fraction: float = 0.25
    steps: int = 100
    batch_size: int = 16
    eval_every: int = 25
    eval_batch_size: int = 8
    micro_batch_size: int = 8
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class VerifierData:
    """The examples of the training tasks and of the held-out tasks."""

    train: list[VerifierExample]
    heldout: list[VerifierExample]


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


def verifier_data(
    trajectories: Sequence[Trajectory],
    problem_statements: Mapping[str, str],
    prompt: VerifierPrompt,
    settings: VerifierTrainingSettings,
) -> VerifierData:
    """Splits by task, balances the training tasks' trajectories and renders both sets as
    examples; raises when there is nothing to train on (before any model is built)."""
    train_set, heldout_set = split_by_task(trajectories, settings.heldout_fraction, settings.seed)
    chosen = select_verifier_trajectories(
        train_set, max_per_task=settings.max_per_task, seed=settings.seed
    )
    data = VerifierData(
        train=verifier_examples(chosen, problem_statements, prompt),
        heldout=verifier_examples(heldout_set, problem_statements, prompt),
    )
    if not data.train:
        raise ValueError(
            f"no verifier training examples among {len(train_set)} training trajectories: "
            "training needs tasks with both resolved and unresolved graded trajectories"
        )
    logger.info(
        "verifier data: %d training examples (%d resolved) from %d trajectories; %d held out",
        len(data.train),
        sum(e.resolved for e in data.train),
        len(train_set),
        len(data.heldout),
    )
    return data


def train_verifier(
    workdir: str | os.PathLike,
    trainer: Trainer,
    params: nnx.State,
    prompt: VerifierPrompt,
    data: VerifierData,
    settings: VerifierTrainingSettings,
    *,
    model_config: Mapping[str, Any],
    tokenizer_dir: str | os.PathLike,
    compute_dtype: str,
) -> dict:
    """Trains the verifier from `params` (the model's nnx.Param state, adapters included;
    donated), scores the held-out set, and saves it to workdir/verifier (adapters merged, with
    `model_config`, the tokenizer of `tokenizer_dir` and `compute_dtype`); returns the summary,
    also written to workdir/summary.json."""
    workdir = Path(workdir)
    state = trainer.init_state(params)
    scorer = VerifierScorer(
        trainer.graphdef,
        prompt,
        mesh=trainer.mesh,
        rules=trainer.rules,
        batch_size=settings.eval_batch_size,
    )
    heldout_prompts = [example.prompt_ids for example in data.heldout]
    heldout_labels = [example.resolved for example in data.heldout]

    def evaluate() -> dict[str, float]:
        if not data.heldout:
            return {}
        return heldout_metrics(scorer(state.params, heldout_prompts), heldout_labels)

    stream = example_stream(data.train, settings.seed)
    rows = settings.micro_batch_size
    last_eval: dict[str, float] = {}
    with MetricsWriter(workdir, resume_step=-1) as writer:  # starts over: from step 0
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

    merged = merge_lora(nnx.merge(trainer.graphdef, state.params))  # as is without adapters
    save_verifier(
        workdir / VERIFIER_DIR,
        nnx.state(merged, nnx.Param),
        model_config=model_config,
        tokenizer_dir=tokenizer_dir,
        max_prompt_tokens=prompt.max_prompt_tokens,
        compute_dtype=compute_dtype,
    )
    summary = {
        "steps": settings.steps,
        "train_examples": len(data.train),
        "train_resolved": sum(e.resolved for e in data.train),
        "heldout_examples": len(data.heldout),
        "heldout_resolved": sum(heldout_labels),
        **{key.removeprefix("heldout/"): value for key, value in last_eval.items()},
        "verifier": str(workdir / VERIFIER_DIR),
    }
    (workdir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary
