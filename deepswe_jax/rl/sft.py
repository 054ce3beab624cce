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

`train_sft(run_dir, trainer, initial_params, trajectories, settings)` runs
`settings.num_steps` such steps on seeded shuffles of the data, in a `RunDirectory` like the RL
loop's (experiment.train_sft builds the parts from a config; launch/train_sft.py).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.interrupts import deferred_interrupts
from deepswe_jax.parallel.distributed import process_local_record
from deepswe_jax.rl.batch import TrainBatch, assemble_batch
from deepswe_jax.rl.run_directory import RunDirectory
from deepswe_jax.rl.train_step import Trainer, TrainState

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
    """The SFT objective as an `objectives.MicroBatchLoss`: token-mean NLL over `loss_mask`.

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


@dataclasses.dataclass(frozen=True)
class SFTSettings:
    """What `train_sft` trains on (config.sft and config.seed): `num_steps` optimizer steps of
    `batch_size` trajectories in micro-batches of `micro_batch_size` rows padded to
    `length_buckets` (() = powers of two), each trajectory cut to its first `max_tokens` tokens
    (0 = all); epochs reshuffle the data with `seed`."""

    num_steps: int
    batch_size: int
    micro_batch_size: int
    length_buckets: tuple[int, ...] = ()
    max_tokens: int = 0
    seed: int = 0


def train_sft(
    *,
    run_dir: RunDirectory,
    trainer: Trainer,
    initial_params: Callable[[], nnx.State],
    trajectories: Sequence[Trajectory],
    settings: SFTSettings,
) -> TrainState:
    """Fine-tunes the policy (`initial_params()`, or the run's latest checkpoint) on
    `trajectories` with `trainer` (its loss: `NegativeLogLikelihoodLoss`) for
    `settings.num_steps` optimizer steps, in the entered `run_dir`; returns the final state.

    Metrics keys are sft/...; checkpoints go to checkpoints/<step>/ every few steps and at the
    end: a valid `config.init_from` for launch/train.py and a policy for launch/evaluate.py.
    Started again on the same run directory, a run resumes from its latest checkpoint and sees
    the same batches. With several processes each one feeds its share of every batch's rows.
    """
    run = run_dir.restore_or_init(trainer, initial_params, settings.seed)
    run_dir.open_metrics(run.iteration)
    state = run.train_state
    for step in range(run.iteration, settings.num_steps):
        indices = sft_batch_indices(
            len(trajectories), seed=settings.seed, step=step, batch_size=settings.batch_size
        )
        batch = sft_batch(
            [trajectories[i] for i in indices],
            micro_batch_size=settings.micro_batch_size,
            length_buckets=settings.length_buckets or None,
            max_tokens=settings.max_tokens or None,
        )
        # Every process builds the same batch and feeds the rows its devices hold.
        micro_batches = [
            process_local_record(mb, trainer.batch_sharding) for mb in batch.micro_batches
        ]
        run_dir.check_saved()  # the last save failed: stop before training on
        with deferred_interrupts():
            state, metrics = trainer.step(state, micro_batches)
        # The row first, in one block with the save for the signals: a saved step has its
        # metrics row (a Ctrl-C here lets both finish; a rerun resumes after this step).
        with deferred_interrupts():
            run_dir.write_metrics(step + 1, {f"sft/{key}": v for key, v in metrics.items()})
            run_dir.save(
                step + 1,
                state,
                run.rng_key,
                {"tasks_consumed": (step + 1) * settings.batch_size},
                force=step + 1 == settings.num_steps,
            )
        logger.info(
            "sft step %d/%d: loss %.4f, perplexity %.2f, %.1f s",
            step + 1,
            settings.num_steps,
            metrics["loss"],
            metrics["perplexity"],
            metrics["step_time_s"],
        )
    with deferred_interrupts():
        run_dir.wait_until_finished()
    return state
