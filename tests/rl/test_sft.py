"""SFT loss and batches: NLL on assistant tokens only (NumPy reference), exact accumulation,
token-exact rows, and the seeded data order of train_sft."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import OptimizerSettings, learning_rate_schedule, make_optimizer
from deepswe_jax.rl.sft import (
    NegativeLogLikelihoodLoss,
    negative_log_likelihood,
    sft_batch,
    sft_batch_indices,
    truncate_trajectory,
)
from deepswe_jax.rl.train_step import Trainer

MODEL = Qwen3Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)


def episode(index: int, *, infra_error: bool = False) -> Trajectory:
    """prompt (mask 0), assistant turn (1), observation (0), assistant turn (1); 20-35 tokens."""
    rng = np.random.default_rng(index)
    prompt, turn1, obs, turn2 = (int(n) for n in rng.integers(3, 10, 4))
    tokens = tuple(int(t) for t in rng.integers(0, MODEL.vocab_size, prompt + turn1 + obs + turn2))
    mask = (0,) * prompt + (1,) * turn1 + (0,) * obs + (1,) * turn2
    return Trajectory(
        task_id=f"task{index}",
        rollout_index=0,
        policy_version=0,
        prompt_ids=tokens[:prompt],
        token_ids=tokens,
        loss_mask=mask,
        sampler_logprobs=tuple(-0.3 * m for m in mask),
        reward=1.0,
        stop_reason=StopReason.env_error if infra_error else StopReason.finished,
        infra_error=infra_error,
        num_steps=2,
        patch="diff",
        timings={},
        steps=(),
        grade=None,
    )


def reference_nll(model: Qwen3ForCausalLM, trajectories: list[Trajectory]) -> float:
    """Mean -log p(token) over assistant tokens, each sequence scored alone with NumPy."""
    total, count = 0.0, 0
    for t in trajectories:
        tokens = np.asarray(t.token_ids)
        logits = np.asarray(model(jnp.asarray(tokens[None, :-1])), np.float64)[0]
        logits -= logits.max(axis=-1, keepdims=True)
        logprobs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        picked = logprobs[np.arange(len(tokens) - 1), tokens[1:]]
        assistant = np.asarray(t.loss_mask[1:]) == 1
        total -= picked[assistant].sum()
        count += assistant.sum()
    return total / count


def test_negative_log_likelihood_matches_numpy():
    rng = np.random.default_rng(0)
    logprobs = -rng.random((3, 7)).astype(np.float32) * 5
    mask = (rng.random((3, 7)) < 0.5).astype(np.float32)
    total, denominator = negative_log_likelihood(jnp.asarray(logprobs), jnp.asarray(mask))
    np.testing.assert_allclose(float(total), -(logprobs * mask).sum(), rtol=1e-6)
    assert float(denominator) == mask.sum()


@pytest.fixture(scope="module")
def trainer_and_model():
    model = Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0))
    rl = OptimizerSettings(lr=1e-2, warmup_steps=0, weight_decay=0.0, grad_clip=0.0)
    trainer = Trainer(
        model,
        make_optimizer(rl),
        LossSettings(logprob_chunk=16, temperature=1.0),
        mesh=make_mesh(devices=jax.devices()[:1]),
        loss_fn=NegativeLogLikelihoodLoss(),
    )
    return trainer, model


def test_trainer_loss_is_the_assistant_token_nll(trainer_and_model):
    trainer, model = trainer_and_model
    trajectories = [episode(i) for i in range(6)]
    batch = sft_batch(trajectories, micro_batch_size=6, pack_length=64)  # packed rows too
    params = nnx.state(model, nnx.Param)
    _, sums = trainer.accumulate_gradients(params, batch.micro_batches)
    assistant_targets = sum(sum(t.loss_mask[1:]) for t in trajectories)
    assert float(sums["denominator"]) == assistant_targets
    np.testing.assert_allclose(
        float(sums["loss_sum"]) / float(sums["denominator"]),
        reference_nll(model, trajectories),
        rtol=1e-5,
    )


def test_micro_batches_accumulate_to_the_token_mean_of_the_whole_batch(trainer_and_model):
    trainer, model = trainer_and_model
    trajectories = [episode(i) for i in range(4)]
    params = nnx.state(model, nnx.Param)
    whole = sft_batch(trajectories, micro_batch_size=4).micro_batches
    parts = sft_batch(trajectories, micro_batch_size=1).micro_batches
    assert len(parts) == 4
    results = []
    for micro_batches in (whole, parts):
        grads, sums = trainer.accumulate_gradients(params, micro_batches)
        denominator = float(sums["denominator"])
        results.append(jax.tree.map(lambda g, d=denominator: np.asarray(g) / d, grads))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), *results)


def test_steps_lower_the_nll_and_report_perplexity(trainer_and_model):
    trainer, model = trainer_and_model
    trajectories = [episode(i) for i in range(4)]
    batch = sft_batch(trajectories, micro_batch_size=4)
    state = trainer.init_state(jax.tree.map(jnp.copy, nnx.state(model, nnx.Param)))
    losses = []
    for _ in range(5):
        state, metrics = trainer.step(state, batch.micro_batches)
        losses.append(metrics["loss"])
        assert metrics["perplexity"] == pytest.approx(np.exp(metrics["loss"]), rel=1e-5)
    assert losses[-1] < losses[0] - 0.5
    assert metrics["loss_tokens"] == sum(sum(t.loss_mask[1:]) for t in trajectories)
    assert metrics["target_logprob_min"] < -metrics["loss"]


def test_sft_batch_rows_are_the_sampled_tokens_and_skip_infrastructure_failures():
    kept, failed = episode(1), episode(2, infra_error=True)
    (micro_batch,) = sft_batch([kept, failed], micro_batch_size=2).micro_batches
    n = len(kept.token_ids) - 1
    row = 0 if micro_batch.loss_mask[0].any() else 1
    np.testing.assert_array_equal(micro_batch.input_ids[row, :n], kept.token_ids[:-1])
    np.testing.assert_array_equal(micro_batch.targets[row, :n], kept.token_ids[1:])
    np.testing.assert_array_equal(micro_batch.loss_mask[row, :n], kept.loss_mask[1:])
    assert micro_batch.loss_mask.sum() == sum(kept.loss_mask)  # the failed episode is masked


def test_batch_indices_walk_seeded_epochs_without_repeats():
    steps = [sft_batch_indices(5, seed=3, step=s, batch_size=2) for s in range(5)]
    assert steps == [sft_batch_indices(5, seed=3, step=s, batch_size=2) for s in range(5)]
    assert all(len(set(batch)) == 2 for batch in steps)
    first_epoch = [i for batch in steps[:2] for i in batch] + [steps[2][0]]
    assert sorted(first_epoch) == list(range(5))
    assert steps != [sft_batch_indices(5, seed=4, step=s, batch_size=2) for s in range(5)]
    with pytest.raises(ValueError, match="batch_size=6"):
        sft_batch_indices(5, seed=0, step=0, batch_size=6)


def test_max_tokens_trains_on_a_token_exact_prefix():
    trajectory = episode(3)
    cut = len(trajectory.prompt_ids) + 2
    short = truncate_trajectory(trajectory, cut)
    assert short.token_ids == trajectory.token_ids[:cut] and short.loss_mask[-2:] == (1, 1)
    assert truncate_trajectory(trajectory, 10_000) is trajectory
    (micro_batch,) = sft_batch([trajectory], micro_batch_size=1, max_tokens=cut).micro_batches
    assert micro_batch.loss_mask.sum() == 2
    np.testing.assert_array_equal(
        micro_batch.input_ids[0, : cut - 1], trajectory.token_ids[: cut - 1]
    )
    # A cut inside the prompt leaves nothing to train on: the trajectory drops out.
    assert sft_batch([trajectory], micro_batch_size=1, max_tokens=2).micro_batches == ()


def test_cosine_decay_reaches_zero_at_the_last_step():
    schedule = learning_rate_schedule(OptimizerSettings(lr=1e-2, warmup_steps=2, decay_steps=10))
    assert [float(schedule(s)) for s in (0, 2, 6, 10)] == pytest.approx([0.0, 1e-2, 5e-3, 0.0])
