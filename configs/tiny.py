"""A 1.3M-parameter Qwen3 that runs the whole RL loop on 2 CPU cores.

python launch/train.py --config=configs/tiny.py --workdir=/tmp/tiny_run --config.rl.lr=3e-4

The random model writes noise, so every episode ends on its 64-token budget after one turn
(the shipped tasks' prompts are 1,239-1,427 tokens with the test tokenizer). Compact filtering
would mask all of them; it is off so each iteration still runs the train step.
"""

import ml_collections

from configs import common


def get_config() -> ml_collections.ConfigDict:
    config = common.get_config()
    config.model.update(
        vocab_size=4096,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
    )
    config.compute_dtype = "float32"
    config.remat = "none"
    config.mesh.update(data=1, fsdp=-1, tensor=1)
    config.tokenizer = "tests/assets/tokenizer"

    config.rl.update(
        lr=1e-4,
        n_rollouts=4,
        tasks_per_step=2,
        micro_batch_size=4,
        logprob_chunk=512,
        total_steps=3,
        compact_filtering=False,
        # Rows padded to multiples of 512 (up to max_position_embeddings), not powers of two:
        # prompt + 64 tokens fit 1,536.
        length_buckets=tuple(range(512, 4097, 512)),
    )
    config.agent.update(
        max_steps=4,
        max_prompt_tokens=1536,
        max_context=64,
        step_timeout=30.0,
        trajectory_timeout=300.0,
        reward_timeout=120.0,
        submit_notice_tokens=56,
    )
    # A dense cache on CPU: XLA:CPU gathers pages at about half a slice's speed (the paged
    # sampler ran 0.64x the dense one on the full-size agent draw, BENCHMARKS.md), and these
    # rows are short.
    config.sampler.update(kind="jax", max_batch=8, dtype="float32", paged=False)
    config.env.update(max_envs=8, mem_limit="1g", cpus=1.0, pids_limit=256)
    config.checkpoint.update(every=1, keep=2)
    return config


def get_sweep() -> list[dict]:
    """Three learning rates: python launch/sweep.py --config=configs/tiny.py --workdir=/tmp/sweep"""
    return [{"rl.lr": lr} for lr in (1e-4, 3e-4, 1e-3)]
