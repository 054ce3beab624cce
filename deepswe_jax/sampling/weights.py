"""The sampler's copy of the policy's weights, laid out for its programs (decoding.py).

The model stacks every decoder layer's parameter along a leading [layers] axis and its layer
scan slices one layer out per iteration. XLA:CPU copies such a slice before a matmul reads it,
so a decode step moved each weight three times (read, write, read again): at 8 rows of the
~100M model those copies took as long as the matmuls themselves. With ``per_layer`` the sampler
holds each layer's parameters as arrays of their own instead, which
``Qwen3ForCausalLM.decode(layer_weights=)`` reads in place (a ``lax.switch`` over the layers),
and the stacked parameters are rebuilt inside a program only where one needs them (the prefill's
full forward; XLA drops the unused stack from the decode and extend programs). The weights are
held once either way. Off by default on GPUs, where a slice feeds the matmul as it is and a
switch per layer would only add launches, and off for small layers (under
``PER_LAYER_MIN_BYTES``), where the switch costs more than the copies it saves.

Weights travel as ``(leaves, layers)``: the model state's leaves with ``None`` where a stacked
layer parameter was, and a tuple of one {name: array} per layer (``layers`` None when stacked).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from deepswe_jax.model.qwen3 import LAYER_PARAM_AXES, Qwen3ForCausalLM

Weights = tuple[list[Any], tuple[dict[str, jax.Array], ...] | None]

# A layer's weights below this are cheaper to copy than to pick by a switch (a decode call of
# the 1.3M-parameter tiny model, 0.3 MiB a layer: 14% slower per layer; ~100M, 25 MiB a layer:
# 10-13% faster).
PER_LAYER_MIN_BYTES = 4 << 20


def per_layer_by_default(state: nnx.State, platform: str) -> bool:
    """Whether a sampler on ``platform`` holds ``state``'s layers one array per layer: on CPUs,
    for plain layers (``extra_layer_params``) of at least ``PER_LAYER_MIN_BYTES``."""
    layers = jax.tree.leaves(state["layers"])
    layer_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in layers) // len(layers[0])
    plain = not extra_layer_params(state)
    return platform == "cpu" and plain and layer_bytes >= PER_LAYER_MIN_BYTES


def extra_layer_params(state: nnx.State) -> set[str]:
    """Layer parameters other than Qwen3's own (e.g. LoRA adapters, which only the stacked
    layers' code merges into their kernels; model/lora.py)."""
    return set(state["layers"].keys()) - set(LAYER_PARAM_AXES)


@dataclasses.dataclass(frozen=True)
class WeightLayout:
    """The model's graph, and where its state's leaves go: ``layer_leaves`` maps each stacked
    decoder-layer parameter's leaf index to its name (empty: everything stays stacked)."""

    graphdef: nnx.GraphDef
    treedef: Any
    layer_leaves: dict[int, str]
    num_layers: int

    @classmethod
    def of(cls, graphdef: nnx.GraphDef, state: nnx.State, per_layer: bool) -> WeightLayout:
        extra = extra_layer_params(state)
        if per_layer and extra:
            raise ValueError(
                f"per_layer_weights needs plain Qwen3 layers; these also hold {sorted(extra)} "
                "(LoRA adapters?): merge them first (model.lora.merge_lora) or pass "
                "per_layer_weights=False"
            )
        layer_leaves = {}
        if per_layer:
            for index, (path, _) in enumerate(jax.tree_util.tree_leaves_with_path(state)):
                keys = [getattr(key, "key", None) for key in path]
                if keys[0] == "layers":
                    layer_leaves[index] = keys[1]
        num_layers = len(jax.tree.leaves(state["layers"])[0])
        return cls(graphdef, jax.tree.structure(state), layer_leaves, num_layers)

    @property
    def per_layer(self) -> bool:
        return bool(self.layer_leaves)

    def split(self, state: nnx.State) -> Weights:
        """The state's arrays in this layout (the per-layer arrays are new slices)."""
        leaves = jax.tree.leaves(state)
        if not self.per_layer:
            return leaves, None
        layers = tuple(
            {name: leaves[index][layer] for index, name in self.layer_leaves.items()}
            for layer in range(self.num_layers)
        )
        return self._without_layers(leaves), layers

    def shardings(self, state_shardings: Any) -> Any:
        """The state's NamedShardings in this layout: a layer's array drops the [layers] axis."""
        leaves = jax.tree.leaves(state_shardings)
        if not self.per_layer:
            return leaves, None
        layer = {
            name: NamedSharding(leaves[index].mesh, PartitionSpec(*leaves[index].spec[1:]))
            for index, name in self.layer_leaves.items()
        }
        return self._without_layers(leaves), tuple(dict(layer) for _ in range(self.num_layers))

    def _without_layers(self, leaves: list[Any]) -> list[Any]:
        """``leaves`` with None in place of the stacked layer parameters."""
        return [None if index in self.layer_leaves else leaf for index, leaf in enumerate(leaves)]

    def model(
        self, weights: Weights
    ) -> tuple[Qwen3ForCausalLM, tuple[dict[str, jax.Array], ...] | None]:
        """Inside a program: the model, and the per-layer weights for ``decode(layer_weights=)``
        (None when stacked). Its stacked layer parameters are rebuilt from the per-layer ones;
        a program that does not read them does not compute them."""
        leaves, layers = weights
        if layers is not None:
            leaves = list(leaves)
            for index, name in self.layer_leaves.items():
                leaves[index] = jnp.stack([layer[name] for layer in layers])
        state = jax.tree.unflatten(self.treedef, leaves)
        return nnx.merge(self.graphdef, state), layers
