"""Our GRPO++ loss, aggregation, leave-one-out advantage and rollout correction against verl
0.9.1's own functions (tests/rl/verl_reference.py, run in the verl environment .venv-verl that
`./run.sh test` installs with .ci/install_verl.sh), on identical random tensors: rows of
different lengths with holes in the mask, a sampler mismatch with outlier rows; loss, gradient
w.r.t. the log-probs, IS weights, rejected mask and mismatch metrics agree to 1e-6."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from deepswe_jax.rl.advantages import leave_one_out_advantages
from deepswe_jax.rl.objectives import LossSettings, PolicyGradientLoss
from deepswe_jax.rl.rollout_correction import RolloutCorrectionSettings, correct_rollout
from tests.side_venvs import require_installed

ROOT = Path(__file__).resolve().parents[2]
VERL_PYTHON = Path(os.environ.get("DEEPSWE_VERL_PYTHON", ROOT / ".venv-verl" / "bin" / "python"))
ROWS, LENGTH, MAX_LEN = 9, 24, 64
GROUPS = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2])
EPS_LOW, EPS_HIGH = 0.2, 0.28
# Our loss mode and sequence count -> verl's agg_loss mode, global_batch_size, loss_scale_factor.
# DeepSWE: verl's seq-mean-token-sum over every row of the mini-batch, divided by the constant
# response length (seq-mean-token-sum-norm in verl 0.9).
AGGREGATIONS = {
    ("seq_sum_const", "all"): ("seq-mean-token-sum-norm", ROWS, MAX_LEN),
    ("token_mean", "all"): ("token-mean", None, None),
    ("seq_mean_token_mean", "all"): ("seq-mean-token-mean", ROWS, None),
    ("seq_mean_token_mean", "trained"): ("seq-mean-token-mean", None, None),
}


def case(
    name,
    mode="seq_sum_const",
    sequences="all",
    is_=None,
    is_threshold=2.0,
    rs=None,
    rs_threshold=None,
):
    agg, global_batch_size, loss_scale_factor = AGGREGATIONS[(mode, sequences)]
    return {
        "name": name,
        "mode": mode,
        "sequences": sequences,
        "agg": agg,
        "global_batch_size": global_batch_size,
        "loss_scale_factor": loss_scale_factor,
        "eps_low": EPS_LOW,
        "eps_high": EPS_HIGH,
        "rollout_is": is_,
        "rollout_is_threshold": is_threshold,
        "rollout_rs": rs,
        "rollout_rs_threshold": rs_threshold,
    }


CASES = [
    case("grpo_seq_sum_const"),
    case("grpo_token_mean", mode="token_mean"),
    case("grpo_seq_mean_token_mean", mode="seq_mean_token_mean"),
    case("token_tis", is_="token", is_threshold=1.5),
    case("sequence_tis", is_="sequence", is_threshold=2.0),
    case("token_masked_is", is_="token", is_threshold="0.8_1.25"),
    case("sequence_masked_is", is_="sequence", is_threshold="0.3_3.0"),
    case("token_tis_token_mean", mode="token_mean", is_="token", is_threshold=1.5),
    *[
        case(f"rs_{option}", rs=option, rs_threshold=threshold)
        for option, threshold in [
            ("token_k1", "1.3"),
            ("token_k2", "0.03"),
            ("token_k3", "0.03"),
            ("seq_sum_k1", "0.3_3.0"),
            ("seq_sum_k2", "0.3"),
            ("seq_sum_k3", "0.3"),
            ("seq_mean_k1", "0.9_1.1"),  # the geometric-mean mask
            ("seq_mean_k2", "0.02"),
            ("seq_mean_k3", "0.02"),
            ("seq_max_k2", "0.12"),
            ("seq_max_k3", "0.12"),
        ]
    ],
    case(
        "token_tis_rs_token_mean",
        mode="token_mean",
        is_="token",
        rs="token_k1,seq_mean_k3",
        rs_threshold="1.5,0.02",
    ),
    case(
        "sequence_tis_rs_trained",
        mode="seq_mean_token_mean",
        sequences="trained",
        is_="sequence",
        rs="seq_sum_k1",
        rs_threshold="0.3_3.0",
    ),
]
# verl metric -> ours, compared in every case that reports it.
METRICS = {
    "kl": "mismatch_kl_k1",
    "k3_kl": "mismatch_kl_k3",
    "chi2_token": "mismatch_chi2_token",
    "chi2_seq": "mismatch_chi2_seq",
    "rollout_is_mean": "rollout_is_mean",
    "rollout_is_oob_ratio": "rollout_is_masked_fraction",
    "rollout_is_seq_fraction_high": "rollout_is_seq_fraction_high",
    "rollout_rs_masked_fraction": "rollout_rs_masked_fraction",
    "rollout_rs_seq_masked_fraction": "rollout_rs_seq_masked_fraction",
}
# Token-level IS only: verl reports sequence-level max / min / fractions per sequence.
TOKEN_IS_METRICS = {
    "rollout_is_max": "rollout_is_max",
    "rollout_is_min": "rollout_is_min",
    "rollout_is_ratio_fraction_high": "rollout_is_fraction_high",
    "rollout_is_ratio_fraction_low": "rollout_is_fraction_low",
}


def random_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Rows of 6-24 response tokens with holes (observation tokens), every row with a loss
    token; old and current log-probs within e^+-1 of each other (below verl's dual-clip bound
    3, which GRPO++ does not have), the sampler within ~0.1 nats, rows 2 and 6 far off."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(6, LENGTH + 1, ROWS)
    present = np.arange(LENGTH)[None] < lengths[:, None]
    mask = (present & (rng.random((ROWS, LENGTH)) < 0.85)).astype(np.float32)
    mask[:, 0] = 1.0
    logprobs = -np.abs(rng.normal(1.0, 0.7, (ROWS, LENGTH)))
    old = logprobs + np.clip(rng.normal(0, 0.3, (ROWS, LENGTH)), -1, 1)
    sampler = old + rng.normal(0, 0.1, (ROWS, LENGTH))
    sampler[2] += 0.4
    sampler[6] -= rng.uniform(0, 1.0, LENGTH)
    rewards = rng.integers(0, 2, ROWS).astype(np.float32)
    group_rewards = np.zeros((3, 4), np.float32)
    valid = np.zeros((3, 4), bool)
    for g in range(3):
        members = np.flatnonzero(GROUPS == g)
        group_rewards[g, : len(members)] = rewards[members]
        valid[g, : len(members)] = True
    loo = leave_one_out_advantages(group_rewards, valid)
    advantages = np.concatenate([loo[g, : (GROUPS == g).sum()] for g in range(3)])
    return {
        "logprobs": logprobs.astype(np.float32),
        "old_logprobs": old.astype(np.float32),
        "sampler_logprobs": sampler.astype(np.float32),
        "mask": mask,
        "present": present.astype(np.int32),
        "advantages": np.repeat(advantages[:, None], LENGTH, 1).astype(np.float32),
        "rewards": rewards,
        "group": GROUPS,
    }


def ours(inputs: dict[str, np.ndarray], spec: dict) -> dict[str, np.ndarray]:
    rollout = RolloutCorrectionSettings(
        rollout_is=spec["rollout_is"],
        rollout_is_threshold=spec["rollout_is_threshold"],
        rollout_rs=spec["rollout_rs"],
        rollout_rs_threshold=spec["rollout_rs_threshold"],
    )
    objective = PolicyGradientLoss(
        LossSettings(
            mode=spec["mode"],
            eps_low=spec["eps_low"],
            eps_high=spec["eps_high"],
            max_response_len=MAX_LEN,
            sequences=spec["sequences"],
            rollout_correction=rollout,
        )
    )
    batch = {
        "old_logprobs": jnp.asarray(inputs["old_logprobs"]),
        "sampler_logprobs": jnp.asarray(inputs["sampler_logprobs"]),
        "advantages": jnp.asarray(inputs["advantages"]),
        "loss_mask": jnp.asarray(inputs["mask"]),
        "segment_ids": jnp.asarray(inputs["present"]),
        "absent_sequences": jnp.zeros(ROWS, jnp.float32),
    }

    @jax.jit
    def loss(logprobs):
        total, denominator, sums = objective(logprobs, jnp.zeros_like(logprobs), batch)
        return total / denominator, sums

    (value, sums), grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(inputs["logprobs"]))
    return {
        "loss": np.asarray(value),
        "grad": np.asarray(grad),
        "metrics": objective.summarize(jax.device_get(sums)),
    }


@pytest.fixture(scope="module")
def verl(tmp_path_factory):
    """verl's outputs for CASES (one subprocess in the verl environment)."""
    require_installed(VERL_PYTHON, "bash .ci/install_verl.sh .venv-verl")
    directory = tmp_path_factory.mktemp("verl")
    inputs = random_inputs()
    np.savez(directory / "inputs.npz", **inputs)
    (directory / "cases.json").write_text(json.dumps(CASES))
    subprocess.run(
        [
            str(VERL_PYTHON),
            str(ROOT / "tests" / "rl" / "verl_reference.py"),
            str(directory / "inputs.npz"),
            str(directory / "cases.json"),
            str(directory / "outputs.npz"),
        ],
        check=True,
        stdout=sys.stdout,
        stderr=sys.stderr,
    )
    return inputs, dict(np.load(directory / "outputs.npz"))


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spec", CASES, ids=[c["name"] for c in CASES])
def test_loss_gradient_weights_masks_and_metrics_match_verl(verl, spec):
    inputs, outputs = verl
    name = spec["name"]
    got = ours(inputs, spec)
    close(got["loss"], outputs[f"{name}/loss"])
    close(got["grad"], outputs[f"{name}/grad"])
    if spec["rollout_is"] is not None or spec["rollout_rs"] is not None:
        weights, mask, _ = correct_rollout(
            jnp.asarray(inputs["old_logprobs"]),
            jnp.asarray(inputs["sampler_logprobs"]),
            jnp.asarray(inputs["mask"]),
            RolloutCorrectionSettings(
                rollout_is=spec["rollout_is"],
                rollout_is_threshold=spec["rollout_is_threshold"],
                rollout_rs=spec["rollout_rs"],
                rollout_rs_threshold=spec["rollout_rs_threshold"],
            ),
            jnp.asarray(inputs["present"]),
        )
        np.testing.assert_array_equal(mask, outputs[f"{name}/mask"])
        if weights is not None:
            close(weights, outputs[f"{name}/weights"])
    if spec["rollout_rs"] is not None:
        # Each rejection case drops some tokens and keeps some, so it tests a boundary.
        assert 0 < outputs[f"{name}/mask"].sum() < inputs["mask"].sum()
    expected = {**METRICS, **(TOKEN_IS_METRICS if spec["rollout_is"] == "token" else {})}
    for theirs, our_key in expected.items():
        key = f"{name}/metric/{theirs}"
        if key in outputs:
            close(got["metrics"][our_key], outputs[key])
    assert f"{name}/metric/kl" in outputs


def test_leave_one_out_advantage_matches_verl_rloo(verl):
    inputs, outputs = verl
    close(inputs["advantages"][:, 0], outputs["rloo"])
