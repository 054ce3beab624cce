"""Causal self-attention over whole sequences (training and scoring), one function per kernel.

    out = causal_attention(q, k, v, segment_ids, impl="cudnn", packed=False)   # [b, s, h, d]

q [b, s, h, d]; k, v [b, s, k, d] (grouped-query: h a multiple of k); segment_ids [b, s] int,
0 = padding, or None (every token real). A token attends to the earlier tokens of its own
segment and to itself. Rows are `packed` (several sequences per row, told apart by their
segment ids) or not (each row one sequence from slot 0, then padding): unpacked rows reduce to
sequence lengths, which cuDNN takes instead of a mask.

Implementations (`ATTENTION_IMPLS`, config.attention):

  xla     XLA ops in query blocks of 128 (`query_block_attention`): each block's fp32 scores
          against the keys up to its end only, about half the [b, h, s, s] scores of a dense
          causal attention. Packed rows mask by segment, unpacked rows by length. CPU.
  cudnn   unpacked rows: cuDNN flash attention with sequence lengths (padding + causal masks
          built inside the kernel). No dense mask: cuDNN turns one into a bf16 bias and writes
          its gradient too, ~8.6 GB each at 65K tokens. Packed rows go to the Pallas kernel
          below: cuDNN's packed-sequence offsets are private API in jax 0.10
          (jax._src.cudnn.fused_attention_stablehlo), and Hopper-only.
  pallas  the Pallas flash kernel with segment ids for every row
          (jax.experimental.pallas.ops.gpu.attention.mha: Triton on GPU, forward and backward
          kernels, memory linear in s). On CPU it runs in Pallas interpret mode: the same
          kernel code, which is how tests compare it with the XLA path.

Under a mesh (`jax.set_mesh`) the Pallas kernel runs per device through `jax.shard_map`, batch
and heads split by the active sharding rules ('batch', 'act_heads'); the cuDNN call carries its
own partitioning rules in JAX.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention as pallas_attention

from deepswe_jax.parallel.sharding import constrain, logical_to_spec

AttentionImpl = Literal["xla", "cudnn", "pallas"]
ATTENTION_IMPLS: tuple[str, ...] = ("xla", "cudnn", "pallas")

# Tiles of the Pallas kernel (JAX's defaults for the Triton kernel): query x key blocks of the
# forward pass, 32 x 32 blocks for the backward pass. A row length must be a multiple of both
# (or at most the block, which then shrinks to it).
FLASH_BLOCK_SIZES = pallas_attention.BlockSizes(
    block_q=128, block_k=128, block_q_dkv=32, block_kv_dkv=32, block_q_dq=32, block_kv_dq=32
)


# Query block of the XLA path (`query_block_attention`): 128 was the fastest of 128/256/512 at
# every size measured on CPU. Longer rows take larger blocks, at most MAX_QUERY_BLOCKS of them,
# so the traced program stays the same size however long the row (a 32K-token prefill would
# otherwise unroll 256 blocks into every layer); 16 blocks compute 17/32 of the dense scores.
QUERY_BLOCK = 128
MAX_QUERY_BLOCKS = 16


def check_attention_impl(impl: str) -> None:
    if impl not in ATTENTION_IMPLS:
        raise ValueError(
            f"unknown attention implementation {impl!r}; set config.attention to one of "
            f"{ATTENTION_IMPLS} ('xla' on CPU, 'cudnn' or 'pallas' on GPU)"
        )


def sequence_lengths(segment_ids: jax.Array) -> jax.Array:
    """[b] int32 real tokens per row of unpacked rows (segment id > 0, then padding 0)."""
    return (segment_ids > 0).sum(axis=-1).astype(jnp.int32)


def causal_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segment_ids: jax.Array | None,
    *,
    impl: AttentionImpl = "xla",
    packed: bool = True,
) -> jax.Array:
    """Causal attention within segments, by `impl` (module docstring). -> [b, s, h, d].

    `packed=False` promises one sequence per row starting at slot 0 (segment ids > 0, then 0 for
    padding); the outputs at padding slots are then unspecified (finite), as no loss reads them.
    """
    check_attention_impl(impl)
    if impl == "pallas" or (impl == "cudnn" and packed and segment_ids is not None):
        return flash_attention(q, k, v, segment_ids)
    if impl == "xla":
        return query_block_attention(q, k, v, segment_ids, packed=packed)
    lengths = None if segment_ids is None or packed else sequence_lengths(segment_ids)
    return jax.nn.dot_product_attention(
        q,
        k,
        v,
        is_causal=True,
        query_seq_lengths=lengths,
        key_value_seq_lengths=lengths,
        implementation=impl,
    )


def query_blocks(seq: int, block: int = QUERY_BLOCK) -> list[tuple[int, int]]:
    """(first, end) of each query block of a row of `seq` tokens: blocks of `block`, larger when
    that would make more than MAX_QUERY_BLOCKS."""
    block = max(block, -(-seq // MAX_QUERY_BLOCKS))
    return [(lo, min(lo + block, seq)) for lo in range(0, seq, block)]


def query_block_scores_fraction(seq: int) -> float:
    """The share of a dense causal attention's [s, s] scores that the query blocks compute (and
    keep for the backward pass): 9/16 at 1,024 tokens, 17/32 from 2,048 on."""
    return sum((hi - lo) * hi for lo, hi in query_blocks(seq)) / seq**2


def query_block_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segment_ids: jax.Array | None,
    *,
    packed: bool = True,
    block: int = QUERY_BLOCK,
) -> jax.Array:
    """The XLA path: queries in blocks of `block` (larger past MAX_QUERY_BLOCKS blocks), each
    against the keys up to its own end only, so the masked upper triangle of the scores is mostly
    never computed (nor stored for the backward pass). -> [b, s, h, d].

    The same arithmetic as `jax.nn.dot_product_attention`'s XLA path (fp32 logits, scaled, masked
    with its large negative, softmax, probabilities in the value dtype) over fewer keys; measured
    on 2 CPUs, forward + backward of one attention: 1.6x faster at 16 x 640 tokens, 2.2x at
    4 x 512, 2.8x at 1 x 2,048, outputs and gradients equal to ~1e-6 relative (BENCHMARKS.md,
    issue 29). Masks: causal, plus same segment (`packed`) or key inside the row's length.
    """
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    grouped = q.reshape(batch, seq, kv_heads, heads // kv_heads, head_dim)
    lengths = None if segment_ids is None or packed else sequence_lengths(segment_ids)
    large_negative = -0.7 * float(jnp.finfo(jnp.float32).max)  # jax.nn's, for fp32 logits
    blocks = []
    for lo, hi in query_blocks(seq, block):
        logits = jnp.einsum(
            "bqkgd,bskd->bkgqs", grouped[:, lo:hi], k[:, :hi], preferred_element_type=jnp.float32
        )
        logits = logits * jnp.float32(head_dim**-0.5)
        query_pos, key_pos = jnp.arange(lo, hi)[:, None], jnp.arange(hi)[None, :]
        mask = (key_pos <= query_pos)[None]  # [1 | b, queries, keys]
        if segment_ids is not None and packed:
            mask = mask & (segment_ids[:, lo:hi, None] == segment_ids[:, None, :hi])
        elif lengths is not None:
            mask = mask & (key_pos[None] < lengths[:, None, None])
        logits = jnp.where(mask[:, None, None], logits, large_negative)
        probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        blocks.append(jnp.einsum("bkgqs,bskd->bqkgd", probs, v[:, :hi]))
    return jnp.concatenate(blocks, axis=1).reshape(batch, seq, heads, head_dim)


def flash_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array | None
) -> jax.Array:
    """The Pallas flash kernel (causal, within segments); interpret mode on CPU. -> [b, s, h, d].

    The kernel wants as many key/value heads as query heads: grouped keys/values are repeated
    (an [b, s, h, d] copy per layer, small next to the [b, h, s, s] scores it avoids).
    """
    batch, seq, heads, head_dim = q.shape
    for block in (FLASH_BLOCK_SIZES.block_q, FLASH_BLOCK_SIZES.block_q_dq):
        if seq > block and seq % block:
            raise ValueError(
                f"the Pallas flash kernel needs rows of at most {block} tokens or a multiple of "
                f"{block}, got {seq}; use length buckets that are multiples of 128 "
                "(config.rl.length_buckets) or config.attention='xla'"
            )
    groups = heads // k.shape[2]
    k = constrain(jnp.repeat(k, groups, axis=2), ("batch", "seq", "act_heads", None))
    v = constrain(jnp.repeat(v, groups, axis=2), ("batch", "seq", "act_heads", None))
    kernel = functools.partial(
        pallas_attention.mha,
        sm_scale=head_dim**-0.5,
        causal=True,
        block_sizes=FLASH_BLOCK_SIZES,
        interpret=jax.default_backend() == "cpu",
    )
    if segment_ids is None:
        call = lambda q, k, v: kernel(q, k, v, None)  # noqa: E731
        operands = (q, k, v)
    else:
        call, operands = kernel, (q, k, v, segment_ids)
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return call(*operands)
    # The kernel sees whole sequences: split batch and heads over the mesh, never the sequence.
    spec = logical_to_spec(
        ("batch", None, "act_heads", None), shape=q.shape, mesh_shape=dict(mesh.shape.items())
    )
    row_spec = jax.P(spec[0] if len(spec) else None)
    in_specs = (spec, spec, spec) + ((row_spec,) if segment_ids is not None else ())
    return jax.shard_map(call, in_specs=in_specs, out_specs=spec, check_vma=False)(*operands)
