"""Evaluating the released DeepSWE-Preview as its model card says: R2E-Gym's prompts and tools.

The model was trained with RL on what R2E-Gym's tools print, so it is evaluated through the
r2egym agent interface (byte-identical observations, rLLM's step counter; agent/r2egym.py) with
R2E-Gym's own prompts, which are not shipped here: point config.agent.prompts_file at R2E-Gym's
src/r2egym/agenthub/config/r2egym/edit_non_fn_calling.yaml (what the card's evaluation command
uses) or at rLLM's rllm/agents/system_prompts.py (what training used). Then, on one node of
8 x H100 (tasks: an R2E-Gym / SWE-bench-Verified task file):

  python launch/evaluate.py --config=configs/deepswe_preview_eval.py \\
      --config.agent.prompts_file=/path/to/edit_non_fn_calling.yaml \\
      --config.env.tasks=/path/to/swe_bench_verified.jsonl \\
      --policy=/ckpt/DeepSWE-Preview --num_runs=16 \\
      --select=hybrid --verifier=/ckpt/verifier --output_dir=/tmp/deepswe_preview_eval

summary.json then holds what the card reports: Pass@1 (mean of the 16 runs, with its standard
error), pass@16 and the hybrid Best@16 (verifier + execution checks). Published on
SWE-Bench-Verified: 42.2%, 71.0% and 59% (hybrid test-time scaling with their verifiers).

Settings, from the card's evaluation (R2E-Gym `edit.py runagent_multiple` against
`vllm serve --tensor-parallel-size 8 --max-model-len 65536`) and rLLM's run_deepswe.py:
temperature 1 (top_p 1, no top_k), 100 steps, a 64K context (4,096 prompt + 61,440 tokens after
it; Qwen3-32B's max_position_embeddings raised to 65,536 as the card's --hf-overrides does),
90 s per command, 1,200 s to grade, 48 environments at once. The "running out of tokens" note
comes at rLLM's fixed 28,000 tokens. R2E-Gym's own runner counts "Steps Remaining" against a
soft limit of 40 steps; rLLM's counter (the one training used) counts down from 100 here.

Memory, vLLM with tensor parallelism 8 on one node (worst case: 24 sequences generating at once,
each at its full 65,536 tokens):

  python launch/plan_memory.py --config=configs/deepswe_preview_eval.py --sampler \\
      --num_devices=8 --device_memory_gb=80

A miniature of the same evaluation, the tiny model on CPU (tests/configs/test_deepswe_preview_eval.py):
--config=configs/deepswe_preview_eval.py:mini.
"""

import ml_collections

from configs import deepswe_qwen3_32b, tiny


def get_config(variant: str = "") -> ml_collections.ConfigDict:
    """The evaluation on 8 GPUs; variant 'mini': the same interface and settings shrunk to the
    tiny model, the JAX sampler and a few steps, for CPU."""
    if variant not in ("", "mini"):
        raise ValueError(f"unknown variant {variant!r} of deepswe_preview_eval; use '' or 'mini'")
    config = deepswe_qwen3_32b.get_config()
    config.model.max_position_embeddings = 65536
    # Sampling on one node: tensor parallelism over its 8 devices.
    config.mesh.update(data=1, fsdp=1, tensor=8)
    config.agent.update(
        interface="r2egym",
        prompts_file="",
        max_steps=100,
        max_prompt_tokens=4096,
        max_context=61440,
        step_timeout=90.0,
        trajectory_timeout=50000.0,
        reward_timeout=1200.0,
        submit_notice_tokens=28000,
    )
    config.sampler.update(
        kind="vllm",
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_batch=24,
        tensor_parallel_size=8,
        gpu_memory_utilization=0.9,
    )
    config.env.update(max_envs=48)
    if variant == "mini":
        small = tiny.get_config()
        config.model.update(small.model.to_dict())
        # The tiny model's CPU settings, attention kernel included: the sampler's prefill runs the
        # configured kernel, and cuDNN's needs a GPU.
        config.update(
            compute_dtype=small.compute_dtype,
            remat=small.remat,
            tokenizer=small.tokenizer,
            attention=small.attention,
        )
        config.mesh.update(data=1, fsdp=-1, tensor=1)
        config.agent.update(
            max_steps=3,
            max_prompt_tokens=2048,
            max_context=48,
            trajectory_timeout=300.0,
            reward_timeout=120.0,
            submit_notice_tokens=40,
        )
        config.sampler.update(
            kind="jax",
            max_batch=4,
            tensor_parallel_size=1,
            dtype=small.compute_dtype,
            paged=small.sampler.paged,
            paged_attention=small.sampler.paged_attention,
        )
        config.env.update(max_envs=2, mem_limit="1g")
    return config
