"""Mesh construction, logical->mesh sharding rules, and multi-host start-up.

mesh         the device mesh ('data', 'fsdp', 'tensor') and multi-host start-up
sharding     logical axis names -> mesh axes: the one table that decides all sharding
distributed  multi-process JAX: joining the job, what each process feeds and gathers
"""

from deepswe_jax.parallel.mesh import MESH_AXES, init_distributed, make_mesh, mesh_shape_for
from deepswe_jax.parallel.sharding import (
    DEFAULT_RULES,
    LOGICAL_AXES_KEY,
    active_rules,
    batch_sharding,
    constrain,
    create_sharded_model,
    logical_to_sharding,
    logical_to_spec,
    shard_model,
    state_shardings,
    use_rules,
    variable_logical_axes,
)

__all__ = [
    "DEFAULT_RULES",
    "LOGICAL_AXES_KEY",
    "MESH_AXES",
    "active_rules",
    "batch_sharding",
    "constrain",
    "create_sharded_model",
    "init_distributed",
    "logical_to_sharding",
    "logical_to_spec",
    "make_mesh",
    "mesh_shape_for",
    "shard_model",
    "state_shardings",
    "use_rules",
    "variable_logical_axes",
]
