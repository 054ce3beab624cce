"""DeepSWE's recipe on Qwen3-8B, one node of 8 GPUs (rLLM's examples/swe/train_deepswe_8b.sh:
8 tasks x 8 rollouts per step, lr 1e-6, 4,096 + 32,768 tokens, seq-mean-token-sum).

  python -m launch.train --config=configs/deepswe_qwen3_8b.py \
      --config.init_from=/ckpt/Qwen3-8B --config.tokenizer=/ckpt/Qwen3-8B

Memory plan: python -m launch.plan_memory --config=configs/deepswe_qwen3_8b.py --num_devices=8
(about 40 of 80 GB per device; tests/configs/test_gpu_configs.py checks the margin). One Qwen3-8B does
not fit one GPU with fp32 master weights and AdamW (131 GB of state alone); FSDP over the 8 GPUs
leaves 16.4 GB of it per device.
"""

import ml_collections

from configs import common


def get_config() -> ml_collections.ConfigDict:
    config = common.get_config()
    config.model.update(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=False,
        max_position_embeddings=40960,
    )
    # fp32 master weights and AdamW moments (at lr 1e-6 bf16 updates would round away), bf16
    # compute, full remat, cuDNN flash attention with sequence lengths.
    config.attention = "cudnn"
    config.mesh.update(data=1, fsdp=8, tensor=1)
    config.rl.update(
        tasks_per_step=8,
        n_rollouts=8,
        micro_batch_size=8,  # one trajectory per GPU per micro-step, 8 micro-steps per step
        peak_flops_per_device=989e12,  # H100 / H200 SXM bf16 dense, for MFU
        length_buckets=tuple(range(4096, 36864 + 1, 4096)),
        # One optimizer step per batch, as rLLM's DeepSWE 8B script (rllm-org/rllm
        # examples/swe/train_deepswe_8b.sh @ 7043b086): train_batch_size=8 =
        # ppo_mini_batch_size=8 prompts.
        mini_batches=1,
    )
    config.sampler.update(kind="vllm", max_batch=64)
    config.env.update(max_envs=64)
    return config
