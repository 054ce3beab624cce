"""Token log-probabilities and entropies without materializing [batch, seq, vocab] logits.

With vocab 151,936 and seq 32,768 the full fp32 logits of one sequence take 20 GB. Here the
sequence is cut into chunks; a `lax.map` visits one chunk at a time and `jax.checkpoint`
makes the backward pass recompute each chunk's logits instead of keeping them all.

When the whole sequence fits one chunk (chunk_size >= seq, as for short rows or a small
vocabulary) there is nothing to walk and nothing to save by recomputing: the chunk's logits
are live during its own backward pass either way, and the head's backward runs before the
decoder's, whose residuals are live then too. That case is one plain fused computation, without
the map and the checkpoint, so the backward pass does not recompute the [batch, seq, vocab]
logits matmul (a third of the head's matmul work; ~28% of the head's time for configs/tiny.py
at 4 x 512 on CPU).

`scored_logprobs` computes the head only where the loss reads it: each row's loss positions,
gathered into a static capacity (`loss_position_index`, host side; LossSettings
loss_position_buckets). Prompts and tool observations, most of an agent's row, skip the head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from deepswe_jax.parallel import constrain


def _chunk_logprobs_and_entropy(
    hidden: jax.Array, unembed: jax.Array, targets: jax.Array, temperature: float
) -> tuple[jax.Array, jax.Array]:
    """[b, c, h], [h, v], [b, c] -> log p(target) [b, c] and entropy [b, c], in fp32."""
    logits = jnp.einsum("bch,hv->bcv", hidden, unembed, preferred_element_type=jnp.float32)
    logits = constrain(logits.astype(jnp.float32) / temperature, ("batch", "seq", "act_vocab"))
    log_normalizer = jax.nn.logsumexp(logits, axis=-1)  # [b, c]
    target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    probs = jnp.exp(logits - log_normalizer[..., None])
    entropy = log_normalizer - jnp.sum(probs * logits, axis=-1)
    return target_logits - log_normalizer, entropy


def token_logprobs(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    *,
    chunk_size: int = 1024,
    temperature: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """Log-probability of each target token and the entropy of each next-token distribution.

    Args:
      hidden: [batch, seq, hidden] final hidden states (model.hidden_states(...)).
      unembed: [hidden, vocab] output projection (model.unembed_matrix()).
      targets: [batch, seq] int token ids to score (inputs shifted left by one).
      chunk_size: sequence positions per chunk; peak logits memory is batch * chunk * vocab * 4.
        At least seq: one chunk, computed without the map and the recomputation.
      temperature: logits are divided by it, to score under the sampler's distribution.
    Returns:
      (logprobs [batch, seq], entropy [batch, seq]), float32.
    """
    batch, seq, width = hidden.shape
    if unembed.shape[0] != width:
        raise ValueError(f"unembed is {unembed.shape}, expected [hidden={width}, vocab]")
    if targets.shape != (batch, seq):
        raise ValueError(f"targets is {targets.shape}, expected [batch, seq] = {(batch, seq)}")
    if chunk_size >= seq:
        return _chunk_logprobs_and_entropy(hidden, unembed, targets, temperature)
    num_chunks = -(-seq // chunk_size)
    padding = num_chunks * chunk_size - seq
    if padding:
        hidden = jnp.pad(hidden, ((0, 0), (0, padding), (0, 0)))
        targets = jnp.pad(targets, ((0, 0), (0, padding)))
    # [num_chunks, batch, chunk, ...]: lax.map walks the leading axis.
    hidden_chunks = hidden.reshape(batch, num_chunks, chunk_size, width).swapaxes(0, 1)
    target_chunks = targets.reshape(batch, num_chunks, chunk_size).swapaxes(0, 1)

    @jax.checkpoint
    def one_chunk(chunk: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        return _chunk_logprobs_and_entropy(chunk[0], unembed, chunk[1], temperature)

    logprobs, entropy = jax.lax.map(one_chunk, (hidden_chunks, target_chunks))
    logprobs = logprobs.swapaxes(0, 1).reshape(batch, -1)[:, :seq]
    entropy = entropy.swapaxes(0, 1).reshape(batch, -1)[:, :seq]
    return logprobs, entropy


def loss_position_index(loss_mask: np.ndarray, buckets: int) -> np.ndarray | None:
    """Host side: [rows, capacity] int32 positions of each row's loss tokens, in order, padded
    with the row length (out of range: `scored_logprobs` drops them), or None when scoring every
    position is as cheap (buckets <= 1, or the fullest row needs the whole length).

    The capacity is k/buckets of the row length for the least k that holds the row with the
    most loss tokens, so one row length compiles at most `buckets` programs.
    """
    rows, length = loss_mask.shape
    if buckets <= 1 or rows == 0:
        return None
    scored = loss_mask > 0
    counts = scored.sum(axis=1)
    grain = -(-length // buckets)
    capacity = max(1, -(-int(counts.max()) // grain)) * grain
    if capacity >= length:
        return None
    # A stable sort puts each row's loss positions first, in order.
    order = np.argsort(~scored, axis=1, kind="stable")[:, :capacity]
    valid = np.arange(capacity)[None, :] < counts[:, None]
    return np.where(valid, order, length).astype(np.int32)


def scored_logprobs(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    index: jax.Array | None,
    *,
    chunk_size: int = 1024,
    temperature: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """`token_logprobs` at the positions `index` holds (from `loss_position_index`); 0 at the
    others. index None: every position. Same shapes as `token_logprobs`.

    The head's work shrinks to the gathered positions; its result is scattered back, so the
    loss sees [batch, seq] arrays as before (positions outside the loss mask count for nothing).
    """
    if index is None:
        return token_logprobs(
            hidden, unembed, targets, chunk_size=chunk_size, temperature=temperature
        )
    seq = hidden.shape[1]
    # Padding entries (== seq) read the last position and are dropped again by the scatter: their
    # cotangent is zero, so they add nothing to any gradient.
    inside = jnp.minimum(index, seq - 1)
    gathered = jnp.take_along_axis(hidden, inside[..., None], axis=1)
    logprobs, entropy = token_logprobs(
        gathered,
        unembed,
        jnp.take_along_axis(targets, inside, axis=1),
        chunk_size=chunk_size,
        temperature=temperature,
    )
    rows = jnp.arange(hidden.shape[0])[:, None]
    zeros = jnp.zeros(targets.shape, jnp.float32)
    return (
        zeros.at[rows, index].set(logprobs, mode="drop"),
        zeros.at[rows, index].set(entropy, mode="drop"),
    )
