"""GRPO++ training, one small module per piece.

advantages: leave-one-out / GRPO / Dr. GRPO advantages, group statistics, compact filter.
loss: the clipped-surrogate policy loss as (sum, denominator), importance-ratio metrics.
logprobs: token log-probs and entropies, chunked over the sequence.
batch: trajectories -> fixed-shape micro-batches (shifted, masked, bucketed, optionally packed).
optimizer: AdamW with global-norm clipping and its learning-rate schedule.
objectives: what a train step minimizes (MicroBatchLoss; GRPO++'s PolicyGradientLoss, LossSettings).
rollout_correction: verl's rollout correction for the sampler-trainer mismatch (TIS, masked IS,
  rejection), off by default, and the mismatch metrics.
train_step: TrainState, the sharded update with gradient accumulation.
sft: the supervised (negative log-likelihood) loss and steps of SFT warm starts.
metrics: what an iteration logs (rollout/, batch/), MetricsWriter (metrics.jsonl, TensorBoard).
curve: the training reward curve: standard errors, thirds, collapse warnings.
run_directory: a run's workdir: config.json, checkpoints, metrics, resume.
overlap: rollouts of the next iteration while this one trains (bounded staleness).
loop: the outer RL loop that calls all of the above.
"""
