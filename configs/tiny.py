"""A few-million-parameter Qwen3 that runs the whole RL loop on 2 CPU cores.

python -m launch.train --config=configs/tiny.py --config.rl.lr=3e-4
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
    )
    config.agent.update(
        max_steps=4,
        max_prompt_tokens=1024,
        max_context=2048,
        step_timeout=30.0,
        trajectory_timeout=300.0,
        reward_timeout=120.0,
        submit_notice_tokens=1792,
    )
    config.sampler.update(kind="jax", max_batch=8)
    config.env.update(max_envs=4, mem_limit="1g", cpus=1.0, pids_limit=256)
    config.checkpoint.update(every=1, keep=2)
    return config
