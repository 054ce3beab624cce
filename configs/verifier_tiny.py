"""Outcome-verifier training (launch/train_verifier.py) on the tiny Qwen3, on CPU.

python launch/train_verifier.py --config=configs/verifier_tiny.py --workdir=/tmp/verifier \
    --trajectories=/tmp/eval_run/trajectories.jsonl

The verifier.* fields are declared (with their meaning) in configs/common.py; this config
trains the tiny model fully (lora_rank=0) on short prompts. The optimizer is config.rl's AdamW
(lr, betas, weight decay, clipping, warmup).
"""

import ml_collections

from configs import tiny


def get_config() -> ml_collections.ConfigDict:
    config = tiny.get_config()
    config.rl.update(lr=1e-3, warmup_steps=10, weight_decay=0.0, grad_clip=1.0, micro_batch_size=8)
    config.verifier.update(
        max_prompt_tokens=2048,
        lora_rank=0,
        lora_alpha=16.0,
        max_per_task=2,
        heldout_fraction=0.25,
        steps=100,
        batch_size=16,
        eval_every=25,
        eval_batch_size=8,
    )
    return config
