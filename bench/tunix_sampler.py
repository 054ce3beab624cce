"""JaxSampler against google-tunix's sampler (tunix.generate.sampler.Sampler) on the same weights.

  PYTHONPATH=$PWD JAX_PLATFORMS=cpu python bench/tunix_sampler.py [--models tiny 100M]
      [--batches 16 64] [--new_tokens 256] [--repeats 3] [--warmup 2]
      [--tunix-python /work/venv-tunix/bin/python]

bench/vllm_sampler.py's single-turn benchmark with tunix in place of vLLM. tunix runs in its own
venv (bench/tunix_step.py's docstring installs it). For each model (configs/tiny.py's dims and
bench/vllm_sampler.py's ~100M Qwen3) the parent writes one random transformers Qwen3ForCausalLM
(bench/train_step.py's _write_checkpoint); for each batch it runs each side in its own
subprocess (this file with --side=ours|tunix), one after the other (the order alternates from
batch to batch), pinned to the same 2 CPUs. Both decode greedily in float32 from the same
`batch` random 32-token prompts for exactly `new_tokens` tokens (no stop token can occur):

  ours:  deepswe_jax.model.load_hf_checkpoint, JaxSampler(max_batch=batch, max_cache_len=32 +
         new_tokens, prefix_caching=False), one `generate` of all prompts (temperature 0).
  tunix: tunix.models.qwen3.params.create_model_from_safe_tensors (bench/tunix_step.py's
         tunix_qwen3), Sampler(model, tokenizer, CacheConfig(cache_size=32 + new_tokens, ...)),
         one call with the prompts' token ids, max_generation_steps=new_tokens,
         max_prompt_length=32, temperature 0 (no top_p / beam_size: tunix's 'greedy' mode).

Each side makes `--warmup` calls (the first compiles; tunix's second took ~40 ms more than the
later ones in tiny runs, so two by default), then `--repeats` timed calls; the table reports
tokens/s = batch * new_tokens / median seconds per call (prefill included), ours/tunix, and
'same tokens': the fraction of greedy tokens before the first disagreement (bench/vllm_sampler.py's
_agreement; float rounding may flip near-ties later on).

Caveats:
  - tunix's Sampler takes strings and a tokenizer; a stand-in tokenizer's encode returns the
    token ids it is given, so no text is involved. Its pad and end-of-sequence ids are -1 and
    -2, outside the vocabulary: tunix treats any buffer token equal to pad_id as padding (masked
    from attention), a generated one included, and stops a row at an eos token.
  - tunix's decode is one jax.lax.while_loop on the device over a dense [batch, cache_size,
    kv_heads, head_dim] cache per layer, every step attending over the whole cache_size (no
    paged or ragged attention); the loop runs until its step counter reaches prompt +
    new_tokens, so it runs new_tokens model steps after prefill (the last one's token falls
    outside the buffer and is dropped). Its Qwen3 computes prefill logits at every prompt
    position (it has no decode_only_last_token). Ours is continuous batching with one host round
    trip per 8 decode steps (decoding.DECODE_STEPS), and returns log-probs too.
  - Ours runs without prefix caching: the timed calls repeat the same prompts, and tunix
    keeps nothing between calls.
  - The two sides run in separate processes one after the other, not interleaved call by call,
    so load that changes between them shows in the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

# bench/ is on sys.path as this script's folder in every process; the tunix side runs without
# the repository on its path, so it cannot import bench.tunix_step.
from tunix_step import CPUS, TUNIX_PYTHON, _spawn, tunix_qwen3

# tunix's pad and end-of-sequence ids: outside the vocabulary, so never a prompt or sampled token.
PAD_ID, EOS_ID = -1, -2


def _time_calls(generate, warmup: int, repeats: int) -> tuple[list[float], np.ndarray]:
    """Seconds of each of warmup + repeats generate() calls; the last call's [batch, new] tokens."""
    times = []
    for _ in range(warmup + repeats):
        start = time.perf_counter()
        tokens = generate()
        times.append(time.perf_counter() - start)
    return times, tokens


