"""One GPU, one table: the training path of deepswe_jax against PyTorch, ready for a one-shot run.

  python bench/gpu.py [--out=results.json]     # one H100 / H200: Qwen3-1.7B shape, < 8 minutes
  python bench/gpu.py --mini                   # CPU miniature: tiny shapes, the same code paths

Sections (bench/gpu_sections.py), each in its own subprocess of this script with a time limit
(a failure or an out-of-memory costs only its own rows; JAX and PyTorch do not fight over
preallocated memory):

  train      GRPO++ train step (forward, backward, AdamW) of rl.train_step.Trainer on Qwen3-1.7B
             (configs/qwen3_1p7b_1gpu.py's model; --model=4b for the next size, which fits an
             H200 but not 80 GB): fp32 master weights and AdamW moments, bf16 compute, full
             remat, cuDNN attention with sequence lengths, one row of 8,192 and of 32,768 tokens
             (loss on the last 7/8). Tokens/s, MFU = model FLOPs (Trainer's training_flops) /
             (step time x 989 TFLOP/s dense bf16), peak device memory.
  torch      the same step in transformers' Qwen3ForCausalLM (sdpa attention, fp32 weights under
             bf16 autocast, gradient checkpointing, the log-probs in checkpointed 1,024-token
             chunks) with the GRPO++ loss written plainly and torch.optim.AdamW (fused).
  attention  causal attention forward + backward at the model's heads: cuDNN (sequence
             lengths) and the Pallas flash kernel (segment ids) against XLA, milliseconds and
             the largest difference from XLA's output.
  decode     JaxSampler greedy decode at batch 64 (prompt 128 + 256 new tokens, bf16 weights)
             against transformers' generate on the same weights: new tokens/s.
  paged      the paged KV cache's decode attention (bench/gpu_paged.py): the Pallas kernel
             against the XLA gather of every row's pages, 64 rows of 4K-32K tokens, one layer;
             then JaxSampler on the paged cache (kernel) against the dense cache, the decode
             section's requests.
  numerics   same weights and tokens (random init with initializer_range 0.05, so the
             next-token distributions are peaked): mean KL between JAX bf16 and PyTorch bf16
             next-token distributions, and the GRPO++ log-probs of the Trainer in bf16 against
             float32 (mean and max absolute difference).

Needs only jax, flax, optax, numpy, safetensors, torch and transformers: no ml_collections,
docker or vLLM (the GPU machine has none), so the package may be installed with --no-deps.
Steps are timed as the median of --repeats after one warm-up that compiles. --out writes every
figure as JSON. tests/bench/test_gpu_bench.py runs --mini with ml_collections and docker made
unimportable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

# Run as a script (python bench/gpu.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import gpu_sections  # noqa: E402
from bench.gpu_paged import section_paged  # noqa: E402
from bench.gpu_sections import Scale, qwen3_config  # noqa: E402

SECTIONS = {**gpu_sections.SECTIONS, "paged": section_paged}

QWEN3_1P7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    tie_word_embeddings=True,
)
QWEN3_4B = dict(
    QWEN3_1P7B, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
    num_attention_heads=32,
)  # fmt: skip
TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    tie_word_embeddings=True,
)
# Seconds per section on one H200 (compiles included); with the parent's start, < 8 minutes.
GPU_BUDGETS = dict(train=140, torch=70, attention=65, numerics=45, decode=80, paged=60)


def scale_for(model: str, mini: bool) -> Scale:
    if mini:
        return Scale(
            model=TINY,
            train_tokens=(128,),
            attention_tokens=(128,),
            xla_attention_max=128,
            decode_batch=4,
            decode_prompt=8,
            decode_new=4,
            paged_max_len=256,
            numerics_shape=(2, 64),
            repeats=1,
            decode_repeats=1,
            budgets_s={name: 300 for name in GPU_BUDGETS},
        )
    return Scale(
        model={"1.7b": QWEN3_1P7B, "4b": QWEN3_4B}[model],
        train_tokens=(8192, 32768),
        attention_tokens=(8192, 32768),
        xla_attention_max=8192,
        decode_batch=64,
        decode_prompt=128,
        decode_new=256,
        paged_max_len=32768,
        numerics_shape=(4, 1024),
        repeats=3,
        decode_repeats=1,
        budgets_s=GPU_BUDGETS,
    )


# --- the parent: run the sections, print the table ----------------------------------------------


def run_section(name: str, args: argparse.Namespace, timeout_s: float) -> dict[str, Any]:
    """Runs one section in a subprocess; its records, and its error or timeout if any."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        f"--section={name}",
        f"--model={args.model}",
    ]
    if args.mini:
        command.append("--mini")
    environment = dict(os.environ)
    if name in ("decode", "numerics"):  # JAX and torch share the GPU in one process
        environment["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    started = time.perf_counter()
    error = None
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=environment
        )
        stdout, stderr = completed.stdout, completed.stderr
        if completed.returncode:
            error = f"exit {completed.returncode}: " + (stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout
        stderr = expired.stderr.decode() if isinstance(expired.stderr, bytes) else expired.stderr
        error = f"timed out after {timeout_s:.0f} s"
    records = [json.loads(line) for line in (stdout or "").splitlines() if line.startswith("{")]
    seconds = time.perf_counter() - started
    print(
        f"[gpu bench] {name}: {len(records)} records in {seconds:.0f} s"
        + (f"; {error}" if error else ""),
        file=sys.stderr,
        flush=True,
    )
    if error and stderr:
        print(stderr[-3000:], file=sys.stderr, flush=True)
    return {"records": records, "error": error, "seconds": seconds}


def _find(records: list[dict], **match: Any) -> dict:
    found = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    return {key: value for record in found for key, value in record.items()}


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(results: dict[str, dict[str, Any]], scale: Scale) -> str:
    """The one table: rows of (measure, JAX, PyTorch, JAX/PyTorch, note)."""
    rows = []
    train, torch_ = results["train"]["records"], results["torch"]["records"]
    for tokens in scale.train_tokens:
        ours, theirs = _find(train, tokens=tokens), _find(torch_, tokens=tokens)
        ratio = None
        if ours.get("tokens_per_s") and theirs.get("tokens_per_s"):
            ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
        rows.append(
            (
                f"train step {tokens:,} tok: tokens/s",
                _fmt(ours.get("tokens_per_s"), ",.0f"),
                _fmt(theirs.get("tokens_per_s"), ",.0f"),
                _fmt(ratio, ".2f") + ("x" if ratio else ""),
                "goal >= 1.3x" if tokens == scale.train_tokens[0] else "",
            )
        )
        rows.append(
            (
                f"train step {tokens:,} tok: MFU",
                _fmt(ours.get("mfu"), ".1%"),
                _fmt(theirs.get("mfu"), ".1%"),
                "",
                "989 TFLOP/s bf16" + ("; goal >= 50%" if tokens == scale.train_tokens[0] else ""),
            )
        )
        rows.append(
            (
                f"train step {tokens:,} tok: peak GB",
                _fmt(ours.get("peak_gb"), ".1f"),
                _fmt(theirs.get("peak_gb"), ".1f"),
                "",
                "device memory",
            )
        )
    attention = results["attention"]["records"]
    for tokens in scale.attention_tokens:
        xla = _find(attention, tokens=tokens, impl="xla").get("ms")
        for impl in ("cudnn", "pallas", "xla"):
            found = _find(attention, tokens=tokens, impl=impl)
            if not found:
                continue
            speedup = f"{xla / found['ms']:.2f}x vs XLA" if xla and "ms" in found else ""
            diff = found.get("max_diff_vs_xla")
            rows.append(
                (
                    f"attention fwd+bwd {tokens:,} tok: {impl} ms",
                    _fmt(found.get("ms"), ".2f"),
                    "",
                    speedup,
                    "" if diff is None else f"max abs diff from XLA {diff:.3g}",
                )
            )
    decode = results["decode"]["records"]
    ours, theirs = _find(decode, side="jax"), _find(decode, side="torch")
    ratio = None
    if ours.get("tokens_per_s") and theirs.get("tokens_per_s"):
        ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
    rows.append(
        (
            f"decode batch {scale.decode_batch}: new tokens/s",
            _fmt(ours.get("tokens_per_s"), ",.0f"),
            _fmt(theirs.get("tokens_per_s"), ",.0f"),
            _fmt(ratio, ".2f") + ("x" if ratio else ""),
            "same greedy rows " + _fmt(theirs.get("same_greedy_rows"), ".0%"),
        )
    )
    rows += _paged_rows(results["paged"]["records"], scale)
    numerics = _find(results["numerics"]["records"])
    rows.append(
        (
            "bf16: KL(JAX, torch) mean / max",
            _fmt(numerics.get("kl_jax_torch_mean"), ".2e"),
            _fmt(numerics.get("kl_jax_torch_max"), ".2e"),
            "",
            "entropy " + _fmt(numerics.get("entropy_mean"), ".2f") + " nats",
        )
    )
    rows.append(
        (
            "bf16 vs fp32 log-probs: mean / max abs diff",
            _fmt(numerics.get("logprob_abs_diff_mean"), ".2e"),
            _fmt(numerics.get("logprob_abs_diff_max"), ".2e"),
            "",
            "Trainer.logprobs",
        )
    )
    header = ("measure", "JAX", "PyTorch", "JAX/PyTorch", "note")
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    for name, result in results.items():
        if result["error"]:
            lines.append(f"\n{name}: {result['error']}")
    return "\n".join(lines)


def _paged_rows(records: list[dict[str, Any]], scale: Scale) -> list[tuple[str, ...]]:
    """The paged section's rows: the kernel against the XLA gather, the paged sampler against
    the dense one (both JAX: the PyTorch column holds the XLA / dense figure)."""
    kernel, gather = (_find(records, part="kernel", attention=a) for a in ("pallas", "xla"))
    paged, dense = (_find(records, part="sampler", cache=c) for c in ("paged", "dense"))
    rows = []
    for label, ours, theirs, key, unit, note in (
        (
            f"paged attention, {scale.decode_batch} rows to {scale.paged_max_len:,}: ms",
            kernel, gather, "ms", ".2f",
            "Pallas kernel vs XLA gather; max abs diff "
            + _fmt(kernel.get("max_diff_vs_xla"), ".3g"),
        ),
        (
            f"paged sampler batch {scale.decode_batch}: new tokens/s",
            paged, dense, "tokens_per_s", ",.0f",
            "paged (kernel) vs dense cache; same greedy rows "
            + _fmt(paged.get("same_greedy_rows"), ".0%"),
        ),
    ):  # fmt: skip
        a, b = ours.get(key), theirs.get(key)
        ratio = (b / a if key == "ms" else a / b) if a and b else None  # speedup of ours
        rows.append(
            (label, _fmt(a, unit), _fmt(b, unit), _fmt(ratio, ".2f") + "x" * bool(ratio), note)
        )
    return rows


def parent(args: argparse.Namespace) -> int:
    """Runs every section in turn within --total_s, prints the table; exit 1 if one failed."""
    from importlib.metadata import version

    # No JAX backend here: it would take the GPU memory the sections need.
    scale = scale_for(args.model, args.mini)
    deadline = time.perf_counter() + args.total_s
    results = {}
    for name in SECTIONS:
        left = deadline - time.perf_counter()
        results[name] = run_section(name, args, max(min(scale.budgets_s[name], left), 1))
    device = _find(results["train"]["records"]).get("device", "?")
    versions = ", ".join(f"{name} {version(name)}" for name in ("jax", "torch", "transformers"))
    header = (
        f"bench/gpu.py on {device}{' (miniature)' if args.mini else ''}: Qwen3 "
        f"{'tiny' if args.mini else args.model} shape ({qwen3_config(scale).num_parameters:,} "
        f"params); {versions}; median of {scale.repeats} after a compiling warm-up"
    )
    print(header + "\n\n" + table(results, scale), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "results": results}, f, indent=2)
    return 1 if any(result["error"] for result in results.values()) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mini", action="store_true", help="tiny shapes on CPU, seconds")
    parser.add_argument("--model", choices=("1.7b", "4b"), default="1.7b")
    parser.add_argument("--out", help="write every figure here as JSON")
    parser.add_argument("--total_s", type=float, default=460.0, help="the whole run's budget")
    parser.add_argument("--section", choices=tuple(SECTIONS), help="internal: run one section")
    args = parser.parse_args()
    if args.mini:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.section:
        SECTIONS[args.section](scale_for(args.model, args.mini))
        return
    sys.exit(parent(args))


if __name__ == "__main__":
    main()
