"""GRPO++ train step (forward, backward, AdamW update) of deepswe_jax's Trainer vs PyTorch.

  JAX_PLATFORMS=cpu python -m bench.train_step [--repeats=5] [--warmup=2]

For each model (configs/tiny.py's dims, and a ~100M-parameter Qwen3 with bench/model_throughput.py's
dims) the parent writes one random transformers Qwen3ForCausalLM with save_pretrained, then runs
each side in its own subprocess (this script with --side=jax|torch), one after the other:

  jax:   deepswe_jax.model.load_hf_checkpoint + experiment.make_trainer(tiny config with
         the case's model dims), Trainer.step on one MicroBatch (GRPO++ loss, optax AdamW with the
         config's global-norm clipping).
  torch: transformers Qwen3ForCausalLM (sdpa attention) with the same weights, the same GRPO++
         loss written plainly (log_softmax of the logits, gather targets, ratio = exp(logp -
         logp.detach()), PPO clip eps_low 0.2 / eps_high 0.28, per-sequence token sum divided by
         max_response_len, mean over sequences), clip_grad_norm_ and torch.optim.AdamW.

Both run float32 on the same batch (random tokens, one sequence per row, loss on the second half,
random per-row advantages), pinned to the same 2 CPUs (torch.set_num_threads(2)). Step time is
the median of --repeats steps after --warmup steps (the JAX warm-up includes compilation);
tokens/s = batch * seq / step time. Peak memory is the subprocess's peak resident set size,
resource.getrusage(RUSAGE_SELF).ru_maxrss read at its end: framework import, weights, optimizer
state, activations and (JAX) compilation all count.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

CPUS = 2


@dataclasses.dataclass(frozen=True)
class Case:
    """A model (HF config overrides of configs/tiny.py's model) and its batch shape."""

    name: str
    model_overrides: dict[str, Any]
    batch: int
    seq: int


# The ~100M Qwen3 of bench/model_throughput.py (HF config overrides of configs/tiny.py's
# model), shared by bench/tunix_step.py and bench/vllm_sampler.py.
MODEL_100M = {
    "vocab_size": 32000,
    "hidden_size": 768,
    "intermediate_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "head_dim": 64,
}
CASES = (
    Case("tiny", {}, batch=4, seq=512),
    Case("100M", MODEL_100M, batch=1, seq=256),
)


def _config(model_overrides: dict[str, Any], seq: int):
    """configs/tiny.py with the case's model dims; the response budget is the second half."""
    from configs import tiny

    config = tiny.get_config()
    config.model.update(model_overrides)
    config.rl.logprob_chunk = seq
    config.agent.max_context = seq // 2
    return config


def _batch_arrays(vocab_size: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    """[batch, seq] MicroBatch fields: one sequence per row, loss on its second half."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab_size, (batch, seq + 1), dtype=np.int32)
    loss_mask = np.zeros((batch, seq), np.float32)
    loss_mask[:, seq // 2 :] = 1.0
    return {
        "input_ids": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy(),
        "segment_ids": np.ones((batch, seq), np.int32),
        "loss_mask": loss_mask,
        "advantages": np.repeat(rng.standard_normal((batch, 1)).astype(np.float32), seq, axis=1),
        "sampler_logprobs": np.zeros((batch, seq), np.float32),
    }


def _time_steps(step, warmup: int, repeats: int) -> tuple[float, float]:
    """Median seconds of `repeats` calls of step() -> loss after `warmup` calls; last loss."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), loss


def _run_jax(spec: dict[str, Any]) -> dict[str, float]:
    import jax
    from flax import nnx

    from deepswe_jax.experiment import make_trainer, sharding_rules
    from deepswe_jax.model import load_hf_checkpoint
    from deepswe_jax.parallel import make_mesh
    from deepswe_jax.rl.batch import MicroBatch

    config = _config(spec["model_overrides"], spec["seq"])
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    trainer = make_trainer(config, mesh, sharding_rules(config))
    model = load_hf_checkpoint(spec["hf_dir"], mesh=mesh, rules=config.sharding_rules)
    params = nnx.split(model, nnx.Param)[1]
    num_params = sum(x.size for x in jax.tree.leaves(params))
    del model
    state = trainer.init_state(params)
    micro_batch = MicroBatch(**_batch_arrays(config.model.vocab_size, spec["batch"], spec["seq"]))

    def step() -> float:
        nonlocal state
        state, metrics = trainer.step(state, [micro_batch])
        return metrics["loss"]

    seconds, loss = _time_steps(step, spec["warmup"], spec["repeats"])
    return {"params": num_params, "step_s": seconds, "loss": loss}


def _run_torch(spec: dict[str, Any]) -> dict[str, float]:
    import torch
    import transformers

    torch.set_num_threads(CPUS)
    config = _config(spec["model_overrides"], spec["seq"])
    rl = config.rl
    model = transformers.AutoModelForCausalLM.from_pretrained(
        spec["hf_dir"], dtype=torch.float32, attn_implementation="sdpa"
    )
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=rl.lr, betas=(rl.b1, rl.b2), weight_decay=rl.weight_decay
    )
    arrays = _batch_arrays(config.model.vocab_size, spec["batch"], spec["seq"])
    batch = {name: torch.from_numpy(array) for name, array in arrays.items()}
    max_response_len = config.agent.max_context

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        logits = model(input_ids=batch["input_ids"], position_ids=batch["positions"]).logits
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        logp = log_probs.gather(-1, batch["targets"].long()[..., None])[..., 0]
        ratio = torch.exp(logp - logp.detach())
        advantages = batch["advantages"]
        clipped = torch.clamp(ratio, 1.0 - rl.eps_low, 1.0 + rl.eps_high)
        token_loss = torch.maximum(-advantages * ratio, -advantages * clipped)
        sequence_loss = (token_loss * batch["loss_mask"]).sum(-1) / max_response_len
        loss = sequence_loss.mean()
        loss.backward()
        if rl.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), rl.grad_clip)
        optimizer.step()
        return loss.item()

    seconds, loss = _time_steps(step, spec["warmup"], spec["repeats"])
    num_params = sum(p.numel() for p in model.parameters())
    return {"params": num_params, "step_s": seconds, "loss": loss}