def _run_ours(spec: dict[str, Any], prompts: np.ndarray) -> dict[str, Any]:
    import asyncio

    import jax
    from flax import nnx

    from deepswe_jax.model import load_hf_checkpoint
    from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams

    model = load_hf_checkpoint(spec["hf_dir"])
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    max_cache_len = prompts.shape[1] + spec["new_tokens"]
    sampler = JaxSampler(
        model, max_batch=len(prompts), max_cache_len=max_cache_len, prefix_caching=False
    )
    params = SamplingParams(temperature=0.0, max_new_tokens=spec["new_tokens"])
    requests = [GenerateRequest(tuple(int(t) for t in row), params) for row in prompts]

    def generate() -> np.ndarray:
        completions = asyncio.run(sampler.generate(requests))
        return np.array([c.token_ids for c in completions])

    times, tokens = _time_calls(generate, spec["warmup"], spec["repeats"])
    sampler.close()
    return {
        "params": num_params,
        "times": times,
        "tokens": tokens,
        "settings": {"max_cache_len": max_cache_len, "prefix_caching": False},
    }


class _IdTokenizer:
    """tunix's tokenizer interface over token ids: encode returns the ids it is given."""

    def encode(self, ids, **kwargs) -> list[int]:
        return list(ids)

    def decode(self, ids, **kwargs) -> str:
        return ""

    def bos_id(self) -> None:
        return None  # falsy: tunix prepends no BOS and drops no repeated leading ids

    def eos_id(self) -> int:
        return EOS_ID

    def pad_id(self) -> int:
        return PAD_ID


def _run_tunix(spec: dict[str, Any], prompts: np.ndarray) -> dict[str, Any]:
    import jax
    from flax import nnx
    from tunix.generate import sampler as sampler_lib

    model, model_config = tunix_qwen3(spec["hf_dir"])
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    prompt_len, new_tokens = prompts.shape[1], spec["new_tokens"]
    cache_config = sampler_lib.CacheConfig(
        cache_size=prompt_len + new_tokens,
        num_layers=model_config.num_layers,
        num_kv_heads=model_config.num_kv_heads,
        head_dim=model_config.head_dim,
    )
    sampler = sampler_lib.Sampler(model, _IdTokenizer(), cache_config)
    inputs = [[int(t) for t in row] for row in prompts]

    def generate() -> np.ndarray:
        output = sampler(
            inputs,
            max_generation_steps=new_tokens,
            max_prompt_length=prompt_len,
            echo=False,
            eos_tokens=[EOS_ID],
            temperature=0.0,
        )
        return np.stack([np.asarray(row) for row in output.tokens])

    times, tokens = _time_calls(generate, spec["warmup"], spec["repeats"])
    return {
        "params": num_params,
        "times": times,
        "tokens": tokens,
        "settings": {
            "mode": "greedy",
            "cache_size": cache_config.cache_size,
            "max_prompt_length": prompt_len,
            "kv_cache": "dense [batch, cache_size, kv_heads, head_dim] per layer (not paged)",
            "use_flash_attention": model_config.use_flash_attention,
            "prefill_last_token_only": sampler._supports_decode_only_last_token,
        },
    }


def _child(side: str, spec: dict[str, Any]) -> None:
    """Runs one side, saves its tokens to out_dir/<side>.npy, prints its figures as JSON."""
    import jax

    prompts = np.load(os.path.join(spec["out_dir"], "prompts.npy"))
    result = (_run_ours if side == "ours" else _run_tunix)(spec, prompts)
    tokens = result.pop("tokens")
    expected = (len(prompts), spec["new_tokens"])
    assert tokens.shape == expected, f"{side} returned tokens {tokens.shape}, not {expected}"
    np.save(os.path.join(spec["out_dir"], f"{side}.npy"), tokens)
    result["versions"] = {"jax": jax.__version__}
    if side == "tunix":
        from importlib import metadata

        result["versions"]["google-tunix"] = metadata.version("google-tunix")
    print(json.dumps(result))


