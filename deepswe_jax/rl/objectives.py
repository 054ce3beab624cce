"""What a train step minimizes, one micro-batch at a time: the `MicroBatchLoss` protocol and
GRPO++'s `PolicyGradientLoss` with its `LossSettings` (rl/loss.py holds the loss itself; rl/sft.py
the supervised objective). `train_step.Trainer` evaluates them inside its jitted step.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import jax
import jax.numpy as jnp

from deepswe_jax.rl import rollout_correction
from deepswe_jax.rl.loss import policy_loss, ratio_metrics
from deepswe_jax.rl.rollout_correction import RolloutCorrectionSettings, correct_rollout


@dataclasses.dataclass(frozen=True)
class LossSettings:
    """The loss hyperparameters (config.rl, and the response budget of config.agent).

    max_response_len: the constant of 'seq_sum_const' (config.agent.max_context).
    sequences: which sequences a per-sequence mode divides by: 'all' (DeepSWE) | 'trained'
      (rl/loss.py).
    logprob_chunk: sequence positions per chunk of the log-prob computation.
    loss_position_buckets: B > 1 scores only each row's loss positions: they are gathered into
      k/B of the row length, the least k that holds the row with the most loss tokens, so the
      vocabulary head (matmul, log-softmax, entropy) skips prompts and observations, at up to B
      compiled programs per row length. 1 = every position, one program (the head's cost is
      small beside a large model's decoder, and each program compiles for minutes there). Multi-
      process runs score every position (each process would pick its own capacity).
    temperature: the sampler's temperature, so trainer and sampler score the same distribution.
    rollout_correction: IS weights / rejection against the sampler's log-probs
      (rl/rollout_correction.py); off by default (DeepSWE).
    """

    mode: str = "seq_sum_const"
    eps_low: float = 0.2
    eps_high: float = 0.28
    max_response_len: int = 32768
    sequences: str = "all"
    logprob_chunk: int = 1024
    loss_position_buckets: int = 1
    temperature: float = 1.0
    rollout_correction: RolloutCorrectionSettings = RolloutCorrectionSettings()


class MicroBatchLoss(Protocol):
    """A training objective evaluated one micro-batch at a time inside the jitted step.

    __call__(logprobs, entropy, batch) -> (loss_sum, denominator, metric_sums):
      logprobs / entropy: [rows, length] float32 under the current params (logprobs carries the
        gradient); batch: the micro-batch's arrays by MicroBatch field name, plus
        "old_logprobs" [rows, length] (the policy before this batch's first update; equal to
        stop_gradient(logprobs) when each batch gets one update).
      The batch loss is sum(loss_sum) / sum(denominator) over micro-batches, so accumulation is
      exact. metric_sums: float32 scalars combined across micro-batches by summation, or by
      min / max for keys ending in _min / _max.
    summarize(sums) -> metrics: host-side metrics (Python floats) from the combined
      metric_sums of one step.
    """

    def __call__(
        self, logprobs: jax.Array, entropy: jax.Array, batch: dict[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]: ...

    def summarize(self, sums: dict[str, float]) -> dict[str, float]: ...


@dataclasses.dataclass(frozen=True)
class PolicyGradientLoss:
    """GRPO++ (rl/loss.py policy_loss), with the rollout correction when set, and importance-ratio
    metrics against the old policy and against the sampler's log-probs (trainer/sampler
    mismatch, rl/rollout_correction.py). A `MicroBatchLoss`."""

    settings: LossSettings

    def __call__(
        self, logprobs: jax.Array, entropy: jax.Array, batch: dict[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        settings = self.settings
        old = batch["old_logprobs"]
        mask = batch["loss_mask"]
        weights, trained_mask, correction = None, mask, {}
        if settings.rollout_correction.enabled:
            weights, trained_mask, correction = correct_rollout(
                old,
                batch["sampler_logprobs"],
                mask,
                settings.rollout_correction,
                batch["segment_ids"],
            )
        total, denominator = policy_loss(
            logprobs,
            old,
            batch["advantages"],
            trained_mask,
            eps_low=settings.eps_low,
            eps_high=settings.eps_high,
            mode=settings.mode,
            max_response_len=settings.max_response_len,
            segment_ids=batch["segment_ids"],
            sequences=settings.sequences,
            absent_sequences=batch["absent_sequences"],
            token_weights=weights,
        )
        clip = {"eps_low": settings.eps_low, "eps_high": settings.eps_high}
        current = jax.lax.stop_gradient(logprobs)
        policy = ratio_metrics(current, old, batch["advantages"], mask, **clip)
        sampler = ratio_metrics(old, batch["sampler_logprobs"], batch["advantages"], mask, **clip)
        return (
            total,
            denominator,
            {
                **{f"policy_{key}": value for key, value in policy.items()},
                **{f"sampler_{k}": v for k, v in sampler.items() if "clipped" not in k},
                # |trainer - sampler| logprob per loss token: how far the sampler's numerics
                # are from the trainer's (same weights; 0 up to float rounding).
                "sampler_logprob_abs_diff_sum": jnp.where(
                    mask > 0, jnp.abs(old - batch["sampler_logprobs"]), 0.0
                ).sum(),
                **rollout_correction.mismatch_sums(
                    old, batch["sampler_logprobs"], mask, batch["segment_ids"]
                ),
                **correction,
            },
        )

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        tokens = max(float(sums["policy_tokens"]), 1.0)
        return {
            "clip_frac_low": float(sums["policy_clipped_low"]) / tokens,
            "clip_frac_high": float(sums["policy_clipped_high"]) / tokens,
            "policy_approx_kl": float(sums["policy_approx_kl_sum"]) / tokens,
            "ratio_mean": float(sums["policy_ratio_sum"]) / tokens,
            "ratio_min": float(sums["policy_ratio_min"]),
            "ratio_max": float(sums["policy_ratio_max"]),
            "sampler_approx_kl": float(sums["sampler_approx_kl_sum"]) / tokens,
            "sampler_ratio_mean": float(sums["sampler_ratio_sum"]) / tokens,
            "sampler_ratio_min": float(sums["sampler_ratio_min"]),
            "sampler_ratio_max": float(sums["sampler_ratio_max"]),
            "sampler_logprob_abs_diff": float(sums["sampler_logprob_abs_diff_sum"]) / tokens,
            **rollout_correction.summarize(sums),
        }
