"""Supervised fine-tuning on trajectories: negative log-likelihood of the assistant tokens.

Rejection-sampling fine-tuning (SWE-Gym) trains on the policy's own resolved trajectories
(verify/rejection_sampling.py) or on expert ones (verify/expert.py), with exactly the token
sequences the sampler produced: the batches are the RL batches (`rl.batch.assemble_batch`:
shift, pack, pad to length buckets) and the loss reads only `loss_mask` (1 on sampled
assistant tokens, <|im_end|> included; prompt and observations are 0). It plugs into the
sharded, gradient-accumulating `Trainer` as its `loss_fn`:

    trainer = Trainer(model, optimizer, LossSettings(temperature=1.0), mesh=mesh,
                      loss_fn=NegativeLogLikelihoodLoss())
    state, metrics = trainer.step(state, sft_batch(trajectories, micro_batch_size=8).micro_batches)

`train_sft(config, workdir, trajectories)` runs config.sft.num_steps such steps on seeded
shuffles of the data, with the RL loop's checkpoints and metrics (launch/train_sft.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.checkpoint import TrainCheckpoints
from deepswe_jax.experiment import model_factory, sharding_rules
from deepswe_jax.interrupts import deferred_interrupts
from deepswe_jax.parallel import make_mesh
from deepswe_jax.parallel.distributed import is_primary_process, process_local_record
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.rl.batch import TrainBatch, assemble_batch
from deepswe_jax.rl.loop import CHECKPOINT_DIR, restore_or_init, save_config
from deepswe_jax.rl.metrics import MetricsWriter
from deepswe_jax.rl.train_step import (
    LossSettings,
    Trainer,
    TrainState,
    learning_rate_schedule,
    make_optimizer,
)

logger = logging.getLogger(__name__)


def negative_log_likelihood(logprobs: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Token-mean NLL as (sum, denominator): sum of -logprobs where mask > 0, and the token count.

    logprobs: [batch, seq] log-probs of the targets; mask: [batch, seq] loss mask (its value
    weights each token, so 0/1 masks count tokens). Returns float32 scalars.
    """
    mask = mask.astype(jnp.float32)
    return -(logprobs.astype(jnp.float32) * mask).sum(), mask.sum()


