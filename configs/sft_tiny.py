"""Rejection-sampling / expert SFT of the tiny Qwen3 on the shipped tasks, then RL and evaluation.

python launch/train_sft.py --config=configs/sft_tiny.py --workdir=/tmp/sft_tiny \\
    --expert_tasks=tasks/tasks.jsonl
python launch/train.py --config=configs/sft_tiny.py --workdir=/tmp/sft_rl_tiny \\
    --config.init_from=/tmp/sft_tiny/checkpoints

The agent budget fits the scripted expert's episodes (view around the first hunk, edits, a
test run, finish: 900-1,800 tokens after prompts of 1,239-1,427 tokens), so the SFT data,
the RL rollouts and the evaluation share one context size. A high learning rate with cosine
decay and batches of 2: the tiny model needs ~100-150 such steps to pick up the tool-call format
(tests/launch/test_train_sft.py).
"""

import ml_collections

from configs import tiny


def get_config() -> ml_collections.ConfigDict:
    config = tiny.get_config()
    config.agent.update(
        max_steps=8,
        max_prompt_tokens=1536,
        max_context=2048,
        submit_notice_tokens=1792,
    )
    config.rl.update(compact_filtering=True)
    config.sft.update(
        lr=2e-2,
        b1=0.9,
        b2=0.95,
        weight_decay=0.0,
        grad_clip=1.0,
        warmup_steps=5,
        cosine_decay=True,
        num_steps=200,
        batch_size=2,
        micro_batch_size=2,
        max_per_task=2,
        length_buckets=(1536, 2048, 2560, 3072, 3584),
        max_tokens=0,
    )
    config.checkpoint.update(every=50, keep=2)
    return config
