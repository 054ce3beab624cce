"""LoRA adapters on the stacked projection kernels of a Qwen3ForCausalLM.

A wrapped kernel W (one per layer, e.g. q_proj [e, h, d]) becomes

    W + (alpha / rank) * A @ B,   A [in..., rank] ~ N(0, 1/in), B [rank, out...] = 0

so the adapted model equals the base model until B is trained. Kernels split into input
dimensions (contracted with the activations) and output dimensions: one input dimension for
q/k/v/gate/up/down ([e] or [m]), two for o_proj ([h, d]).

    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    apply_lora(model, LoRAConfig(rank=64, alpha=128), rngs=nnx.Rngs(1))      # in place
    trainer = Trainer(model, optimizer, loss, mesh=mesh, trainable=LoRAParam)  # only A, B train
    plain = merge_lora(model)                                                # export/sampling

Adapters are `LoRAParam`s, an `nnx.Param` subclass: `nnx.split(model, nnx.Param)` includes
them, and the Trainer's `trainable=LoRAParam` trains them alone (the base weights get no
gradient and no optimizer state). The base parameters keep their state paths
(`layers.q_proj`), so base checkpoints load into an adapted model unchanged. The merge happens
one layer at a time inside the layer scan (see `LoRAKernel`), so no merged copy of all layers
is ever built.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from deepswe_jax.model.qwen3 import LAYER_PARAM_AXES, Qwen3ForCausalLM

# Wrappable kernels -> number of leading (after 'layers') input dimensions.
KERNEL_INPUT_DIMS: dict[str, int] = {
    "q_proj": 1,
    "k_proj": 1,
    "v_proj": 1,
    "o_proj": 2,
    "gate_proj": 1,
    "up_proj": 1,
    "down_proj": 1,
}


class LoRAParam(nnx.Param):
    """An adapter parameter (A or B); `rl.train_step.Trainer(..., trainable=LoRAParam)` trains
    these alone."""


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
    """rank r and alpha (the update is scaled by alpha / r); targets: kernels to wrap."""

    rank: int
    alpha: float
    targets: tuple[str, ...] = tuple(KERNEL_INPUT_DIMS)

    def __post_init__(self):
        if self.rank < 1:
            raise ValueError(
                f"LoRA rank must be >= 1, got {self.rank}; use rank 0 in the "
                "config to mean full fine-tuning (no adapters)"
            )
        unknown = sorted(set(self.targets) - set(KERNEL_INPUT_DIMS))
        if unknown:
            raise ValueError(
                f"unknown LoRA targets {unknown}; choose from {sorted(KERNEL_INPUT_DIMS)}"
            )

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LoRAKernel:
    """A kernel with its adapter, standing in for the plain array in `stacked_params()`.

    The layer code reads every kernel as `p[name].astype(dtype)` inside the layer scan, where
    the leaves here are one layer's slices (base [in..., out...], a [in..., r], b [r, out...]);
    `astype` returns the merged kernel of that layer.
    """

    base: jax.Array
    a: jax.Array
    b: jax.Array
    scale: float = dataclasses.field(metadata=dict(static=True))

    def astype(self, dtype: jnp.dtype) -> jax.Array:
        return merged_kernel(self.base, self.a, self.b, self.scale).astype(dtype)


def merged_kernel(base: jax.Array, a: jax.Array, b: jax.Array, scale: float) -> jax.Array:
    """base + scale * a @ b over the rank axis, in float32, returned in base's dtype.

    a [batch..., in..., r], b [batch..., r, out...], base [batch..., in..., out...]; the
    leading batch axes (layers outside the scan, none inside) are shared.
    """
    batch = a.ndim + b.ndim - 2 - base.ndim
    a_axes = "abcdefg"[: a.ndim - 1]  # batch then input axes
    b_axes = "stuvw"[: b.ndim - 1 - batch]  # output axes
    spec = f"{a_axes}r,{a_axes[:batch]}r{b_axes}->{a_axes}{b_axes}"
    delta = jnp.einsum(spec, a.astype(jnp.float32), b.astype(jnp.float32))
    return (base.astype(jnp.float32) + scale * delta).astype(base.dtype)


class LoRADecoderLayers(nnx.Module):
    """Qwen3DecoderLayers' parameters (the same Variables, under the same names) plus adapters
    `{name}_lora_a` [L, in..., r] and `{name}_lora_b` [L, r, out...] for each target kernel."""

    def __init__(self, base: nnx.Module, config: LoRAConfig, *, rngs: nnx.Rngs):
        self.lora_config = config
        for name in LAYER_PARAM_AXES:
            setattr(self, name, getattr(base, name))
        for name in config.targets:
            kernel = getattr(base, name)
            shape, axes = kernel[...].shape, LAYER_PARAM_AXES[name]
            num_in = KERNEL_INPUT_DIMS[name]
            in_shape, out_shape = shape[1 : 1 + num_in], shape[1 + num_in :]
            std = 1.0 / math.sqrt(math.prod(in_shape))
            a = std * jax.random.normal(
                rngs.params(), (shape[0], *in_shape, config.rank), kernel[...].dtype
            )
            b = jnp.zeros((shape[0], config.rank, *out_shape), kernel[...].dtype)
            setattr(
                self, f"{name}_lora_a", LoRAParam(a, logical_axes=("layers", *axes[:num_in], None))
            )
            setattr(
                self, f"{name}_lora_b", LoRAParam(b, logical_axes=("layers", None, *axes[num_in:]))
            )

    def stacked_params(self) -> dict[str, Any]:
        """{name: [L, ...] array} for unwrapped parameters, {name: LoRAKernel} for targets."""
        params: dict[str, Any] = {name: getattr(self, name)[...] for name in LAYER_PARAM_AXES}
        for name in self.lora_config.targets:
            params[name] = LoRAKernel(
                base=params[name],
                a=getattr(self, f"{name}_lora_a")[...],
                b=getattr(self, f"{name}_lora_b")[...],
                scale=self.lora_config.scale,
            )
        return params


def apply_lora(model: Qwen3ForCausalLM, config: LoRAConfig, *, rngs: nnx.Rngs) -> Qwen3ForCausalLM:
    """Adds adapters to `model`'s target kernels, in place (B = 0: outputs are unchanged).

    Returns `model`. Its base parameters keep their values and state paths.
    """
    if isinstance(model.layers, LoRADecoderLayers):
        raise ValueError("the model already has LoRA adapters; merge_lora(model) first")
    model.layers = LoRADecoderLayers(model.layers, config, rngs=rngs)
    return model


def merge_lora(model: Qwen3ForCausalLM) -> Qwen3ForCausalLM:
    """A plain Qwen3ForCausalLM whose kernels are W + (alpha / r) A @ B (for HF export or the
    sampler); `model` is unchanged. A model without adapters is returned as is."""
    layers = model.layers
    if not isinstance(layers, LoRADecoderLayers):
        return model
    abstract = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(
            model.config,
            rngs=nnx.Rngs(0),
            param_dtype=model.param_dtype,
            dtype=model.dtype,
            remat=model.remat,
            attention_impl=model.attention_impl,
            scan_unroll=model.scan_unroll,
        )
    )
    graphdef, state = nnx.split(abstract)
    values = nnx.to_pure_dict(nnx.state(model))
    for name, kernel in layers.stacked_params().items():
        if isinstance(kernel, LoRAKernel):
            kernel = merged_kernel(kernel.base, kernel.a, kernel.b, kernel.scale)
        values["layers"][name] = kernel
    values["layers"] = {name: values["layers"][name] for name in LAYER_PARAM_AXES}
    nnx.replace_by_pure_dict(state, values)
    return nnx.merge(graphdef, state)
