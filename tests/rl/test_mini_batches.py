"""config.rl.mini_batches: several optimizer steps per rollout batch, as verl's
dp_actor.update_policy takes one per ppo_mini_batch_size (rLLM's DeepSWE 32B script: 8 per
batch, rllm-org/rllm examples/swe/train_deepswe_32b_eager.sh). Each mini-batch is whole,
consecutive task groups, normalised on its own, clipped against the pre-update policy."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from configs import tiny
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.experiment import optimizer_settings
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh
from deepswe_jax.parallel.distributed import process_local_record
from deepswe_jax.rl.batch import assemble_batch
from deepswe_jax.rl.loop import UpdateSettings, update_policy
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import make_optimizer
from deepswe_jax.rl.train_step import Trainer

PROMPT_LEN = 3


def trajectory(task: int, rollout: int, reward: float, length: int, stop=StopReason.finished):
    """Task `task`'s rollout: every token id is the task number (so rows show their task)."""
    tokens = (task,) * (PROMPT_LEN + length)
    return Trajectory(
        task_id=f"task{task}",
        rollout_index=rollout,
        policy_version=0,
        prompt_ids=tokens[:PROMPT_LEN],
        token_ids=tokens,
        loss_mask=(0,) * PROMPT_LEN + (1,) * length,
        sampler_logprobs=(0.0,) * PROMPT_LEN + (-1.0,) * length,
        reward=reward,
        stop_reason=stop,
        infra_error=False,
        num_steps=1,
        patch="",
        timings={},
        steps=(),
        grade=None,
    )


def rollouts() -> list[Trajectory]:
    """4 tasks x 2 rollouts of varied lengths; task 3's second rollout ran out of steps."""
    out = []
    for task in range(4):
        for rollout in range(2):
            stop = StopReason.max_steps if (task, rollout) == (3, 1) else StopReason.finished
            out.append(trajectory(task, rollout, float(rollout == 0), 2 + task + rollout, stop))
    return out


def test_mini_batches_are_consecutive_task_groups_each_counting_its_sequences():
    batch = assemble_batch(rollouts(), micro_batch_size=2, mini_batches=2)
    assert batch.mini_batch_sizes == (2, 2)  # tasks 0-1: 4 rows; tasks 2-3: 3 (one masked)
    tasks_of = [
        {int(t) for mb in part for t in np.unique(mb.input_ids[mb.segment_ids > 0])}
        for part in batch.mini_batches()
    ]
    assert tasks_of == [{0, 1}, {2, 3}]
    # The compact-filtered rollout counts in its own mini-batch's denominator only.
    absent = [float(sum(mb.absent_sequences.sum() for mb in part)) for part in batch.mini_batches()]
    assert absent == [0.0, 1.0]
    whole = assemble_batch(rollouts(), micro_batch_size=2)
    assert whole.mini_batch_sizes == (4,) and len(whole.mini_batches()) == 1
    # The same stats but for padding (each mini-batch pads its own micro-batches).
    assert dataclasses.replace(batch.stats, padding_fraction=0.0) == dataclasses.replace(
        whole.stats, padding_fraction=0.0
    )

    # Whole groups: the advantages do not depend on the split.
    def advantages(micro_batches):
        return sorted(float(a) for mb in micro_batches for a in mb.advantages[mb.loss_mask > 0])

    assert advantages(batch.micro_batches) == advantages(whole.micro_batches)


def make_trainer() -> tuple[Trainer, nnx.State]:
    config = tiny.get_config()
    config.rl.update(lr=5e-2, weight_decay=0.0, warmup_steps=0)
    model = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=8,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        ),
        rngs=nnx.Rngs(0),
    )
    trainer = Trainer(
        model,
        make_optimizer(optimizer_settings(config.rl)),
        LossSettings(max_response_len=8, logprob_chunk=8),
        mesh=make_mesh(1, 1, 1, devices=jax.devices()[:1]),
        rules=config.sharding_rules,
    )
    return trainer, nnx.state(model, nnx.Param)


def fresh_state(trainer: Trainer, params: nnx.State):
    """A new train state from copies of `params` (init_state donates its argument)."""
    return trainer.init_state(jax.tree.map(jnp.array, params))


def test_k_mini_batches_equal_k_sequential_steps_against_the_pre_update_policy():
    trainer, params = make_trainer()
    settings = UpdateSettings(micro_batch_size=2, length_buckets=(16,), mini_batches=2)
    state, metrics = update_policy(trainer, fresh_state(trainer, params), rollouts(), settings)
    assert metrics["train/optimizer_steps"] == 2.0

    # The explicit reference: the same batch's two halves stepped one after the other, each its
    # own (sum, denominator), old log-probs of both from the parameters before the first step.
    batch = assemble_batch(rollouts(), micro_batch_size=2, length_buckets=(16,), mini_batches=2)
    expected = fresh_state(trainer, params)
    parts = [
        [process_local_record(mb, trainer.batch_sharding) for mb in part]
        for part in batch.mini_batches()
    ]
    old = [[trainer.logprobs(expected.params, mb) for mb in part] for part in parts]
    for part, part_old in zip(parts, old, strict=True):
        expected, _ = trainer.step(expected, part, part_old)
    assert int(state.step) == int(expected.step) == 2
    jax.tree.map(np.testing.assert_array_equal, state.params, expected.params)

    # Not the same as one step on the whole batch (so the split is what is being tested).
    single, metrics = update_policy(
        trainer,
        fresh_state(trainer, params),
        rollouts(),
        UpdateSettings(micro_batch_size=2, length_buckets=(16,)),
    )
    assert metrics["train/optimizer_steps"] == 1.0 and int(single.step) == 1
    differences = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), single.params, state.params)
    assert max(jax.tree.leaves(differences)) > 1e-4
