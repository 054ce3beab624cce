"""JaxSampler's memory: a cache that cannot fit is refused before anything is allocated, with the
sizes and what to change; a token budget sets the number of cache slots."""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from configs import deepswe_qwen3_32b
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh
from deepswe_jax.sampling import JaxSampler

TINY = Qwen3Config(
    vocab_size=64,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=8,
)


def test_refuses_the_32b_configs_cache_with_its_size_and_what_fits():
    config = deepswe_qwen3_32b.get_config()
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    model = nnx.eval_shape(  # nothing is allocated: the refusal comes first
        lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0), dtype=jnp.bfloat16)
    )
    max_len = config.agent.max_prompt_tokens + config.agent.max_context
    mesh = make_mesh(1, 8, 1)  # weights and cache rows split 8 ways
    with pytest.raises(ValueError) as refused:
        JaxSampler(
            model, max_batch=config.sampler.max_batch, max_cache_len=max_len, mesh=mesh,
            free_bytes=80 * 10**9,
        )  # fmt: skip
    # 64 layers x (keys, values) x 8 kv heads x 128 x 2 bytes = 262,144 bytes per token.
    per_slot = 64 * 2 * 8 * 128 * 2 * max_len
    cache_gb = per_slot * 512 / 8 / 1e9
    weights_gb = 32_762_123_264 * 4 / 8 / 1e9  # float32 parameters, split 8 ways (norms aside)
    fitting = int((80e9 - weights_gb * 1e9) // (per_slot / 8))
    message = str(refused.value)
    assert f"KV cache {cache_gb:,.1f} GB (512 slots x 36,864 tokens x 64 layers" in message
    assert f"weights {weights_gb:,.1f} GB" in message and "80.0 GB free" in message
    assert f"{fitting} slots fit: set sampler.max_batch={fitting} or sampler.max_cache_tokens=" in (
        message
    )
    assert fitting == 52 and f"max_cache_tokens={fitting * max_len:,}" in message


def test_token_budget_sets_the_slots():
    model = Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0))
    devices = jax.devices()[:1]
    sampler = JaxSampler(
        model, max_batch=8, max_cache_len=32, max_cache_tokens=100, mesh=make_mesh(devices=devices)
    )
    try:
        assert sampler.max_batch == 3  # 100 // 32
        assert sampler._cache.values.shape == (1, 3, 1, 32, 8)  # 3 rows of 32 positions
    finally:
        sampler.close()
    with pytest.raises(ValueError, match="raise sampler.max_cache_tokens to at least 32"):
        JaxSampler(model, max_batch=8, max_cache_len=32, max_cache_tokens=31)
