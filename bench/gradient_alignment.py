"""Where one GRPO++ batch's gradient points: along SFT on the batch's own successes, or not.

Reads one RL iteration's trajectories (a run's trajectories/iter_XXXXXX.jsonl) and the policy
checkpoint that sampled them (the run's --config.init_from for iteration 0), builds that batch
as launch/train.py does (config.rl: advantage, compact filtering, length buckets; the whole
batch as one step) and computes at the checkpoint, where every importance ratio is 1:

  grpo      the GRPO++ gradient
  positive  its part from positive-advantage sequences (A > 0)
  negative  its part from negative-advantage sequences (A < 0); grpo = positive + negative
  sft       the NLL gradient of the resolved trajectories (SFT on its own successes)

and prints each one's norm, the cosine of each with `sft`, and the share of parameters whose
update direction agrees in sign with `sft` (what Adam's first steps follow). `positive` is
parallel to `sft` (cosine 1 up to the per-sequence weights), so the cosine of `grpo` with `sft`
says how much of the step reinforces what already works rather than pushing down what was
sampled in failures (BENCHMARKS.md, "Learning").

    PYTHONPATH=. python bench/gradient_alignment.py --config=configs/learn_tiny.py \\
        --policy=/tmp/bench15/sft/checkpoints \\
        --trajectories=/tmp/bench15/rl/trajectories/iter_000000.jsonl
"""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from deepswe_jax.agent.trajectory import Trajectory, read_trajectories
from deepswe_jax.experiment import (
    device_mesh,
    initial_params,
    make_trainer,
    sharding_rules,
    update_settings,
)
from deepswe_jax.rl.batch import TrainBatch
from deepswe_jax.rl.loop import update_batch
from deepswe_jax.rl.sft import sft_batch

_CONFIG = config_flags.DEFINE_config_file("config", "configs/learn_tiny.py", "Run config.")
_POLICY = flags.DEFINE_string("policy", None, "Checkpoint that sampled the trajectories.")
_TRAJECTORIES = flags.DEFINE_string("trajectories", None, "One iteration's trajectories.")
_OUTPUT = flags.DEFINE_string("output", None, "Also write the figures here as JSON.")


def flat_gradient(trainer, params, micro_batches) -> np.ndarray:
    """The batch loss's gradient (summed loss / its denominator), as one vector."""
    grads, sums = trainer.accumulate_gradients(params, micro_batches)
    leaves = [np.asarray(leaf, np.float64).ravel() for leaf in jax.tree_util.tree_leaves(grads)]
    return np.concatenate(leaves) / max(float(sums["denominator"]), 1e-8)


def with_advantages(micro_batches, keep) -> list:
    """The micro-batches with only the advantages `keep` selects (others set to 0)."""
    return [
        dataclasses.replace(mb, advantages=np.where(keep(mb.advantages), mb.advantages, 0.0))
        for mb in micro_batches
    ]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))


def sign_agreement(a: np.ndarray, b: np.ndarray) -> float:
    both = (a != 0) & (b != 0)
    return float((np.sign(a[both]) == np.sign(b[both])).mean()) if both.any() else float("nan")


def batch_gradients(
    config, trajectories: list[Trajectory], devices=None
) -> tuple[TrainBatch, list[Trajectory], dict[str, np.ndarray]]:
    """The batch launch/train.py would build from `trajectories` (as one step), its resolved
    trajectories, and the four gradients of the module docstring at config.init_from, on the
    mesh of config.mesh over `devices` (default: all)."""
    resolved = [t for t in trajectories if t.reward > 0 and not t.infra_error]
    if not resolved:
        raise ValueError("no resolved trajectory, so no SFT direction to compare with")
    mesh, rules = device_mesh(config, devices), sharding_rules(config)
    params = initial_params(config, mesh, rules)
    settings = dataclasses.replace(update_settings(config), mini_batches=1)
    batch = update_batch(trajectories, settings)
    grpo = make_trainer(config, mesh, rules, objective="grpo")
    sft = sft_batch(
        resolved,
        micro_batch_size=settings.micro_batch_size,
        length_buckets=settings.length_buckets,
    )
    gradients = {
        "grpo": flat_gradient(grpo, params, batch.micro_batches),
        "positive": flat_gradient(
            grpo, params, with_advantages(batch.micro_batches, lambda a: a > 0)
        ),
        "negative": flat_gradient(
            grpo, params, with_advantages(batch.micro_batches, lambda a: a < 0)
        ),
        "sft": flat_gradient(
            make_trainer(config, mesh, rules, objective="sft"), params, sft.micro_batches
        ),
    }
    return batch, resolved, gradients


def main(argv: list[str]) -> None:
    del argv
    config = _CONFIG.value
    config.init_from = _POLICY.value
    trajectories = read_trajectories(_TRAJECTORIES.value)
    try:
        batch, resolved, gradients = batch_gradients(config, trajectories)
    except ValueError as error:
        raise SystemExit(f"{_TRAJECTORIES.value}: {error}") from None
    figures = {
        "episodes": len(trajectories),
        "resolved": len(resolved),
        "groups_mixed": batch.stats.groups.solve_partial,
        **{
            name: {
                "norm": float(np.linalg.norm(g)),
                "cosine_with_sft": cosine(g, gradients["sft"]),
                "sign_agreement_with_sft": sign_agreement(g, gradients["sft"]),
            }
            for name, g in gradients.items()
        },
    }
    print(f"{len(trajectories)} episodes, {len(resolved)} resolved")
    print(f"{'gradient':10} {'norm':>10} {'cos(sft)':>9} {'sign agrees':>12}")
    for name in gradients:
        row = figures[name]
        print(
            f"{name:10} {row['norm']:10.4g} {row['cosine_with_sft']:9.3f} "
            f"{row['sign_agreement_with_sft']:12.3f}"
        )
    if _OUTPUT.value:
        with open(_OUTPUT.value, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    flags.mark_flags_as_required(["policy", "trajectories"])
    app.run(main)
