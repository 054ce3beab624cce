"""What a config says about the policy: the device mesh, the sharding rules, the model and its
starting parameters (config.init_from), the tokenizer, and a policy directory's config.

    mesh, rules = device_mesh(config), sharding_rules(config)
    params = initial_params(config, mesh, rules)   # random, HF directory or Orbax checkpoint
    tokenizer = load_tokenizer(config)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.checkpoint import read_model_config, restore_params, restore_target
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, load_hf_checkpoint
from deepswe_jax.parallel import create_sharded_model, make_mesh, state_shardings
from deepswe_jax.parallel.sharding import Rules


def device_mesh(
    config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None = None
) -> jax.sharding.Mesh:
    """The (data, fsdp, tensor) mesh of config.mesh over `devices` (default: all devices)."""
    return make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor, devices=devices)


def sharding_rules(config: ml_collections.ConfigDict) -> Rules:
    """config.sharding_rules as (logical axis, mesh axes) pairs; lists (from a command line or
    JSON) become tuples."""
    return tuple(
        (rule[0], tuple(rule[1]) if isinstance(rule[1], list) else rule[1])
        for rule in config.sharding_rules
    )


def model_factory(config: ml_collections.ConfigDict) -> Callable[[], Qwen3ForCausalLM]:
    """Builds the policy of config.model (seeded by config.seed; dtypes, remat, attention
    kernel and layer-scan unrolling from config)."""
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict(), source="config.model")

    def make_model() -> Qwen3ForCausalLM:
        return Qwen3ForCausalLM(
            model_config,
            rngs=nnx.Rngs(config.seed),
            param_dtype=jnp.dtype(config.param_dtype),
            dtype=jnp.dtype(config.compute_dtype),
            remat=config.remat,
            attention_impl=config.attention,
            scan_unroll=config.scan_unroll,
        )

    return make_model


def abstract_model(config: ml_collections.ConfigDict) -> Qwen3ForCausalLM:
    """The policy's structure, dtypes and remat policy, with no arrays (nnx.eval_shape)."""
    return nnx.eval_shape(model_factory(config))


def _check_model_config(config: ml_collections.ConfigDict, saved: Qwen3Config, source: str) -> None:
    """Raises unless the model saved in `source` has the architecture config.model describes."""
    ours = Qwen3Config.from_hf_dict(config.model.to_dict())
    differing = [
        f"{key}={getattr(ours, key)!r} vs {getattr(saved, key)!r}"
        for key in config.model.keys()
        if getattr(ours, key) != getattr(saved, key)
    ]
    if differing:
        raise ValueError(
            f"config.model differs from the model in {source}: {', '.join(differing)}; set "
            "config.model to that model's config.json fields"
        )


def initial_params(
    config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh, rules: Rules
) -> nnx.State:
    """The policy's starting parameters (nnx.Param state on `mesh`) per config.init_from:
    '' random init, a HF directory (config.json + safetensors), or an Orbax parameters /
    training checkpoint directory."""
    make_model = model_factory(config)
    path = config.init_from
    if not path:
        return nnx.state(create_sharded_model(make_model, mesh, rules), nnx.Param)
    check_init_from(path)
    if os.path.isfile(os.path.join(path, "config.json")):
        _check_model_config(config, Qwen3Config.from_json_file(path), path)
        model = load_hf_checkpoint(
            path,
            dtype=jnp.dtype(config.param_dtype),
            mesh=mesh,
            rules=rules,
            compute_dtype=jnp.dtype(config.compute_dtype),
            remat=config.remat,
        )
        return nnx.state(model, nnx.Param)
    _check_model_config(config, Qwen3Config.from_hf_dict(read_model_config(path), path), path)
    _, abstract_params = nnx.split(nnx.eval_shape(make_model), nnx.Param)
    target = restore_target(abstract_params, state_shardings(abstract_params, mesh, rules))
    return restore_params(path, target)


def check_init_from(path: str) -> None:
    """Raises FileNotFoundError unless config.init_from is '' or a directory."""
    if path and not os.path.isdir(path):
        raise FileNotFoundError(
            f"config.init_from={path!r} is not a directory; give a HF model directory, an Orbax "
            "checkpoint (launch/import_hf.py output) or '' for random init"
        )


def load_tokenizer(config: ml_collections.ConfigDict) -> ChatTokenizer:
    if not config.tokenizer:
        raise ValueError(
            "config.tokenizer is empty; set it to a HF tokenizer directory (the policy's HF "
            "checkpoint, or tests/assets/tokenizer for the tiny model)"
        )
    return ChatTokenizer.from_directory(config.tokenizer)


def policy_config(
    config: ml_collections.ConfigDict, checkpoint: str | os.PathLike
) -> ml_collections.ConfigDict:
    """A copy of `config` that loads the policy from `checkpoint` (a HF directory or an Orbax
    parameters / training checkpoint directory): init_from set, config.model taken from the
    checkpoint's own model config, and a HF directory's tokenizer when config.tokenizer is ''."""
    path = os.path.abspath(os.fspath(checkpoint))
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"policy {path!r} is not a directory; give a HF model directory, an Orbax checkpoint "
            "(launch/import_hf.py or launch/train.py output), 'gold' or 'empty'"
        )
    hf_config = os.path.join(path, "config.json")
    if os.path.isfile(hf_config):
        with open(hf_config) as f:
            saved = json.load(f)
    else:
        saved = read_model_config(path)
    config = config.copy_and_resolve_references()
    config.init_from = path
    config.model.update({key: saved[key] for key in config.model.keys() if key in saved})
    if not config.tokenizer and os.path.isfile(os.path.join(path, "tokenizer.json")):
        config.tokenizer = path
    return config
