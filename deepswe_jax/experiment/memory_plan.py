"""Bytes per device for training a config on a mesh, before touching any accelerator.

Parameter shapes and logical axes come from `nnx.eval_shape` of the model (nothing is allocated);
each array's per-device size follows the config's sharding rules on the (data, fsdp, tensor) mesh.
Optimizer state is AdamW (two moments in param_dtype); gradients match the parameters.
Activations are an estimate for one micro-batch (rl.micro_batch_size rows of the longest
trajectory, agent.max_prompt_tokens + agent.max_context tokens, padded to its length bucket as
the training batches are) under the remat policy. With config.attention 'cudnn' or 'pallas' no
[seq, seq] scores are kept (flash kernels); 'xla' counts them. The activation factors are
checked against XLA's compiled memory analysis in tests/launch/test_plan_memory.py.

The sampler's plan (vLLM engines or the JaxSampler) is sampler_memory_plan.py. The command line
is launch/plan_memory.py.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx
from ml_collections import ConfigDict

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.attention import query_block_scores_fraction
from deepswe_jax.parallel.mesh import mesh_shape_for
from deepswe_jax.parallel.sharding import logical_to_spec, variable_logical_axes
from deepswe_jax.rl.batch import bucket_length, row_length_buckets

GB = 1e9


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Per-device bytes of each part of a training step (all counts are per device)."""

    mesh: tuple[int, int, int]
    num_parameters: int
    params: int
    optimizer: int
    gradients: int
    gathered_layer_weights: int
    saved_activations: int
    layer_working_set: int
    logits: int
    sequences_per_device: int
    seq_len: int  # padded row length assumed
    max_row_tokens: int  # the longest trajectory before padding
    attention: str

    @property
    def total(self) -> int:
        return (
            self.params
            + self.optimizer
            + self.gradients
            + self.gathered_layer_weights
            + self.saved_activations
            + self.layer_working_set
            + self.logits
        )


def _local_elements(shape: tuple[int, ...], spec: jax.sharding.PartitionSpec, mesh: dict) -> int:
    """Elements of one device's shard of an array of `shape` laid out by `spec` on `mesh`."""
    count = 1
    for dim, size in enumerate(shape):
        entry = spec[dim] if dim < len(spec) else None
        axes = () if entry is None else (entry,) if isinstance(entry, str) else entry
        count *= math.ceil(size / math.prod(mesh[a] for a in axes))
    return count


def plan_memory(
    config: ConfigDict,
    num_devices: int,
    *,
    seq_len: int | None = None,
    attention: str | None = None,
) -> MemoryPlan:
    """Per-device memory of one training micro-step of `config` on `num_devices` devices.

    seq_len: row length (default: agent.max_prompt_tokens + agent.max_context padded to its
    bucket of config.rl.length_buckets); attention: the kernel (default config.attention).
    """
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict(), source="config.model")
    data, fsdp, tensor = mesh_shape_for(
        config.mesh.data, config.mesh.fsdp, config.mesh.tensor, num_devices=num_devices
    )
    mesh = {"data": data, "fsdp": fsdp, "tensor": tensor}
    rules = tuple(tuple(rule) for rule in config.sharding_rules)
    param_bytes = jnp.dtype(config.param_dtype).itemsize
    act_bytes = jnp.dtype(config.compute_dtype).itemsize

    abstract = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0), param_dtype=config.param_dtype)
    )
    local_elements, gathered_layer_elements = 0, 0
    for _, variable in nnx.to_flat_state(nnx.state(abstract, nnx.Param)):
        shape = tuple(variable.get_value().shape)
        axes = variable_logical_axes(variable)
        spec = logical_to_spec(axes, rules, shape=shape, mesh_shape=mesh)
        local_elements += _local_elements(shape, spec, mesh)
        if axes and axes[0] == "layers":  # one layer's weights, all-gathered over data/fsdp
            gather = {**mesh, "data": 1, "fsdp": 1}
            gathered_layer_elements += _local_elements(shape[1:], spec[1:], gather)

    c = model_config
    max_row = config.agent.max_prompt_tokens + config.agent.max_context
    seq_len = seq_len or bucket_length(
        max_row, row_length_buckets(max_row, config.rl.length_buckets)
    )
    attention = attention or config.attention
    batch = math.ceil(config.rl.micro_batch_size / (data * fsdp))
    tokens = batch * seq_len
    e, q, kv = c.hidden_size, c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    m = c.intermediate_size
    # Per-token elements of the tensors one layer produces (head/mlp dims split over tensor).
    qkv = (q + 2 * kv) / tensor
    projections = qkv + e + 2 * m / tensor + e  # q, k, v, attention out, gate, up, down
    # Without remat every intermediate stays (norm outputs, q/k/v before and after RoPE, SwiGLU
    # parts, fp32 upcasts); the factors match XLA's memory analysis of this model on CPU.
    everything = 8 * e + 4 * qkv + 2 * q / tensor + 6 * m / tensor
    saved_per_token = {
        "none": everything,
        "full": e,  # the layer input only
        "save_dots": e + projections,
        "offload": e,  # projections live in host memory
    }[config.remat]
    saved = int(c.num_hidden_layers * tokens * saved_per_token * act_bytes)
    # With remat, one layer is recomputed and differentiated at a time.
    working = int(tokens * everything * act_bytes) if config.remat != "none" else 0
    if attention == "xla":  # fp32 [heads, seq, seq] scores/probabilities: kept per layer, or live
        # (the query blocks' share of them: model/attention.py)
        dense = batch * math.ceil(c.num_attention_heads / tensor) * seq_len * seq_len * 4
        scores = int(dense * query_block_scores_fraction(seq_len))
        if config.remat == "none":
            saved += 3 * c.num_hidden_layers * scores
        else:
            working += 4 * scores
    chunk = config.rl.logprob_chunk or seq_len
    logits = int(3 * batch * min(chunk, seq_len) * math.ceil(c.vocab_size / tensor) * 4)
    return MemoryPlan(
        mesh=(data, fsdp, tensor),
        num_parameters=model_config.num_parameters,
        params=local_elements * param_bytes,
        optimizer=2 * local_elements * param_bytes,
        gradients=local_elements * param_bytes,
        gathered_layer_weights=2 * gathered_layer_elements * act_bytes,
        saved_activations=saved,
        layer_working_set=working,
        logits=logits,
        sequences_per_device=batch,
        seq_len=seq_len,
        max_row_tokens=max_row,
        attention=attention,
    )


