"""The train step on a tiny Qwen3 (hidden 32, 2 layers): accumulation, sharding, AdamW steps, FLOPs.

Compiles are the cost here, so the single-device trainer is shared by the tests of this module.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.batch import assemble_batch
from deepswe_jax.rl.logprobs import loss_position_index
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import OptimizerSettings, learning_rate_schedule, make_optimizer
from deepswe_jax.rl.train_step import Trainer, training_flops

MODEL = Qwen3Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)
LOSS = LossSettings(max_response_len=64, logprob_chunk=16)


def rl_config(lr=1e-2):
    return OptimizerSettings(lr=lr, warmup_steps=0, weight_decay=0.0, grad_clip=0.0)


def make_trajectories():
    """Two tasks x four rollouts, 18-33 tokens each (one 32-token bucket after the shift)."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(8):
        length, prompt = int(rng.integers(18, 34)), 6
        tokens = tuple(int(t) for t in rng.integers(0, MODEL.vocab_size, length))
        mask = (0,) * prompt + tuple(int(m) for m in rng.random(length - prompt) < 0.8)
        out.append(
            Trajectory(
                task_id=f"task{i // 4}",
                rollout_index=i % 4,
                policy_version=0,
                prompt_ids=tokens[:prompt],
                token_ids=tokens,
                loss_mask=mask,
                sampler_logprobs=tuple(-0.5 * m for m in mask),
                reward=float(i % 4 in (0, 3) if i < 4 else i == 5),
                stop_reason=StopReason.finished,
                infra_error=False,
                num_steps=1,
                patch="",
                timings={},
                steps=(),
                grade=None,
            )
        )
    return out


def fresh_params():
    return nnx.state(Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0)), nnx.Param)


def normalized(grads, sums):
    denominator = float(sums["denominator"])
    return jax.tree.map(lambda g: np.asarray(g) / denominator, jax.device_get(grads))


@pytest.fixture(scope="module")
def single():
    """A one-device trainer with AdamW, and the batch split as 1 x 8 rows and as 2 x 4 rows."""
    mesh = make_mesh(devices=jax.devices()[:1])
    trainer = Trainer(
        Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0)),
        make_optimizer(rl_config()),
        LOSS,
        mesh=mesh,
        peak_flops_per_device=1e12,
        learning_rate=learning_rate_schedule(rl_config()),
    )
    trajectories = make_trajectories()
    whole = assemble_batch(trajectories, micro_batch_size=8).micro_batches
    halves = assemble_batch(trajectories, micro_batch_size=4).micro_batches
    assert [mb.shape for mb in whole] == [(8, 32)] and [mb.shape for mb in halves] == [(4, 32)] * 2
    params = jax.device_put(fresh_params(), trainer.param_shardings)
    grads, sums = trainer.accumulate_gradients(params, whole)
    return trainer, params, whole, halves, normalized(grads, sums), jax.device_get(sums)


def assert_trees_close(a, b, rtol=1e-5, atol=1e-7):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol), a, b)


def test_k_micro_batches_equal_one_big_batch(single):
    trainer, params, _, halves, want_grads, want_sums = single
    grads, sums = trainer.accumulate_gradients(params, halves)
    assert_trees_close(normalized(grads, sums), want_grads)
    for key in ("loss_sum", "denominator", "entropy_sum", "policy_tokens", "sampler_approx_kl_sum"):
        np.testing.assert_allclose(sums[key], want_sums[key], rtol=1e-5)
    assert float(sums["denominator"]) == 8  # seq_sum_const: one per sequence with loss tokens


def test_compact_filtered_sequences_count_in_the_deepswe_denominator(single):
    """DeepSWE's mean runs over every trajectory of the batch (rl/loss.py, sequences='all'): two
    compact-filtered rollouts are left out of the arrays but still divide the loss, exactly
    however the rest is split into micro-batches."""
    trainer, params, *_ = single
    trajectories = make_trajectories()
    for i in (1, 6):
        trajectories[i] = dataclasses.replace(trajectories[i], stop_reason=StopReason.max_steps)
    whole = assemble_batch(trajectories, micro_batch_size=8)
    halves = assemble_batch(trajectories, micro_batch_size=4)
    assert whole.stats.num_trained == 6 and len(halves.micro_batches) == 2
    grads, sums = trainer.accumulate_gradients(params, whole.micro_batches)
    split_grads, split_sums = trainer.accumulate_gradients(params, halves.micro_batches)
    assert float(sums["denominator"]) == float(split_sums["denominator"]) == 8
    assert_trees_close(normalized(split_grads, split_sums), normalized(grads, sums))
    # With the current policy as the old one every ratio is 1: the loss is -sum(A * tokens) / L
    # per sequence, divided by all 8 trajectories.
    (micro_batch,) = whole.micro_batches
    want = -(micro_batch.advantages * micro_batch.loss_mask).sum() / LOSS.max_response_len / 8
    np.testing.assert_allclose(float(sums["loss_sum"]) / 8, want, rtol=1e-5)


def test_trainer_logprobs_score_the_shifted_targets(single):
    trainer, params, whole, *_ = single
    (micro_batch,) = whole
    got = np.asarray(trainer.logprobs(params, micro_batch))

    @jax.jit
    def unchunked(params, input_ids, positions, segment_ids, targets):
        logits = nnx.merge(trainer.graphdef, params)(input_ids, positions, segment_ids)
        return jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]

    want = unchunked(
        params,
        micro_batch.input_ids,
        micro_batch.positions,
        micro_batch.segment_ids,
        micro_batch.targets,
    )
    real = micro_batch.segment_ids > 0
    np.testing.assert_allclose(got[real], np.asarray(want)[real], rtol=1e-5, atol=1e-5)


