"""LoRA adapters: identity at init, exact merge, sharded placement, and adapter-only training
(gradients and optimizer state for the adapters alone, and the memory that saves)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.lora import LoRAConfig, LoRAParam, apply_lora, merge_lora
from deepswe_jax.parallel import make_mesh, shard_model
from deepswe_jax.rl.batch import MicroBatch
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.sft import NegativeLogLikelihoodLoss
from deepswe_jax.rl.train_step import Trainer

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
# Weight decay would move the base weights if the optimizer saw them.
OPTIMIZER = optax.adamw(1e-2, weight_decay=0.1)


def next_token_micro_batch(rows=4, length=16, seed=3) -> MicroBatch:
    """Random sequences filling every row, trained on every target."""
    tokens = np.random.default_rng(seed).integers(0, MODEL.vocab_size, (rows, length + 1))
    tokens = tokens.astype(np.int32)
    ones = np.ones((rows, length), np.float32)
    return MicroBatch(
        input_ids=tokens[:, :-1],
        targets=tokens[:, 1:],
        positions=np.tile(np.arange(length, dtype=np.int32), (rows, 1)),
        segment_ids=ones.astype(np.int32),
        loss_mask=ones,
        advantages=0 * ones,
        sampler_logprobs=0 * ones,
    )


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


@pytest.fixture(scope="module")
def lora_trainers():
    """NLL trainers over all parameters and over the adapters only, on an fsdp x tensor mesh, and
    the params (nonzero B, so A gets gradients too) placed on it."""
    _, model = base_and_adapted()
    randomize_b(model)
    mesh = make_mesh(data=1, fsdp=4, tensor=2)
    full, adapters = (
        Trainer(
            model,
            OPTIMIZER,
            LossSettings(logprob_chunk=8),
            mesh=mesh,
            loss_fn=NegativeLogLikelihoodLoss(),
            trainable=trainable,
        )
        for trainable in (nnx.Param, LoRAParam)
    )
    return full, adapters, jax.device_put(nnx.state(model, nnx.Param), full.param_shardings)


def assert_trees_close(a, b, rtol=1e-5, atol=1e-7):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol), a, b)


def test_adapter_gradients_are_the_adapter_part_of_the_full_gradient(lora_trainers):
    full, adapters, params = lora_trainers
    micro_batch = next_token_micro_batch()
    all_grads, all_sums = full.accumulate_gradients(params, [micro_batch])
    grads, sums = adapters.accumulate_gradients(params, [micro_batch])
    want, _ = nnx.split_state(all_grads, LoRAParam, ...)
    assert jax.tree.structure(grads) == jax.tree.structure(want)
    assert_trees_close(grads, want)
    assert float(sums["loss_sum"]) == pytest.approx(float(all_sums["loss_sum"]), rel=1e-6)


def test_adapter_step_moves_only_the_adapters_with_optimizer_state_for_them_alone(lora_trainers):
    _, trainer, params = lora_trainers
    micro_batch = next_token_micro_batch()
    adapter_params, base_params = nnx.split_state(params, LoRAParam, ...)
    grads, sums = trainer.accumulate_gradients(params, [micro_batch])
    mean_grads = jax.tree.map(lambda g: g / sums["denominator"], grads)
    updates, _ = OPTIMIZER.update(mean_grads, OPTIMIZER.init(adapter_params), adapter_params)
    want_adapters = optax.apply_updates(adapter_params, updates)

    state = trainer.init_state(jax.tree.map(jnp.copy, params))
    state, metrics = trainer.step(state, [micro_batch])
    new_adapters, new_base = nnx.split_state(state.params, LoRAParam, ...)
    jax.tree.map(np.testing.assert_array_equal, new_base, base_params)  # bit-identical
    assert_trees_close(new_adapters, want_adapters, rtol=1e-5, atol=1e-6)
    changed = jax.tree.map(
        lambda old, new: not np.array_equal(old, new), adapter_params, new_adapters
    )
    assert all(jax.tree.leaves(changed))
    assert metrics["grad_norm"] == pytest.approx(float(optax.tree.norm(mean_grads)), rel=1e-5)
    # Adam's two moments, for the adapters only.
    moments = [x for x in jax.tree.leaves(state.opt_state) if x.ndim]
    adapter_leaves = jax.tree.leaves(adapter_params)
    assert {x.shape for x in moments} == {x.shape for x in adapter_leaves}
    assert sum(x.size for x in moments) == 2 * sum(x.size for x in adapter_leaves)


def test_adapter_only_step_compiles_to_less_device_memory(lora_trainers):
    full, adapters, params = lora_trainers
    micro_batch = next_token_micro_batch()

    def footprint(trainer):
        """(arguments + outputs - aliased + temporaries, temporaries) in bytes per device."""
        stats = trainer.compile_accumulation(params, micro_batch).memory_analysis()
        live = stats.argument_size_in_bytes + stats.output_size_in_bytes
        return live - stats.alias_size_in_bytes + stats.temp_size_in_bytes, stats.temp_size_in_bytes

    (full_total, full_temp), (adapter_total, adapter_temp) = footprint(full), footprint(adapters)
    _, base_params = nnx.split_state(params, LoRAParam, ...)
    base_bytes = sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(base_params))
    assert adapter_temp < full_temp
    # At least the base weights' accumulated gradient is gone.
    assert full_total - adapter_total >= base_bytes, (full_total, adapter_total, base_bytes)


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
    with pytest.raises(ValueError, match="no parameter of the model matches"):
        Trainer(base_model(), OPTIMIZER, LossSettings(), mesh=make_mesh(), trainable=LoRAParam)
