"""The trainer's weights for an inference engine: HF names and layouts, one layer at a time.

`HFWeightExtractor.stream(params)` yields `(hf_name, array)` pairs in exactly the names, shapes and
order `save_hf_checkpoint` writes, so an engine's own HF loader (vLLM's `load_weights` /
`reload_weights`) fuses q/k/v and gate/up itself. Two jitted programs do all the work, compiled
once per dtype and sharding: the top-level tensors, and one layer's tensors with the layer index
as an argument (not one compile per (layer, parameter) slice: 704 of them for Qwen3-32B). Each
is cast to the engine's dtype (bf16 on GPUs) on the trainer's devices, then gathered whole, so
at most one layer of gathered weights is alive at a time and nothing goes through host memory.

With several JAX processes the extraction is a collective: every process iterates the stream in
lockstep, and only the process that owns the engine keeps what it yields (`jax_to_torch`); the
others drop each layer as soon as it is made. Nobody gathers the fp32 model to host memory.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from deepswe_jax.model.config import Qwen3Config
from deepswe_jax.model.hf_io import (
    EMBED_NAME,
    FINAL_NORM_NAME,
    HF_LAYER_NAMES,
    LM_HEAD_NAME,
    hf_layer_name,
    hf_shapes,
    to_hf_layout,
)


def _replicated_like(state: nnx.State) -> jax.sharding.Sharding:
    """A sharding that puts a whole array on every device `state`'s first array lives on."""
    sharding = jax.tree.leaves(state)[0].sharding
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, PartitionSpec())
    return sharding


def _top_level(graphdef: nnx.GraphDef, dtype: jnp.dtype, state: nnx.State) -> dict[str, jax.Array]:
    model = nnx.merge(graphdef, state)
    shapes = hf_shapes(model.config)
    tensors = {
        EMBED_NAME: to_hf_layout("embed_tokens", model.embed_tokens[...], shapes[EMBED_NAME]),
        FINAL_NORM_NAME: to_hf_layout("norm", model.norm[...], shapes[FINAL_NORM_NAME]),
    }
    if not model.config.tie_word_embeddings:
        tensors[LM_HEAD_NAME] = to_hf_layout("lm_head", model.lm_head[...], shapes[LM_HEAD_NAME])
    return {name: tensor.astype(dtype) for name, tensor in tensors.items()}


def _one_layer(
    graphdef: nnx.GraphDef, dtype: jnp.dtype, state: nnx.State, layer: jax.Array
) -> dict[str, jax.Array]:
    model = nnx.merge(graphdef, state)
    shapes = hf_shapes(model.config)
    stacked = model.layers.stacked_params()
    return {
        param: to_hf_layout(
            param,
            jax.lax.dynamic_index_in_dim(stacked[param], layer, keepdims=False).astype(dtype),
            shapes[hf_layer_name(0, param)],
        )
        for param in HF_LAYER_NAMES
    }


class HFWeightExtractor:
    """Streams a `Qwen3ForCausalLM`'s parameters as HF tensors of `dtype`, a layer at a time.

    Args:
      graphdef: the model's graph definition (`nnx.split(model)[0]`, or the trainer's
        `graphdef` for its params-only state).
      config: the model's config (layer count, tied embeddings).
      dtype: dtype of the yielded tensors (the engine's).
      untie: with tied word embeddings, also yield lm_head (the embedding), for an engine whose
        output layer is a separate tensor.
    """

    def __init__(
        self, graphdef: nnx.GraphDef, config: Qwen3Config, dtype: jnp.dtype, *, untie: bool = False
    ):
        self.config = config
        self.dtype = jnp.dtype(dtype)
        self.untie = untie and config.tie_word_embeddings
        self._graphdef = graphdef
        self._programs: dict[Any, tuple[Any, Any]] = {}
        self.peak_local_bytes = 0

    def _compiled(self, state: nnx.State) -> tuple[Any, Any]:
        out = _replicated_like(state)
        if out not in self._programs:
            self._programs[out] = (
                jax.jit(
                    functools.partial(_top_level, self._graphdef, self.dtype), out_shardings=out
                ),
                jax.jit(
                    functools.partial(_one_layer, self._graphdef, self.dtype), out_shardings=out
                ),
            )
        return self._programs[out]

    @property
    def compilation_count(self) -> int:
        """Programs compiled so far (2 per distinct sharding of the synced params)."""
        return sum(p._cache_size() for programs in self._programs.values() for p in programs)

    def stream(self, state: nnx.State) -> Iterator[tuple[str, jax.Array]]:
        """`(hf_name, array)` for every weight, in `save_hf_checkpoint`'s order; each array is
        whole (replicated) on the devices of `state`. A collective with several processes.
        `peak_local_bytes` records the most bytes one program's output held on this process."""
        top_level, one_layer = self._compiled(state)
        top = jax.block_until_ready(top_level(state))  # one program's output alive at a time
        self.peak_local_bytes = sum(local_bytes(a) for a in top.values())
        if self.untie:
            top[LM_HEAD_NAME] = top[EMBED_NAME]
        yield EMBED_NAME, top.pop(EMBED_NAME)
        for layer in range(self.config.num_hidden_layers):
            tensors = jax.block_until_ready(one_layer(state, jnp.int32(layer)))
            layer_bytes = sum(local_bytes(a) for a in tensors.values())
            self.peak_local_bytes = max(self.peak_local_bytes, layer_bytes)
            for param in HF_LAYER_NAMES:
                yield hf_layer_name(layer, param), tensors.pop(param)
        yield FINAL_NORM_NAME, top.pop(FINAL_NORM_NAME)
        if LM_HEAD_NAME in top:
            yield LM_HEAD_NAME, top.pop(LM_HEAD_NAME)

    def hf_shapes(self) -> dict[str, tuple[int, ...]]:
        """hf_name -> shape of everything `stream` yields."""
        shapes = hf_shapes(self.config)
        if self.untie:
            shapes[LM_HEAD_NAME] = shapes[EMBED_NAME]
        return shapes

    def hf_bytes(self) -> int:
        """Bytes of one full stream (the engine's copy of the weights)."""
        return sum(math.prod(shape) * self.dtype.itemsize for shape in self.hf_shapes().values())


def local_bytes(array: jax.Array) -> int:
    """Bytes `array` occupies on this process's devices."""
    return sum(shard.data.nbytes for shard in array.addressable_shards)


def jax_to_torch(array: jax.Array):
    """A torch tensor sharing the buffer of `array`'s whole copy on one local device (DLPack).

    A replicated array (what `HFWeightExtractor` yields) is shared without a copy, also when it
    spans several processes; an array split over several devices is first gathered onto the
    first of them (one copy).
    """
    import torch

    if array.sharding.is_fully_replicated:
        return torch.from_dlpack(array.addressable_shards[0].data)
    if len(array.sharding.device_set) > 1:
        first_device = min(array.sharding.device_set, key=lambda d: d.id)
        array = jax.device_put(array, jax.sharding.SingleDeviceSharding(first_device))
    return torch.from_dlpack(array)