def test_sharded_step_on_8_devices_equals_single_device(single):
    _, _, whole, _, want_grads, want_sums = single
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    trainer = Trainer(
        Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0)), make_optimizer(rl_config()), LOSS, mesh=mesh
    )
    params = jax.device_put(fresh_params(), trainer.param_shardings)
    assert params["layers"]["gate_proj"].get_value().sharding.spec == jax.P(None, "fsdp", "tensor")
    # Recomputed old log-probs (PPO reuse path) equal the current policy's, so grads match.
    old = [trainer.logprobs(params, mb) for mb in whole]
    assert old[0].sharding.spec[0] == ("data", "fsdp")
    grads, sums = trainer.accumulate_gradients(params, whole, old_logprobs=old)
    assert_trees_close(normalized(grads, sums), want_grads, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(sums["loss_sum"], want_sums["loss_sum"], rtol=1e-5)
    np.testing.assert_allclose(sums["policy_ratio_max"], 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="multiple of 4"):
        trainer.logprobs(
            params, assemble_batch(make_trajectories()[:2], micro_batch_size=2).micro_batches[0]
        )


def test_scoring_loss_positions_only_gives_the_same_gradient_and_metrics(single):
    """LossSettings.loss_position_buckets: the head scores each row's loss positions gathered
    into 20 of the 32 positions (8 buckets), accumulated, and in the one-program step with
    recomputed old log-probs (the PPO reuse path); the gradient and sums are every-position
    scoring's."""
    _, params, whole, halves, want_grads, want_sums = single
    (micro_batch,) = whole
    index = loss_position_index(micro_batch.loss_mask, 8)
    assert index is not None and index.shape == (8, 20)
    loss = dataclasses.replace(LOSS, loss_position_buckets=8)
    trainer = Trainer(
        Qwen3ForCausalLM(MODEL, rngs=nnx.Rngs(0)),
        make_optimizer(rl_config()),
        loss,
        mesh=make_mesh(devices=jax.devices()[:1]),
    )
    for micro_batches in (whole, halves):
        grads, sums = trainer.accumulate_gradients(params, micro_batches)
        assert_trees_close(normalized(grads, sums), want_grads)
        for key in ("loss_sum", "denominator", "entropy_sum", "loss_tokens", "policy_ratio_max"):
            np.testing.assert_allclose(sums[key], want_sums[key], rtol=1e-5)
    old = [trainer.logprobs(params, micro_batch)]
    assert np.asarray(old[0])[micro_batch.segment_ids > 0].all()  # scored everywhere
    state = trainer.init_state(jax.tree.map(jnp.copy, params))
    _, metrics = trainer.step(state, whole, old_logprobs=old)
    assert metrics["ratio_max"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["entropy"] == pytest.approx(want_sums["entropy_sum"] / want_sums["loss_tokens"])


def test_adamw_steps_move_logprobs_along_the_advantages(single):
    trainer, params, whole, *_ = single
    (micro_batch,) = whole
    before = np.asarray(trainer.logprobs(params, micro_batch))
    state = trainer.init_state(jax.tree.map(jnp.copy, params))
    for expected_step in (1, 2, 3):
        state, metrics = trainer.step(state, whole)
        assert metrics["step"] == expected_step
    after = np.asarray(trainer.logprobs(state.params, micro_batch))
    trained = micro_batch.loss_mask > 0
    change = ((after - before) * trained).sum(axis=1) / trained.sum(axis=1)
    advantage = micro_batch.advantages[:, 0]
    assert np.all(change[advantage > 0] > 0) and np.all(change[advantage < 0] < 0)

    assert metrics["loss_denominator"] == 8 and metrics["loss_tokens"] == trained.sum()
    assert metrics["tokens"] == (micro_batch.segment_ids > 0).sum()
    assert metrics["ratio_mean"] == pytest.approx(1.0) and metrics["clip_frac_high"] == 0.0
    assert metrics["learning_rate"] == pytest.approx(1e-2) and 0 < metrics["mfu"] < 1
    assert metrics["grad_norm"] > 0 and metrics["entropy"] > 0 and metrics["step_time_s"] > 0
    # The sampler's logprobs were all -0.5: the mismatch KL must show it.
    assert metrics["sampler_approx_kl"] > 0.1 and metrics["sampler_ratio_max"] < 1.0
    with pytest.raises(ValueError, match="no micro-batches"):
        trainer.step(state, [])


def test_training_flops_counts_matmuls_and_causal_attention():
    (micro_batch,) = assemble_batch(make_trajectories(), micro_batch_size=8).micro_batches
    lengths = micro_batch.sequence_lengths()
    assert lengths.sum() == (micro_batch.segment_ids > 0).sum()
    c = MODEL
    per_layer = c.hidden_size * (4 * 8 + 2 * 2 * 8) + 4 * 8 * c.hidden_size + 3 * c.hidden_size * 64
    matmul = c.num_hidden_layers * per_layer + c.vocab_size * c.hidden_size  # untied output only
    norms = c.num_hidden_layers * (2 * c.hidden_size + 2 * 8) + c.hidden_size
    attention = 6 * 2 * 4 * 8 * (lengths.astype(float) ** 2).sum()
    want = 6 * (matmul + norms) * lengths.sum() + attention
    assert training_flops(MODEL, [micro_batch]) == pytest.approx(want)
