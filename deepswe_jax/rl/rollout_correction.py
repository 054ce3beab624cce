"""Rollout correction for the sampler-trainer mismatch, as verl 0.9.1 defines it
(verl/trainer/ppo/rollout_corr_helper.py, decoupled mode; docs/algo/rollout_corr.md).

The sampler (vLLM in bf16, or a bf16 JaxSampler) and the trainer (fp32) score the same tokens
differently. With rho = pi_old / pi_sampler per token (pi_old: the trainer's log-probs before
the update, pi_sampler: the log-probs the sampler reported):

  importance sampling (rollout_is): a detached weight multiplies each token's clipped PPO loss
    'token':    w_t = rho_t                       (truncated IS, TIS)
    'sequence': w_t = prod over the sequence of rho (sequence-level IS)
    threshold 'C' (a number): w = min(w, C); 'lower_upper': w = 0 outside [lower, upper]
    (masked IS, verl's IcePop; the token stays in the loss's denominators).
  rejection (rollout_rs): tokens or whole sequences leave the loss mask (numerator and the
    token counts of the denominators, as verl's agg_loss on the rejected response_mask); a
    sequence whose tokens are all rejected still counts in sequences='all' (verl divides by the
    mini-batch's rows). Options, comma-separated, all must pass:
    token_k1/k2/k3, seq_sum_k1/k2/k3, seq_mean_k1/k2/k3 (seq_mean_k1 is the geometric-mean
    mask), seq_max_k2/k3; k1 = -log rho, k2 = (log rho)^2 / 2, k3 = rho - 1 - log rho. k1
    thresholds are 'lower_upper' ratio bounds (one number C means 1/C and C), kept when
    log(lower) <= k1 <= log(upper); the others an upper bound.

Arrays are [batch, seq]; a row holds one sequence or several packed ones (segment ids). Every
statistic is per micro-batch and summable, so micro-batches and hosts merge exactly; a sequence
never spans micro-batches.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from deepswe_jax.rl.loss import sequence_max, sequence_sum

# verl's SAFETY_BOUND: log-ratios are clamped to +-20 before exp.
SAFETY_BOUND = 20.0
IS_LEVELS = ("token", "sequence")
RS_OPTIONS = (
    "token_k1",
    "token_k2",
    "token_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
)
# |log rho| histogram edges for the ratio's quantiles: 0 and 64 geometric steps from 1e-6 to 20
# (each 1.31x the last), mirrored for negative log-ratios.
_POSITIVE_EDGES = np.geomspace(1e-6, SAFETY_BOUND, 64)
LOG_RATIO_EDGES = np.concatenate([-_POSITIVE_EDGES[::-1], [0.0], _POSITIVE_EDGES])
RATIO_QUANTILES = (0.01, 0.05, 0.5, 0.95, 0.99)


def _number(text: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise ValueError(
            f"config.rl.rollout_correction.{field}: {text!r} is not a number; give 'C' or "
            "'lower_upper' (e.g. '2.0' or '0.5_2.0')"
        ) from error
    if value <= 0:
        raise ValueError(f"config.rl.rollout_correction.{field}: bounds must be > 0, got {text!r}")
    return value


def _bounds(spec: str | float, field: str) -> tuple[float | None, float]:
    """(lower or None, upper) of a 'C' or 'lower_upper' threshold."""
    text = str(spec).strip()
    if "_" in text:
        lower, upper = (_number(part, field) for part in text.split("_", 1))
        if lower > upper:
            raise ValueError(f"config.rl.rollout_correction.{field}: lower > upper in {text!r}")
        return lower, upper
    return None, _number(text, field)


@dataclasses.dataclass(frozen=True)
class RolloutCorrectionSettings:
    """verl's algorithm.rollout_correction (names and defaults; config.rl.rollout_correction).

    rollout_is: None (off; DeepSWE) | 'token' | 'sequence'.
    rollout_is_threshold: 'C' (truncate weights at C) | 'lower_upper' (zero weights outside).
    rollout_rs: None (off) | comma-separated RS_OPTIONS.
    rollout_rs_threshold: one spec for all options or one per option, comma-separated.
    """

    rollout_is: str | None = None
    rollout_is_threshold: str | float = 2.0
    rollout_rs: str | None = None
    rollout_rs_threshold: str | float | None = None

    def __post_init__(self) -> None:
        if self.rollout_is is not None and self.rollout_is not in IS_LEVELS:
            raise ValueError(
                f"config.rl.rollout_correction.rollout_is={self.rollout_is!r}; use '' (off), "
                f"'token' or 'sequence'"
            )
        self.is_bounds()
        self.rs_bounds()

    @property
    def enabled(self) -> bool:
        return self.rollout_is is not None or self.rollout_rs is not None

    def is_bounds(self) -> tuple[float | None, float]:
        """(lower or None for truncation, upper) of the IS weights."""
        return _bounds(self.rollout_is_threshold, "rollout_is_threshold")

    def rs_bounds(self) -> tuple[tuple[str, float | None, float], ...]:
        """(option, lower, upper) per rejection option: k1 options bound log(rho)'s negation
        by (log lower, log upper); the others bound their statistic by upper."""
        if self.rollout_rs is None:
            return ()
        options = list(dict.fromkeys(o.strip() for o in self.rollout_rs.split(",") if o.strip()))
        unknown = [o for o in options if o not in RS_OPTIONS]
        if not options or unknown:
            raise ValueError(
                f"config.rl.rollout_correction.rollout_rs={self.rollout_rs!r}; use options of "
                f"{RS_OPTIONS}, comma-separated"
            )
        if self.rollout_rs_threshold is None or not str(self.rollout_rs_threshold).strip():
            raise ValueError(
                "config.rl.rollout_correction.rollout_rs is set but rollout_rs_threshold is "
                "not; give one threshold, or one per option (comma-separated)"
            )
        specs = [s.strip() for s in str(self.rollout_rs_threshold).split(",") if s.strip()]
        if len(specs) not in (1, len(options)):
            raise ValueError(
                f"config.rl.rollout_correction.rollout_rs_threshold has {len(specs)} thresholds "
                f"for {len(options)} rollout_rs options; give one or one per option"
            )
        specs = specs * len(options) if len(specs) == 1 else specs
        bounds = []
        for option, spec in zip(options, specs, strict=True):
            lower, upper = _bounds(spec, "rollout_rs_threshold")
            if option.endswith("k1"):
                lower = 1.0 / upper if lower is None else lower
                bounds.append((option, math.log(lower), math.log(upper)))
            elif lower is not None:
                raise ValueError(
                    f"config.rl.rollout_correction.rollout_rs_threshold {spec!r}: {option} takes "
                    "one upper bound, not 'lower_upper'"
                )
            else:
                bounds.append((option, None, upper))
        return tuple(bounds)


def _rejection_keep(
    log_ratio: jax.Array,
    mask: jax.Array,
    segment_ids: jax.Array | None,
    option: str,
    lower: float | None,
    upper: float,
) -> jax.Array:
    """[batch, seq] bool: the tokens `option` keeps (sequence options: per whole sequence)."""
    safe = jnp.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND)
    level, estimator = option.rsplit("_", 1)
    per_token = {
        "k1": -safe,
        "k2": 0.5 * safe**2,
        "k3": jnp.exp(safe) - 1.0 - safe,
    }[estimator]
    if level == "token":
        statistic = per_token
    elif level == "seq_sum":
        statistic = sequence_sum(per_token * mask, segment_ids)
    elif level == "seq_mean":
        counts = sequence_sum(mask, segment_ids)
        statistic = sequence_sum(per_token * mask, segment_ids) / jnp.maximum(counts, 1.0)
    else:
        statistic = sequence_max(jnp.where(mask > 0, per_token, -jnp.inf), segment_ids)
        statistic = jnp.where(jnp.isneginf(statistic), 0.0, statistic)
    if lower is None:
        return statistic <= upper
    return (statistic >= lower) & (statistic <= upper)


def correct_rollout(
    old_logprobs: jax.Array,
    sampler_logprobs: jax.Array,
    mask: jax.Array,
    settings: RolloutCorrectionSettings,
    segment_ids: jax.Array | None = None,
) -> tuple[jax.Array | None, jax.Array, dict[str, jax.Array]]:
    """IS weights, the rejected loss mask and their metric sums (verl's
    compute_rollout_correction_and_rejection_mask).

    Args:
      old_logprobs / sampler_logprobs: [batch, seq] the trainer's and the sampler's log-probs.
      mask: [batch, seq] float loss mask.
      segment_ids: [batch, seq] packed-sequence ids (0 = padding), or None for one per row.
    Returns:
      (weights [batch, seq] (0 off the mask; None without rollout_is), mask [batch, seq] with
      rejected tokens zeroed (`mask` itself without rollout_rs), metric sums: keys ending in
      _min / _max combine by min / max, the rest by addition; see `summarize`).
    """
    mask = mask.astype(jnp.float32)
    log_ratio = old_logprobs.astype(jnp.float32) - sampler_logprobs.astype(jnp.float32)
    is_loss = mask > 0
    sequence_tokens = sequence_sum(mask, segment_ids)
    first_token = _first_loss_token(is_loss, segment_ids)
    sums: dict[str, jax.Array] = {}
    weights = None
    if settings.rollout_is is not None:
        lower, upper = settings.is_bounds()
        if settings.rollout_is == "token":
            log_weight = log_ratio
        else:
            log_weight = sequence_sum(log_ratio * mask, segment_ids)
        raw = jnp.exp(jnp.clip(log_weight, -SAFETY_BOUND, SAFETY_BOUND)) * mask
        if lower is None:
            weights = jnp.minimum(raw, upper)
            outside = jnp.zeros_like(is_loss)
        else:
            outside = (raw < lower) | (raw > upper)
            weights = jnp.where(outside, 0.0, raw)
        weights = jax.lax.stop_gradient(weights)
        # verl's fraction_low for truncation is below 1 / C.
        low = 1.0 / upper if lower is None else lower
        raw_sequence_mean = sequence_sum(raw, segment_ids) / jnp.maximum(sequence_tokens, 1.0)
        sums |= {
            "rollout_is_weight_sum": weights.sum(),
            "rollout_is_weight_min": jnp.where(is_loss, weights, jnp.inf).min(),
            "rollout_is_weight_max": jnp.where(is_loss, weights, -jnp.inf).max(),
            "rollout_is_high_tokens": (is_loss & (raw > upper)).sum().astype(jnp.float32),
            "rollout_is_low_tokens": (is_loss & (raw < low)).sum().astype(jnp.float32),
            "rollout_is_masked_tokens": (is_loss & outside).sum().astype(jnp.float32),
            "rollout_is_high_sequences": (first_token & (raw_sequence_mean > upper))
            .sum()
            .astype(jnp.float32),
        }
    if settings.rollout_rs is not None:
        keep = jnp.ones_like(is_loss)
        for option, lower, upper in settings.rs_bounds():
            keep &= _rejection_keep(log_ratio, mask, segment_ids, option, lower, upper)
        rejected = is_loss & ~keep
        rejected_in_sequence = sequence_sum(rejected.astype(jnp.float32), segment_ids) > 0
        sums |= {
            "rollout_rs_masked_tokens": rejected.sum().astype(jnp.float32),
            "rollout_rs_masked_sequences": (first_token & rejected_in_sequence)
            .sum()
            .astype(jnp.float32),
        }
        mask = mask * keep
    return weights, mask, sums


def _first_loss_token(is_loss: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
    """[batch, seq] bool, True on the first loss token of each sequence (counts sequences)."""
    before = jnp.cumsum(is_loss.astype(jnp.int32), axis=1) - is_loss
    # Loss tokens of the row's earlier sequences: the count at this sequence's first position.
    earlier = -sequence_max(-before, segment_ids)
    return is_loss & (before == earlier)


def mismatch_sums(
    old_logprobs: jax.Array,
    sampler_logprobs: jax.Array,
    mask: jax.Array,
    segment_ids: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Summable statistics of rho = pi_old / pi_sampler over loss tokens (verl's
    compute_offpolicy_metrics): k1 and k3 estimates of KL(sampler || old), chi-square at token
    and sequence level, and a [len(LOG_RATIO_EDGES) + 1] histogram of log rho for quantiles."""
    mask = mask.astype(jnp.float32)
    is_loss = mask > 0
    log_ratio = old_logprobs.astype(jnp.float32) - sampler_logprobs.astype(jnp.float32)
    safe = jnp.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND)
    sequence_log_ratio = sequence_sum(log_ratio * mask, segment_ids)
    first_token = _first_loss_token(is_loss, segment_ids)
    bins = jnp.searchsorted(jnp.asarray(LOG_RATIO_EDGES, jnp.float32), safe, side="right")
    histogram = jnp.zeros(len(LOG_RATIO_EDGES) + 1, jnp.float32).at[bins.ravel()].add(mask.ravel())
    zero = jnp.zeros_like(log_ratio)
    return {
        "mismatch_tokens": is_loss.sum().astype(jnp.float32),
        "mismatch_sequences": first_token.sum().astype(jnp.float32),
        "mismatch_k1_sum": jnp.where(is_loss, -log_ratio, zero).sum(),
        "mismatch_k3_sum": jnp.where(is_loss, jnp.exp(log_ratio) - log_ratio - 1.0, zero).sum(),
        "mismatch_rho_squared_sum": jnp.where(is_loss, jnp.exp(2.0 * safe), zero).sum(),
        "mismatch_sequence_rho_squared_sum": jnp.where(
            first_token,
            jnp.exp(2.0 * jnp.clip(sequence_log_ratio, -SAFETY_BOUND, SAFETY_BOUND)),
            zero,
        ).sum(),
        "mismatch_log_ratio_histogram": histogram,
    }


