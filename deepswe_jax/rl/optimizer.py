"""The optimizer of a train step: AdamW with global-norm clipping and its learning-rate schedule
(`OptimizerSettings` from config.rl, or config.sft for SFT).

    optimizer = make_optimizer(OptimizerSettings(lr=1e-6))    # what Trainer(...) applies
    schedule = learning_rate_schedule(settings)                # the rate each step used
"""

from __future__ import annotations

import dataclasses

import optax


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """AdamW with global-norm clipping (config.rl, or config.sft for SFT).

    grad_clip: global-norm threshold, 0 = off. warmup_steps: linear warmup from 0.
    decay_steps: > 0 decays the learning rate to 0 by a cosine at that step (SFT); 0 keeps it
    constant after warmup (DeepSWE).
    """

    lr: float
    b1: float = 0.9
    b2: float = 0.999
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    warmup_steps: int = 0
    decay_steps: int = 0


def learning_rate_schedule(settings: OptimizerSettings) -> optax.Schedule:
    """Linear warmup from 0 over `warmup_steps`, then constant `lr` (DeepSWE: constant); with
    `decay_steps` > 0 a cosine decay from `lr` to 0 at step `decay_steps` instead (SFT)."""
    lr, warmup = settings.lr, settings.warmup_steps
    if settings.decay_steps > 0:
        return optax.warmup_cosine_decay_schedule(
            0.0, lr, warmup, max(settings.decay_steps, warmup + 1)
        )
    if warmup > 0:
        return optax.linear_schedule(0.0, lr, warmup)  # holds lr afterwards
    return optax.constant_schedule(lr)


def make_optimizer(settings: OptimizerSettings) -> optax.GradientTransformation:
    """Global-norm clipping (`grad_clip`, 0 = off) then AdamW with decay on every parameter
    (as torch AdamW in verl, which DeepSWE trained with); learning rate as
    `learning_rate_schedule(settings)`."""
    adamw = optax.adamw(
        learning_rate_schedule(settings),
        b1=settings.b1,
        b2=settings.b2,
        weight_decay=settings.weight_decay,
    )
    if settings.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(settings.grad_clip), adamw)
    return adamw
