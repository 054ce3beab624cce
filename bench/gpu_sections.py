"""The measurements of bench/gpu.py; each section runs in its own subprocess of that script.

`SECTIONS[name](scale)` prints its results as JSON lines on stdout (`_emit`), one per figure as
soon as it is measured, so a section stopped at its time limit still reports what it had.
Third-party imports happen inside the sections: the parent imports this module without starting
JAX on the GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

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
    paged_max_len: int  # the paged section's longest row
    numerics_shape: tuple[int, int]  # rows x tokens
    repeats: int
    decode_repeats: int
    budgets_s: dict[str, int]  # per section; the whole run must end within 8 minutes


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


def qwen3_config(scale: Scale, **overrides: Any):
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

    config = transformers.Qwen3Config(**{**qwen3_config(scale, **overrides).to_hf_dict()})
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
    from deepswe_jax.rl.objectives import LossSettings
    from deepswe_jax.rl.optimizer import OptimizerSettings, make_optimizer
    from deepswe_jax.rl.train_step import Trainer, training_flops

    config = qwen3_config(scale)
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
    adamw = OptimizerSettings(lr=1e-6, b1=0.9, b2=0.999, weight_decay=0.01, grad_clip=1.0)
    trainer = Trainer(
        nnx.eval_shape(make_model),
        make_optimizer(adamw),
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

    config = qwen3_config(scale)
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

    config = qwen3_config(scale)
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

    config = qwen3_config(scale)
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
    from deepswe_jax.rl.objectives import LossSettings
    from deepswe_jax.rl.train_step import Trainer

    config = qwen3_config(scale, initializer_range=0.05)
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
