"""The composition root (deepswe_jax.experiment): each config section becomes the typed
settings a library package takes, and the trainer and sampler a config describes are built in
one place each."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from configs import sft_tiny, tiny, verifier_tiny
from deepswe_jax import experiment
from deepswe_jax.model.lora import LoRAParam
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.objectives import PolicyGradientLoss
from deepswe_jax.rl.sft import NegativeLogLikelihoodLoss
from deepswe_jax.sampling.jax_sampler import JaxSampler


def test_settings_carry_the_values_of_their_config_sections():
    config = tiny.get_config()
    config.agent.update(max_steps=7, max_context=100, submit_notice_tokens=90)
    config.sampler.update(temperature=0.5, top_p=0.9, top_k=5)
    config.rl.update(n_rollouts=6, advantage="grpo", num_iterations=2, overlap=True)
    config.checkpoint.update(every=4, keep=5, async_save=False)
    config.seed = 11

    episode = experiment.episode_settings(config)
    assert (episode.max_steps, episode.max_context, episode.submit_notice_after) == (7, 100, 90)
    assert (episode.temperature, episode.top_p, episode.top_k) == (0.5, 0.9, 5)
    assert episode.reward_timeout == config.agent.reward_timeout
    loop = experiment.loop_settings(config)
    assert (loop.n_rollouts, loop.seed, loop.overlap, loop.total_steps) == (6, 11, True, 3)
    assert loop.update.advantage == "grpo" and loop.update.num_iterations == 2
    assert loop.update.compact_filtering is False  # tiny turns it off
    assert loop.update.length_buckets == tuple(config.rl.length_buckets)
    assert dataclasses.astuple(experiment.checkpoint_settings(config)) == (4, 5, False)
    loss = experiment.loss_settings(config)
    assert (loss.max_response_len, loss.temperature) == (100, 0.5)  # scored as sampled

    sft = sft_tiny.get_config()
    settings = experiment.sft_settings(sft)
    assert (settings.num_steps, settings.batch_size, settings.length_buckets[0]) == (200, 2, 1536)
    assert experiment.sft_optimizer_settings(sft).decay_steps == 200  # cosine_decay
    sft.sft.cosine_decay = False
    assert experiment.sft_optimizer_settings(sft).decay_steps == 0
    assert experiment.sft_optimizer_settings(sft).lr == sft.sft.lr != sft.rl.lr

    verifier = verifier_tiny.get_config()
    assert experiment.lora_config(verifier) is None  # rank 0: full fine-tuning
    verifier.verifier.lora_rank = 8
    assert experiment.lora_config(verifier).rank == 8
    assert experiment.verifier_settings(verifier).micro_batch_size == verifier.rl.micro_batch_size


def test_one_trainer_builder_for_rl_sft_and_the_verifier():
    config = tiny.get_config()
    config.remat = "full"
    config.scan_unroll = 4
    config.rl.loss_position_buckets = 8
    config.rl.peak_flops_per_device = 1e12
    mesh, rules = make_mesh(), experiment.sharding_rules(config)
    trainer = experiment.make_trainer(config, mesh, rules)
    assert trainer.model_config.hidden_size == config.model.hidden_size
    policy = nnx.merge(trainer.graphdef, trainer.param_shardings)
    assert policy.remat == "full" and policy.scan_unroll == 4
    assert trainer.loss.max_response_len == config.agent.max_context
    assert trainer.loss.logprob_chunk == config.rl.logprob_chunk
    assert trainer.loss.loss_position_buckets == 8
    assert trainer.peak_flops_per_device == 1e12
    assert isinstance(trainer.loss_fn, PolicyGradientLoss)
    assert float(trainer.learning_rate(0)) == config.rl.lr  # no warmup in tiny

    sft_config = sft_tiny.get_config()
    sft = experiment.make_trainer(sft_config, mesh, rules, objective="sft")
    assert isinstance(sft.loss_fn, NegativeLogLikelihoodLoss) and sft.loss.temperature == 1.0
    peak = sft_config.sft.warmup_steps
    assert float(sft.learning_rate(peak)) == pytest.approx(sft_config.sft.lr)
    assert float(sft.learning_rate(sft_config.sft.num_steps)) == pytest.approx(0.0)

    verifier_config = verifier_tiny.get_config()
    verifier_config.model.num_hidden_layers = 1
    verifier_config.verifier.update(lora_rank=4, lora_targets=("q_proj",))
    model = experiment.verifier_model(verifier_config, mesh, rules)
    verifier = experiment.make_trainer(
        verifier_config, mesh, rules, objective="verifier", model=model
    )
    assert verifier.trainable is LoRAParam
    assert jax.tree.leaves(nnx.state(model, LoRAParam))
    with pytest.raises(ValueError, match="objective 'ppo' is not one of"):
        experiment.make_trainer(config, mesh, rules, objective="ppo")


def test_one_sampler_builder_for_every_kind():
    """'jax' here ('vllm' engines are built through it in tests/sampling/test_multihost_vllm.py)."""
    config = tiny.get_config()
    config.model.update(num_hidden_layers=1)
    config.sampler.update(max_batch=16, max_cache_tokens=8 * 1600)  # room for 8 of 16 slots
    mesh, rules = make_mesh(), experiment.sharding_rules(config)
    model = experiment.model_factory(config)()
    sampler = experiment.make_sampler(config, model, mesh, rules, seed=0)
    try:
        assert isinstance(sampler, JaxSampler) and sampler.max_batch == 8
        assert sampler.max_cache_len == config.agent.max_prompt_tokens + config.agent.max_context
    finally:
        sampler.close()
    config.sampler.kind = "hf"
    with pytest.raises(ValueError, match="config.sampler.kind='hf'; use 'jax'"):
        experiment.make_sampler(config, model, mesh, rules, seed=0)


def test_policy_config_reads_the_checkpoints_architecture_and_keeps_the_schema(tmp_path):
    from deepswe_jax.checkpoint import save_params

    config = tiny.get_config()
    config.model.update(hidden_size=64, num_attention_heads=2, head_dim=32)
    model = experiment.model_factory(config)()
    save_params(
        tmp_path / "policy", nnx.state(model, nnx.Param), model_config=config.model.to_dict()
    )
    loaded = experiment.policy_config(tiny.get_config(), tmp_path / "policy")
    assert loaded.init_from == str(tmp_path / "policy") and loaded.model.hidden_size == 64
    assert loaded.is_locked  # still the declared schema
    params = experiment.initial_params(loaded, make_mesh(), experiment.sharding_rules(loaded))
    np.testing.assert_array_equal(
        params["embed_tokens"].get_value(), nnx.state(model, nnx.Param)["embed_tokens"].get_value()
    )


def test_the_scorer_is_what_the_selectors_need():
    """experiment.make_scorer: no selectors need no scorer; a verifier selector without a
    verifier directory, and an unknown selector, are refused before anything is loaded."""
    settings = dict(timeout=60, workers=1, run_label="eval-test", runtime_factory=None)
    assert experiment.make_scorer((), verifier_dir=None, **settings) is None
    assert callable(experiment.make_scorer(("execution",), verifier_dir=None, **settings))
    for selectors in (("verifier",), ("hybrid",)):
        with pytest.raises(ValueError, match=r"need an execution-free verifier.*--verifier=DIR"):
            experiment.make_scorer(selectors, verifier_dir=None, **settings)
    with pytest.raises(ValueError, match=r"unknown selectors \['oracle'\]"):
        experiment.make_scorer(("oracle",), verifier_dir=None, **settings)
