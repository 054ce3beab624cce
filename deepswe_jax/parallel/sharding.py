"""Logical axis names -> mesh axes: the one table that decides how everything is sharded.

Model code names the axes of every parameter (``nnx.Param(..., logical_axes=('embed', 'mlp'))``)
and of key activations (``constrain(x, ('batch', 'seq', 'act_embed'))``); it never names mesh
axes. A rules table (``DEFAULT_RULES`` or ``config.sharding_rules``) maps each logical name to a
mesh axis, a tuple of mesh axes, or ``None`` (replicated). Changing the parallelism layout is a
change to that table, not to model code.

Parameters and activations use different logical names for the same dimension (``embed`` vs
``act_embed``) because FSDP shards the *weights* along the embedding dimension while activations
are sharded along the batch instead.

A layout the mesh cannot realise is an error, not a silent replication (jax-llm-examples
raises on colliding axes too), because at 64 devices a dropped axis hides a wrong layout:
  * a mesh axis used by two dimensions of one array ("colliding") raises;
  * a mesh axis that does not divide the dimension raises when the array is placed
    (``logical_to_sharding``, ``state_shardings``: parameters, optimizer state, caches). To
    replicate such a dimension, say so in the table: e.g. ``("kv_heads", None)`` for 2 key/value
    heads on ``tensor=4``.
Two leniencies remain, each for a reason: ``constrain`` on activations leaves a non-dividing
axis to XLA (a prefill of one prompt on an 8-way batch axis is normal, and an activation hint
pins no memory), and a rule naming an axis the mesh lacks is skipped (a mesh of only
``('fsdp', 'tensor')`` still takes the default rules).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MeshAxes = str | tuple[str, ...] | None
Rules = Sequence[tuple[str, MeshAxes]]
LogicalAxes = Sequence[str | None]

# Metadata key under which every parameter stores its logical axis names (one per dimension).
LOGICAL_AXES_KEY = "logical_axes"

DEFAULT_RULES: tuple[tuple[str, MeshAxes], ...] = (
    # parameters
    ("layers", None),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("head_dim", None),
    ("mlp", "tensor"),
    ("norm", None),
    # activations
    ("batch", ("data", "fsdp")),
    ("seq", None),
    ("act_embed", None),
    ("act_heads", "tensor"),
    ("act_kv_heads", "tensor"),
    ("act_mlp", "tensor"),
    ("act_vocab", "tensor"),
    ("cache_seq", None),
)

_active_rules: contextvars.ContextVar[Rules] = contextvars.ContextVar(
    "deepswe_sharding_rules", default=DEFAULT_RULES
)


@contextlib.contextmanager
def use_rules(rules: Rules) -> Iterator[None]:
    """Make ``rules`` the table that ``constrain`` resolves activation names with (at trace time)."""
    token = _active_rules.set(tuple(rules))
    try:
        yield
    finally:
        _active_rules.reset(token)


def active_rules() -> Rules:
    """The rules table set by the innermost ``use_rules`` (``DEFAULT_RULES`` by default)."""
    return _active_rules.get()


def _as_tuple(mesh_axes: MeshAxes) -> tuple[str, ...]:
    if mesh_axes is None:
        return ()
    if isinstance(mesh_axes, str):
        return (mesh_axes,)
    return tuple(mesh_axes)


def logical_to_spec(
    logical_axes: LogicalAxes,
    rules: Rules | None = None,
    *,
    shape: Sequence[int] | None = None,
    mesh_shape: dict[str, int] | None = None,
    drop_non_dividing: bool = False,
) -> PartitionSpec:
    """Resolve logical axis names to a PartitionSpec through ``rules``.

    Args:
      logical_axes: one logical name (or None) per array dimension.
      rules: the logical->mesh table; defaults to the active rules.
      shape, mesh_shape: when both are given, a mesh axis that does not divide its dimension
        raises, or with ``drop_non_dividing`` (activations) is dropped; with mesh_shape, mesh
        axes missing from the mesh are dropped.

    Raises:
      KeyError: a logical name that the rules table does not mention.
      ValueError: two dimensions map to the same mesh axis, or a mesh axis does not divide
        its dimension (see the module docstring for how to replicate instead).
    """
    table = dict(active_rules() if rules is None else rules)
    used: dict[str, str] = {}
    entries: list[MeshAxes] = []
    for dim, name in enumerate(logical_axes):
        if name is None:
            entries.append(None)
            continue
        if name not in table:
            raise KeyError(
                f"logical axis {name!r} has no sharding rule; add ({name!r}, <mesh axes or None>) "
                f"to the rules table (known: {sorted(table)})"
            )
        kept: list[str] = []
        size = 1
        for axis in _as_tuple(table[name]):
            if axis in used:
                raise ValueError(
                    f"Colliding mesh axes: logical axes {tuple(logical_axes)} map both "
                    f"{used[axis]!r} and {name!r} to mesh axis {axis!r}; change the sharding "
                    "rules so each mesh axis shards at most one dimension of an array"
                )
            if mesh_shape is not None:
                if axis not in mesh_shape:
                    continue
                if shape is not None and shape[dim] % (size * mesh_shape[axis]) != 0:
                    if drop_non_dividing:
                        continue
                    raise ValueError(
                        f"mesh axis {axis!r} (size {mesh_shape[axis]}) does not divide dimension "
                        f"{dim} ({name!r}, size {shape[dim]}) of an array with logical axes "
                        f"{tuple(logical_axes)} and shape {tuple(shape)}; choose a mesh whose "
                        f"size divides it, or replicate it with the rule ({name!r}, None)"
                    )
                size *= mesh_shape[axis]
            kept.append(axis)
            used[axis] = name
        entries.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    while entries and entries[-1] is None:
        entries.pop()
    return PartitionSpec(*entries)


def logical_to_sharding(
    logical_axes: LogicalAxes, mesh: Mesh, rules: Rules | None = None, shape: Sequence[int] = ()
) -> NamedSharding:
    """NamedSharding on ``mesh`` for an array of ``shape`` whose dimensions carry ``logical_axes``."""
    spec = logical_to_spec(
        logical_axes, rules, shape=shape or None, mesh_shape=dict(mesh.shape.items())
    )
    return NamedSharding(mesh, spec)


def constrain(x: jax.Array, logical_axes: LogicalAxes) -> jax.Array:
    """Sharding constraint on an activation, by logical names; a no-op when no mesh is set.

    The mesh comes from ``jax.set_mesh(mesh)`` around the jitted call, the rules from
    ``use_rules`` (default ``DEFAULT_RULES``).
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return x
    spec = logical_to_spec(
        logical_axes, shape=x.shape, mesh_shape=dict(mesh.shape.items()), drop_non_dividing=True
    )
    return jax.lax.with_sharding_constraint(x, spec)


