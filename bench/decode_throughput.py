"""Decode throughput (new tokens/s) of JaxSampler vs transformers' generate(), same weights.

  JAX_PLATFORMS=cpu python -m bench.decode_throughput [--repeats=3] [--new_tokens=256]

The JAX model's random init is written with save_hf_checkpoint and read by transformers, so both
decode the same float32 weights, greedily, from the same prompts, for exactly `new_tokens` tokens
(no stop tokens). JaxSampler gets `max_batch` = the batch and a cache just long enough
(prompt + new tokens); transformers uses its default dynamic KV cache with sdpa attention. Timed
runs alternate between the two after a warm-up (compilation excluded), and the table reports
medians of wall time per `generate` call, prefill included. 'same tokens' is the fraction of
greedy tokens before the first disagreement (float32 rounding may flip near-ties later on).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

import jax
import numpy as np
import torch
import transformers
from flax import nnx

from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, save_hf_checkpoint
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams

PROMPT_LEN = 32


def _agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over rows of the fraction of tokens before the first mismatch. a, b: [batch, new]."""
    mismatch = a != b
    first = np.where(mismatch.any(axis=1), mismatch.argmax(axis=1), a.shape[1])
    return float(first.mean() / a.shape[1])


def _run(
    jax_model: Qwen3ForCausalLM,
    torch_model: torch.nn.Module,
    batch: int,
    new_tokens: int,
    repeats: int,
) -> dict[str, float]:
    vocab = jax_model.config.vocab_size
    prompts = np.random.default_rng(batch).integers(0, vocab, (batch, PROMPT_LEN))
    sampler = JaxSampler(jax_model, max_batch=batch, max_cache_len=PROMPT_LEN + new_tokens)
    params = SamplingParams(temperature=0.0, max_new_tokens=new_tokens)
    requests = [GenerateRequest(tuple(int(t) for t in row), params) for row in prompts]
    torch_prompts = torch.from_numpy(prompts)

    def time_jax() -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        completions = asyncio.run(sampler.generate(requests))
        seconds = time.perf_counter() - start
        return seconds, np.array([c.token_ids for c in completions])

    def time_torch() -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        with torch.inference_mode():
            out = torch_model.generate(
                torch_prompts,
                attention_mask=torch.ones_like(torch_prompts),
                do_sample=False,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=0,
            )
        seconds = time.perf_counter() - start
        return seconds, out[:, PROMPT_LEN:].numpy()

    time_jax()
    time_torch()
    jax_times, torch_times = [], []
    for _ in range(repeats):
        seconds, jax_tokens = time_jax()
        jax_times.append(seconds)
        seconds, torch_tokens = time_torch()
        torch_times.append(seconds)
    sampler.close()
    generated = batch * new_tokens
    return {
        "jax_tok_s": generated / statistics.median(jax_times),
        "torch_tok_s": generated / statistics.median(torch_times),
        "same_tokens": _agreement(jax_tokens, torch_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new_tokens", type=int, default=256)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)

    config = Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict())
    jax_model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    with tempfile.TemporaryDirectory() as hf_dir:
        save_hf_checkpoint(jax_model, hf_dir)
        torch_model = transformers.AutoModelForCausalLM.from_pretrained(
            hf_dir, dtype=torch.float32, attn_implementation="sdpa"
        )
    torch_model.eval()
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(jax_model)))
    print(
        f"greedy decode, float32, configs/tiny.py model ({num_params:,} params), prompt "
        f"{PROMPT_LEN} + {args.new_tokens} new tokens, on {jax.default_backend()} ({threads} "
        f"threads), median of {args.repeats}; jax {jax.__version__}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    print(
        f"{'batch':>5}{'JaxSampler tok/s':>18}{'HF generate tok/s':>19}{'JAX/HF':>9}"
        f"{'same tokens':>13}"
    )
    for batch in args.batches:
        result = _run(jax_model, torch_model, batch, args.new_tokens, args.repeats)
        print(
            f"{batch:>5}{result['jax_tok_s']:>18.0f}{result['torch_tok_s']:>19.0f}"
            f"{result['jax_tok_s'] / result['torch_tok_s']:>8.2f}x{result['same_tokens']:>13.2f}"
        )


if __name__ == "__main__":
    main()
