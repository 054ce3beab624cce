"""Qwen3 dense decoder in Flax NNX: scanned layers, named remat policies, functional KV cache.

Shapes: b = batch, s = sequence, t = new tokens in a decode step, e = hidden_size,
h = num_attention_heads, k = num_key_value_heads, d = head_dim, m = intermediate_size,
v = vocab_size, L = num_hidden_layers, c = cache length.

Training / scoring (full sequences, optionally packed)::

    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), dtype=jnp.bfloat16, remat="full")
    logits = model(input_ids, positions, segment_ids)          # [b, s, v] float32
    hidden = model.hidden_states(input_ids, positions, segment_ids)  # [b, s, e] after final norm
    w = model.unembed_matrix()                                  # [e, v] (embedding.T when tied)

``positions`` [b, s] are RoPE positions (default ``arange(s)`` per row); for packed rows they
restart at 0 in each segment. ``segment_ids`` [b, s] int: a token attends only to earlier tokens
with the same segment id (causal within the segment); padding can use its own id (e.g. 0).
``packed=False`` promises one sequence per row from slot 0 (ids > 0, then padding 0), so the
attention kernel gets sequence lengths instead of segments (model/attention.py; the kernel is
the constructor's ``attention_impl``).

Incremental decoding (the sampler's API) — everything is functional so both steps jit with
fixed shapes, and the cache can be donated::

    cache = model.init_cache(batch_size=B, max_length=C)        # KVCache, lengths all 0
    # prefill: right-padded prompts [B, T] with true lengths prompt_lengths [B]
    logits, cache = model.decode(prompt_ids, cache, num_tokens=prompt_lengths)
    next_logits = logits[jnp.arange(B), prompt_lengths - 1]     # [B, v]
    # one token per row per step
    logits, cache = model.decode(next_ids[:, None], cache)      # logits [B, 1, v]

``KVCache`` (model/kv_cache.py; attention over it in model/cache_attention.py) holds ``keys`` [L, B, k, d, C], ``values`` [L, B, k, C, d] and
``lengths`` [B] (filled slots per row). ``decode(input_ids [B, t], cache, positions=None,
num_tokens=None)`` writes the t new keys and values of row b into slots ``lengths[b] ..
lengths[b] + t - 1``, lets each new token attend to every slot up to and including its own, and
advances ``lengths[b]`` by ``num_tokens[b]`` (default t). Tokens past ``num_tokens[b]``
(padding) are written but not counted, so the next call overwrites them; their logits are
meaningless. Rows are independent, so rows of different lengths decode together (continuous
batching): to start a new request in row b, set its length to 0 with
``cache.reset_rows(row_mask)`` and prefill it (other rows may pass ``num_tokens=0`` for that
call, which leaves them unchanged). ``positions`` default to the slot indices
(``lengths[b] + i``). The caller keeps ``lengths + t <= C``; writes past the end are dropped.
A step reads only the cache slots the rows with real tokens hold (rounded up to a few static
lengths; on CPU each row as far as its own length, elsewhere every row as far as the longest);
the layer scan only reads the cache, and the new keys/values are written once after it, so
with a donated cache a step writes L * b * t slots in place instead of copying the cache.

``init_paged_cache(batch_size, pages, max_length)`` gives a ``PagedKVCache`` instead: rows hold
pages of 16 slots named by a page table the caller fills (JaxSampler's ``paged=True``); ``decode``
reads and writes it through the same calls.

Prompts into empty rows can skip the cache altogether: ``prefill(prompt_ids, prompt_lengths)``
runs the full-sequence forward and returns the logits at each prompt's last token and the
prompts' keys/values in the cache layouts, for the caller to place in its rows (JaxSampler).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

import jax
import jax.numpy as jnp
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from deepswe_jax.model.attention import AttentionImpl, causal_attention, check_attention_impl
from deepswe_jax.model.cache_attention import attend_cache
from deepswe_jax.model.config import Qwen3Config
from deepswe_jax.model.kv_cache import PAGE, Cache, KVCache, PagedKVCache
from deepswe_jax.model.paged_kernel import check_paged_kernel
from deepswe_jax.parallel.sharding import constrain

RematPolicy = Literal["none", "full", "save_dots", "offload"]
REMAT_POLICIES: tuple[str, ...] = ("none", "full", "save_dots", "offload")

# Matmul outputs tagged with checkpoint_name; 'save_dots' keeps them, 'offload' moves them to host.
PROJECTION_NAMES = (
    "query_proj",
    "key_proj",
    "value_proj",
    "attention_out",
    "mlp_gate",
    "mlp_up",
    "mlp_down",
)

# Stacked per-layer parameters: name -> logical axes after the leading 'layers' axis.
LAYER_PARAM_AXES: dict[str, tuple[str, ...]] = {
    "input_layernorm": ("norm",),
    "q_proj": ("embed", "heads", "head_dim"),
    "k_proj": ("embed", "kv_heads", "head_dim"),
    "v_proj": ("embed", "kv_heads", "head_dim"),
    "q_norm": ("head_dim",),
    "k_norm": ("head_dim",),
    "o_proj": ("heads", "head_dim", "embed"),
    "post_attention_layernorm": ("norm",),
    "gate_proj": ("embed", "mlp"),
    "up_proj": ("embed", "mlp"),
    "down_proj": ("mlp", "embed"),
}
NORM_PARAMS = ("input_layernorm", "q_norm", "k_norm", "post_attention_layernorm")


def remat_policy(name: str):
    """The jax.checkpoint policy for a remat name, or None for 'none' (no rematerialization)."""
    if name == "none":
        return None
    if name == "full":
        return jax.checkpoint_policies.nothing_saveable
    if name == "save_dots":
        return jax.checkpoint_policies.save_only_these_names(*PROJECTION_NAMES)
    if name == "offload":
        return jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[],
            names_which_can_be_offloaded=list(PROJECTION_NAMES),
            offload_src="device",
            offload_dst="pinned_host",
        )
    raise ValueError(f"unknown remat policy {name!r}; choose one of {REMAT_POLICIES}")


def rms_norm(x: jax.Array, weight: jax.Array, eps: float, dtype: jnp.dtype) -> jax.Array:
    """RMSNorm over the last axis, statistics in float32 (as HF Qwen3RMSNorm)."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return normed.astype(dtype) * weight.astype(dtype)


