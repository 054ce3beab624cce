"""GRPO train step (forward, backward, AdamW update): deepswe_jax's Trainer vs google-tunix's.

  PYTHONPATH=$PWD JAX_PLATFORMS=cpu python bench/tunix_step.py [--repeats=3] [--warmup=2]
      [--cases=tiny-4x512,...] [--tunix-python=/work/venv-tunix/bin/python]

tunix runs in its own venv with the same jax / flax / optax (google-tunix from PyPI):

  python3 -m venv /work/venv-tunix
  /work/venv-tunix/bin/pip install "jax[cpu]==0.10.2" flax==0.12.8 optax==0.2.8 google-tunix

For each case the parent writes one random transformers Qwen3ForCausalLM (bench/train_step.py's
_write_checkpoint) and runs each side in its own subprocess (this file with --side=ours|tunix),
one after the other, pinned to the same 2 CPUs:

  ours:  deepswe_jax.model.load_hf_checkpoint + experiment.make_trainer (configs/tiny.py with the
         case's model dims; loss_mode seq_sum_const with max_response_len = seq / 2),
         Trainer.step on one MicroBatch (GRPO++ loss, clip_by_global_norm + optax AdamW).
  tunix: tunix.models.qwen3.params.create_model_from_safe_tensors on the same checkpoint,
         tunix.rl.algo_core.grpo_loss_fn (the loss GRPOLearner registers as "grpo") with a
         GRPOConfig (beta 0: no reference model / KL, epsilon 0.2, epsilon_high 0.28,
         loss_agg_mode "sequence-mean-token-scale", whose default norm is the completion
         length = seq / 2, i.e. our seq_sum_const), trained by tunix.sft.peft_trainer.PeftTrainer's
         own jitted train step (jit_train_and_eval_step) with the same optax chain.

The batch is the same on both sides: batch x seq random tokens (never the pad id), the loss on
the second half (tunix: prompt = the first seq / 2 tokens, completion = the rest; ours: the
same targets through loss_mask), random per-row advantages, old log-probs = current (one update
per batch). Every row has exactly seq / 2 loss tokens, so tunix's token-mean,
sequence-mean-token-mean and sequence-mean-token-scale and our seq_sum_const / token_mean all
give the same loss here; the agreement check does not depend on the aggregation choice. With
old log-probs = current the ratio is 1 and the loss is -mean(advantages) for any weights, so the
loss checks the aggregation only; the gradient is what checks the model and the loss's backward.

Printed per case: step time (median of --repeats steps after --warmup steps; the warm-up
includes compilation, and tunix's PeftTrainer step took ~12 s on its second call in our runs,
compiling again, so the warm-up is at least 2 steps) as tokens/s = batch * seq / step time, the
ours/tunix ratio, the first step's loss on both sides, the global gradient norm, and the max
relative difference max|g_ours - g_tunix| / max|g_tunix| of the (pre-update) gradient of named
parameters (the embedding, layer 0's q_proj, the last layer's down_proj, the final norm),
computed once before the timed steps.
"""

from __future__ import annotations

import argparse
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
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUNIX_PYTHON = "/work/venv-tunix/bin/python"
# name -> (model, batch, seq): 'tiny' is configs/tiny.py's model, '100M' bench/train_step.py's
# MODEL_100M (bench/model_throughput.py's dims; imported by the parent only, since the tunix
# side runs without the repository on its path).
CASES = {
    "tiny-4x512": ("tiny", 4, 512),
    "tiny-1x2048": ("tiny", 1, 2048),
    "100M-4x512": ("100M", 4, 512),
    "100M-1x2048": ("100M", 1, 2048),
}
# Gradients compared: (label, our nnx path, tunix nnx path); our per-layer params are stacked
# on a leading layer axis, tunix keeps a list of layers. Both store q_proj as [embed, heads,
# head_dim] and down_proj as [mlp, embed].
COMPARED = ("embedding", "layer0 q_proj", "last layer down_proj", "final norm")


