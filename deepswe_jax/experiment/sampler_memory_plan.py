"""Bytes per device of config.sampler.kind's sampler serving a config's policy, before touching
any accelerator: vLLM engines (weights, KV cache in blocks of ``PAGE`` tokens, activations), or
the in-process JaxSampler (its weights and dense or paged KV cache, as
`sampling.memory.memory_per_device` counts them). The training step's plan is memory_plan.py;
the command line is launch/plan_memory.py (--sampler).

    plan = plan_sampler_memory(config, num_devices=8, device_memory_gb=80)
    print(format_sampler_plan(plan, config))
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx
from ml_collections import ConfigDict

from deepswe_jax.experiment.memory_plan import GB
from deepswe_jax.experiment.model import sharding_rules
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.parallel.mesh import MESH_AXES, mesh_shape_for
from deepswe_jax.sampling.memory import CacheLayout, memory_per_device

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
    activations are not counted, except `read_copy`: with paged_attention='xla' a decode step
    gathers every row's pages of one layer into a dense copy (at least rows x seq_len slots, keys
    and values; the Pallas kernel reads in place: 0). `budget` is the device's memory.
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
    read_copy: int = 0

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
        return self.weights + self.kv_cache + self.read_copy

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
    paged = bool(sampler.paged)
    # the layout JaxSampler builds (a paged row's slots are whole pages)
    layout = CacheLayout.of(sampler.max_batch, seq_len, sampler.max_cache_tokens or None, paged)
    rows, seq_len, pages = layout.rows, layout.row_len, layout.pages or 0
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
    read_copy = 0
    if paged and sampler.paged_attention == "xla":
        per_token_layer = kv_cache // (pages * PAGE) // model_config.num_hidden_layers
        read_copy = rows * seq_len * per_token_layer
    return JaxSamplerMemoryPlan(
        read_copy=read_copy,
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
    if plan.read_copy:
        rows.append(
            (
                "decode read copy",
                plan.read_copy,
                f"paged_attention=xla: {plan.rows} rows x {plan.seq_len:,} slots of one layer "
                "gathered per step (at least); paged_attention=pallas reads in place",
            )
        )
    lines = [
        f"JAX sampler: mesh data={data} fsdp={fsdp} tensor={tensor}; {cache}",
        f"{'item':<28}{'GB/device':>12}  note",
    ]
    lines += [f"{name:<28}{size / GB:>12.2f}  {note}" for name, size, note in rows]
    lines.append(f"{'total':<28}{plan.total / GB:>12.2f}  of {plan.budget / GB:g} GB")
    counted = "weights, KV cache and read copy" if plan.read_copy else "weights and KV cache"
    lines.append(f"fits: {'yes' if plan.fits else 'NO'} ({counted}, no other activations)")
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
