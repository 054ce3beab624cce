"""Bytes per device for training a config on a mesh, before touching any accelerator.

Parameter shapes and logical axes come from `nnx.eval_shape` of the model (nothing is allocated);
each array's per-device size follows the config's sharding rules on the (data, fsdp, tensor) mesh.
Optimizer state is AdamW (two moments in param_dtype); gradients match the parameters.
Activations are an estimate for one micro-batch (rl.micro_batch_size rows of the longest
trajectory, agent.max_prompt_tokens + agent.max_context tokens, padded to its length bucket as
the training batches are) under the remat policy. With config.attention 'cudnn' or 'pallas' no
[seq, seq] scores are kept (flash kernels); 'xla' counts them. The activation factors are
checked against XLA's compiled memory analysis in tests/launch/test_plan_memory.py.

`plan_sampler_memory` plans the sampler of config.sampler.kind instead: vLLM engines (weights,
KV cache in blocks of ``PAGE`` tokens, activations), or the in-process JaxSampler (its weights
and dense or paged KV cache, as `sampling.memory.memory_per_device` counts them).
The command line is launch/plan_memory.py.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx
from ml_collections import ConfigDict

from deepswe_jax.experiment.model import sharding_rules
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.attention import query_block_scores_fraction
from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.parallel.mesh import MESH_AXES, mesh_shape_for
from deepswe_jax.parallel.sharding import logical_to_spec, variable_logical_axes
from deepswe_jax.rl.batch import bucket_length, row_length_buckets
from deepswe_jax.sampling.memory import memory_per_device

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


# ---------------------------------------------------------------- the sampler (vLLM or JAX)

# Tokens one engine step processes (vLLM's max_num_batched_tokens); its profile run sizes the
# activation workspace by it. An assumption of this plan, not read from vLLM.
SAMPLER_STEP_TOKENS = 8192


@dataclasses.dataclass(frozen=True)
class SamplerMemoryPlan:
    """Per-device bytes of a vLLM engine serving config's policy (all counts per device).

    Each engine shards the model over `tensor_parallel` devices; `engines` of them share the
    devices and the config.sampler.max_batch concurrent generations. The KV cache is the worst
    case: every concurrent sequence at its full length (agent.max_prompt_tokens + max_context),
    held, as vLLM holds it, in blocks of ``PAGE`` tokens. `budget` is what the engine may use,
    gpu_memory_utilization x device memory; what weights and activations leave of it is the KV
    cache vLLM allocates (`budget_kv_blocks`).
    """

    tensor_parallel: int
    engines: int
    sequences_per_engine: int
    seq_len: int
    num_parameters: int
    weights: int
    kv_cache: int
    kv_bytes_per_token: int
    activations: int
    budget: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations

    @property
    def fits(self) -> bool:
        return self.total <= self.budget

    @property
    def kv_blocks(self) -> int:
        """Blocks of ``PAGE`` tokens per engine in the planned KV cache."""
        return self.kv_cache // (PAGE * self.kv_bytes_per_token)

    @property
    def budget_kv_blocks(self) -> int:
        """Blocks per engine in what the budget leaves after weights and activations."""
        return max(self.budget - self.weights - self.activations, 0) // (
            PAGE * self.kv_bytes_per_token
        )

    def full_length_sequences(self, blocks: int) -> int:
        """Sequences of `seq_len` tokens that `blocks` blocks hold."""
        return blocks // -(-self.seq_len // PAGE)


@dataclasses.dataclass(frozen=True)
class JaxSamplerMemoryPlan:
    """Per-device bytes of the in-process JaxSampler of config (all counts per device).

    Paged: a pool of `pages` pages of ``PAGE`` tokens shared by `rows` rows of `seq_len` slots
    (the full length rounded up to whole pages); dense: `rows` slots of `seq_len` each. Step
    activations are not counted. `budget` is the device's memory.
    """

    mesh: tuple[int, int, int]
    paged: bool
    rows: int
    pages: int  # 0 for a dense cache
    seq_len: int
    num_parameters: int
    weights: int
    kv_cache: int
    budget: int

    @property
    def cache_tokens(self) -> int:
        """Tokens the KV cache holds (all rows together)."""
        return self.pages * PAGE if self.paged else self.rows * self.seq_len

    @property
    def full_length_sequences(self) -> int:
        """Sequences of `seq_len` tokens the cache holds at once."""
        return self.cache_tokens // self.seq_len

    @property
    def tokens_that_fit(self) -> int:
        """Cache tokens that fit beside the weights in `budget`."""
        return max(self.budget - self.weights, 0) * self.cache_tokens // self.kv_cache

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache

    @property
    def fits(self) -> bool:
        return self.total <= self.budget


def plan_sampler_memory(
    config: ConfigDict, num_devices: int, *, device_memory_gb: float = 80.0
) -> SamplerMemoryPlan | JaxSamplerMemoryPlan:
    """Per-device memory of config.sampler.kind serving config's policy on `num_devices`
    devices: vLLM engines (config.sampler.tensor_parallel_size, gpu_memory_utilization and
    max_batch; weights and KV cache in config.compute_dtype), or the JaxSampler
    (`plan_jax_sampler_memory`)."""
    if config.sampler.kind == "jax":
        return plan_jax_sampler_memory(config, num_devices, device_memory_gb=device_memory_gb)
    if config.sampler.kind != "vllm":
        raise ValueError(
            f"config.sampler.kind={config.sampler.kind!r}; the planner knows 'jax' and 'vllm'"
        )
    c = Qwen3Config.from_hf_dict(config.model.to_dict(), source="config.model")
    tensor = int(config.sampler.tensor_parallel_size)
    if tensor < 1 or num_devices % tensor:
        raise ValueError(
            f"config.sampler.tensor_parallel_size={tensor} does not divide {num_devices} devices; "
            "choose a divisor (8 for one 8-GPU node)"
        )
    if c.num_attention_heads % tensor:
        raise ValueError(
            f"{c.num_attention_heads} attention heads do not split over "
            f"config.sampler.tensor_parallel_size={tensor}; vLLM needs a divisor"
        )
    engines = num_devices // tensor
    sequences = math.ceil(config.sampler.max_batch / engines)
    seq_len = config.agent.max_prompt_tokens + config.agent.max_context
    dtype_bytes = jnp.dtype(config.compute_dtype).itemsize
    num_parameters = c.num_parameters
    kv_per_token = c.kv_bytes_per_token(dtype_bytes, tensor_parallel=tensor)
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    # One step's intermediates (residual and norms, q/k/v, SwiGLU) and the fp32 logits it samples.
    per_token = 4 * c.hidden_size + (q + 2 * kv) / tensor + 3 * c.intermediate_size / tensor
    activations = int(SAMPLER_STEP_TOKENS * per_token * dtype_bytes)
    activations += sequences * c.vocab_size * 4
    return SamplerMemoryPlan(
        tensor_parallel=tensor,
        engines=engines,
        sequences_per_engine=sequences,
        seq_len=seq_len,
        num_parameters=num_parameters,
        weights=math.ceil(num_parameters / tensor) * dtype_bytes,
        kv_cache=sequences * seq_len * kv_per_token,
        kv_bytes_per_token=kv_per_token,
        activations=activations,
        budget=int(config.sampler.gpu_memory_utilization * device_memory_gb * GB),
    )


def plan_jax_sampler_memory(
    config: ConfigDict, num_devices: int, *, device_memory_gb: float = 80.0
) -> JaxSamplerMemoryPlan:
    """Per-device memory of the JaxSampler that training builds from config (make_sampler in
    experiment/training.py): weights in config.param_dtype, the KV cache in
    config.sampler.dtype, on config.mesh over `num_devices` devices with config.sharding_rules
    (one process; a multi-process run samples on each process's own devices).
    `sampling.memory.memory_per_device` counts the bytes, on an abstract model (nnx.eval_shape)
    and an abstract mesh: nothing is allocated.

    config.sampler.paged: a pool of max_cache_tokens // PAGE pages (0: max_batch rows of full
    length) shared by max_batch rows; otherwise min(max_batch, max_cache_tokens // full length)
    dense slots (0: max_batch)."""
    sampler = config.sampler
    seq_len = config.agent.max_prompt_tokens + config.agent.max_context
    if sampler.max_cache_tokens and sampler.max_cache_tokens < seq_len:
        raise ValueError(
            f"config.sampler.max_cache_tokens={sampler.max_cache_tokens:,} holds no sequence of "
            f"agent.max_prompt_tokens + agent.max_context = {seq_len:,} tokens; raise it to at "
            f"least {seq_len:,}"
        )
    paged = bool(sampler.get("paged", False))
    rows, pages = sampler.max_batch, 0
    if paged:
        seq_len = -(-seq_len // PAGE) * PAGE  # a row's slots are whole pages
        pages = (sampler.max_cache_tokens or rows * seq_len) // PAGE
    elif sampler.max_cache_tokens:
        rows = min(rows, sampler.max_cache_tokens // seq_len)
    mesh_shape = mesh_shape_for(
        config.mesh.data, config.mesh.fsdp, config.mesh.tensor, num_devices=num_devices
    )
    mesh = jax.sharding.AbstractMesh(
        mesh_shape, MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    )
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict(), source="config.model")
    model = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(
            model_config,
            rngs=nnx.Rngs(0),
            param_dtype=jnp.dtype(config.param_dtype),
            dtype=jnp.dtype(sampler.dtype),
        )
    )
    weights, kv_cache = memory_per_device(
        model,
        slots=rows,
        max_cache_len=seq_len,
        mesh=mesh,
        rules=sharding_rules(config),
        pages=pages if paged else None,
    )
    return JaxSamplerMemoryPlan(
        mesh=mesh_shape,
        paged=paged,
        rows=rows,
        pages=pages,
        seq_len=seq_len,
        num_parameters=model_config.num_parameters,
        weights=weights,
        kv_cache=kv_cache,
        budget=int(device_memory_gb * GB),
    )


def format_sampler_plan(plan: SamplerMemoryPlan | JaxSamplerMemoryPlan, config: ConfigDict) -> str:
    if isinstance(plan, JaxSamplerMemoryPlan):
        return _format_jax_sampler_plan(plan, config)
    rows = [
        ("weights", plan.weights, f"{plan.num_parameters:,} x {config.compute_dtype} / tp"),
        (
            "KV cache",
            plan.kv_cache,
            f"{plan.sequences_per_engine} seq x {plan.seq_len} tokens x "
            f"{plan.kv_bytes_per_token:,} B",
        ),
        ("activations + logits", plan.activations, f"{SAMPLER_STEP_TOKENS}-token step"),
    ]
    room = plan.budget_kv_blocks
    lines = [
        f"vLLM: {plan.engines} engine(s) x tensor_parallel_size={plan.tensor_parallel}; "
        f"{plan.sequences_per_engine} concurrent sequence(s) per engine at full length",
        f"KV cache per engine: {plan.kv_blocks:,} blocks of {PAGE} tokens hold "
        f"{plan.full_length_sequences(plan.kv_blocks)} full-length sequence(s) of "
        f"{plan.seq_len:,} tokens; the budget leaves room for {room:,} blocks = "
        f"{plan.full_length_sequences(room)} sequence(s)",
        f"{'item':<28}{'GB/device':>12}  note",
    ]
    lines += [f"{name:<28}{size / GB:>12.2f}  {note}" for name, size, note in rows]
    utilization = config.sampler.gpu_memory_utilization
    lines.append(
        f"{'total':<28}{plan.total / GB:>12.2f}  of {plan.budget / GB:.2f} GB "
        f"(gpu_memory_utilization={utilization:g})"
    )
    lines.append(f"fits: {'yes' if plan.fits else 'NO'}")
    if not plan.fits:
        lines.append(
            "does not fit: lower --config.sampler.max_batch, raise "
            "--config.sampler.tensor_parallel_size or gpu_memory_utilization"
        )
    if plan.seq_len > config.model.max_position_embeddings:
        lines.append(
            f"note: sequences of {plan.seq_len} tokens exceed config.model."
            f"max_position_embeddings={config.model.max_position_embeddings}"
        )
    return "\n".join(lines)


def _format_jax_sampler_plan(plan: JaxSamplerMemoryPlan, config: ConfigDict) -> str:
    data, fsdp, tensor = plan.mesh
    if plan.paged:
        cache = (
            f"paged KV cache: {plan.pages:,} pages of {PAGE} tokens shared by {plan.rows} rows; "
            f"{plan.full_length_sequences} full-length sequence(s) of {plan.seq_len:,} tokens"
        )
        note = f"{plan.pages:,} pages x {PAGE} tokens, {config.sampler.dtype}"
    else:
        cache = f"dense KV cache: {plan.rows} slot(s) of {plan.seq_len:,} tokens"
        note = f"{plan.rows} slots x {plan.seq_len:,} tokens, {config.sampler.dtype}"
    rows = [
        ("weights", plan.weights, f"{plan.num_parameters:,} x {config.param_dtype}"),
        ("KV cache", plan.kv_cache, note),
    ]
    lines = [
        f"JAX sampler: mesh data={data} fsdp={fsdp} tensor={tensor}; {cache}",
        f"{'item':<28}{'GB/device':>12}  note",
    ]
    lines += [f"{name:<28}{size / GB:>12.2f}  {note}" for name, size, note in rows]
    lines.append(f"{'total':<28}{plan.total / GB:>12.2f}  of {plan.budget / GB:g} GB")
    lines.append(f"fits: {'yes' if plan.fits else 'NO'} (weights and KV cache, no activations)")
    if not plan.fits:
        fitting = plan.tokens_that_fit
        if plan.paged:
            change = f"--config.sampler.max_cache_tokens={fitting} (at least {plan.seq_len:,})"
        else:
            change = f"--config.sampler.max_batch={fitting // plan.seq_len}"
        lines.append(
            f"does not fit: {fitting:,} cache tokens fit; set {change}, shorten "
            "--config.agent.max_context, or shard over more devices (--config.mesh.tensor)"
        )
    lines.append(
        "in training the trainer shares these devices: add launch/plan_memory.py's figure "
        "without --sampler"
    )
    return "\n".join(lines)
