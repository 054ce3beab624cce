"""bench/gradient_alignment.py: a GRPO++ gradient is the sum of its positive- and
negative-advantage parts, and the positive part points exactly where SFT on the resolved
episodes points (equal advantages, ratio 1), with the same sign."""

from __future__ import annotations

import jax
import numpy as np

from bench.gradient_alignment import batch_gradients, cosine, sign_agreement
from configs import learn_tiny
from deepswe_jax.agent.trajectory import StopReason, Trajectory

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
    config = learn_tiny.get_config()  # random init: config.init_from is ''
    config.rl.update(compact_filtering=False, micro_batch_size=8, length_buckets=(128,))
    # One device: over the suite's 8 fake CPU devices this program deadlocked twice in CI
    # (XLA:CPU, 7 device threads in an all-reduce and 1 in an all-gather; tests/cpu_devices.py).
    # The sums checked here do not depend on the mesh.
    _, resolved, gradients = batch_gradients(config, trajectories, devices=jax.devices()[:1])
    whole, positive, negative, sft = (gradients[k] for k in ("grpo", "positive", "negative", "sft"))
    assert [t.reward for t in resolved] == [1.0, 1.0]

    np.testing.assert_allclose(whole, positive + negative, rtol=1e-4, atol=1e-9)
    assert cosine(positive, sft) > 0.999
    assert sign_agreement(positive, sft) > 0.99
    assert cosine(negative, sft) < 0.9  # failures' tokens are other tokens
    assert np.linalg.norm(negative) > 0 and np.linalg.norm(positive) > 0
