"""Qwen3-1.7B on one GPU: the single-device training path end to end (the shapes bench/gpu.py
measures), with the in-process JaxSampler sharing the GPU.

  python -m launch.train --config=configs/qwen3_1p7b_1gpu.py --workdir=/tmp/q17 \
      --config.init_from=/ckpt/Qwen3-1.7B --config.tokenizer=/ckpt/Qwen3-1.7B

Memory on one 80 GB device (tests/configs/test_gpu_configs.py): training ~39 GB (python -m
launch.plan_memory --config=configs/qwen3_1p7b_1gpu.py --num_devices=1) plus the sampler's
weights (6.9 GB, float32) and KV cache (4 slots x 36,864 tokens x 114,688 bytes = 16.9 GB):
about 63 GB. Qwen3-4B does not fit 80 GB this way (64 GB of fp32 weights and AdamW moments
alone); it does fit an H200's 141 GB.
"""

import ml_collections

from configs import common


def get_config() -> ml_collections.ConfigDict:
    config = common.get_config()
    config.model.update(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=True,
        max_position_embeddings=40960,
    )
    # fp32 master weights and AdamW moments, bf16 compute, full remat, cuDNN flash attention.
    config.attention = "cudnn"
    config.mesh.update(data=1, fsdp=1, tensor=1)
    config.rl.update(
        tasks_per_step=8,
        n_rollouts=8,
        micro_batch_size=1,
        peak_flops_per_device=989e12,  # H100 / H200 SXM bf16 dense, for MFU
        length_buckets=tuple(range(4096, 36864 + 1, 4096)),
    )
    # The in-process sampler: 64 rows sharing a pool of pages that holds 4 sequences of 36,864
    # tokens (a token budget; rows take pages as they grow).
    config.sampler.update(kind="jax", max_batch=64, max_cache_tokens=4 * 36864)
    config.env.update(max_envs=64)
    return config