def _child(side: str, spec: dict[str, Any]) -> None:
    """Runs one side and prints its figures, with the process's peak RSS, as one JSON line."""
    result = _run_jax(spec) if side == "jax" else _run_torch(spec)
    # Linux reports ru_maxrss in KiB.
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def _spawn(side: str, spec: dict[str, Any]) -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "bench.train_step",
        f"--side={side}",
        f"--spec={json.dumps(spec)}",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode:
        raise RuntimeError(
            f"the {side} subprocess failed (exit {completed.returncode}); its stderr:\n"
            f"{completed.stderr[-4000:]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _write_checkpoint(case: Case, hf_dir: str) -> None:
    """A random transformers Qwen3ForCausalLM with the case's dims, saved to `hf_dir`."""
    import torch
    import transformers

    from deepswe_jax.model import Qwen3Config

    config = _config(case.model_overrides, case.seq)
    hf_dict = Qwen3Config.from_hf_dict(config.model.to_dict()).to_hf_dict()
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**hf_dict))
    model.save_pretrained(hf_dir)


def _parent(warmup: int, repeats: int) -> None:
    import jax
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    print(
        f"GRPO++ train step (fwd + bwd + AdamW), float32 on cpu ({CPUS} threads each side), median "
        f"of {repeats} steps after {warmup} warm-up; peak memory = subprocess peak RSS "
        f"(getrusage ru_maxrss); jax {jax.__version__}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}\n"
    )
    print(
        "| model | params | batch x seq | JAX tok/s | torch tok/s | JAX/torch "
        "| JAX peak RSS MB | torch peak RSS MB | loss JAX / torch |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case in CASES:
        with tempfile.TemporaryDirectory() as hf_dir:
            _write_checkpoint(case, hf_dir)
            spec = {
                "hf_dir": hf_dir,
                "model_overrides": case.model_overrides,
                "batch": case.batch,
                "seq": case.seq,
                "warmup": warmup,
                "repeats": repeats,
            }
            results = {side: _spawn(side, spec) for side in ("jax", "torch")}
        tokens = case.batch * case.seq
        jax_tok_s = tokens / results["jax"]["step_s"]
        torch_tok_s = tokens / results["torch"]["step_s"]
        print(
            f"| {case.name} | {results['jax']['params']:,} | {case.batch} x {case.seq} "
            f"| {jax_tok_s:,.0f} | {torch_tok_s:,.0f} | {jax_tok_s / torch_tok_s:.2f}x "
            f"| {results['jax']['peak_rss_mb']:,.0f} | {results['torch']['peak_rss_mb']:,.0f} "
            f"| {results['jax']['loss']:.4f} / {results['torch']['loss']:.4f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--side", choices=("jax", "torch"), help="internal: run one side")
    parser.add_argument("--spec", help="internal: the case as JSON (with --side)")
    args = parser.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:CPUS])
    if args.side:
        _child(args.side, json.loads(args.spec))
    else:
        _parent(args.warmup, args.repeats)


if __name__ == "__main__":
    main()
