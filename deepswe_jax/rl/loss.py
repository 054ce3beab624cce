"""GRPO++ policy loss: PPO clipped surrogate with clip-high, returned as (sum, denominator).

`total = sum(sums) / sum(denominators)` over micro-batches and hosts is the exact loss of the
whole batch, which is what makes gradient accumulation and multi-host reduction exact.

Token arrays are [batch, seq]; `mask` is the (shifted, compact-filtered) loss mask. A row
holds one sequence, or several packed ones told apart by `segment_ids` (0 = padding).

Which sequences a per-sequence mode divides by (`sequences`):
  'all' (DeepSWE): every sequence of the batch, compact-filtered ones included. DeepSWE trained
    with verl's loss_agg_mode=seq-mean-token-sum, which in rLLM's verl (agentica-project/verl
    777704a, verl/trainer/ppo/core_algos.py agg_loss) is `mean over rows of (sum of token losses
    / response_length)`; the rows are every trajectory of the mini-batch, and rLLM's compact
    filter (rllm/engine/agent_execution_engine.py, overlong_filter) zeroes a row's mask but keeps
    the row, so it counts in the mean.
  'trained': only sequences with at least one loss token; larger gradients by
    N_all / N_trained when compact filtering drops sequences.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LOSS_MODES = ("seq_sum_const", "token_mean", "seq_mean_token_mean")
SEQUENCE_DENOMINATORS = ("all", "trained")
# The log-ratio is clamped before exp so one wild token cannot overflow the ratio.
LOG_RATIO_CLAMP = 20.0


def importance_ratio(logprobs: jax.Array, old_logprobs: jax.Array) -> jax.Array:
    """`exp(clamp(logprobs - old_logprobs, -20, 20))`, [batch, seq] -> [batch, seq]."""
    log_ratio = jnp.clip(logprobs - old_logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return jnp.exp(log_ratio)


def clipped_surrogate(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    *,
    eps_low: float,
    eps_high: float,
) -> jax.Array:
    """Per-token PPO loss `max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))`, [batch, seq]."""
    ratio = importance_ratio(logprobs, old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return jnp.maximum(unclipped, clipped)


def _token_advantages(advantages: jax.Array, like: jax.Array) -> jax.Array:
    if advantages.ndim == 1:
        advantages = advantages[:, None]
    return jnp.broadcast_to(advantages, like.shape).astype(jnp.float32)


def _sequence_index(segment_ids: jax.Array | None, shape: tuple[int, int]) -> jax.Array:
    """[batch, seq] id of each token's sequence, unique over the batch (< batch * (seq + 1)).

    Without segment ids each row is one sequence; with them, segment 0 (padding) of each row
    gets an id of its own that callers leave out."""
    batch, seq = shape
    if segment_ids is None:
        return jnp.broadcast_to((jnp.arange(batch) * (seq + 1) + 1)[:, None], shape)
    # Segment ids are < seq + 1 since a segment holds >= 1 token.
    return jnp.arange(batch)[:, None] * (seq + 1) + segment_ids


def sequence_sum(values: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
    """[batch, seq] the sum of `values` [batch, seq] over each token's sequence (one per row
    without segment ids; a row's padding is a sequence of its own)."""
    index = _sequence_index(segment_ids, values.shape).ravel()
    num_ids = values.shape[0] * (values.shape[1] + 1)
    sums = jax.ops.segment_sum(values.ravel(), index, num_segments=num_ids)
    return sums[index].reshape(values.shape)


def sequence_max(values: jax.Array, segment_ids: jax.Array | None = None) -> jax.Array:
    """[batch, seq] the max of `values` [batch, seq] over each token's sequence."""
    index = _sequence_index(segment_ids, values.shape).ravel()
    num_ids = values.shape[0] * (values.shape[1] + 1)
    maxima = jax.ops.segment_max(values.ravel(), index, num_segments=num_ids)
    return maxima[index].reshape(values.shape)


def sequence_token_counts(
    mask: jax.Array, segment_ids: jax.Array | None = None, sequences: str = "trained"
) -> tuple[jax.Array, jax.Array]:
    """Loss tokens of each token's sequence [batch, seq], and the number of sequences counted.

    sequences='trained' counts sequences having a loss token; 'all' counts every sequence in the
    arrays (a row without segment ids, a nonzero segment with segment ids).
    """
    batch, seq = mask.shape
    is_loss = (mask > 0).astype(jnp.float32)
    index = _sequence_index(segment_ids, mask.shape).ravel()
    num_ids = batch * (seq + 1)
    counts = jax.ops.segment_sum(is_loss.ravel(), index, num_segments=num_ids)
    if sequences == "trained":
        counted = counts > 0
    else:
        present = jnp.ones_like(is_loss) if segment_ids is None else (segment_ids > 0)
        counted = jax.ops.segment_sum(present.ravel().astype(jnp.float32), index, num_ids) > 0
    return counts[index].reshape(mask.shape), counted.sum().astype(jnp.float32)


