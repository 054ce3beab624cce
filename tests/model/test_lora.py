"""LoRA adapters: identity at init, exact merge, only adapters train, sharded placement."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.lora import (
    LoRAConfig,
    LoRAParam,
    apply_lora,
    freeze_non_adapters,
    merge_lora,
)
from deepswe_jax.parallel import make_mesh, shard_model

MODEL = Qwen3Config(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)
TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 64, (2, 12)), jnp.int32)


@nnx.jit
def logits(model):
    return model(TOKENS)


@functools.cache
def base_model() -> Qwen3ForCausalLM:
    """Built once per module (eager construction is the slow part); tests use clones."""
    return Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0))


def base_and_adapted(rank=4, alpha=8.0, targets=None):
    base = base_model()
    config = LoRAConfig(rank, alpha) if targets is None else LoRAConfig(rank, alpha, targets)
    return base, apply_lora(nnx.clone(base), config, rngs=nnx.Rngs(1))


def randomize_b(model, seed=2):
    """Nonzero B everywhere, so the adapters change the output."""
    keys = iter(jax.random.split(jax.random.key(seed), 64))
    for path, variable in nnx.iter_graph(model):
        if isinstance(variable, LoRAParam) and path[-1].endswith("_lora_b"):
            variable[...] = 0.1 * jax.random.normal(next(keys), variable[...].shape)


def test_adapted_model_equals_base_at_init_and_keeps_param_paths():
    base, adapted = base_and_adapted()
    np.testing.assert_array_equal(logits(adapted), logits(base))
    base_paths = set(dict(nnx.to_flat_state(nnx.state(base))))
    adapted_paths = set(dict(nnx.to_flat_state(nnx.state(adapted))))
    assert base_paths < adapted_paths
    added = adapted_paths - base_paths
    assert len(added) == 2 * 7 and all(p[-1].endswith(("_lora_a", "_lora_b")) for p in added)
    a = adapted.layers.q_proj_lora_a[...]
    assert a.shape == (2, 32, 4) and adapted.layers.q_proj_lora_b[...].shape == (2, 4, 4, 8)
    assert adapted.layers.o_proj_lora_a[...].shape == (2, 4, 8, 4)


def test_merge_matches_explicit_kernel_update():
    _, adapted = base_and_adapted(rank=4, alpha=8.0, targets=("q_proj", "o_proj", "down_proj"))
    randomize_b(adapted)
    merged = merge_lora(adapted)
    assert type(merged.layers).__name__ == "Qwen3DecoderLayers"
    layers = adapted.layers
    for name, einsum in (("q_proj", "ler,lrhk->lehk"), ("o_proj", "lhdr,lre->lhde")):
        a, b = getattr(layers, f"{name}_lora_a")[...], getattr(layers, f"{name}_lora_b")[...]
        expected = getattr(layers, name)[...] + 2.0 * jnp.einsum(einsum, a, b)  # alpha / r = 2
        np.testing.assert_allclose(getattr(merged.layers, name)[...], expected, atol=1e-6)
    np.testing.assert_array_equal(merged.layers.gate_proj[...], layers.gate_proj[...])
    np.testing.assert_allclose(logits(merged), logits(adapted), atol=2e-5)
    base, _ = base_and_adapted()
    assert not np.allclose(logits(adapted), logits(base), atol=1e-3)


def test_only_adapters_change_under_training():
    _, model = base_and_adapted()
    graphdef, params = nnx.split(model, nnx.Param)
    optimizer = freeze_non_adapters(optax.adamw(1e-2, weight_decay=0.1))
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
        def loss(params):
            logits = nnx.merge(graphdef, params)(TOKENS)
            return -jax.nn.log_softmax(logits)[:, :-1, 0].mean()

        grads = jax.grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    new_params, _ = step(params, opt_state)
    new_params, _ = step(new_params, _)
    flat_old = dict(nnx.to_flat_state(params))
    flat_new = dict(nnx.to_flat_state(new_params))
    for path, old in flat_old.items():
        changed = not np.array_equal(old[...], flat_new[path][...])
        assert changed == isinstance(old, LoRAParam), path
    # Adam moments exist for the adapters only.
    moment_leaves = jax.tree.leaves(opt_state)
    adapter_count = sum(v[...].size for v in flat_old.values() if isinstance(v, LoRAParam))
    assert sum(x.size for x in moment_leaves if x.ndim) == 2 * adapter_count


def test_adapters_shard_like_their_kernels():
    mesh = make_mesh(data=1, fsdp=4, tensor=2)
    _, model = base_and_adapted()
    shard_model(model, mesh)
    spec_a = model.layers.gate_proj_lora_a[...].sharding.spec
    spec_b = model.layers.gate_proj_lora_b[...].sharding.spec
    assert tuple(spec_a) == (None, "fsdp") and tuple(spec_b) == (None, None, "tensor")
    with jax.set_mesh(mesh):
        sharded = jax.jit(lambda m, t: m(t))(model, TOKENS)
    base, _ = base_and_adapted()
    np.testing.assert_allclose(sharded, logits(base), atol=1e-5)


def test_bad_config_is_explained():
    with pytest.raises(ValueError, match="rank must be >= 1"):
        LoRAConfig(0, 1.0)
    with pytest.raises(ValueError, match="unknown LoRA targets"):
        LoRAConfig(4, 8.0, ("qkv",))
    _, model = base_and_adapted()
    with pytest.raises(ValueError, match="already has LoRA"):
        apply_lora(model, LoRAConfig(4, 8.0), rngs=nnx.Rngs(0))