def _batch(vocab_size: int, batch: int, seq: int) -> dict[str, np.ndarray]:
    """Tokens [batch, seq + 1] below vocab_size - 1 (the pad id tunix masks), per-row advantages."""
    rng = np.random.default_rng(0)
    return {
        "tokens": rng.integers(0, vocab_size - 1, (batch, seq + 1), dtype=np.int32),
        "advantages": rng.standard_normal(batch).astype(np.float32),
    }


def _time_steps(step, warmup: int, repeats: int) -> tuple[float, float, list[float]]:
    """Median seconds of `repeats` step() calls after `warmup`; first and last losses."""
    losses = [step() for _ in range(warmup)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    return statistics.median(times), losses[0], times


def _run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    import jax
    from flax import nnx

    from bench.train_step import _config
    from deepswe_jax.experiment import make_trainer, sharding_rules
    from deepswe_jax.model import load_hf_checkpoint
    from deepswe_jax.parallel import make_mesh
    from deepswe_jax.rl.batch import MicroBatch

    batch, seq = spec["batch"], spec["seq"]
    config = _config(spec["model_overrides"], seq)
    for key, value in spec.get("ours_overrides", {}).items():
        section, _, name = key.rpartition(".")
        (config[section] if section else config)[name] = value
    assert config.rl.loss_mode == "seq_sum_const" and config.agent.max_context == seq // 2
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    trainer = make_trainer(config, mesh, sharding_rules(config))
    model = load_hf_checkpoint(spec["hf_dir"], mesh=mesh, rules=config.sharding_rules)
    params = nnx.split(model, nnx.Param)[1]
    num_params = sum(x.size for x in jax.tree.leaves(params))
    del model
    arrays = _batch(config.model.vocab_size, batch, seq)
    tokens = arrays["tokens"]
    loss_mask = np.zeros((batch, seq), np.float32)
    # Targets tokens[:, seq/2 : seq], scored at positions seq/2 - 1 .. seq - 2 (tunix's completion).
    loss_mask[:, seq // 2 - 1 : seq - 1] = 1.0
    micro_batch = MicroBatch(
        input_ids=tokens[:, :-1],
        targets=tokens[:, 1:],
        positions=np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy(),
        segment_ids=np.ones((batch, seq), np.int32),
        loss_mask=loss_mask,
        advantages=np.repeat(arrays["advantages"][:, None], seq, axis=1),
        sampler_logprobs=np.zeros((batch, seq), np.float32),
    )
    state = trainer.init_state(params)

    grads, sums = trainer.accumulate_gradients(state.params, [micro_batch])
    grads = nnx.to_pure_dict(grads)
    denominator = float(sums["denominator"])
    layers = grads["layers"]
    named = {
        "embedding": grads["embed_tokens"],
        "layer0 q_proj": layers["q_proj"][0],
        "last layer down_proj": layers["down_proj"][-1],
        "final norm": grads["norm"],
    }
    np.savez(
        os.path.join(spec["out_dir"], "ours.npz"),
        **{k: np.asarray(v) / denominator for k, v in named.items()},
    )

    def step() -> float:
        nonlocal state
        state, metrics = trainer.step(state, [micro_batch])
        step.grad_norm = step.grad_norm or metrics["grad_norm"]
        return metrics["loss"]

    step.grad_norm = None
    seconds, first_loss, times = _time_steps(step, spec["warmup"], spec["repeats"])
    return {
        "params": num_params,
        "step_s": seconds,
        "times": times,
        "loss": first_loss,
        "grad_norm": step.grad_norm,
    }


def tunix_qwen3(hf_dir: str):
    """tunix's Qwen3 (float32, no mesh) of the transformers checkpoint in `hf_dir`, and its
    tunix.models.qwen3.model.ModelConfig. Runs in the tunix venv (bench/tunix_sampler.py too)."""
    import jax.numpy as jnp
    from tunix.models.qwen3 import model as qwen3_model
    from tunix.models.qwen3 import params as qwen3_params

    with open(os.path.join(hf_dir, "config.json")) as f:
        hf = json.load(f)
    rope = hf.get("rope_parameters") or {}
    rope_theta = rope.get("rope_theta", hf.get("rope_theta"))
    # tunix's Qwen3 hard-codes RoPE theta 1e6 (apply_rope's default); configs/tiny.py uses it.
    assert rope_theta == 1_000_000, rope_theta
    model_config = qwen3_model.ModelConfig(
        num_layers=hf["num_hidden_layers"],
        vocab_size=hf["vocab_size"],
        embed_dim=hf["hidden_size"],
        hidden_dim=hf["intermediate_size"],
        num_heads=hf["num_attention_heads"],
        head_dim=hf["head_dim"],
        num_kv_heads=hf["num_key_value_heads"],
        rope_theta=int(rope_theta),
        norm_eps=hf["rms_norm_eps"],
        use_tied_embedding=hf["tie_word_embeddings"],
    )
    model = qwen3_params.create_model_from_safe_tensors(
        hf_dir, model_config, mesh=None, dtype=jnp.float32
    )
    return model, model_config


def _run_tunix(spec: dict[str, Any]) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx
    from tunix.rl import algo_core, common
    from tunix.rl.grpo import grpo_learner
    from tunix.sft import peft_trainer

    batch, seq = spec["batch"], spec["seq"]
    model, model_config = tunix_qwen3(spec["hf_dir"])
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))

    hp = spec["hyper"]
    algo_config = grpo_learner.GRPOConfig(
        num_generations=2,
        beta=0.0,
        epsilon=hp["eps_low"],
        loss_agg_mode="sequence-mean-token-scale",
    )
    # grpo_loss_fn reads epsilon_high (DAPO's clip-high) and the learner-set temperature.
    algo_config.epsilon_high = hp["eps_high"]
    algo_config.temperature = 1.0
    pad_id = model_config.vocab_size - 1
    eos_id = -1  # unused by the loss; no token is -1

    def loss_fn(model, train_example):
        return algo_core.grpo_loss_fn(
            model, train_example, algo_config=algo_config, pad_id=pad_id, eos_id=eos_id
        )

    arrays = _batch(model_config.vocab_size, batch, seq)
    input_ids = arrays["tokens"][:, :-1]
    half = seq // 2
    example = common.TrainExample(
        prompt_ids=jnp.asarray(input_ids[:, :half]),
        prompt_mask=jnp.ones((batch, half), jnp.int32),
        completion_ids=jnp.asarray(input_ids[:, half:]),
        completion_mask=jnp.ones((batch, seq - half), jnp.int32),
        advantages=jnp.asarray(arrays["advantages"]),
        ref_per_token_logps=None,
        old_per_token_logps=None,
    )

    (first_loss, _), grads = nnx.jit(nnx.value_and_grad(loss_fn, has_aux=True))(model, example)
    grads = nnx.to_pure_dict(grads)
    named = {
        "embedding": grads["embedder"]["input_embedding"],
        "layer0 q_proj": grads["layers"][0]["attn"]["q_proj"]["w"],
        "last layer down_proj": grads["layers"][model_config.num_layers - 1]["mlp"]["down_proj"][
            "kernel"
        ],
        "final norm": grads["final_norm"]["w"],
    }
    np.savez(
        os.path.join(spec["out_dir"], "tunix.npz"),
        **{k: np.asarray(v) for k, v in named.items()},
    )
    del grads

    adamw = optax.adamw(hp["lr"], b1=hp["b1"], b2=hp["b2"], weight_decay=hp["weight_decay"])
    optimizer = optax.chain(optax.clip_by_global_norm(hp["grad_clip"]), adamw)
    trainer = peft_trainer.PeftTrainer(
        model, optimizer, peft_trainer.TrainingConfig(eval_every_n_steps=10**9)
    )
    trainer.with_loss_fn(loss_fn, has_aux=True)
    trainer.with_gen_model_input_fn(lambda x: {"train_example": x})
    train_step, _ = trainer.jit_train_and_eval_step()

    def step() -> float:
        loss, _, grad_norm = train_step(example)
        step.grad_norm = step.grad_norm or float(grad_norm)
        return float(loss)

    step.grad_norm = None
    seconds, step_loss, times = _time_steps(step, spec["warmup"], spec["repeats"])
    return {
        "params": num_params,
        "step_s": seconds,
        "times": times,
        "loss": float(first_loss),
        "first_step_loss": step_loss,
        "grad_norm": step.grad_norm,
    }


