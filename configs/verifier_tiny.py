"""Outcome-verifier training (launch/train_verifier.py) on the tiny Qwen3, on CPU.

python launch/train_verifier.py --config=configs/verifier_tiny.py --workdir=/tmp/verifier \
    --trajectories=/tmp/eval_run/trajectories.jsonl

Fields added to the common ones:
  verifier.max_prompt_tokens  budget of a rendered trajectory prompt (longest thoughts condensed).
  verifier.lora_rank / lora_alpha  LoRA adapters (SWE-Gym: r=64 beat full fine-tuning);
                               rank 0 = full fine-tuning.
  verifier.lora_targets       kernels that get adapters (model/lora.py KERNEL_INPUT_DIMS names).
  verifier.max_per_task       at most this many resolved and unresolved trajectories per task.
  verifier.heldout_fraction   tasks held out for the AUC (split by task, seeded).
  verifier.steps / batch_size optimizer steps, examples per step (micro-batches of
                               rl.micro_batch_size rows).
  verifier.eval_every / eval_batch_size  held-out scoring cadence and prompts per forward pass.
The optimizer is config.rl's AdamW (lr, betas, weight decay, clipping, warmup).
"""

import ml_collections

from configs import tiny


def get_config() -> ml_collections.ConfigDict:
    config = tiny.get_config()
    config.rl.update(lr=1e-3, warmup_steps=10, weight_decay=0.0, grad_clip=1.0, micro_batch_size=8)
    config.verifier = ml_collections.ConfigDict(
        dict(
            max_prompt_tokens=2048,
            lora_rank=0,
            lora_alpha=16.0,
            lora_targets=(
                "q_proj",
                "k_proj",
                "v_proj",
                "o_proj",
                "gate_proj",
                "up_proj",
                "down_proj",
            ),
            max_per_task=2,
            heldout_fraction=0.25,
            steps=100,
            batch_size=16,
            eval_every=25,
            eval_batch_size=8,
        )
    )
    return config
