"""Training the execution-free outcome verifier on graded trajectories (SWE-Gym recipe).

Tasks are split into train and held-out (config.verifier.heldout_fraction, seeded, by task).
Training uses at most config.verifier.max_per_task resolved and unresolved trajectories per
task, balanced 1:1, with the loss on the answer token(s) only, on the sharded train step
(rl.train_step.Trainer with rl.sft's NLL); LoRA adapters when config.verifier.lora_rank > 0
(only they train), else full fine-tuning from config.init_from ('' = random init).
Held-out items are all graded trajectories of the held-out tasks, scored by
p(YES) / (p(YES) + p(NO)); their ROC AUC is logged every eval_every steps.
The command line is launch/train_verifier.py.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import ml_collections
import numpy as np
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.experiment import initial_params, model_factory, sharding_rules
from deepswe_jax.model.lora import LoRAConfig, LoRAParam, apply_lora, merge_lora
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.metrics import MetricsWriter
from deepswe_jax.rl.sft import NegativeLogLikelihoodLoss
from deepswe_jax.rl.train_step import (
    LossSettings,
    Trainer,
    learning_rate_schedule,
    make_optimizer,
)
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
    trainer = Trainer(
        model,
        make_optimizer(config.rl),
        LossSettings(logprob_chunk=config.rl.logprob_chunk),
        mesh=mesh,
        rules=rules,
        learning_rate=learning_rate_schedule(config.rl),
        loss_fn=NegativeLogLikelihoodLoss(),
        trainable=LoRAParam if settings.lora_rank > 0 else nnx.Param,
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
