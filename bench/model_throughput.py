"""Training throughput (forward + backward tokens/s) of the JAX Qwen3 vs transformers' PyTorch Qwen3.

  JAX_PLATFORMS=cpu python -m bench.model_throughput [--repeats=5]

Both models hold the same weights (the JAX model's random init, written with save_hf_checkpoint and
read by transformers), run in float32 on the same batch, and compute the same loss: mean
next-token cross-entropy over the full logits. Timed runs alternate between the two frameworks
after warm-up (so load from other processes hits both alike); the table reports medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
import transformers
from flax import nnx

from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, save_hf_checkpoint


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    model: Qwen3Config
    batch: int
    seq: int


def _cases() -> list[Case]:
    tiny_model = Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict())
    model_100m = dataclasses.replace(
        tiny_model,
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=4,
        head_dim=64,
    )
    return [Case("tiny", tiny_model, batch=2, seq=512), Case("100M", model_100m, batch=1, seq=256)]


def _jax_step(model: Qwen3ForCausalLM):
    """A jitted fn(params, input_ids [b, s]) -> (loss, grads); also returns the params."""
    graphdef, params = nnx.split(model)

    def loss_fn(params, input_ids):
        logits = nnx.merge(graphdef, params)(input_ids)[:, :-1]
        log_probs = jax.nn.log_softmax(logits)
        targets = input_ids[:, 1:, None]
        return -jnp.take_along_axis(log_probs, targets, axis=-1).mean()

    return jax.jit(jax.value_and_grad(loss_fn)), params


def _torch_step(model: torch.nn.Module, input_ids: torch.Tensor) -> float:
    model.zero_grad(set_to_none=True)
    logits = model(input_ids).logits[:, :-1].float()
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1)
    )
    loss.backward()
    return loss.item()


def _run(case: Case, repeats: int, warmup: int) -> dict[str, float]:
    jax_model = Qwen3ForCausalLM(case.model, rngs=nnx.Rngs(0))
    with tempfile.TemporaryDirectory() as hf_dir:
        save_hf_checkpoint(jax_model, hf_dir)
        torch_model = transformers.AutoModelForCausalLM.from_pretrained(
            hf_dir, dtype=torch.float32, attn_implementation="sdpa"
        )
    torch_model.train()
    ids = np.random.default_rng(0).integers(0, case.model.vocab_size, (case.batch, case.seq))
    jax_ids, torch_ids = jnp.asarray(ids, jnp.int32), torch.from_numpy(ids)
    step, params = _jax_step(jax_model)

    def time_jax() -> tuple[float, float]:
        start = time.perf_counter()
        loss, grads = step(params, jax_ids)
        jax.block_until_ready(grads)
        return time.perf_counter() - start, float(loss)

    def time_torch() -> tuple[float, float]:
        start = time.perf_counter()
        loss = _torch_step(torch_model, torch_ids)
        return time.perf_counter() - start, loss

    for _ in range(warmup):
        time_jax()
        time_torch()
    jax_times, torch_times = [], []
    for _ in range(repeats):
        seconds, jax_loss = time_jax()
        jax_times.append(seconds)
        seconds, torch_loss = time_torch()
        torch_times.append(seconds)
    tokens = case.batch * case.seq
    return {
        "params": sum(x.size for x in jax.tree.leaves(params)),
        "jax_tok_s": tokens / statistics.median(jax_times),
        "torch_tok_s": tokens / statistics.median(torch_times),
        "loss_diff": abs(jax_loss - torch_loss),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    print(
        f"fwd+bwd float32 on {jax.default_backend()} ({threads} threads), median of "
        f"{args.repeats} after {args.warmup} warm-up; jax {jax.__version__}, torch "
        f"{torch.__version__}, transformers {transformers.__version__}"
    )
    print(
        f"{'model':<6}{'params':>12}{'batch x seq':>13}{'JAX tok/s':>11}{'torch tok/s':>13}"
        f"{'JAX/torch':>11}{'|loss diff|':>13}"
    )
    for case in _cases():
        result = _run(case, args.repeats, args.warmup)
        print(
            f"{case.name:<6}{result['params']:>12,}{f'{case.batch} x {case.seq}':>13}"
            f"{result['jax_tok_s']:>11.0f}{result['torch_tok_s']:>13.0f}"
            f"{result['jax_tok_s'] / result['torch_tok_s']:>10.2f}x{result['loss_diff']:>13.1e}"
        )


if __name__ == "__main__":
    main()
