"""bench/gradient_alignment.py: a GRPO++ gradient is the sum of its positive- and
negative-advantage parts, and the positive part points exactly where SFT on the resolved
episodes points (equal advantages, ratio 1), with the same sign."""

from __future__ import annotations

import numpy as np

from bench.gradient_alignment import cosine, flat_gradient, sign_agreement, with_advantages
from configs import learn_tiny
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.experiment import device_mesh, initial_params, make_trainer, sharding_rules
from deepswe_jax.rl.batch import assemble_batch
from deepswe_jax.rl.sft import sft_batch

PROMPT_LEN = 5


def trajectory(task: str, rollout: int, reward: float, length: int, rng) -> Trajectory:
    tokens = tuple(int(t) for t in rng.integers(10, 4000, PROMPT_LEN + length))
    return Trajectory(
        task_id=task,
        rollout_index=rollout,
        policy_version=0,
        prompt_ids=tokens[:PROMPT_LEN],
        token_ids=tokens,
        loss_mask=(0,) * PROMPT_LEN + (1,) * length,
        sampler_logprobs=(0.0,) * PROMPT_LEN + (-1.0,) * length,
        reward=reward,
        stop_reason=StopReason.finished,
        infra_error=False,
        num_steps=1,
        patch="",
        timings={},
        steps=(),
        grade=None,
    )


def test_positive_part_is_sft_on_successes_and_the_parts_sum_to_the_gradient():
    rng = np.random.default_rng(0)
    # Two groups of 4, one success each: every positive advantage is 1 (leave-one-out).
    trajectories = [
        trajectory(task, i, float(i == 0), int(rng.integers(6, 30)), rng)
        for task in ("a", "b")
        for i in range(4)
    ]
    config = learn_tiny.get_config()
    mesh, rules = device_mesh(config), sharding_rules(config)
    params = initial_params(config, mesh, rules)
    batch = assemble_batch(
        trajectories, micro_batch_size=8, compact_filtering=False, length_buckets=(128,)
    )
    grpo = make_trainer(config, mesh, rules, objective="grpo")
    whole = flat_gradient(grpo, params, batch.micro_batches)
    positive = flat_gradient(grpo, params, with_advantages(batch.micro_batches, lambda a: a > 0))
    negative = flat_gradient(grpo, params, with_advantages(batch.micro_batches, lambda a: a < 0))
    resolved = [t for t in trajectories if t.reward > 0]
    sft = flat_gradient(
        make_trainer(config, mesh, rules, objective="sft"),
        params,
        sft_batch(resolved, micro_batch_size=8, length_buckets=(128,)).micro_batches,
    )

    np.testing.assert_allclose(whole, positive + negative, rtol=1e-4, atol=1e-9)
    assert cosine(positive, sft) > 0.999
    assert sign_agreement(positive, sft) > 0.99
    assert cosine(negative, sft) < 0.9  # failures' tokens are other tokens
    assert np.linalg.norm(negative) > 0 and np.linalg.norm(positive) > 0