def apply_rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Rotary embedding, HF split-half layout. x [b, s, n, d], positions [b, s] -> [b, s, n, d]."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))  # [d/2]
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [b, s, d/2]
    angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]  # [b, s, 1, d]
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    x1, x2 = jnp.split(x, 2, axis=-1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos + rotated * sin


class Qwen3DecoderLayers(nnx.Module):
    """All decoder layers; every parameter is stacked along a leading [layers] axis.

    The forward pass is one ``jax.lax.scan`` over the stack, so compile time does not grow with
    depth. Parameter layouts (after the layers axis) are einsum-friendly, e.g. q_proj [e, h, d],
    o_proj [h, d, e], gate_proj [e, m], down_proj [m, e].
    """

    def __init__(self, config: Qwen3Config, *, rngs: nnx.Rngs, param_dtype: jnp.dtype):
        c = config
        sizes = {
            "norm": c.hidden_size,
            "embed": c.hidden_size,
            "heads": c.num_attention_heads,
            "kv_heads": c.num_key_value_heads,
            "head_dim": c.head_dim,
            "mlp": c.intermediate_size,
        }
        init = nnx.initializers.normal(c.initializer_range)
        for name, axes in LAYER_PARAM_AXES.items():
            shape = (c.num_hidden_layers, *(sizes[a] for a in axes))
            if name in NORM_PARAMS:
                value = jnp.ones(shape, param_dtype)
            else:
                value = init(rngs.params(), shape, param_dtype)
            setattr(self, name, nnx.Param(value, logical_axes=("layers", *axes)))

    def stacked_params(self) -> dict[str, jax.Array]:
        """{name: [L, ...] array} for every per-layer parameter."""
        return {name: getattr(self, name)[...] for name in LAYER_PARAM_AXES}


def _project_qkv(
    p: dict[str, jax.Array], x: jax.Array, positions: jax.Array, config: Qwen3Config, dtype
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Pre-norm, q/k/v projections, per-head q/k RMSNorm, RoPE. x [b, s, e] -> q, k, v."""
    h = rms_norm(x, p["input_layernorm"], config.rms_norm_eps, dtype)
    q = jnp.einsum("bse,ehd->bshd", h, p["q_proj"].astype(dtype))
    k = jnp.einsum("bse,ekd->bskd", h, p["k_proj"].astype(dtype))
    v = jnp.einsum("bse,ekd->bskd", h, p["v_proj"].astype(dtype))
    q = checkpoint_name(q, "query_proj")
    k = checkpoint_name(k, "key_proj")
    v = checkpoint_name(v, "value_proj")
    q = rms_norm(q, p["q_norm"], config.rms_norm_eps, dtype)
    k = rms_norm(k, p["k_norm"], config.rms_norm_eps, dtype)
    q = apply_rope(q, positions, config.rope_theta)
    k = apply_rope(k, positions, config.rope_theta)
    q = constrain(q, ("batch", "seq", "act_heads", None))
    k = constrain(k, ("batch", "seq", "act_kv_heads", None))
    v = constrain(v, ("batch", "seq", "act_kv_heads", None))
    return q, k, v


def _finish_layer(
    p: dict[str, jax.Array], x: jax.Array, attended: jax.Array, config: Qwen3Config, dtype
) -> jax.Array:
    """Output projection + residual, then the SwiGLU MLP block + residual. -> [b, s, e]."""
    attn_out = jnp.einsum("bshd,hde->bse", attended, p["o_proj"].astype(dtype))
    attn_out = checkpoint_name(attn_out, "attention_out")
    x = constrain(x + attn_out, ("batch", "seq", "act_embed"))
    h = rms_norm(x, p["post_attention_layernorm"], config.rms_norm_eps, dtype)
    gate = jnp.einsum("bse,em->bsm", h, p["gate_proj"].astype(dtype))
    up = jnp.einsum("bse,em->bsm", h, p["up_proj"].astype(dtype))
    gate = checkpoint_name(gate, "mlp_gate")
    up = checkpoint_name(up, "mlp_up")
    hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"))
    down = jnp.einsum("bsm,me->bse", hidden, p["down_proj"].astype(dtype))
    down = checkpoint_name(down, "mlp_down")
    return constrain(x + down, ("batch", "seq", "act_embed"))


def unstack_layers(stacked: dict[str, jax.Array]) -> tuple[dict[str, jax.Array], ...]:
    """The stacked layer parameters ({name: [L, ...]}) as one {name: array} per layer, for
    ``Qwen3ForCausalLM.decode(layer_weights=)``."""
    layers = len(next(iter(stacked.values())))
    return tuple({name: w[i] for name, w in stacked.items()} for i in range(layers))


def _in_layer(fn, index: jax.Array, p: dict, layer_weights: Sequence[dict] | None, *arrays):
    """fn(weights, *arrays) with layer ``index``'s weights: the scan's slice ``p``, or
    ``layer_weights[index]`` through a switch (each branch reads its layer's arrays in place)."""
    if layer_weights is None:
        return fn(p, *arrays)
    branches = [functools.partial(fn, weights) for weights in layer_weights]
    return jax.lax.switch(index, branches, *arrays)


class Qwen3ForCausalLM(nnx.Module):
    """Qwen3 causal LM. Parameters are stored in ``param_dtype``, computed in ``dtype``.

    Args:
      config: architecture.
      rngs: initializers' randomness (weights ~ N(0, initializer_range), norms = 1).
      param_dtype: storage dtype of parameters.
      dtype: compute dtype of activations (logits are returned in float32).
      remat: 'none' | 'full' | 'save_dots' | 'offload' (see ``remat_policy``).
      attention_impl: the full-sequence forward's attention kernel, 'xla' | 'cudnn' | 'pallas'
        (model/attention.py); ``decode`` attends over the cache with model/kv_cache.py.
      scan_unroll: layers per iteration of the full-sequence forward's layer scan (lax.scan's
        unroll; >= the layer count: no loop). Unrolled, XLA fuses across layers and skips the
        loop's slicing of the stacked weights (~8% of a ~100M model's train step on CPU) but
        compiles for longer, in proportion: keep 1 for deep models.
    """

    def __init__(
        self,
        config: Qwen3Config,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
        dtype: jnp.dtype = jnp.float32,
        remat: RematPolicy = "none",
        attention_impl: AttentionImpl = "xla",
        scan_unroll: int = 1,
    ):
        remat_policy(remat)  # validate the names early
        if scan_unroll < 1:
            raise ValueError(
                f"scan_unroll must be >= 1 (layers per scan iteration), not {scan_unroll}"
            )
        check_attention_impl(attention_impl)
        self.config = config
        self.param_dtype = param_dtype
        self.dtype = dtype
        self.remat = remat
        self.attention_impl = attention_impl
        self.scan_unroll = scan_unroll
        init = nnx.initializers.normal(config.initializer_range)
        v, e = config.vocab_size, config.hidden_size
        self.embed_tokens = nnx.Param(
            init(rngs.params(), (v, e), param_dtype), logical_axes=("vocab", "embed")
        )
        self.layers = Qwen3DecoderLayers(config, rngs=rngs, param_dtype=param_dtype)
        self.norm = nnx.Param(jnp.ones((e,), param_dtype), logical_axes=("norm",))
        if config.tie_word_embeddings:
            self.lm_head = None
        else:
            self.lm_head = nnx.Param(
                init(rngs.params(), (e, v), param_dtype), logical_axes=("embed", "vocab")
            )

    def unembed_matrix(self) -> jax.Array:
        """[hidden, vocab] output projection in param dtype (embedding.T when tied)."""
        if self.lm_head is None:
            return self.embed_tokens[...].T
        return self.lm_head[...]

    def _embed(self, input_ids: jax.Array) -> jax.Array:
        # Gather the FSDP shards of the table first (as for any weight) so the lookup and its
        # gradient's scatter-add run on batch-sharded tokens; the gradient is reduce-scattered.
        table = constrain(self.embed_tokens[...], ("act_vocab", None))
        x = jnp.take(table, input_ids, axis=0).astype(self.dtype)
        return constrain(x, ("batch", "seq", "act_embed"))

    def _logits(self, hidden: jax.Array) -> jax.Array:
        w = self.unembed_matrix().astype(self.dtype)
        logits = jnp.einsum("bse,ev->bsv", hidden, w, preferred_element_type=jnp.float32)
        return constrain(logits, ("batch", "seq", "act_vocab"))

    def hidden_states(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        *,
        packed: bool = True,
    ) -> jax.Array:
        """input_ids [b, s] (positions, segment_ids [b, s]) -> [b, s, e] after the final norm."""
        batch, seq = input_ids.shape
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch, seq))
        config, dtype, impl = self.config, self.dtype, self.attention_impl

        def layer(x: jax.Array, p: dict[str, jax.Array]) -> tuple[jax.Array, None]:
            q, k, v = _project_qkv(p, x, positions, config, dtype)
            attended = causal_attention(q, k, v, segment_ids, impl=impl, packed=packed)
            return _finish_layer(p, x, attended, config, dtype), None

        policy = remat_policy(self.remat)
        if self.remat != "none":
            layer = jax.checkpoint(layer, policy=policy, prevent_cse=False)
        x, _ = jax.lax.scan(
            layer,
            self._embed(input_ids),
            self.layers.stacked_params(),
            unroll=min(self.scan_unroll, config.num_hidden_layers),
        )
        return rms_norm(x, self.norm[...], config.rms_norm_eps, dtype)

    def __call__(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        *,
        packed: bool = True,
    ) -> jax.Array:
        """input_ids [b, s] -> logits [b, s, v] float32. See ``hidden_states`` for the arguments."""
        return self._logits(self.hidden_states(input_ids, positions, segment_ids, packed=packed))

    def init_cache(
        self, batch_size: int, max_length: int, dtype: jnp.dtype | None = None
    ) -> KVCache:
        """An empty cache (``KVCache`` layouts) of ``batch_size`` rows and ``max_length`` slots in
        ``dtype`` (default the compute dtype), lengths [batch_size] zeros."""
        c = self.config
        shape = (c.num_hidden_layers, batch_size, c.num_key_value_heads, max_length, c.head_dim)
        dtype = dtype or self.dtype
        # Two separate buffers (not one array twice), so a jit may donate the whole cache.
        return KVCache(
            keys=jnp.zeros(shape[:3] + (c.head_dim, max_length), dtype),
            values=jnp.zeros(shape, dtype),
            lengths=jnp.zeros((batch_size,), jnp.int32),
        )

    def init_paged_cache(
        self,
        batch_size: int,
        pages: int,
        max_length: int,
        dtype: jnp.dtype | None = None,
        attention: str = "xla",
    ) -> PagedKVCache:
        """An empty ``PagedKVCache`` of ``pages`` pages per layer for ``batch_size`` rows of at
        most ``max_length`` slots (a multiple of ``PAGE``); every table entry out of range.
        ``attention``: how decode reads it, "xla" (a gather) or "pallas" (model/paged_kernel.py)."""
        c = self.config
        if max_length % PAGE:
            raise ValueError(f"a paged cache's max_length must be a multiple of {PAGE}")
        check_paged_kernel(attention)
        dtype = dtype or self.dtype
        kv_heads, layers = c.num_key_value_heads, c.num_hidden_layers
        return PagedKVCache(
            keys=jnp.zeros((kv_heads, layers, pages, PAGE, c.head_dim), dtype),
            values=jnp.zeros((kv_heads, layers, pages, PAGE, c.head_dim), dtype),
            table=jnp.full((batch_size, max_length // PAGE), pages, jnp.int32),
            lengths=jnp.zeros((batch_size,), jnp.int32),
            attention=attention,
        )

    def prefill(
        self, input_ids: jax.Array, lengths: jax.Array, cache_dtype: jnp.dtype | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Prompts into empty cache rows: the full-sequence forward, which reads no cache.

        Args:
          input_ids: [b, s] right-padded prompts, one per row from slot 0.
          lengths: [b] int, real tokens per row (at least 1).
          cache_dtype: dtype of the returned keys/values (default the compute dtype).

        Returns:
          logits [b, v] float32 at each prompt's last token, and keys [L, b, k, d, s] / values
          [L, b, k, s, d] for slots 0 .. s - 1 of the rows' cache (``KVCache`` layouts; slots
          past a row's length hold padding, which its length hides).
        """
        batch, seq = input_ids.shape
        positions = jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch, seq))
        segment_ids = (jnp.arange(seq) < lengths[:, None]).astype(jnp.int32)
        config, dtype, impl = self.config, self.dtype, self.attention_impl
        cache_dtype = cache_dtype or dtype

        def layer(x, p):
            q, k, v = _project_qkv(p, x, positions, config, dtype)
            # Round through the cache dtype so the prompt sees what decode steps will read.
            k, v = k.astype(cache_dtype), v.astype(cache_dtype)
            attended = causal_attention(
                q, k.astype(dtype), v.astype(dtype), segment_ids, impl=impl, packed=False
            )
            return _finish_layer(p, x, attended, config, dtype), (k, v)

        x, (keys, values) = jax.lax.scan(
            layer, self._embed(input_ids), self.layers.stacked_params()
        )
        last = x[jnp.arange(batch), lengths - 1]  # [b, e]: only these rows need the vocabulary
        hidden = rms_norm(last, self.norm[...], config.rms_norm_eps, dtype)
        logits = self._logits(hidden[:, None])[:, 0]
        # [L, b, s, k, d] -> the cache layouts
        return logits, keys.transpose(0, 1, 3, 4, 2), values.transpose(0, 1, 3, 2, 4)

    def decode(
        self,
        input_ids: jax.Array,
        cache: Cache,
        positions: jax.Array | None = None,
        num_tokens: jax.Array | None = None,
        rows: jax.Array | None = None,
        logits_at: jax.Array | None = None,
        each_row_reads: bool | None = None,
        layer_weights: Sequence[dict[str, jax.Array]] | None = None,
    ) -> tuple[jax.Array, Cache]:
        """Run t new tokens per row against the cache (see the module docstring).

        Args:
          input_ids: [b, t] new tokens (right-padded when rows have fewer than t).
          cache: the KVCache (or PagedKVCache) from ``init_cache`` (``init_paged_cache``) or a
            previous ``decode``.
          positions: [b, t] RoPE positions; default ``cache.lengths[:, None] + arange(t)``.
          num_tokens: [b] int, how many of the t tokens are real in each row (default t).
          rows: [b] int, the cache rows the b input rows continue (a subset of the cache's rows,
            e.g. prompts extending cached prefixes; out of range = skipped); default all rows,
            b = the cache's batch.
          logits_at: [b] int, the one new token per row whose logits are wanted (a prompt's
            last); default all t.
          each_row_reads: every row reads only its own filled slots (``attend_each_row_cache``:
            a device loop over rows) instead of all rows reading as far as the longest one;
            default on CPU, where attention reads are the cost of a decode step. Only without
            ``rows``.
          layer_weights: every layer's weights as arrays of their own (``unstack_layers``),
            which each layer reads where they lie, picked by a ``lax.switch`` on the layer,
            instead of the stacked parameters' slices: XLA:CPU copies a slice of a stacked
            weight before a matmul reads it, which costs as much as the matmul at a few rows.
            They must be arguments of the jitted program (slices taken inside it are copied
            again); default the stacked parameters.

        Returns:
          logits [b, t, v] float32 ([b, 1, v] with ``logits_at``) and the updated cache.
        """
        batch, t = input_ids.shape
        if positions is None:
            lengths = cache.lengths if rows is None else cache.lengths[rows]  # [b]
            positions = lengths[:, None] + jnp.arange(t, dtype=jnp.int32)  # [b, t]
        if num_tokens is None:
            num_tokens = jnp.full((batch,), t, jnp.int32)
        config, dtype, cache_dtype = self.config, self.dtype, cache.keys.dtype

        def project(p, x):
            return _project_qkv(p, x, positions, config, dtype)

        def finish(p, x, attended):
            return _finish_layer(p, x, attended, config, dtype)

        def layer(x, layer_inputs):
            p, index = layer_inputs
            q, k, v = _in_layer(project, index, p, layer_weights, x)
            # Round through the cache dtype so this step sees what later steps will read.
            k, v = k.astype(cache_dtype), v.astype(cache_dtype)
            attended = attend_cache(
                q, k.astype(dtype), v.astype(dtype), cache, index, num_tokens, rows, each_row_reads
            )
            return _in_layer(finish, index, p, layer_weights, x, attended), (k, v)

        # The scan only reads the cache; the new keys/values [L, b, t, k, d] are written once
        # afterwards, in place when the caller donates the cache.
        layers = jnp.arange(config.num_hidden_layers)
        stacked = self.layers.stacked_params() if layer_weights is None else {}
        x, (new_keys, new_values) = jax.lax.scan(layer, self._embed(input_ids), (stacked, layers))
        if logits_at is not None:
            x = x[jnp.arange(batch), logits_at][:, None]  # [b, 1, e]
        hidden = rms_norm(x, self.norm[...], config.rms_norm_eps, dtype)
        new_cache = cache.with_new_tokens(new_keys, new_values, rows, num_tokens)
        return self._logits(hidden), new_cache
