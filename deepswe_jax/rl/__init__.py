"""GRPO++ training, one small module per piece.

advantages: leave-one-out / GRPO / Dr. GRPO advantages, group statistics, compact filter.
loss: the clipped-surrogate policy loss as (sum, denominator), importance-ratio metrics.
logprobs: token log-probs and entropies, chunked over the sequence.
batch: trajectories -> fixed-shape micro-batches (shifted, masked, bucketed, optionally packed).
optimizer: AdamW with global-norm clipping and its learning-rate schedule.
objectives: what a train step minimizes (MicroBatchLoss; GRPO++'s PolicyGradientLoss, LossSettings).
train_step: TrainState, the sharded update with gradient accumulation.
"""
