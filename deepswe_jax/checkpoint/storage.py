"""How a checkpoint folder stores things: the names of its items, any pytree of arrays as a nested
dict keyed by the pytree path, restore targets that carry shapes, dtypes and shardings, the RNG key
and configs as JSON (`training` and `parameters` write and read them with Orbax).

A saved nested dict restores into the structure and shardings of an abstract target (build one
with `restore_target(nnx.eval_shape(...) state, parallel.state_shardings(...))`), so a checkpoint
saved on one mesh restores onto another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from deepswe_jax.model import Qwen3Config

# The items of a step folder (training) or a parameters directory (params and model_config).
PARAMS = "params"
OPT_STATE = "opt_state"
MODEL_CONFIG = "model_config"
META = "meta"
CONFIG = "config"


class CorruptCheckpointError(RuntimeError):
    """No saved step of a checkpoint directory can be restored."""


def _key_name(entry: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    raise TypeError(f"unsupported pytree path entry {entry!r}")


def _plain(tree: Any) -> Any:
    """nnx.State -> nested dict of arrays (no Variable wrappers); other pytrees unchanged."""
    return nnx.to_pure_dict(tree) if isinstance(tree, nnx.State) else tree


def to_nested_dict(tree: Any) -> dict:
    """Any pytree -> nested dict with string keys (its pytree path), the leaves unchanged."""
    nested: dict = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(_plain(tree))[0]:
        names = [_key_name(entry) for entry in path] or ["value"]
        node = nested
        for name in names[:-1]:
            node = node.setdefault(name, {})
        node[names[-1]] = leaf
    return nested


def from_nested_dict(nested: dict, target: Any) -> Any:
    """Inverse of `to_nested_dict`: the leaves of `nested` in the structure of `target`."""

    def lookup(path: tuple, _: Any) -> Any:
        node = nested
        for name in [_key_name(entry) for entry in path] or ["value"]:
            node = node[name]
        return node

    plain = jax.tree_util.tree_map_with_path(lookup, _plain(target))
    if isinstance(target, nnx.State):
        state = jax.tree.map(lambda x: x, target)
        nnx.replace_by_pure_dict(state, plain)
        return state
    return plain


def _abstract(leaf: Any, mesh: jax.sharding.Mesh | None) -> jax.ShapeDtypeStruct:
    """A restore target leaf: shape, dtype and the (concrete) sharding to restore onto.

    With `mesh`, a NamedSharding on an abstract mesh (what jax.eval_shape returns) is placed on
    `mesh`, and a leaf without sharding is replicated over `mesh`.
    """
    sharding = getattr(leaf, "sharding", None)
    if mesh is not None:
        if sharding is None:
            sharding = NamedSharding(mesh, PartitionSpec())
        elif isinstance(sharding, NamedSharding) and not isinstance(
            sharding.mesh, jax.sharding.Mesh
        ):
            sharding = NamedSharding(mesh, sharding.spec)
    if sharding is None or (
        isinstance(sharding, NamedSharding) and not isinstance(sharding.mesh, jax.sharding.Mesh)
    ):
        raise ValueError(
            f"restore target leaf {leaf!r} has no concrete sharding; pass mesh=... or build the "
            "target with jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))"
        )
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)


def abstract_nested(target: Any, mesh: jax.sharding.Mesh | None) -> dict:
    return jax.tree.map(lambda leaf: _abstract(leaf, mesh), to_nested_dict(target))


def restore_target(abstract: Any, shardings: Any) -> Any:
    """Pair an abstract state with its shardings into a restore target.

    abstract: nnx.State / pytree of jax.ShapeDtypeStruct (from nnx.eval_shape / jax.eval_shape).
    shardings: the same tree with a Sharding per array (e.g. deepswe_jax.parallel.state_shardings).
    """

    def with_sharding(leaf: Any, sharding: jax.sharding.Sharding) -> Any:
        if isinstance(leaf, nnx.Variable):
            value = leaf.get_value()
            return leaf.replace(jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding))
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)

    return jax.tree.map(
        with_sharding, abstract, shardings, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )


def rng_to_json(rng_key: jax.Array) -> dict:
    if jax.dtypes.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        impl = str(jax.random.key_impl(rng_key))
        data = np.asarray(jax.random.key_data(rng_key))
    else:
        impl, data = "", np.asarray(rng_key)
    return {"impl": impl, "data": data.tolist(), "dtype": str(data.dtype)}


def rng_from_json(saved: dict) -> jax.Array:
    data = jax.numpy.asarray(np.asarray(saved["data"], dtype=saved["dtype"]))
    return jax.random.wrap_key_data(data, impl=saved["impl"]) if saved["impl"] else data


def json_ready(config: Mapping[str, Any]) -> dict:
    """A plain mapping -> a json-compatible dict (tuples become lists, NumPy scalars numbers).
    A ConfigDict is refused: the caller converts it (`ConfigDict.to_dict()`), so library code
    never reads one."""
    if not isinstance(config, Mapping):
        raise TypeError(
            f"expected a plain mapping, got {type(config).__name__}; pass config.to_dict() "
            "(checkpoints take configs as JSON-ready dicts)"
        )
    return jax.tree.map(
        lambda x: x.item() if isinstance(x, np.generic) else x,
        dict(config),
        is_leaf=lambda x: isinstance(x, tuple),
    )


def model_config_json(model_config: Mapping[str, Any] | Qwen3Config) -> dict:
    """The model config as saved beside parameters: HF config.json fields, from a Qwen3Config
    (`to_hf_dict`) or a mapping of them (config.model.to_dict())."""
    if isinstance(model_config, Qwen3Config):
        return model_config.to_hf_dict()
    return json_ready(model_config)
