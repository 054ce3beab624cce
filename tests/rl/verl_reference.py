"""verl 0.9.1's own functions on the cross-check's tensors (run by tests/rl/test_verl_crosscheck.py
in the verl environment, .venv-verl: `bash .ci/install_verl.sh .venv-verl`).

    python tests/rl/verl_reference.py inputs.npz cases.json outputs.npz

For each case: rollout_corr_helper.compute_rollout_correction_and_rejection_mask (IS weights,
rejected response mask, metrics), then core_algos.compute_policy_loss_vanilla (clip-high, the
IS weights on the clipped loss, agg_loss over the rejected mask) and its gradient w.r.t. the
log-probs; and core_algos.compute_rloo_outcome_advantage once.
"""

import json
import sys

import numpy as np
import torch
from verl.trainer.ppo import core_algos, rollout_corr_helper


class ActorConfig(dict):
    """What compute_policy_loss_vanilla reads of verl's ActorConfig (attribute and .get)."""

    def __getattr__(self, name):
        return self[name]


def run_case(inputs: dict[str, np.ndarray], case: dict) -> dict[str, np.ndarray]:
    old = torch.tensor(inputs["old_logprobs"])
    sampler = torch.tensor(inputs["sampler_logprobs"])
    mask = torch.tensor(inputs["mask"])
    advantages = torch.tensor(inputs["advantages"])
    weights, rejected_mask, metrics = (
        rollout_corr_helper.compute_rollout_correction_and_rejection_mask(
            old_log_prob=old,
            rollout_log_prob=sampler,
            response_mask=mask,
            rollout_is=case["rollout_is"],
            rollout_is_threshold=case["rollout_is_threshold"],
            rollout_rs=case["rollout_rs"],
            rollout_rs_threshold=case["rollout_rs_threshold"],
        )
    )
    is_weights = None if weights is None else weights.batch["rollout_is_weights"]
    config = ActorConfig(
        clip_ratio=case["eps_low"],
        clip_ratio_low=case["eps_low"],
        clip_ratio_high=case["eps_high"],
        global_batch_info={
            "global_batch_size": case["global_batch_size"],
            "loss_scale_factor": case["loss_scale_factor"],
        },
    )
    logprobs = torch.tensor(inputs["logprobs"], requires_grad=True)
    loss, _ = core_algos.compute_policy_loss_vanilla(
        old_log_prob=old,
        log_prob=logprobs,
        advantages=advantages,
        response_mask=rejected_mask,
        loss_agg_mode=case["agg"],
        config=config,
        rollout_is_weights=is_weights,
    )
    loss.backward()
    out = {
        "loss": loss.detach().numpy(),
        "grad": logprobs.grad.numpy(),
        "mask": rejected_mask.numpy(),
    }
    if is_weights is not None:
        out["weights"] = is_weights.numpy()
    for key, value in metrics.items():
        out["metric/" + key.removeprefix("rollout_corr/")] = np.asarray(value, np.float64)
    return out


def main(inputs_path: str, cases_path: str, outputs_path: str) -> None:
    inputs = dict(np.load(inputs_path))
    outputs = {}
    for case in json.loads(open(cases_path).read()):
        for key, value in run_case(inputs, case).items():
            outputs[f"{case['name']}/{key}"] = value
    rewards = torch.zeros(inputs["mask"].shape)
    rewards[:, -1] = torch.tensor(inputs["rewards"])
    advantages, _ = core_algos.compute_rloo_outcome_advantage(
        token_level_rewards=rewards,
        response_mask=torch.ones_like(rewards),
        index=inputs["group"],
    )
    outputs["rloo"] = advantages[:, 0].numpy()
    np.savez(outputs_path, **outputs)


if __name__ == "__main__":
    main(*sys.argv[1:])
