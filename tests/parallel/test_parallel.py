"""Sharding on 8 fake CPU devices: rules, mesh, and sharded == single-device numerics."""

from __future__ import annotations

import importlib
import math
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import configs
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import (
    DEFAULT_RULES,
    batch_sharding,
    constrain,
    create_sharded_model,
    init_distributed,
    logical_to_spec,
    make_mesh,
    mesh_shape_for,
    shard_model,
    state_shardings,
    variable_logical_axes,
)

TINY = Qwen3Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rope_theta=10_000.0,
)


def test_make_mesh_fills_the_remaining_axis():
    mesh = make_mesh(data=2, fsdp=-1, tensor=2)
    assert dict(mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    with pytest.raises(ValueError, match="3 = 6 devices, but 8 are available"):
        make_mesh(data=1, fsdp=2, tensor=3)


def test_logical_to_spec_refuses_non_dividing_and_colliding_axes():
    mesh_shape = {"data": 2, "fsdp": 4, "tensor": 2}
    assert logical_to_spec(("embed", "heads", "head_dim")) == P("fsdp", "tensor")
    # 3 kv heads cannot be split over tensor=2: an error naming the fix, not a silent copy...
    with pytest.raises(ValueError, match=r"'tensor' \(size 2\) does not divide dimension 1 "):
        logical_to_spec(("embed", "kv_heads"), shape=(32, 3), mesh_shape=mesh_shape)
    # ...unless the rules say to replicate them.
    replicate_kv = (*DEFAULT_RULES, ("kv_heads", None))
    spec = logical_to_spec(
        ("embed", "kv_heads"), replicate_kv, shape=(32, 3), mesh_shape=mesh_shape
    )
    assert spec == P("fsdp")
    # A batch of 2 on the (data, fsdp) = 8-way batch axis: refused for an array that is placed,
    # left to XLA for an activation (constrain).
    with pytest.raises(ValueError, match="'fsdp' \\(size 4\\) does not divide"):
        logical_to_spec(("batch",), shape=(2,), mesh_shape=mesh_shape)
    spec = logical_to_spec(("batch",), shape=(2,), mesh_shape=mesh_shape, drop_non_dividing=True)
    assert spec == P("data")
    # fsdp shards both batch and embed: two dimensions of one array cannot share a mesh axis.
    with pytest.raises(ValueError, match="Colliding mesh axes: .* 'batch' and 'embed' to .*'fsdp'"):
        logical_to_spec(("batch", "embed"), DEFAULT_RULES)
    # Axes the mesh lacks are skipped (a mesh of fsdp and tensor only).
    assert logical_to_spec(("batch",), shape=(8,), mesh_shape={"fsdp": 4}) == P("fsdp")
    with pytest.raises(KeyError, match="logical axis 'experts' has no sharding rule"):
        logical_to_spec(("experts",))


@pytest.mark.parametrize(
    "name",
    sorted(m.name for m in pkgutil.iter_modules(configs.__path__) if m.name != "common"),
)
def test_every_shipped_config_lays_out_its_parameters(name):
    """Each config on its own mesh (the product of its sizes, or the 8 test devices for a -1
    axis; Qwen3-32B on 64): every parameter resolves without a dropped axis. Nothing is
    allocated (nnx.eval_shape)."""
    config = importlib.import_module(f"configs.{name}").get_config()
    sizes = (config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
    devices = 8 if -1 in sizes else math.prod(sizes)
    mesh_shape = dict(zip(("data", "fsdp", "tensor"), mesh_shape_for(*sizes, devices), strict=True))
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    abstract = nnx.eval_shape(lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0)))
    specs = {
        path: logical_to_spec(
            variable_logical_axes(variable),
            config.sharding_rules,
            shape=variable.get_value().shape,
            mesh_shape=mesh_shape,
        )
        for path, variable in nnx.to_flat_state(nnx.state(abstract, nnx.Param))
    }
    # The embedding (the largest weight) is split over every device of the model axes.
    embedding = next(spec for path, spec in specs.items() if "embed_tokens" in path)
    named = [
        a for entry in embedding if entry for a in ((entry,) if isinstance(entry, str) else entry)
    ]
    shards = math.prod(mesh_shape[axis] for axis in named)
    assert shards == mesh_shape["fsdp"] * mesh_shape["tensor"], (name, embedding, mesh_shape)


def test_constrain_applies_only_under_a_mesh():
    mesh = make_mesh(data=2, fsdp=4, tensor=1)

    @jax.jit
    def scaled(x):
        return constrain(x * 2, ("batch", None))

    x = jnp.ones((8, 4))
    assert scaled(x).sharding.is_fully_replicated
    with jax.set_mesh(mesh):
        assert scaled(x).sharding.spec == P(("data", "fsdp"))


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return nnx.jit(lambda: Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0)))()