@dataclasses.dataclass(frozen=True)
class NegativeLogLikelihoodLoss:
    """The SFT objective as a `train_step.MicroBatchLoss`: token-mean NLL over `loss_mask`.

    Metrics: perplexity (exp of the step's mean NLL) and target_logprob_min (the least likely
    trained token, a sign of what is not yet learned).
    """

    def __call__(
        self, logprobs: jax.Array, entropy: jax.Array, batch: dict[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        mask = batch["loss_mask"]
        total, denominator = negative_log_likelihood(logprobs, mask)
        current = jax.lax.stop_gradient(logprobs)
        return (
            total,
            denominator,
            {"target_logprob_min": jnp.where(mask > 0, current, jnp.inf).min()},
        )

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        mean_nll = float(sums["loss_sum"]) / max(float(sums["denominator"]), 1e-8)
        return {
            "perplexity": math.exp(min(mean_nll, 80.0)),
            "target_logprob_min": float(sums["target_logprob_min"]),
        }


def truncate_trajectory(trajectory: Trajectory, max_tokens: int) -> Trajectory:
    """The first `max_tokens` tokens of `trajectory` (a token-exact prefix, with its loss mask
    and sampler log-probs); the trajectory itself when it is not longer."""
    if len(trajectory.token_ids) <= max_tokens:
        return trajectory
    prompt_tokens = min(len(trajectory.prompt_ids), max_tokens)
    return dataclasses.replace(
        trajectory,
        prompt_ids=trajectory.prompt_ids[:prompt_tokens],
        token_ids=trajectory.token_ids[:max_tokens],
        loss_mask=trajectory.loss_mask[:max_tokens],
        sampler_logprobs=trajectory.sampler_logprobs[:max_tokens],
    )


def sft_batch(
    trajectories: Sequence[Trajectory],
    *,
    micro_batch_size: int,
    length_buckets: Sequence[int] | None = None,
    pack_length: int | None = None,
    max_tokens: int | None = None,
) -> TrainBatch:
    """Micro-batches of `trajectories` for `NegativeLogLikelihoodLoss`, token for token as sampled.

    Every trajectory with assistant tokens is trained on whatever its reward or stop reason,
    except infrastructure failures (choose them first, e.g. with
    `verify.rejection_sampling.select_for_sft`); the advantages are not used.
    Args as `rl.batch.assemble_batch`: rows per micro-batch, allowed row lengths (None = powers
    of two), and the row length to pack several sequences into (None = one per row);
    max_tokens: train on each trajectory's first max_tokens tokens only (None = all), the
    usual SFT cut to a maximum sequence length.
    """
    if max_tokens is not None:
        trajectories = [truncate_trajectory(t, max_tokens) for t in trajectories]
    return assemble_batch(
        trajectories,
        micro_batch_size=micro_batch_size,
        compact_filtering=False,
        length_buckets=length_buckets,
        pack_length=pack_length,
    )


def sft_batch_indices(num_examples: int, *, seed: int, step: int, batch_size: int) -> list[int]:
    """The example indices of optimizer step `step` (0-based): positions step * batch_size ...
    of a stream of epochs, each a permutation drawn from (seed, epoch), so a resumed run sees
    the same batches. A batch never holds one example twice (batch_size <= num_examples)."""
    if not 0 < batch_size <= num_examples:
        raise ValueError(
            f"config.sft.batch_size={batch_size} must be between 1 and the number of training "
            f"trajectories ({num_examples}); lower it or add data"
        )
    chosen: dict[int, None] = {}
    position = step * batch_size
    while len(chosen) < batch_size:
        epoch, index = divmod(position, num_examples)
        chosen.setdefault(
            int(np.random.default_rng([seed, epoch]).permutation(num_examples)[index])
        )
        position += 1
    return list(chosen)


def make_sft_trainer(config: ml_collections.ConfigDict, rules: Rules) -> Trainer:
    """The sharded trainer of config.model with AdamW from config.sft and the NLL loss.

    The learning rate warms up over config.sft.warmup_steps, then stays constant or, with
    config.sft.cosine_decay, decays to 0 at config.sft.num_steps. Log-probs are scored at
    temperature 1: SFT fits the model's own distribution, whatever temperature the sampler
    later uses.
    """
    decay_steps = config.sft.num_steps if config.sft.get("cosine_decay", False) else 0
    return Trainer(
        nnx.eval_shape(model_factory(config)),
        make_optimizer(config.sft, decay_steps),
        LossSettings(logprob_chunk=config.rl.logprob_chunk, temperature=1.0),
        mesh=make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor),
        rules=rules,
        peak_flops_per_device=config.rl.get("peak_flops_per_device"),
        learning_rate=learning_rate_schedule(config.sft, decay_steps),
        loss_fn=NegativeLogLikelihoodLoss(),
        packed_rows=False,  # train_sft's batches hold one trajectory per row
    )


def train_sft(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    trajectories: Sequence[Trajectory],
) -> TrainState:
    """Fine-tunes config.model (from config.init_from) on `trajectories` for config.sft.num_steps
    optimizer steps; returns the final state.

    Workdir layout as the RL loop's: config.json, metrics.jsonl and tensorboard/ (keys sft/...),
    checkpoints/<step>/ every config.checkpoint.every steps and at the end. The checkpoints
    folder is a valid `config.init_from` for launch/train.py and a policy for
    launch/evaluate.py. Started again on the same workdir, a run resumes from its latest
    checkpoint and sees the same batches. With several processes each one feeds its share of
    every batch's rows; the first writes config and metrics.
    """
    sft = config.sft
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    primary = is_primary_process()
    if primary:
        save_config(config, workdir)
    rules = sharding_rules(config)
    trainer = make_sft_trainer(config, rules)
    length_buckets = tuple(sft.length_buckets) or None
    with contextlib.ExitStack() as stack:
        checkpoints = stack.enter_context(
            TrainCheckpoints(
                workdir / CHECKPOINT_DIR,
                every=config.checkpoint.every,
                keep=config.checkpoint.keep,
                async_save=config.checkpoint.async_save,
            )
        )
        run = restore_or_init(config, trainer, checkpoints, rules)
        writer = (
            stack.enter_context(MetricsWriter(workdir, resume_step=run.iteration))
            if primary
            else None
        )
        state = run.train_state
        for step in range(run.iteration, sft.num_steps):
            indices = sft_batch_indices(
                len(trajectories), seed=config.seed, step=step, batch_size=sft.batch_size
            )
            batch = sft_batch(
                [trajectories[i] for i in indices],
                micro_batch_size=sft.micro_batch_size,
                length_buckets=length_buckets,
                max_tokens=sft.get("max_tokens") or None,
            )
            # Every process builds the same batch and feeds the rows its devices hold.
            micro_batches = [
                process_local_record(mb, trainer.batch_sharding) for mb in batch.micro_batches
            ]
            checkpoints.check_saved()  # the last save failed: stop before training on
            with deferred_interrupts():
                state, metrics = trainer.step(state, micro_batches)
            with deferred_interrupts():
                checkpoints.save(
                    step + 1,
                    params=state.params,
                    opt_state=state.opt_state,
                    rng_key=run.rng_key,
                    data_position={
                        "optimizer_steps": int(state.step),
                        "tasks_consumed": (step + 1) * sft.batch_size,
                    },
                    config=config,
                    force=step + 1 == sft.num_steps,
                )
            if writer is not None:
                writer.write(step + 1, {f"sft/{key}": value for key, value in metrics.items()})
            logger.info(
                "sft step %d/%d: loss %.4f, perplexity %.2f, %.1f s",
                step + 1,
                sft.num_steps,
                metrics["loss"],
                metrics["perplexity"],
                metrics["step_time_s"],
            )
        checkpoints.wait_until_finished()
    return state
