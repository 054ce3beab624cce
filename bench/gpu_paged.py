"""bench/gpu.py's `paged` section: the paged KV cache's decode attention on the GPU.

  kernel   one decode step's attention of one layer at the model's heads, rows of lengths spread
           up to `paged_max_len` with their pages scattered over the pool: the Pallas kernel
           (model/paged_kernel.py) against the XLA gather of every row's pages, milliseconds
           and the largest difference between the two;
  sampler  JaxSampler with the paged cache read by the kernel against the dense cache, the
           decode section's greedy requests: new tokens/s and the rows whose tokens agree.

The kernel has run only in Pallas interpret mode before this section; a Triton lowering error
shows here as this section's error, and config.sampler.paged_attention='xla' is the fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.gpu_sections import Scale, _emit, _median_seconds, qwen3_config


def _kernel_inputs(config: Any, rows: int, longest: int) -> dict[str, Any]:
    """One layer's scattered pages for `rows` rows of lengths spread to `longest`; bf16."""
    import jax
    import jax.numpy as jnp

    from deepswe_jax.model.kv_cache import PAGE

    rng = np.random.default_rng(0)
    lengths = np.linspace(longest // 8, longest - 1, rows).astype(np.int32)
    counts = -(-lengths // PAGE)
    order = rng.permutation(int(counts.sum()))
    table = np.full((rows, longest // PAGE), len(order), np.int32)
    start = 0
    for row, count in enumerate(counts):
        table[row, :count] = order[start : start + count]
        start += count
    k, d, h = config.num_key_value_heads, config.head_dim, config.num_attention_heads
    draws = iter(jax.random.split(jax.random.key(0), 5))

    def normal(*shape):  # drawn on the device: GBs of pages at the GPU scale
        return jax.random.normal(next(draws), shape, jnp.bfloat16)

    return dict(
        keys=normal(k, 1, len(order), PAGE, d),
        values=normal(k, 1, len(order), PAGE, d),
        table=jnp.asarray(table),
        lengths=jnp.asarray(lengths),
        q=normal(rows, 1, h, d),
        new_k=normal(rows, 1, k, d),
        new_v=normal(rows, 1, k, d),
    )


def _paged_kernel(scale: Scale) -> None:
    import jax
    import jax.numpy as jnp

    from deepswe_jax.model.cache_attention import attend_cache
    from deepswe_jax.model.kv_cache import PagedKVCache

    config = qwen3_config(scale)
    rows, longest = scale.decode_batch, scale.paged_max_len
    x = _kernel_inputs(config, rows, longest)
    live = jnp.ones((rows,), jnp.int32)
    outputs = {}
    for attention in ("xla", "pallas"):
        cache = PagedKVCache(x["keys"], x["values"], x["table"], x["lengths"], attention)
        step = jax.jit(
            lambda q, new_k, new_v, cache: attend_cache(
                q, new_k, new_v, cache, jnp.int32(0), live, each_row_reads=False
            )
        )
        run = lambda: jax.block_until_ready(step(x["q"], x["new_k"], x["new_v"], cache))  # noqa: B023, E731
        outputs[attention] = np.asarray(run().astype(jnp.float32))
        seconds = _median_seconds(run, scale.repeats)
        _emit(section="paged", part="kernel", attention=attention, rows=rows, longest=longest,
              ms=seconds * 1e3)  # fmt: skip
    difference = float(np.abs(outputs["pallas"] - outputs["xla"]).max())
    _emit(section="paged", part="kernel", attention="pallas", max_diff_vs_xla=difference)


def _paged_sampler(scale: Scale) -> None:
    import asyncio

    import jax.numpy as jnp
    from flax import nnx

    from deepswe_jax.model import Qwen3ForCausalLM
    from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams

    config = qwen3_config(scale)
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16, dtype=jnp.bfloat16)
    batch, prompt_len, new = scale.decode_batch, scale.decode_prompt, scale.decode_new
    prompts = np.random.default_rng(1).integers(0, config.vocab_size, (batch, prompt_len))
    params = SamplingParams(temperature=0.0, max_new_tokens=new)
    requests = [GenerateRequest(tuple(int(t) for t in row), params) for row in prompts]
    tokens = {}
    for name, paged in (("dense", {}), ("paged", dict(paged=True, paged_attention="pallas"))):
        sampler = JaxSampler(
            model, max_batch=batch, max_cache_len=prompt_len + new, min_prefill_len=16,
            prefix_caching=False, **paged,
        )  # fmt: skip
        completions = []

        def decode(sampler=sampler, completions=completions) -> None:
            completions[:] = asyncio.run(sampler.generate(requests))

        seconds = _median_seconds(decode, scale.decode_repeats)
        sampler.close()
        tokens[name] = np.array([c.token_ids for c in completions])
        _emit(section="paged", part="sampler", cache=name, tokens_per_s=batch * new / seconds)
    same = (tokens["paged"] == tokens["dense"]).all(axis=1).mean()
    _emit(section="paged", part="sampler", cache="paged", same_greedy_rows=float(same))


def section_paged(scale: Scale) -> None:
    """The kernel against the XLA gather, then the paged sampler against the dense one."""
    _paged_kernel(scale)
    _paged_sampler(scale)