def packed_batch() -> tuple[jax.Array, jax.Array, jax.Array]:
    """[8, 12] tokens, each row two segments (lengths 5 and 7) with restarting positions."""
    ids = jnp.asarray(np.random.default_rng(0).integers(0, 128, (8, 12)))
    positions = jnp.tile(jnp.concatenate([jnp.arange(5), jnp.arange(7)]), (8, 1))
    segments = jnp.tile(jnp.array([1] * 5 + [2] * 7), (8, 1))
    return ids, positions, segments


def loss_and_logits(graphdef, state, ids, positions, segments):
    logits = nnx.merge(graphdef, state)(ids, positions, segments)
    targets = jnp.roll(ids, -1, axis=1)
    logprobs = jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], axis=-1)
    return -jnp.mean(logprobs), logits


@pytest.fixture(scope="module")
def single_device_result(model):
    """((loss, logits), grads) of the packed batch, computed without a mesh."""
    graphdef, state = nnx.split(model)
    grad_fn = jax.value_and_grad(lambda *a: loss_and_logits(graphdef, *a), has_aux=True)
    return jax.jit(grad_fn)(state, *packed_batch())


@pytest.mark.parametrize(
    "axes", [dict(data=1, fsdp=4, tensor=2), dict(data=2, fsdp=4, tensor=1)], ids=str
)
def test_sharded_forward_and_gradients_match_single_device(model, single_device_result, axes):
    graphdef, state = nnx.split(model)
    batch = packed_batch()
    grad_fn = jax.value_and_grad(lambda *a: loss_and_logits(graphdef, *a), has_aux=True)
    (ref_loss, ref_logits), ref_grads = single_device_result

    mesh = make_mesh(**axes)
    param_shardings = state_shardings(state, mesh)
    data_sharding = batch_sharding(mesh)
    logits_sharding = NamedSharding(mesh, logical_to_spec(("batch", "seq", "act_vocab")))
    sharded_step = jax.jit(
        grad_fn,
        in_shardings=(param_shardings, data_sharding, data_sharding, data_sharding),
        out_shardings=((NamedSharding(mesh, P()), logits_sharding), param_shardings),
    )
    sharded_state = jax.device_put(state, param_shardings)
    with jax.set_mesh(mesh):
        (loss, logits), grads = sharded_step(sharded_state, *batch)

    q_proj = sharded_state["layers"]["q_proj"].get_value()
    embed = sharded_state["embed_tokens"].get_value()
    assert q_proj.sharding.spec == P(None, "fsdp", "tensor")
    assert embed.sharding.spec == P("tensor", "fsdp")
    assert len(q_proj.addressable_shards) == 8
    assert q_proj.addressable_shards[0].data.shape == (2, 32 // 4, 4 // (axes["tensor"]), 16)
    assert grads["layers"]["q_proj"].get_value().sharding.spec == q_proj.sharding.spec
    np.testing.assert_allclose(loss, ref_loss, atol=1e-5, rtol=0)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-5, rtol=0)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=0), grads, ref_grads)


def test_sharded_decode_matches_unsharded_forward(model):
    mesh = make_mesh(data=1, fsdp=4, tensor=2)
    sharded = create_sharded_model(lambda: Qwen3ForCausalLM(TINY, rngs=nnx.Rngs(0)), mesh)
    assert sharded.layers.gate_proj.get_value().sharding.spec == P(None, "fsdp", "tensor")
    ids = jnp.asarray(np.random.default_rng(1).integers(0, 128, (4, 6)))
    with jax.set_mesh(mesh):
        cache = sharded.init_cache(batch_size=4, max_length=8)
        logits, cache = nnx.jit(lambda m, i, c: m.decode(i, c))(sharded, ids, cache)
    expected = NamedSharding(mesh, P(None, ("data", "fsdp"), "tensor"))  # batch, kv heads
    assert cache.keys.sharding.is_equivalent_to(expected, ndim=5)
    assert cache.values.sharding.is_equivalent_to(expected, ndim=5)
    np.testing.assert_allclose(logits, nnx.jit(lambda m: m(ids))(model), atol=1e-5, rtol=0)


def test_shard_model_moves_parameters_in_place(model):
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    local = nnx.merge(*nnx.split(model))
    before = np.asarray(local.layers.down_proj.get_value())
    shard_model(local, mesh)
    down_proj = local.layers.down_proj.get_value()
    assert down_proj.sharding.spec == P(None, "tensor", "fsdp")
    np.testing.assert_array_equal(np.asarray(down_proj), before)


def test_init_distributed_is_a_noop_for_one_process(monkeypatch):
    monkeypatch.delenv("JAX_NUM_PROCESSES", raising=False)
    assert init_distributed() is False
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    with pytest.raises(ValueError, match="JAX_COORDINATOR_ADDRESS"):
        init_distributed(process_id=0)
