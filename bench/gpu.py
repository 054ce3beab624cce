"""One GPU, one table: the training path of deepswe_jax against PyTorch, ready for a one-shot run.

  python bench/gpu.py [--out=results.json]     # one H100 / H200: Qwen3-1.7B shape, < 8 minutes
  python bench/gpu.py --mini                   # CPU miniature: tiny shapes, the same code paths

Sections, each in its own subprocess of this script with a time limit (a failure or an
out-of-memory costs only its own rows; JAX and PyTorch do not fight over preallocated memory):

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
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

# Run as a script (python bench/gpu.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

PEAK_FLOPS = 989e12  # H100 / H200 SXM dense bf16
EPS_LOW, EPS_HIGH = 0.2, 0.28
MAX_RESPONSE_LEN = 32768  # the constant of DeepSWE's loss
LOGPROB_CHUNK = 1024


@dataclasses.dataclass(frozen=True)
class Scale:
    """The shapes one run measures."""

    model: dict[str, Any]  # HF Qwen3 config.json fields
    train_tokens: tuple[int, ...]  # one row of each length
    attention_tokens: tuple[int, ...]
    xla_attention_max: int  # XLA keeps fp32 [heads, s, s] scores: only up to this length
    decode_batch: int
    decode_prompt: int
    decode_new: int
    numerics_shape: tuple[int, int]  # rows x tokens
    repeats: int
    decode_repeats: int
    budgets_s: dict[str, int]  # per section; the whole run must end within 8 minutes


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
GPU_BUDGETS = dict(train=150, torch=75, attention=75, numerics=50, decode=90)


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
        numerics_shape=(4, 1024),
        repeats=3,
        decode_repeats=1,
        budgets_s=GPU_BUDGETS,
    )


# --- helpers shared by the sections -------------------------------------------------------------


def _emit(**record: Any) -> None:
    """One result line for the parent (stdout, JSON), flushed at once: a section that runs out
    of time still reports what it measured."""
    print(json.dumps(record), flush=True)


def _median_seconds(step: Callable[[], Any], repeats: int) -> float:
    step()  # warm-up: compiles
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _qwen3_config(scale: Scale, **overrides: Any):
    from deepswe_jax.model import Qwen3Config

    return Qwen3Config.from_hf_dict({**scale.model, **overrides})


def _on_gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu"


def _jax_peak_gb() -> float | None:
    import jax

    stats = jax.devices()[0].memory_stats()
    return stats["peak_bytes_in_use"] / 1e9 if stats else None


def _train_arrays(vocab: int, tokens: int) -> dict[str, np.ndarray]:
    """One row of `tokens` random tokens; the loss on its last 7/8 (the response)."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (1, tokens + 1), dtype=np.int32)
    mask = np.zeros((1, tokens), np.float32)
    mask[:, tokens // 8 :] = 1.0
    return {
        "input_ids": ids[:, :-1],
        "targets": ids[:, 1:],
        "positions": np.arange(tokens, dtype=np.int32)[None],
        "segment_ids": np.ones((1, tokens), np.int32),
        "loss_mask": mask,
        "advantages": np.full((1, tokens), 0.5, np.float32),
        "sampler_logprobs": np.zeros((1, tokens), np.float32),
    }


def _torch_device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _torch_model(scale: Scale, dtype, **overrides: Any):
    """A random transformers Qwen3ForCausalLM with sdpa attention, built on the device."""
    import torch
    import transformers

    config = transformers.Qwen3Config(**{**_qwen3_config(scale, **overrides).to_hf_dict()})
    with torch.device(_torch_device()):
        model = transformers.AutoModelForCausalLM.from_config(
            config, attn_implementation="sdpa", dtype=dtype
        )
    return model


def _load_jax_weights(torch_model, jax_model) -> None:
    """Copies the JAX model's weights into the transformers model (DLPack, HF names)."""
    import jax.numpy as jnp
    import torch

    from deepswe_jax.model import hf_tensor_stream

    dtype = next(torch_model.parameters()).dtype
    jax_dtype = {torch.bfloat16: jnp.bfloat16, torch.float32: jnp.float32}[dtype]
    state = {
        name: torch.from_dlpack(array).to(_torch_device())
        for name, array in hf_tensor_stream(jax_model, dtype=jax_dtype, to_host=False)
    }
    missing, unexpected = torch_model.load_state_dict(state, strict=False)
    if unexpected or [name for name in missing if name != "lm_head.weight"]:
        raise RuntimeError(f"weights did not map: missing {missing}, unexpected {unexpected}")
    torch_model.tie_weights()


# --- sections (each runs in its own subprocess) -------------------------------------------------


def section_train(scale: Scale) -> None:
    """deepswe_jax's GRPO++ step; see the module docstring."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from deepswe_jax.model import Qwen3ForCausalLM
    from deepswe_jax.parallel import create_sharded_model, make_mesh
    from deepswe_jax.rl.batch import MicroBatch
    from deepswe_jax.rl.train_step import LossSettings, Trainer, make_optimizer, training_flops

    config = _qwen3_config(scale)
    attention = "cudnn" if _on_gpu() else "xla"

    def make_model() -> Qwen3ForCausalLM:
        return Qwen3ForCausalLM(
            config,
            rngs=nnx.Rngs(0),
            param_dtype=jnp.float32,
            dtype=jnp.bfloat16,
            remat="full",
            attention_impl=attention,
        )

    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    adamw = SimpleNamespace(lr=1e-6, b1=0.9, b2=0.999, weight_decay=0.01, warmup_steps=0)
    trainer = Trainer(
        nnx.eval_shape(make_model),
        make_optimizer(SimpleNamespace(**vars(adamw), grad_clip=1.0)),
        LossSettings(max_response_len=MAX_RESPONSE_LEN, logprob_chunk=LOGPROB_CHUNK),
        mesh=mesh,
        packed_rows=False,
    )
    state = trainer.init_state(nnx.state(create_sharded_model(make_model, mesh), nnx.Param))
    device = jax.devices()[0].device_kind
    _emit(section="train", params=config.num_parameters, attention=attention, device=device)
    states = [state]  # each step donates the state and returns the next one
    for tokens in scale.train_tokens:
        micro_batch = MicroBatch(**_train_arrays(config.vocab_size, tokens))
        seconds = _median_seconds(
            functools.partial(_jax_grpo_step, trainer, states, micro_batch), scale.repeats
        )
        _emit(
            section="train",
            tokens=tokens,
            tokens_per_s=tokens / seconds,
            mfu=training_flops(config, [micro_batch]) / (seconds * PEAK_FLOPS),
            peak_gb=_jax_peak_gb(),
        )


def _jax_grpo_step(trainer, states: list, micro_batch) -> None:
    states[0], _ = trainer.step(states[0], [micro_batch])


def section_torch(scale: Scale) -> None:
    """The same step in transformers + torch.optim.AdamW; see the module docstring."""
    import torch

    from deepswe_jax.rl.batch import MicroBatch
    from deepswe_jax.rl.train_step import training_flops

    config = _qwen3_config(scale)
    device = _torch_device()
    model = _torch_model(scale, torch.float32)
    model.train()
    enable = getattr(model, "activation_checkpointing_enable", None)
    (enable or model.gradient_checkpointing_enable)()
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-6, betas=(0.9, 0.999), weight_decay=0.01, fused=fused
    )
    _emit(section="torch", params=sum(p.numel() for p in model.parameters()))
    for tokens in scale.train_tokens:
        arrays = _train_arrays(config.vocab_size, tokens)
        batch = {name: torch.from_numpy(array).to(device) for name, array in arrays.items()}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        seconds = _median_seconds(
            functools.partial(_torch_grpo_step, model, optimizer, batch), scale.repeats
        )
        peak = torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else None
        flops = training_flops(config, [MicroBatch(**arrays)])
        _emit(
            section="torch",
            tokens=tokens,
            tokens_per_s=tokens / seconds,
            mfu=flops / (seconds * PEAK_FLOPS),
            peak_gb=peak,
        )


def _torch_grpo_step(model, optimizer, batch: dict[str, Any]) -> None:
    """One GRPO++ step as a PyTorch user writes it: bf16 autocast, log-probs in checkpointed
    chunks (no [tokens, vocab] fp32 logits kept), PPO clip, token sum / L, mean over rows."""
    import torch
    from torch.utils.checkpoint import checkpoint

    unembed = model.get_output_embeddings()

    def chunk_logprobs(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = unembed(hidden).float()
        return torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]

    device = batch["input_ids"].device
    tokens = batch["input_ids"].shape[1]
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        hidden = model.model(
            input_ids=batch["input_ids"], position_ids=batch["positions"], use_cache=False
        ).last_hidden_state
        chunks = [
            checkpoint(
                chunk_logprobs,
                hidden[:, start : start + LOGPROB_CHUNK],
                batch["targets"][:, start : start + LOGPROB_CHUNK].long(),
                use_reentrant=False,
            )
            for start in range(0, tokens, LOGPROB_CHUNK)
        ]
    logp = torch.cat(chunks, dim=1)
    ratio = torch.exp(logp - logp.detach())
    advantages = batch["advantages"]
    clipped = torch.clamp(ratio, 1.0 - EPS_LOW, 1.0 + EPS_HIGH)
    token_loss = torch.maximum(-advantages * ratio, -advantages * clipped)
    loss = ((token_loss * batch["loss_mask"]).sum(-1) / MAX_RESPONSE_LEN).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()


def section_attention(scale: Scale) -> None:
    """cuDNN and Pallas flash attention against XLA, forward + backward."""
    import jax
    import jax.numpy as jnp

    config = _qwen3_config(scale)
    heads, kv_heads, head_dim = (
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
    )
    impls = ["cudnn", "pallas", "xla"] if _on_gpu() else ["pallas", "xla"]
    for tokens in scale.attention_tokens:
        keys = jax.random.split(jax.random.key(tokens), 4)
        q = jax.random.normal(keys[0], (1, tokens, heads, head_dim), jnp.bfloat16)
        k = jax.random.normal(keys[1], (1, tokens, kv_heads, head_dim), jnp.bfloat16)
        v = jax.random.normal(keys[2], (1, tokens, kv_heads, head_dim), jnp.bfloat16)
        weights = jax.random.normal(keys[3], q.shape, jnp.bfloat16)
        segment_ids = jnp.ones((1, tokens), jnp.int32)
        outputs = {}
        for impl in impls:
            if impl == "xla" and tokens > scale.xla_attention_max:
                continue
            seconds, outputs[impl] = _time_attention(impl, (q, k, v, segment_ids, weights), scale)
            _emit(section="attention", tokens=tokens, impl=impl, ms=seconds * 1e3)
        if "xla" in outputs:
            for impl in outputs:
                difference = float(np.abs(outputs[impl] - outputs["xla"]).max())
                _emit(section="attention", tokens=tokens, impl=impl, max_diff_vs_xla=difference)


def _time_attention(impl: str, inputs: tuple, scale: Scale) -> tuple[float, np.ndarray]:
    """Median seconds of one jitted forward + backward of `impl`, and its output [b, s, h, d]."""
    import jax
    import jax.numpy as jnp

    from deepswe_jax.model.attention import causal_attention

    q, k, v, segment_ids, weights = inputs

    def loss(q, k, v):
        out = causal_attention(q, k, v, segment_ids, impl=impl, packed=False)
        return jnp.sum(out.astype(jnp.float32) * weights), out

    fwd_bwd = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))
    seconds = _median_seconds(lambda: jax.block_until_ready(fwd_bwd(q, k, v)), scale.repeats)
    return seconds, np.asarray(fwd_bwd(q, k, v)[0][1].astype(jnp.float32))


def section_decode(scale: Scale) -> None:
    """JaxSampler vs transformers generate, greedy, same bf16 weights."""
    import asyncio

    import jax
    import jax.numpy as jnp
    import torch
    from flax import nnx

    from deepswe_jax.model import Qwen3ForCausalLM
    from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams

    config = _qwen3_config(scale)
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16, dtype=jnp.bfloat16)
    batch, prompt_len, new = scale.decode_batch, scale.decode_prompt, scale.decode_new
    prompts = np.random.default_rng(1).integers(0, config.vocab_size, (batch, prompt_len))
    sampler = JaxSampler(
        model, max_batch=batch, max_cache_len=prompt_len + new, mesh=None, min_prefill_len=16
    )
    params = SamplingParams(temperature=0.0, max_new_tokens=new)
    requests = [GenerateRequest(tuple(int(t) for t in row), params) for row in prompts]
    completions = []

    def jax_decode() -> None:
        completions[:] = asyncio.run(sampler.generate(requests))

    jax_seconds = _median_seconds(jax_decode, scale.decode_repeats)
    jax_tokens = np.array([c.token_ids for c in completions])
    sampler.close()
    _emit(section="decode", side="jax", tokens_per_s=batch * new / jax_seconds)

    torch_model = _torch_model(scale, torch.bfloat16)
    _load_jax_weights(torch_model, model)
    torch_model.eval()
    device = _torch_device()
    torch_prompts = torch.from_numpy(prompts).to(device)
    generated = []

    def torch_decode() -> None:
        with torch.inference_mode():
            out = torch_model.generate(
                torch_prompts,
                attention_mask=torch.ones_like(torch_prompts),
                do_sample=False,
                max_new_tokens=new,
                min_new_tokens=new,
                pad_token_id=0,
            )
        generated[:] = [out[:, prompt_len:].cpu().numpy()]

    torch_seconds = _median_seconds(torch_decode, scale.decode_repeats)
    same = (jax_tokens == generated[0]).all(axis=1).mean()
    _emit(
        section="decode",
        side="torch",
        tokens_per_s=batch * new / torch_seconds,
        same_greedy_rows=float(same),
        jax_backend=jax.default_backend(),
    )


def section_numerics(scale: Scale) -> None:
    """bf16 against bf16 (JAX vs PyTorch) and bf16 against float32 (the Trainer's log-probs)."""
    import jax
    import jax.numpy as jnp
    import optax
    import torch
    from flax import nnx

    from deepswe_jax.model import Qwen3ForCausalLM
    from deepswe_jax.parallel import make_mesh
    from deepswe_jax.rl.batch import MicroBatch
    from deepswe_jax.rl.train_step import LossSettings, Trainer

    config = _qwen3_config(scale, initializer_range=0.05)
    rows, tokens = scale.numerics_shape
    rng = np.random.default_rng(2)
    ids = rng.integers(0, config.vocab_size, (rows, tokens + 1), dtype=np.int32)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])

    def trainer_logprobs(dtype) -> tuple[np.ndarray, Qwen3ForCausalLM]:
        # bf16 as training runs it (cuDNN on GPU); the float32 reference through XLA.
        attention = "cudnn" if _on_gpu() and dtype == jnp.bfloat16 else "xla"
        model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), dtype=dtype, attention_impl=attention)
        trainer = Trainer(
            model, optax.sgd(0.0), LossSettings(), mesh=mesh, packed_rows=False
        )  # fmt: skip
        arrays = {**_train_arrays(config.vocab_size, tokens), "input_ids": ids[:, :-1]}
        arrays = {name: np.broadcast_to(a, (rows, tokens)).copy() for name, a in arrays.items()}
        arrays["targets"] = ids[:, 1:]
        logprobs = trainer.logprobs(nnx.state(model, nnx.Param), MicroBatch(**arrays))
        return np.asarray(logprobs), model

    bf16, model = trainer_logprobs(jnp.bfloat16)
    fp32, _ = trainer_logprobs(jnp.float32)
    difference = np.abs(bf16 - fp32)
    _emit(
        section="numerics",
        logprob_abs_diff_mean=float(difference.mean()),
        logprob_abs_diff_max=float(difference.max()),
    )

    jax_logits = jax.jit(lambda m, x: m(x))(model, jnp.asarray(ids[:, :-1]))  # bf16 compute
    torch_model = _torch_model(scale, torch.bfloat16, initializer_range=0.05)
    _load_jax_weights(torch_model, model)
    torch_model.eval()
    with torch.inference_mode():
        torch_logits = torch_model(torch.from_numpy(ids[:, :-1]).to(_torch_device())).logits
    p_jax = torch.log_softmax(torch.from_dlpack(jax_logits).to(_torch_device()).float(), -1)
    p_torch = torch.log_softmax(torch_logits.float(), -1)
    kl = (p_jax.exp() * (p_jax - p_torch)).sum(-1)  # KL(JAX || torch) per position
    entropy = -(p_jax.exp() * p_jax).sum(-1)
    _emit(
        section="numerics",
        kl_jax_torch_mean=float(kl.mean()),
        kl_jax_torch_max=float(kl.max()),
        entropy_mean=float(entropy.mean()),
    )


SECTIONS: dict[str, Callable[[Scale], None]] = {
    "train": section_train,
    "torch": section_torch,
    "attention": section_attention,
    "numerics": section_numerics,
    "decode": section_decode,
}


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
        f"{'tiny' if args.mini else args.model} shape ({_qwen3_config(scale).num_parameters:,} "
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