def _child(side: str, spec: dict[str, Any]) -> None:
    """Runs one side and prints its figures, with the process's peak RSS, as one JSON line."""
    result = _run_ours(spec) if side == "ours" else _run_tunix(spec)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    import jax

    result["versions"] = {"jax": jax.__version__}
    if side == "tunix":
        from importlib import metadata

        for package in ("google-tunix", "flax", "optax"):
            result["versions"][package] = metadata.version(package)
    print(json.dumps(result))


def _spawn(
    side: str, python: str, spec: dict[str, Any], script: str = os.path.abspath(__file__)
) -> dict[str, Any]:
    """Runs `script --side=side --spec=...` with `python` (the repository on the path of ours
    only); returns the JSON of its last stdout line."""
    command = [python, script, f"--side={side}", f"--spec={json.dumps(spec)}"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if side == "ours":
        env["PYTHONPATH"] = REPO
    else:
        env.pop("PYTHONPATH", None)
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, cwd=REPO
    )
    if completed.returncode:
        raise RuntimeError(
            f"the {side} subprocess failed (exit {completed.returncode}); its stderr:\n"
            f"{completed.stderr[-4000:]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _hyper() -> dict[str, float]:
    from bench.train_step import _config

    rl = _config({}, 512).rl
    return {
        name: float(rl[name])
        for name in ("lr", "b1", "b2", "weight_decay", "grad_clip", "eps_low", "eps_high")
    }


def _parent(
    case_names: list[str],
    warmup: int,
    repeats: int,
    tunix_python: str,
    ours_overrides: dict[str, int],
) -> None:
    import jax
    import transformers

    from bench.train_step import MODEL_100M, Case, _write_checkpoint

    transformers.utils.logging.disable_progress_bar()
    hyper = _hyper()
    print(
        f"GRPO train step (fwd + bwd + AdamW), float32 on cpu ({CPUS} CPUs each side), median of "
        f"{repeats} steps after {warmup} warm-up; ours: jax {jax.__version__} "
        f"({sys.executable}), tunix: {tunix_python}; hyperparameters {hyper}; ours "
        f"configs/tiny.py with {ours_overrides or 'no overrides'}\n"
        "loss aggregation: ours seq_sum_const (L = seq/2), tunix sequence-mean-token-scale "
        "(norm = completion length = seq/2): the same loss; every row has seq/2 loss tokens, so "
        "token-mean would agree too. grad rel diff = max|g_ours - g_tunix| / max|g_tunix| of the "
        "first (pre-update) gradient. With old = current log-probs the ratio is 1 and the loss "
        "is -mean(advantages) whatever the model: it checks the aggregation; the gradient "
        "checks the model.\n",
        flush=True,
    )
    rows = []
    for name in case_names:
        size, batch, seq = CASES[name]
        overrides = MODEL_100M if size == "100M" else {}
        with tempfile.TemporaryDirectory() as work:
            hf_dir = os.path.join(work, "hf")
            _write_checkpoint(Case(name, overrides, batch, seq), hf_dir)
            spec = {
                "hf_dir": hf_dir,
                "out_dir": work,
                "model_overrides": overrides,
                "batch": batch,
                "seq": seq,
                "warmup": warmup,
                "repeats": repeats,
                "hyper": hyper,
                "ours_overrides": ours_overrides,
            }
            results = {
                "ours": _spawn("ours", sys.executable, spec),
                "tunix": _spawn("tunix", tunix_python, spec),
            }
            ours_grads = dict(np.load(os.path.join(work, "ours.npz")))
            tunix_grads = dict(np.load(os.path.join(work, "tunix.npz")))
        grad_diff = {
            key: float(
                np.abs(ours_grads[key] - tunix_grads[key]).max()
                / max(np.abs(tunix_grads[key]).max(), 1e-30)
            )
            for key in COMPARED
        }
        tokens = batch * seq
        ours, tunix = results["ours"], results["tunix"]
        row = {
            "case": name,
            "params": ours["params"],
            "tunix_params": tunix["params"],
            "ours_tok_s": tokens / ours["step_s"],
            "tunix_tok_s": tokens / tunix["step_s"],
            "ratio": tunix["step_s"] / ours["step_s"],
            # Fastest step of each side: less sensitive to load spikes on a shared machine.
            "ratio_min_step": min(tunix["times"]) / min(ours["times"]),
            "loss_ours": ours["loss"],
            "loss_tunix": tunix["loss"],
            "grad_norm_ours": ours["grad_norm"],
            "grad_norm_tunix": tunix["grad_norm"],
            "grad_rel_diff": grad_diff,
            "ours_times": ours["times"],
            "tunix_times": tunix["times"],
            "peak_rss_mb": {"ours": ours["peak_rss_mb"], "tunix": tunix["peak_rss_mb"]},
            "tunix_versions": tunix["versions"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        "\n| case | params | ours tok/s | tunix tok/s | ours/tunix | loss ours / tunix "
        "| ours/tunix (fastest steps) | grad norm ours / tunix | max grad rel diff |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        diffs = ", ".join(f"{k} {v:.1e}" for k, v in row["grad_rel_diff"].items())
        print(
            f"| {row['case']} | {row['params']:,} | {row['ours_tok_s']:,.0f} "
            f"| {row['tunix_tok_s']:,.0f} | {row['ratio']:.2f}x "
            f"| {row['loss_ours']:.6f} / {row['loss_tunix']:.6f} | {row['ratio_min_step']:.2f}x "
            f"| {row['grad_norm_ours']:.4f} / {row['grad_norm_tunix']:.4f} | {diffs} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--cases", default="tiny-4x512,tiny-1x2048", help=f"of {sorted(CASES)}")
    parser.add_argument("--tunix-python", default=TUNIX_PYTHON)
    parser.add_argument(
        "--loss-position-buckets",
        type=int,
        default=0,
        help="ours: config.rl.loss_position_buckets (the head scores loss positions only when "
        "> 1); 0 = configs/tiny.py's value",
    )
    parser.add_argument(
        "--scan-unroll",
        type=int,
        default=0,
        help="ours: config.scan_unroll (layers per layer-scan iteration; >= the layer count "
        "unrolls the loop); 0 = configs/tiny.py's value",
    )
    parser.add_argument("--side", choices=("ours", "tunix"), help="internal: run one side")
    parser.add_argument("--spec", help="internal: the case as JSON (with --side)")
    args = parser.parse_args()
    if args.warmup < 2:
        parser.error("--warmup must be >= 2: tunix's train step compiles on its first two calls")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:CPUS])
    if args.side:
        _child(args.side, json.loads(args.spec))
    else:
        cases = args.cases.split(",")
        unknown = sorted(set(cases) - set(CASES))
        if unknown:
            parser.error(f"unknown cases {unknown}; choose from {sorted(CASES)}")
        ours = {
            "rl.loss_position_buckets": args.loss_position_buckets,
            "scan_unroll": args.scan_unroll,
        }
        ours = {key: value for key, value in ours.items() if value}
        _parent(cases, args.warmup, args.repeats, args.tunix_python, ours)


if __name__ == "__main__":
    main()
