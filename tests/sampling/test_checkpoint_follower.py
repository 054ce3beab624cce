"""Disaggregated sampling: a follower restores the trainer's checkpoint (saved from a 4-device
mesh) onto its own 2-device mesh, samples exactly the trainer's greedy tokens, and reports the
checkpoint step it serves; a newer step replaces it at the next poll."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from configs import tiny
from deepswe_jax import experiment
from deepswe_jax.checkpoint import TrainCheckpoints
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.batch import MicroBatch
from deepswe_jax.rl.train_step import Trainer
from deepswe_jax.sampling.base import GenerateRequest, SamplingParams
from deepswe_jax.sampling.jax_sampler import JaxSampler

PROMPTS = [(5, 17, 300, 41), (9, 2, 2, 2, 2, 77, 1000)]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)


def small_config():
    config = tiny.get_config()
    config.model.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2)
    config.model.update(num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    config.rl.update(lr=3e-2)
    config.agent.update(max_prompt_tokens=32, max_context=32)
    config.sampler.update(max_batch=4)  # divides the trainer's fsdp=4 batch axis
    return config


def train_step(trainer: Trainer, state, seed: int):
    """One update on a random batch, so each checkpoint holds different weights."""
    rng = np.random.default_rng(seed)
    rows, length = 4, 16
    tokens = rng.integers(0, 4096, (rows, length + 1)).astype(np.int32)
    batch = MicroBatch(
        input_ids=tokens[:, :-1],
        targets=tokens[:, 1:],
        positions=np.tile(np.arange(length, dtype=np.int32), (rows, 1)),
        segment_ids=np.ones((rows, length), np.int32),
        loss_mask=np.ones((rows, length), np.float32),
        advantages=np.ones((rows, length), np.float32),
        sampler_logprobs=np.zeros((rows, length), np.float32),
    )
    return trainer.step(state, [batch])[0]


def save(checkpoints: TrainCheckpoints, step: int, state, config) -> None:
    checkpoints.save(
        step,
        params=state.params,
        opt_state=state.opt_state,
        rng_key=jax.random.key(0),
        data_position={"tasks_consumed": 0, "optimizer_steps": step},
        model_config=config.model.to_dict(),
        config=config.to_dict(),
    )
    checkpoints.wait_until_finished()


def greedy(sampler) -> list[tuple[int, ...]]:
    requests = [GenerateRequest(prompt, GREEDY) for prompt in PROMPTS]
    return [completion.token_ids for completion in asyncio.run(sampler.generate(requests))]


def test_follower_serves_the_trainers_policy_on_another_mesh(tmp_path: Path):
    config = small_config()
    rules = experiment.sharding_rules(config)
    trainer = experiment.make_trainer(config, make_mesh(1, 4, 1, devices=jax.devices()[:4]), rules)
    state = trainer.init_state(experiment.initial_params(config, trainer.mesh, rules))
    sampler_mesh = make_mesh(1, 2, 1, devices=jax.devices()[4:6])
    # what the trainer's own model samples, on the trainer's mesh
    reference = JaxSampler(
        nnx.merge(trainer.graphdef, state.params),
        max_batch=4,
        max_cache_len=64,
        mesh=trainer.mesh,
        rules=rules,
    )
    status = tmp_path / "sampler_status.json"
    checkpoints = TrainCheckpoints(tmp_path / "checkpoints", every=1, keep=2)
    follower = experiment.checkpoint_follower(
        config, tmp_path / "checkpoints", sampler_mesh, status_file=status
    )
    try:
        assert follower.poll() is None and follower.policy_version is None  # nothing saved yet

        state = train_step(trainer, state, seed=1)
        save(checkpoints, 1, state, config)
        assert follower.poll() == 1 and follower.policy_version == 1
        assert json.loads(status.read_text())["policy_version"] == 1
        served = follower.sampler._state_shardings
        assert {d for s in jax.tree.leaves(served) for d in s.device_set} == set(
            sampler_mesh.devices.flat
        )
        first = greedy(follower.sampler)
        reference.sync_weights(state.params)
        assert first == greedy(reference)
        assert follower.poll() is None  # no newer step: keeps serving version 1

        state = train_step(trainer, state, seed=2)
        save(checkpoints, 2, state, config)
        assert follower.poll() == 2 and json.loads(status.read_text())["policy_version"] == 2
        second = greedy(follower.sampler)
        reference.sync_weights(state.params)
        assert second == greedy(reference)
        assert second != first  # the update changed what the policy writes
    finally:
        follower.close()
        reference.close()
        checkpoints.close()
