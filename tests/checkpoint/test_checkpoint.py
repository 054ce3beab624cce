"""Orbax checkpoints: round trips, restore onto another mesh, retention, crash safety."""

import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from configs import tiny
from deepswe_jax.checkpoint import (
    TrainCheckpoints,
    params_directory,
    read_model_config,
    restore_params,
    restore_target,
    save_params,
)
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import create_sharded_model, make_mesh, state_shardings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class TwoLayers(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Embed(64, 16, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(16, 32, rngs=rngs), nnx.Linear(32, 16, rngs=rngs)])


def _spec(shape: tuple, mesh: jax.sharding.Mesh) -> P:
    """Shard dim 0 over fsdp and the last dim over tensor where they divide."""
    fsdp, tensor = mesh.shape["fsdp"], mesh.shape["tensor"]
    if len(shape) == 2:
        return P(
            "fsdp" if shape[0] % fsdp == 0 else None,
            "tensor" if shape[1] % tensor == 0 else None,
        )
    if len(shape) == 1 and shape[0] % fsdp == 0:
        return P("fsdp")
    return P()


def _abstract_on(tree, mesh):
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=NamedSharding(mesh, _spec(x.shape, mesh))
        ),
        tree,
    )


def _place_on(tree, mesh):
    return jax.tree.map(
        lambda x: jax.device_put(x, NamedSharding(mesh, _spec(x.shape, mesh))), tree
    )


def _train_state(mesh, seed=0):
    params = _place_on(nnx.state(TwoLayers(nnx.Rngs(seed)), nnx.Param), mesh)
    tx = optax.adamw(1e-2)
    opt_state = tx.init(params)
    grads = jax.tree.map(jnp.ones_like, params)
    _, opt_state = tx.update(grads, opt_state, params)
    return params, opt_state, tx


def _assert_trees_equal(a, b):
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("restore_axes", [(8, 1), (2, 4)], ids=["fsdp8", "fsdp2xtensor4"])
def test_round_trip_restores_onto_a_different_mesh(tmp_path, restore_axes):
    save_mesh = jax.make_mesh((4, 2), ("fsdp", "tensor"))
    params, opt_state, tx = _train_state(save_mesh)
    key = jax.random.key(7)
    config = {"rl": {"lr": 1e-6}, "rules": (("embed", "fsdp"),)}
    with TrainCheckpoints(tmp_path, every=1, keep=3) as checkpoints:
        assert checkpoints.save(
            5,
            params=params,
            opt_state=opt_state,
            rng_key=key,
            data_position={"epoch": 2, "index": 17},
            model_config={"hidden_size": 16},
            config=config,
        )
        checkpoints.wait_until_finished()

    restore_mesh = jax.make_mesh(restore_axes, ("fsdp", "tensor"))
    abstract_model = nnx.eval_shape(lambda: TwoLayers(nnx.Rngs(1)))
    abstract_params = _abstract_on(nnx.state(abstract_model, nnx.Param), restore_mesh)
    abstract_opt_state = jax.eval_shape(tx.init, abstract_params)
    with TrainCheckpoints(tmp_path) as checkpoints:
        assert checkpoints.latest_step() == 5
        restored = checkpoints.restore(
            params=abstract_params, opt_state=abstract_opt_state, mesh=restore_mesh
        )

    assert restored.step == 5
    assert isinstance(restored.params, nnx.State)
    _assert_trees_equal(restored.params, params)
    _assert_trees_equal(restored.opt_state, opt_state)
    kernel = restored.params["layers"][0]["kernel"]
    assert kernel.sharding == NamedSharding(restore_mesh, _spec(kernel.shape, restore_mesh))
    mu_kernel = restored.opt_state[0].mu["layers"][0]["kernel"]
    assert mu_kernel.sharding.mesh == restore_mesh
    assert jnp.array_equal(jax.random.key_data(restored.rng_key), jax.random.key_data(key))
    assert restored.data_position == {"epoch": 2, "index": 17}
    assert restored.config["rl"] == {"lr": 1e-6}
    assert restored.config["rules"] == [["embed", "fsdp"]]
    assert read_model_config(tmp_path) == {"hidden_size": 16}


def test_saves_every_k_steps_and_keeps_the_last_n(tmp_path):
    mesh = jax.make_mesh((8, 1), ("fsdp", "tensor"))
    params, opt_state, _ = _train_state(mesh)
    with TrainCheckpoints(tmp_path, every=2, keep=2) as checkpoints:
        saved = [
            checkpoints.save(
                step,
                params=params,
                opt_state=opt_state,
                rng_key=jax.random.PRNGKey(step),
                data_position={"index": step},
                model_config={},
                config={},
            )
            for step in range(7)
        ]
        checkpoints.wait_until_finished()
        assert saved == [True, False, True, False, True, False, True]
        assert checkpoints.all_steps() == [4, 6]
        restored = checkpoints.restore(4, params=params, opt_state=opt_state)
    assert restored.data_position == {"index": 4}
    np.testing.assert_array_equal(restored.rng_key, jax.random.PRNGKey(4))


def test_params_directory_round_trip_and_errors(tmp_path):
    mesh = jax.make_mesh((8,), ("fsdp",))
    params = {"w": jnp.arange(32.0).reshape(8, 4), "layers": [{"b": jnp.ones(3)}]}
    save_params(tmp_path / "p", params, model_config={"vocab_size": 8})
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    restored = restore_params(tmp_path / "p", target, mesh=mesh)
    _assert_trees_equal(restored, params)
    assert read_model_config(tmp_path / "p") == {"vocab_size": 8}
    with pytest.raises(FileExistsError, match="choose a new --out"):
        save_params(tmp_path / "p", params, model_config={})
    with pytest.raises(ValueError, match="no concrete sharding"):
        restore_params(tmp_path / "p", target)
    with pytest.raises(FileNotFoundError, match="launch.import_hf"):
        params_directory(tmp_path / "missing")


