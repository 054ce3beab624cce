"""config.sampler.dtype for the JaxSampler: bf16 compute and KV cache beside an fp32 trainer gives
the sampler-trainer mismatch vLLM in bf16 has (what rl.rollout_correction corrects), while an
fp32 sampler scores its tokens as the trainer does."""

from __future__ import annotations

import asyncio

import jax
import jax.numpy as jnp
import numpy as np

from configs import tiny
from deepswe_jax import experiment
from deepswe_jax.parallel import make_mesh
from deepswe_jax.sampling.base import GenerateRequest, SamplingParams

PROMPTS = ((5, 17, 99, 3), (42, 7, 7, 1000, 12, 1))
NEW_TOKENS = 24


def sampled_and_trainer_logprobs(dtype: str):
    config = tiny.get_config()
    config.model.update(num_hidden_layers=1)
    config.agent.update(max_prompt_tokens=16, max_context=NEW_TOKENS)
    config.sampler.update(dtype=dtype, max_batch=2)
    model = experiment.model_factory(config)()
    sampler = experiment.make_sampler(
        config,
        model,
        make_mesh(devices=jax.devices()[:1]),
        experiment.sharding_rules(config),
        seed=0,
    )
    params = SamplingParams(max_new_tokens=NEW_TOKENS)
    try:
        completions = asyncio.run(
            sampler.generate([GenerateRequest(prompt, params) for prompt in PROMPTS])
        )
    finally:
        sampler.close()
    assert model.dtype == jnp.float32  # the trainer's model is untouched
    sampled, scored = [], []
    for prompt, completion in zip(PROMPTS, completions, strict=True):
        tokens = jnp.asarray([prompt + completion.token_ids])
        logprobs = jax.nn.log_softmax(model(tokens)[0, len(prompt) - 1 : -1], axis=-1)
        scored.append(np.take_along_axis(logprobs, np.asarray(completion.token_ids)[:, None], 1))
        sampled.append(np.asarray(completion.logprobs))
    return np.concatenate(sampled), np.concatenate(scored)[:, 0]


def test_a_bf16_sampler_disagrees_with_the_fp32_trainer_and_an_fp32_one_does_not():
    sampled, scored = sampled_and_trainer_logprobs("float32")
    np.testing.assert_allclose(sampled, scored, atol=1e-5)
    sampled, scored = sampled_and_trainer_logprobs("bfloat16")
    difference = np.abs(sampled - scored)
    assert 1e-4 < difference.mean() < 0.1, difference.mean()