def ratio_quantiles(histogram: np.ndarray) -> dict[str, float]:
    """rho's RATIO_QUANTILES from `mismatch_sums`' histogram, each rounded toward 1 to its
    bin's edge (within 1.31x in |log rho| of the exact quantile, or 1e-6 absolute)."""
    histogram = np.asarray(histogram, np.float64)
    total = histogram.sum()
    edges = np.concatenate([[-np.inf], LOG_RATIO_EDGES, [np.inf]])
    out = {}
    for q in RATIO_QUANTILES:
        name = f"sampler_ratio_q{round(q * 100):02d}"
        if total == 0:
            out[name] = 1.0
            continue
        index = int(np.searchsorted(np.cumsum(histogram), q * total, side="left"))
        low, high = edges[index], edges[index + 1]
        out[name] = float(np.exp(low if low >= 0 else high))
    return out


def summarize(sums: dict[str, float]) -> dict[str, float]:
    """Host-side metrics from the combined sums of `mismatch_sums` and `correct_rollout`:
    mismatch_kl_k1 / _k3, mismatch_chi2_token / _seq, sampler_ratio_q01..q99, and with the
    correction on rollout_is_mean / _min / _max, rollout_is_fraction_high / _low (tokens whose
    raw weight is above C / below 1/C or lower), rollout_is_seq_fraction_high, rollout_is_
    masked_fraction (tokens zeroed by 'lower_upper'), rollout_rs_masked_fraction (tokens) and
    rollout_rs_seq_masked_fraction (sequences with a rejected token)."""
    tokens = max(float(sums["mismatch_tokens"]), 1.0)
    sequences = max(float(sums["mismatch_sequences"]), 1.0)
    metrics = {
        "mismatch_kl_k1": float(sums["mismatch_k1_sum"]) / tokens,
        "mismatch_kl_k3": float(sums["mismatch_k3_sum"]) / tokens,
        "mismatch_chi2_token": float(sums["mismatch_rho_squared_sum"]) / tokens - 1.0,
        "mismatch_chi2_seq": float(sums["mismatch_sequence_rho_squared_sum"]) / sequences - 1.0,
        **ratio_quantiles(sums["mismatch_log_ratio_histogram"]),
    }
    if "rollout_is_weight_sum" in sums:
        metrics |= {
            "rollout_is_mean": float(sums["rollout_is_weight_sum"]) / tokens,
            "rollout_is_min": float(sums["rollout_is_weight_min"]),
            "rollout_is_max": float(sums["rollout_is_weight_max"]),
            "rollout_is_fraction_high": float(sums["rollout_is_high_tokens"]) / tokens,
            "rollout_is_fraction_low": float(sums["rollout_is_low_tokens"]) / tokens,
            "rollout_is_seq_fraction_high": float(sums["rollout_is_high_sequences"]) / sequences,
            "rollout_is_masked_fraction": float(sums["rollout_is_masked_tokens"]) / tokens,
        }
    if "rollout_rs_masked_tokens" in sums:
        metrics |= {
            "rollout_rs_masked_fraction": float(sums["rollout_rs_masked_tokens"]) / tokens,
            "rollout_rs_seq_masked_fraction": float(sums["rollout_rs_masked_sequences"])
            / sequences,
        }
    return metrics