def format_plan(plan: MemoryPlan, config: ConfigDict, device_memory_gb: float) -> str:
    data, fsdp, tensor = plan.mesh
    rows = [
        ("parameters", plan.params, f"{plan.num_parameters:,} x {config.param_dtype}"),
        ("optimizer (AdamW mu, nu)", plan.optimizer, f"2 x {config.param_dtype}"),
        ("gradients", plan.gradients, config.param_dtype),
        (
            "gathered layer weights",
            plan.gathered_layer_weights,
            "2 layers, " + config.compute_dtype,
        ),
        ("saved activations", plan.saved_activations, f"remat={config.remat}"),
        ("layer recompute/backward", plan.layer_working_set, "one layer's intermediates"),
        ("logits chunk", plan.logits, f"logprob_chunk={config.rl.logprob_chunk}, fp32 x 3"),
    ]
    lines = [
        f"mesh data={data} fsdp={fsdp} tensor={tensor}; micro-batch "
        f"{plan.sequences_per_device} sequence(s) x {plan.seq_len:,} tokens per device",
        f"row length: {plan.seq_len:,} tokens padded (longest trajectory: agent.max_prompt_tokens "
        f"+ agent.max_context = {plan.max_row_tokens:,}); attention={plan.attention}",
        f"{'item':<28}{'GB/device':>12}  note",
    ]
    lines += [f"{name:<28}{size / GB:>12.2f}  {note}" for name, size, note in rows]
    fits = plan.total <= device_memory_gb * GB
    lines.append(f"{'total':<28}{plan.total / GB:>12.2f}  of {device_memory_gb:g} GB")
    margin = device_memory_gb - plan.total / GB
    lines.append(
        f"fits: {'yes' if fits else 'NO'} (margin {margin:.1f} GB, "
        f"{margin / device_memory_gb:.0%} of the device)"
    )
    if config.rl.micro_batch_size % (data * fsdp):
        lines.append(
            f"note: rl.micro_batch_size={config.rl.micro_batch_size} does not divide over "
            f"data x fsdp = {data * fsdp} batch shards; make it a multiple"
        )
    if not fits:
        kernel = (
            " use a flash kernel (--config.attention=cudnn)," if plan.attention == "xla" else ""
        )
        lines.append(
            f"does not fit:{kernel} raise --config.mesh.fsdp/tensor, use --config.remat=full, "
            "lower --config.rl.micro_batch_size or --config.rl.logprob_chunk"
        )
    return "\n".join(lines)