def variable_logical_axes(variable: nnx.Variable) -> tuple[str | None, ...]:
    """Logical axis names stored on a Variable; all-None (replicated) when it has none."""
    axes = variable.get_metadata().get(LOGICAL_AXES_KEY)
    ndim = np.ndim(variable.get_value())
    if axes is None:
        return (None,) * ndim
    if len(axes) != ndim:
        raise ValueError(
            f"variable has logical axes {axes} but {ndim} dimensions; fix its annotation"
        )
    return tuple(axes)


def state_shardings(tree: Any, mesh: Mesh, rules: Rules | None = None) -> Any:
    """NamedSharding for every Variable in an nnx State / Module / pytree of Variables.

    Returns the same tree with each Variable replaced by its NamedSharding (a valid
    ``in_shardings``/``out_shardings`` prefix for ``jax.jit`` over ``nnx.state(model)``).
    Works on abstract states (``nnx.eval_shape``) and on optimizer states, whose variables copy
    the parameters' metadata.
    """
    if isinstance(tree, nnx.Module):
        tree = nnx.state(tree)

    def sharding_of(variable: Any) -> NamedSharding:
        if not isinstance(variable, nnx.Variable):
            return NamedSharding(mesh, PartitionSpec())
        shape = np.shape(variable.get_value())
        return logical_to_sharding(variable_logical_axes(variable), mesh, rules, shape)

    return jax.tree.map(sharding_of, tree, is_leaf=lambda x: isinstance(x, nnx.Variable))


M = TypeVar("M", bound=nnx.Module)


def shard_model(model: M, mesh: Mesh, rules: Rules | None = None) -> M:
    """Place every parameter of ``model`` on ``mesh`` per its logical axes (in place; returns it)."""
    state = nnx.state(model)
    shardings = state_shardings(state, mesh, rules)
    nnx.update(model, jax.device_put(state, shardings))
    return model


def create_sharded_model(make_model: Callable[[], M], mesh: Mesh, rules: Rules | None = None) -> M:
    """Build ``make_model()`` with every parameter created directly in its sharded layout.

    The constructor runs under ``jax.jit`` with ``out_shardings``, so no device (or the host)
    ever holds the whole model: use this for random init of models that do not fit one device.
    """
    abstract = nnx.eval_shape(make_model)
    graphdef, abstract_state = nnx.split(abstract)
    shardings = state_shardings(abstract_state, mesh, rules)

    def init_state() -> Any:
        return nnx.state(make_model())

    state = jax.jit(init_state, out_shardings=shardings)()
    return nnx.merge(graphdef, state)


def batch_sharding(mesh: Mesh, ndim: int = 2, rules: Rules | None = None) -> NamedSharding:
    """Sharding for a batch array ``[batch, seq, ...]``: batch over the ``batch`` rule's axes."""
    spec = logical_to_spec(
        ("batch",) + (None,) * (ndim - 1), rules, mesh_shape=dict(mesh.shape.items())
    )
    return NamedSharding(mesh, spec)
