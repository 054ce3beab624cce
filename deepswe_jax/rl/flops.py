"""Model FLOPs of a train step, for the MFU metric (`train_step.Trainer` reports it when it knows
the device's peak; `training_flops` is importable from rl/train_step.py too)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deepswe_jax.model import Qwen3Config
from deepswe_jax.rl.batch import MicroBatch


def training_flops(model_config: Qwen3Config, micro_batches: Sequence[MicroBatch]) -> float:
    """Model FLOPs of one forward + backward: 6 N per token plus causal attention.

    N counts matmul parameters (the input embedding lookup is free unless tied to the output).
    Attention: per layer and sequence of T tokens, QK^T and AV cost 2 * T^2 * heads * head_dim
    forward (causal halves 4 T^2 h d), times 3 for forward + backward.
    """
    c = model_config
    matmul_params = c.num_parameters - (
        0 if c.tie_word_embeddings else c.vocab_size * c.hidden_size
    )
    lengths = np.concatenate([mb.sequence_lengths() for mb in micro_batches]).astype(np.float64)
    attention = 6.0 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * (lengths**2).sum()
    return 6.0 * matmul_params * lengths.sum() + attention