def policy_loss(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    mode: str = "seq_sum_const",
    max_response_len: int | None = None,
    segment_ids: jax.Array | None = None,
    sequences: str = "all",
    absent_sequences: jax.Array | None = None,
    token_weights: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Clipped-surrogate loss as an unreduced sum and the denominator to divide it by.

    Modes (ARCHITECTURE.md, GRPO++):
      seq_sum_const: per sequence, token-loss sum / max_response_len; mean over sequences
        (DeepSWE, Dr. GRPO). sum = sum_seqs(token sum / L), denominator = number of sequences.
      token_mean: sum = token-loss sum, denominator = number of loss tokens.
      seq_mean_token_mean: sum = sum_seqs(token sum / tokens in seq), denominator = sequences.
    The number of sequences follows `sequences` (module docstring): 'all' counts every sequence
    in the arrays plus `absent_sequences`, 'trained' those with a loss token.

    Args:
      logprobs: [batch, seq] current policy log-probs of the targets (differentiated).
      old_logprobs: [batch, seq] log-probs of the policy that generated the batch.
      advantages: [batch] per row, or [batch, seq] per token (required when packing).
      mask: [batch, seq] loss mask (0/1).
      max_response_len: the constant L of seq_sum_const (config.agent.max_context).
      segment_ids: [batch, seq] packed-sequence ids (0 = padding), or None for one per row.
      sequences: 'all' | 'trained' (config.rl.loss_sequences).
      absent_sequences: sequences of the batch left out of these arrays because they have no
        loss token (rl.batch.MicroBatch.absent_sequences, summed); counted by 'all' only.
      token_weights: [batch, seq] rollout-correction IS weights (rl/rollout_correction.py,
        no gradient) multiplying each token's clipped loss, as verl's policy losses do; None = 1.
    Returns:
      (loss_sum, denominator), float32 scalars.
    """
    if mode not in LOSS_MODES:
        raise ValueError(
            f"unknown loss mode {mode!r}; set config.rl.loss_mode to one of {LOSS_MODES}"
        )
    if sequences not in SEQUENCE_DENOMINATORS:
        raise ValueError(
            f"unknown sequence denominator {sequences!r}; set config.rl.loss_sequences to one of "
            f"{SEQUENCE_DENOMINATORS}"
        )
    if mode == "seq_sum_const" and not max_response_len:
        raise ValueError(
            "loss mode 'seq_sum_const' divides by a constant response length; pass "
            "max_response_len (config.agent.max_context)"
        )
    mask = mask.astype(jnp.float32)
    token_loss = clipped_surrogate(
        logprobs.astype(jnp.float32),
        old_logprobs.astype(jnp.float32),
        _token_advantages(advantages, mask),
        eps_low=eps_low,
        eps_high=eps_high,
    )
    if token_weights is not None:
        token_loss = token_loss * token_weights
    masked_loss = token_loss * mask
    if mode == "token_mean":
        return masked_loss.sum(), mask.sum()
    seq_tokens, num_sequences = sequence_token_counts(mask, segment_ids, sequences)
    if sequences == "all" and absent_sequences is not None:
        num_sequences = num_sequences + jnp.sum(absent_sequences).astype(jnp.float32)
    if mode == "seq_sum_const":
        return masked_loss.sum() / max_response_len, num_sequences
    return (masked_loss / jnp.maximum(seq_tokens, 1.0)).sum(), num_sequences


def ratio_metrics(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> dict[str, jax.Array]:
    """Summable statistics of the importance ratio `exp(logprobs - old_logprobs)` over loss tokens.

    Keys: tokens; clipped_low (A < 0 and r < 1 - eps_low: gradient cut); clipped_high (A > 0 and
    r > 1 + eps_high); ratio_sum; approx_kl_sum (k3 estimator of KL(old || new) per token);
    ratio_min / ratio_max (combine with min / max; +-inf when there are no tokens). Every other
    key combines by summation, so micro-batches and hosts merge exactly.
    """
    mask = mask > 0
    ratio = importance_ratio(logprobs.astype(jnp.float32), old_logprobs.astype(jnp.float32))
    log_ratio = jnp.log(ratio)
    advantages = _token_advantages(advantages, ratio)
    zero = jnp.zeros_like(ratio)
    return {
        "tokens": mask.sum().astype(jnp.float32),
        "clipped_low": (mask & (advantages < 0) & (ratio < 1.0 - eps_low))
        .sum()
        .astype(jnp.float32),
        "clipped_high": (mask & (advantages > 0) & (ratio > 1.0 + eps_high))
        .sum()
        .astype(jnp.float32),
        "ratio_sum": jnp.where(mask, ratio, zero).sum(),
        "approx_kl_sum": jnp.where(mask, ratio - 1.0 - log_ratio, zero).sum(),
        "ratio_min": jnp.where(mask, ratio, jnp.inf).min(),
        "ratio_max": jnp.where(mask, ratio, -jnp.inf).max(),
    }
