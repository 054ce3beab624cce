"""Trajectories -> fixed-shape training arrays (micro-batches) with per-token advantages.

Steps: group rollouts by task, apply the compact filter, compute advantages per group, shift
tokens into (input, target) pairs, drop sequences left without loss tokens, optionally pack
several sequences per row, and pad each micro-batch to a length bucket so the jitted train step
compiles once per bucket rather than once per batch.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.rl.advantages import GroupStats, compact_filter, compute_advantages, group_stats


@dataclass(frozen=True)
class MicroBatch:
    """One forward/backward pass worth of training data; arrays are [rows, length] but one.

    input_ids / targets: int32 tokens and the next token to score (input shifted left by one).
    positions: int32 positions within each sequence (restart at 0 for each packed sequence).
    segment_ids: int32, 1..k for the k sequences packed into a row, 0 for padding.
    loss_mask: float32, 1 on targets the policy sampled and trains on.
    advantages: float32, the sequence's advantage on each of its tokens.
    sampler_logprobs: float32, the sampler's log-prob of each target (0 where loss_mask is 0).
    absent_sequences: float32 [rows]: sequences of the batch left out of every micro-batch for
      having no loss token (compact-filtered), which a loss dividing by all the batch's
      sequences still counts (rl/loss.py, sequences='all'); assemble_batch puts their number on
      the first row of the first micro-batch. Default: zeros.
    """

    input_ids: np.ndarray
    targets: np.ndarray
    positions: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray
    advantages: np.ndarray
    sampler_logprobs: np.ndarray
    absent_sequences: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.absent_sequences is None:
            object.__setattr__(self, "absent_sequences", np.zeros(self.shape[0], np.float32))

    @property
    def shape(self) -> tuple[int, int]:
        return self.input_ids.shape

    def sequence_lengths(self) -> np.ndarray:
        """[num_sequences] token counts of the packed sequences (for attention FLOPs)."""
        ids = self.segment_ids[self.segment_ids > 0]
        rows = np.nonzero(self.segment_ids > 0)[0]
        _, counts = np.unique(rows * (self.shape[1] + 1) + ids, return_counts=True)
        return counts


@dataclass(frozen=True)
class BatchStats:
    """What went into a batch: rollout outcomes, filtering, groups, padding."""

    num_trajectories: int
    num_trained: int  # sequences with at least one loss token
    num_compact_filtered: int  # masked for max_steps / max_context / timeout, kept in baseline
    num_infra_excluded: int  # env_error / infra_error: masked and out of the baseline
    stop_reasons: dict[str, int]
    groups: GroupStats
    reward_mean: float  # over rollouts in a baseline, with the rewards used there
    loss_tokens: int
    padding_fraction: float  # share of array slots holding no sequence token


@dataclass(frozen=True)
class TrainBatch:
    """micro_batches, consecutive per mini-batch: mini-batch i is the next mini_batch_sizes[i]
    of them (one optimizer step each; () = all of them in one)."""

    micro_batches: tuple[MicroBatch, ...]
    stats: BatchStats
    mini_batch_sizes: tuple[int, ...] = ()

    def mini_batches(self) -> list[tuple[MicroBatch, ...]]:
        """The micro-batches of each mini-batch, in order."""
        sizes = self.mini_batch_sizes or (len(self.micro_batches),)
        starts = np.cumsum((0, *sizes))
        return [self.micro_batches[a:b] for a, b in zip(starts[:-1], starts[1:], strict=True)]


@dataclass(frozen=True)
class _Sequence:
    input_ids: np.ndarray
    targets: np.ndarray
    loss_mask: np.ndarray
    sampler_logprobs: np.ndarray
    advantage: float

    def __len__(self) -> int:
        return len(self.input_ids)


# The Pallas flash kernel tiles rows in blocks of 128 tokens (model/attention.py).
ROW_LENGTH_MULTIPLE = 128


def length_buckets_up_to(maximum: int, step: int | None = None) -> tuple[int, ...]:
    """Row lengths for `bucket_length` whose last is `maximum` itself (rounded up to a multiple of
    128), so the longest rows are never padded to the next power of two (36,864 stays 36,864,
    not 65,536): multiples of `step` below it, or with step None powers of two from 128."""
    top = -(-maximum // ROW_LENGTH_MULTIPLE) * ROW_LENGTH_MULTIPLE
    if step is None:
        below = [1 << n for n in range(7, top.bit_length()) if 1 << n < top]
    else:
        below = list(range(step, top, step))
    return (*below, top)


def row_length_buckets(maximum: int, length_buckets: Sequence[int] = ()) -> tuple[int, ...]:
    """config.rl.length_buckets for rows of at most `maximum` tokens: the given buckets, or for
    () powers of two up to `maximum` (`length_buckets_up_to`)."""
    return tuple(length_buckets) or length_buckets_up_to(maximum)


def bucket_length(length: int, length_buckets: Sequence[int] | None = None) -> int:
    """Smallest bucket >= length: from `length_buckets` if given, else the next power of two."""
    if length_buckets is None:
        return 1 << max(length - 1, 0).bit_length()
    for bucket in sorted(length_buckets):
        if bucket >= length:
            return bucket
    raise ValueError(
        f"a row needs {length} tokens but the largest length bucket is {max(length_buckets)}; "
        "add a larger bucket or lower config.agent.max_context"
    )


def _shift(trajectory: Trajectory, loss_weight: float, advantage: float) -> _Sequence:
    tokens = np.asarray(trajectory.token_ids, dtype=np.int32)
    mask = np.asarray(trajectory.loss_mask, dtype=np.float32)
    logprobs = np.asarray(trajectory.sampler_logprobs, dtype=np.float32)
    if len(tokens) and mask[0] > 0:
        raise ValueError(
            f"trajectory {trajectory.task_id!r} has loss_mask 1 on its first token, which no "
            "earlier token predicts; the prompt must come first with mask 0"
        )
    return _Sequence(
        input_ids=tokens[:-1],
        targets=tokens[1:],
        loss_mask=mask[1:] * loss_weight,
        sampler_logprobs=np.where(mask[1:] > 0, logprobs[1:], 0.0).astype(np.float32),
        advantage=advantage,
    )


def _pack_rows(sequences: list[_Sequence], row_length: int | None) -> list[list[_Sequence]]:
    """First-fit decreasing into rows of `row_length` tokens (one sequence per row if None)."""
    ordered = sorted(sequences, key=len, reverse=True)
    if row_length is None:
        return [[sequence] for sequence in ordered]
    rows: list[list[_Sequence]] = []
    room: list[int] = []
    for sequence in ordered:
        if len(sequence) > row_length:
            raise ValueError(
                f"a sequence of {len(sequence)} tokens does not fit a packed row of {row_length}; "
                "raise the pack length to at least config.agent.max_context"
            )
        slot = next((i for i, free in enumerate(room) if free >= len(sequence)), None)
        if slot is None:
            rows.append([])
            room.append(row_length)
            slot = len(rows) - 1
        rows[slot].append(sequence)
        room[slot] -= len(sequence)
    return sorted(rows, key=lambda row: sum(map(len, row)), reverse=True)


def _fill_micro_batch(
    rows: list[list[_Sequence]], num_rows: int, length_buckets: Sequence[int] | None
) -> MicroBatch:
    length = bucket_length(max(sum(map(len, row)) for row in rows), length_buckets)
    arrays = {
        "input_ids": np.zeros((num_rows, length), np.int32),
        "targets": np.zeros((num_rows, length), np.int32),
        "positions": np.zeros((num_rows, length), np.int32),
        "segment_ids": np.zeros((num_rows, length), np.int32),
        "loss_mask": np.zeros((num_rows, length), np.float32),
        "advantages": np.zeros((num_rows, length), np.float32),
        "sampler_logprobs": np.zeros((num_rows, length), np.float32),
    }
    for row_index, row in enumerate(rows):
        start = 0
        for segment, sequence in enumerate(row, start=1):
            span = slice(start, start + len(sequence))
            arrays["input_ids"][row_index, span] = sequence.input_ids
            arrays["targets"][row_index, span] = sequence.targets
            arrays["positions"][row_index, span] = np.arange(len(sequence))
            arrays["segment_ids"][row_index, span] = segment
            arrays["loss_mask"][row_index, span] = sequence.loss_mask
            arrays["advantages"][row_index, span] = sequence.advantage
            arrays["sampler_logprobs"][row_index, span] = sequence.sampler_logprobs
            start += len(sequence)
    return MicroBatch(**arrays)


def assemble_batch(
    trajectories: Sequence[Trajectory],
    *,
    micro_batch_size: int,
    advantage: str = "loo",
    compact_filtering: bool = True,
    length_buckets: Sequence[int] | None = None,
    pack_length: int | None = None,
    mini_batches: int = 1,
) -> TrainBatch:
    """Builds the micro-batches of one optimizer step, or of `mini_batches` steps.

    Args:
      trajectories: rollouts of one step, n per task (grouped by task_id for the advantages).
      micro_batch_size: rows per micro-batch; the last one is padded with empty rows.
      advantage: 'loo' | 'grpo' | 'drgrpo' (config.rl.advantage).
      compact_filtering: mask max_steps / max_context / timeout rollouts (DeepSWE); off = ablation.
      length_buckets: allowed row lengths; None = powers of two.
      pack_length: pack several sequences per row up to this many tokens; None = one per row.
      mini_batches: split the task groups (in order) into this many consecutive mini-batches,
        one optimizer step each (verl's ppo_mini_batch_size; config.rl.mini_batches); a
        mini-batch without a loss token gets no micro-batch (no step).
    Returns:
      TrainBatch: micro-batches (per mini-batch longest rows first, each padded to its own
      bucket), the mini-batches' sizes and stats.
    """
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
    if mini_batches < 1:
        raise ValueError(f"mini_batches must be >= 1, got {mini_batches}")
    groups: dict[str, list[Trajectory]] = {}
    for trajectory in trajectories:
        groups.setdefault(trajectory.task_id, []).append(trajectory)
    width = max((len(group) for group in groups.values()), default=0)
    rewards = np.zeros((len(groups), width), np.float32)
    valid = np.zeros((len(groups), width), bool)
    filters = []
    for group_index, group in enumerate(groups.values()):
        rollout_filter = compact_filter(
            [t.reward for t in group],
            [t.stop_reason for t in group],
            [t.infra_error for t in group],
            enabled=compact_filtering,
        )
        filters.append(rollout_filter)
        rewards[group_index, : len(group)] = rollout_filter.baseline_reward
        valid[group_index, : len(group)] = rollout_filter.in_baseline
    advantages = compute_advantages(advantage, rewards, valid)

    sequences = []
    micro_batches: list[MicroBatch] = []
    mini_batch_sizes = []
    # Mini-batches are consecutive runs of whole task groups (verl splits the batch in order,
    # n rollouts per prompt); each packs its own rows and counts its own absent sequences.
    group_list = list(groups.values())
    for part in np.array_split(
        np.arange(len(group_list)), max(1, min(mini_batches, len(group_list)))
    ):
        part_sequences = []
        for group_index in part:
            rollout_filter = filters[group_index]
            for member, trajectory in enumerate(group_list[group_index]):
                sequence = _shift(
                    trajectory,
                    float(rollout_filter.loss_weight[member]),
                    float(advantages[group_index, member]),
                )
                if sequence.loss_mask.any():
                    part_sequences.append(sequence)
        rows = _pack_rows(part_sequences, pack_length)
        part_micro_batches = [
            _fill_micro_batch(
                rows[start : start + micro_batch_size], micro_batch_size, length_buckets
            )
            for start in range(0, len(rows), micro_batch_size)
        ]
        if part_micro_batches:
            absent = np.zeros(micro_batch_size, np.float32)
            absent[0] = sum(len(group_list[g]) for g in part) - len(part_sequences)
            part_micro_batches[0] = dataclasses.replace(
                part_micro_batches[0], absent_sequences=absent
            )
            mini_batch_sizes.append(len(part_micro_batches))
        sequences += part_sequences
        micro_batches += part_micro_batches
    slots = sum(mb.input_ids.size for mb in micro_batches)
    stats = BatchStats(
        num_trajectories=len(trajectories),
        num_trained=len(sequences),
        num_compact_filtered=sum(f.num_compact_filtered for f in filters),
        num_infra_excluded=sum(f.num_infra_excluded for f in filters),
        stop_reasons=dict(
            Counter(str(getattr(t.stop_reason, "value", t.stop_reason)) for t in trajectories)
        ),
        groups=group_stats(rewards, valid),
        reward_mean=float(rewards[valid].mean()) if valid.any() else 0.0,
        loss_tokens=int(sum((s.loss_mask > 0).sum() for s in sequences)),
        padding_fraction=1.0 - sum(map(len, sequences)) / slots if slots else 0.0,
    )
    return TrainBatch(
        micro_batches=tuple(micro_batches), stats=stats, mini_batch_sizes=tuple(mini_batch_sizes)
    )