_CRASHING_SAVER = textwrap.dedent(
    """
    import os, signal, sys, time
    import jax, jax.numpy as jnp
    from deepswe_jax.checkpoint import TrainCheckpoints

    directory = sys.argv[1]
    checkpoints = TrainCheckpoints(directory, every=1, keep=5, async_save=True)
    small = {"w": jnp.full((4, 4), 1.0)}
    checkpoints.save(1, params=small, opt_state=small, rng_key=jax.random.key(1),
                     data_position={"index": 1}, model_config={}, config={})
    checkpoints.wait_until_finished()
    big = {"w": jnp.full((8192, 4096), 2.0)}  # 128 MiB: the background write takes a while
    checkpoints.save(2, params=big, opt_state=big, rng_key=jax.random.key(2),
                     data_position={"index": 2}, model_config={}, config={})
    deadline = time.time() + 60
    while not any(name.startswith("2.") and "tmp" in name for name in os.listdir(directory)):
        assert time.time() < deadline, "step 2 never started writing"
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_kill_mid_save_keeps_the_previous_step(tmp_path):
    directory = tmp_path / "checkpoints"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, XLA_FLAGS="", JAX_PLATFORMS="cpu")
    process = subprocess.run(
        [sys.executable, "-c", _CRASHING_SAVER, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr
    leftovers = sorted(os.listdir(directory))
    assert "1" in leftovers and "2" not in leftovers
    assert any(name.startswith("2.") for name in leftovers), leftovers  # the unfinished save

    small = {"w": jax.ShapeDtypeStruct((4, 4), jnp.float32)}
    mesh = jax.make_mesh((8,), ("fsdp",))
    with TrainCheckpoints(directory, every=1, keep=5) as checkpoints:
        assert checkpoints.latest_step() == 1
        restored = checkpoints.restore(params=small, opt_state=small, mesh=mesh)
        assert restored.step == 1 and restored.data_position == {"index": 1}
        np.testing.assert_array_equal(restored.params["w"], np.ones((4, 4)))
        assert checkpoints.save(
            2,
            params=restored.params,
            opt_state=restored.opt_state,
            rng_key=restored.rng_key,
            data_position={"index": 2},
            model_config={},
            config={},
        )
        checkpoints.wait_until_finished()
        assert checkpoints.all_steps() == [1, 2]
    assert sorted(os.listdir(directory)) == ["1", "2"]


def test_qwen3_with_nnx_optimizer_restores_under_another_mesh(tmp_path):
    config = tiny.get_config()
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())

    def make(seed):
        model = Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(seed))
        return model, nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)

    save_mesh = make_mesh(fsdp=4, tensor=2)
    model = create_sharded_model(
        lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0)), save_mesh
    )
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    with TrainCheckpoints(tmp_path) as checkpoints:
        checkpoints.save(
            1,
            params=nnx.state(model, nnx.Param),
            opt_state=nnx.state(optimizer),
            rng_key=jax.random.key(0),
            data_position={"index": 3},
            model_config=model_config,
            config=config.to_dict(),
        )
        checkpoints.wait_until_finished()

    restore_mesh = make_mesh(data=2, fsdp=2, tensor=2)
    abstract_model, abstract_optimizer = nnx.eval_shape(lambda: make(1))
    abstract_params = nnx.state(abstract_model, nnx.Param)
    abstract_opt_state = nnx.state(abstract_optimizer)
    with TrainCheckpoints(tmp_path) as checkpoints:
        restored = checkpoints.restore(
            params=restore_target(abstract_params, state_shardings(abstract_params, restore_mesh)),
            opt_state=restore_target(
                abstract_opt_state, state_shardings(abstract_opt_state, restore_mesh)
            ),
        )
    _assert_trees_equal(restored.params, nnx.state(model, nnx.Param))
    _assert_trees_equal(restored.opt_state, nnx.state(optimizer))
    q_proj = restored.params["layers"]["q_proj"]
    assert q_proj.sharding.mesh == restore_mesh and q_proj.sharding.spec == P(
        None, "fsdp", "tensor"
    )
    assert restored.config["model"] == config.model.to_dict()
    saved_model_config = read_model_config(tmp_path)
    assert saved_model_config == model_config.to_hf_dict()
    assert Qwen3Config.from_hf_dict(saved_model_config) == model_config


def test_save_takes_the_model_config_from_the_caller_and_refuses_a_config_dict(tmp_path):
    """The model config is an argument (not read out of the experiment config) and configs come
    as plain mappings: a ConfigDict is refused before anything is written."""
    params = {"w": jnp.ones((2, 2))}
    config = tiny.get_config()
    with TrainCheckpoints(tmp_path, every=1, async_save=False) as checkpoints:
        with pytest.raises(TypeError, match=r"ConfigDict; pass config.to_dict\(\)"):
            checkpoints.save(
                1,
                params=params,
                opt_state=params,
                rng_key=jax.random.key(0),
                data_position={},
                model_config={"vocab_size": 8},
                config=config,
            )
        with pytest.raises(TypeError, match="ConfigDict"):
            save_params(tmp_path / "p", params, model_config=config.model)
        assert checkpoints.all_steps() == [] and not (tmp_path / "p").exists()
        checkpoints.save(
            1,
            params=params,
            opt_state=params,
            rng_key=jax.random.key(0),
            data_position={},
            model_config={"vocab_size": 8},
            config={"model": {"vocab_size": 9}},  # what the step folder exports is model_config
        )
    assert read_model_config(tmp_path) == {"vocab_size": 8}
