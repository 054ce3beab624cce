"""DeepSWE-Preview: Qwen3-32B trained with GRPO++ on 64 GPUs (8 nodes x 8).

  python -m launch.train --config=configs/deepswe_qwen3_32b.py \
      --config.init_from=/ckpt/Qwen3-32B --config.tokenizer=/ckpt/Qwen3-32B

Memory plan: python -m launch.plan_memory --config=configs/deepswe_qwen3_32b.py --num_devices=64
(37.8 of 80 GB per device with cuDNN flash attention: 42 GB of margin; tests/configs/test_gpu_configs.py).
SLURM: python launch/sweep.py --config=configs/deepswe_qwen3_32b.py --workdir=... --mode=print
--nodes=8 --gpus_per_node=8 prints the sbatch line (one process per node, 8 GPUs each).

DeepSWE ran its 512 environments per step on Kubernetes; here they are Docker containers unless
  --config.env.backend=kubernetes --config.env.kubernetes.image_prefix=registry.example.com/
(one pod per environment, grading and execution checks in pods too; launch/k8s/README.md).
"""

import ml_collections

from configs import common


def get_config() -> ml_collections.ConfigDict:
    config = common.get_config()
    # fp32 master weights and AdamW moments (at lr 1e-6 bf16 updates would round away), bf16
    # compute, full remat, cuDNN flash attention with sequence lengths.
    config.attention = "cudnn"
    # Tensor parallelism inside a node (NVLink), FSDP across the 8 nodes.
    config.mesh.data = 1
    config.mesh.fsdp = 8
    config.mesh.tensor = 8
    # 8 sequences per micro-step: one per FSDP shard of the batch; 64 micro-steps per 512 rollouts.
    config.rl.micro_batch_size = 8
    config.rl.peak_flops_per_device = 989e12  # H100 SXM bf16 dense, for MFU
    # Rows padded to multiples of 4,096 up to the longest trajectory (4,096 + 32,768 = 36,864).
    config.rl.length_buckets = tuple(range(4096, 36864 + 1, 4096))
    # 8 optimizer steps per batch, as rLLM's DeepSWE 32B script (rllm-org/rllm
    # examples/swe/train_deepswe_32b_eager.sh @ 45521502): data.train_batch_size=64 and
    # actor.ppo_mini_batch_size=8 prompts, both times rollout.n=8 in verl (fsdp_workers), so its
    # dp_actor.update_policy steps on 8 consecutive mini-batches of 64 trajectories.
    config.rl.mini_batches = 8
    config.sampler.kind = "vllm"
    # One vLLM engine per node (8 GPUs, tensor parallel), beside the trainer on the same GPUs:
    # JAX keeps 55% of each H100 (its peak is 37.8 GB), vLLM takes 40% (bf16 weights 8.2 GB per
    # GPU, the rest KV cache). On H200: jax_memory_fraction=0.31, gpu_memory_utilization=0.64.
    # Arithmetic in README.md (Colocated vLLM on GPUs).
    config.sampler.update(
        tensor_parallel_size=8, gpu_memory_utilization=0.40, jax_memory_fraction=0.55
    )
    config.env.tasks = "tasks/tasks.jsonl"
    # 512 environments per step (64 tasks x 8 rollouts) outgrow one Docker host: use several
    # (config.env.docker_hosts) or backend='kubernetes' (see the docstring).
    config.env.backend = "docker"
    return config