def _parent(
    models: list[str],
    batches: list[int],
    new_tokens: int,
    warmup: int,
    repeats: int,
    tunix_python: str,
) -> None:
    import transformers

    from bench.train_step import Case, _write_checkpoint
    from bench.vllm_sampler import MODELS, PROMPT_LEN, _agreement

    transformers.utils.logging.disable_progress_bar()
    print(
        f"greedy decode, float32, prompt {PROMPT_LEN} + {new_tokens} new tokens, on cpu ({CPUS} "
        f"CPUs each side, one side after the other), median of {repeats} calls after {warmup} "
        f"warm-up; ours: {sys.executable}, tunix: {tunix_python}",
        flush=True,
    )
    rows = []
    for name in models:
        with tempfile.TemporaryDirectory() as work:
            hf_dir = os.path.join(work, "hf")
            _write_checkpoint(Case(name, MODELS[name], max(batches), PROMPT_LEN), hf_dir)
            with open(os.path.join(hf_dir, "config.json")) as f:
                vocab_size = json.load(f)["vocab_size"]
            for i, batch in enumerate(batches):
                rng = np.random.default_rng(batch)
                prompts = rng.integers(0, vocab_size, (batch, PROMPT_LEN), dtype=np.int32)
                np.save(os.path.join(work, "prompts.npy"), prompts)
                spec = {
                    "hf_dir": hf_dir,
                    "out_dir": work,
                    "new_tokens": new_tokens,
                    "warmup": warmup,
                    "repeats": repeats,
                }
                sides = ("ours", "tunix") if i % 2 == 0 else ("tunix", "ours")
                python = {"ours": sys.executable, "tunix": tunix_python}
                results = {
                    side: _spawn(side, python[side], spec, os.path.abspath(__file__))
                    for side in sides
                }
                tokens = {side: np.load(os.path.join(work, f"{side}.npy")) for side in sides}
                ours, tunix = results["ours"], results["tunix"]
                generated = batch * new_tokens
                row = {
                    "model": name,
                    "params": ours["params"],
                    "tunix_params": tunix["params"],
                    "batch": batch,
                    "ours_tok_s": generated / statistics.median(ours["times"][warmup:]),
                    "tunix_tok_s": generated / statistics.median(tunix["times"][warmup:]),
                    "same_tokens": _agreement(tokens["ours"], tokens["tunix"]),
                    "order": sides,
                    "ours_times": ours["times"],
                    "tunix_times": tunix["times"],
                    "ours_settings": ours["settings"],
                    "tunix_settings": tunix["settings"],
                    "versions": {"ours": ours["versions"], "tunix": tunix["versions"]},
                }
                row["ratio"] = row["ours_tok_s"] / row["tunix_tok_s"]
                if i == 0:
                    print(
                        f"{name}: tunix Sampler {tunix['settings']}; ours JaxSampler "
                        f"{ours['settings']}",
                        flush=True,
                    )
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(
        "\n| model | params | batch | ours tok/s | tunix tok/s | ours/tunix | same tokens |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    for row in rows:
        print(
            f"| {row['model']} | {row['params']:,} | {row['batch']} | {row['ours_tok_s']:,.0f} "
            f"| {row['tunix_tok_s']:,.0f} | {row['ratio']:.2f}x | {row['same_tokens']:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "100M"], choices=["tiny", "100M"])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--new_tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tunix-python", default=TUNIX_PYTHON)
    parser.add_argument("--side", choices=("ours", "tunix"), help="internal: run one side")
    parser.add_argument("--spec", help="internal: the run as JSON (with --side)")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be >= 1: the first call compiles")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:CPUS])
    if args.side:
        _child(args.side, json.loads(args.spec))
    else:
        _parent(
            args.models,
            args.batches,
            args.new_tokens,
            args.warmup,
            args.repeats,
            args.tunix_python,
        )


if __name__ == "__main__":
    main()
