"""Compile time of the training graph (forward + backward) vs depth: scanned layers keep it flat.

  JAX_PLATFORMS=cpu python -m bench.compile_time

CPU s (process time) is robust to other load on the machine; wall time is what a user waits.
Everything is abstract (jax.jit(...).lower(ShapeDtypeStructs).compile()): no weights are
allocated, so the Qwen3-32B-shaped row compiles the real 64-layer, 5120-wide graph on a laptop.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
from flax import nnx

from configs import deepswe_qwen3_32b
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM

BATCH, SEQ = 1, 256


def compile_seconds(model_config: Qwen3Config, remat: str, dtype: jnp.dtype) -> tuple[float, float]:
    """(wall, process CPU) seconds to lower and compile grad(mean token NLL) for `model_config` on abstract inputs."""
    abstract = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0), dtype=dtype, remat=remat)
    )
    graphdef, state = nnx.split(abstract)

    def loss(state, input_ids):
        logits = nnx.merge(graphdef, state)(input_ids)
        targets = jnp.roll(input_ids, -1, axis=1)
        log_probs = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(log_probs, targets[..., None], axis=-1).mean()

    input_ids = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
    start, start_cpu = time.perf_counter(), time.process_time()
    jax.jit(jax.value_and_grad(loss)).lower(state, input_ids).compile()
    return time.perf_counter() - start, time.process_time() - start_cpu


def main() -> None:
    qwen3_32b = Qwen3Config.from_hf_dict(deepswe_qwen3_32b.get_config().model.to_dict())
    narrow = dataclasses.replace(
        qwen3_32b,
        vocab_size=1024,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=8,
        num_key_value_heads=1,
        head_dim=8,
    )
    compile_seconds(
        dataclasses.replace(narrow, num_hidden_layers=1), "none", jnp.float32
    )  # warm-up
    rows = []
    for remat in ("none", "full"):
        for layers in (2, 16, 64):
            shape = dataclasses.replace(narrow, num_hidden_layers=layers)
            rows.append(
                (f"hidden 64, {layers} layers", remat, compile_seconds(shape, remat, jnp.float32))
            )
        rows.append(
            ("Qwen3-32B dims, 64 layers", remat, compile_seconds(qwen3_32b, remat, jnp.bfloat16))
        )
    print(
        f"value_and_grad of the LM loss, batch {BATCH} x seq {SEQ}, backend {jax.default_backend()}"
    )
    print(f"{'model':<28}{'remat':<8}{'compile s':>10}{'CPU s':>8}")
    for name, remat, (seconds, cpu_seconds) in rows:
        print(f"{name:<28}{remat:<8}{seconds:>10.2f}{cpu_seconds:>8.2f}")


if __name__ == "__main__":
    main()
