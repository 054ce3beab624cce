"""JaxSampler against the model's own forward pass: greedy tokens, logprobs, batching, weight sync."""

import asyncio
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.lora import LoRAConfig, apply_lora, merge_lora
from deepswe_jax.parallel import DEFAULT_RULES, make_mesh
from deepswe_jax.sampling import (
    Completion,
    GenerateRequest,
    JaxSampler,
    SamplingParams,
    sample_next_tokens,
)
from deepswe_jax.sampling.decoding import first_argmax
from deepswe_jax.sampling.weights import per_layer_by_default

CONFIG = Qwen3Config(
    vocab_size=101,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)
MAX_CACHE_LEN = 32
# (prompt length, max_new_tokens): more requests than the sampler's 2 slots, all lengths differ.
SHAPES = [(3, 9), (11, 4), (1, 12), (16, 6), (7, 1)]


def make_model(seed: int) -> Qwen3ForCausalLM:
    # Larger-than-default init so the random model's next-token distributions are far from flat.
    return Qwen3ForCausalLM(dataclasses.replace(CONFIG, initializer_range=0.5), rngs=nnx.Rngs(seed))


def requests_of(shapes, temperature: float = 0.0, stop_token_ids=()) -> list[GenerateRequest]:
    rng = np.random.default_rng(0)
    return [
        GenerateRequest(
            tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, prompt_len)),
            SamplingParams(
                temperature=temperature, max_new_tokens=new, stop_token_ids=tuple(stop_token_ids)
            ),
        )
        for prompt_len, new in shapes
    ]


def forward_logits(model: Qwen3ForCausalLM, request: GenerateRequest, completion: Completion):
    """Full-sequence logits [num_generated, vocab] that predicted each generated token."""
    ids = jnp.array([list(request.prompt_ids) + list(completion.token_ids)])
    logits = model(ids)[0]
    start = len(request.prompt_ids) - 1
    return logits[start : start + len(completion.token_ids)]


def assert_greedy(model: Qwen3ForCausalLM, request: GenerateRequest, completion: Completion):
    expected = jnp.argmax(forward_logits(model, request, completion), axis=-1)
    assert list(completion.token_ids) == expected.tolist()


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return make_model(0)


@pytest.fixture(scope="module")
def sampler(model):
    sampler = JaxSampler(model, max_batch=2, max_cache_len=MAX_CACHE_LEN, min_prefill_len=16)
    yield sampler
    sampler.close()


def test_greedy_concurrent_requests_equal_forward_argmax_and_solo_runs(model, sampler):
    requests = requests_of(SHAPES)

    async def concurrent():
        return await asyncio.gather(*(sampler.generate([r]) for r in requests))

    together = [c for [c] in asyncio.run(concurrent())]
    for request, completion in zip(requests, together, strict=True):
        assert len(completion.token_ids) == request.params.max_new_tokens
        assert completion.finish_reason == "length"
        assert_greedy(model, request, completion)
        solo = asyncio.run(sampler.generate([request]))[0]
        assert solo == together[requests.index(request)]
    # One generate call with many requests returns them in order, too.
    assert asyncio.run(sampler.generate(requests)) == together


def test_logprobs_equal_log_softmax_of_forward_logits_at_temperature_one(model, sampler):
    requests = requests_of(SHAPES[:3], temperature=1.0)
    completions = asyncio.run(sampler.generate(requests))
    for request, completion in zip(requests, completions, strict=True):
        log_probs = jax.nn.log_softmax(forward_logits(model, request, completion), axis=-1)
        expected = log_probs[jnp.arange(len(completion.token_ids)), jnp.array(completion.token_ids)]
        np.testing.assert_allclose(completion.logprobs, expected, atol=1e-4)
    # Sampling, not argmax: with temperature 1 some token differs from the greedy choice.
    greedy = asyncio.run(sampler.generate(requests_of(SHAPES[:3])))
    assert [c.token_ids for c in completions] != [c.token_ids for c in greedy]


def test_stop_token_ends_with_stop_and_budget_with_length(model, sampler):
    [request] = requests_of([(5, 10)])
    [free] = asyncio.run(sampler.generate([request]))
    stop_id = free.token_ids[3]
    first_stop = free.token_ids.index(stop_id)
    [stopped] = asyncio.run(
        sampler.generate(
            [
                GenerateRequest(
                    request.prompt_ids,
                    SamplingParams(temperature=0.0, max_new_tokens=10, stop_token_ids=(stop_id,)),
                )
            ]
        )
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: first_stop + 1]
    assert len(stopped.logprobs) == len(stopped.token_ids)
    assert free.finish_reason == "length"


def test_cache_room_caps_the_completion_and_bad_requests_are_refused(sampler):
    [request] = requests_of([(16, 100)])
    [completion] = asyncio.run(sampler.generate([request]))
    assert len(completion.token_ids) == MAX_CACHE_LEN - 16 and completion.finish_reason == "length"
    [too_long] = requests_of([(MAX_CACHE_LEN, 1)])
    with pytest.raises(ValueError, match="max_cache_len"):
        asyncio.run(sampler.generate([too_long]))
    with pytest.raises(ValueError, match="empty prompt"):
        asyncio.run(sampler.generate([GenerateRequest((), SamplingParams(max_new_tokens=1))]))


def test_sync_weights_samples_new_weights_without_recompiling(model, sampler):
    requests = requests_of(SHAPES[:2])
    before = asyncio.run(sampler.generate(requests))
    compiled = sampler.compilation_count
    new_model = make_model(1)
    sampler.sync_weights(nnx.state(new_model))
    after = asyncio.run(sampler.generate(requests))
    assert [c.token_ids for c in after] != [c.token_ids for c in before]
    for request, completion in zip(requests, after, strict=True):
        assert_greedy(new_model, request, completion)
    sampler.sync_weights(model)  # a Module works as well as its state
    assert asyncio.run(sampler.generate(requests)) == before
    assert sampler.compilation_count == compiled
    with pytest.raises(ValueError, match="shape"):
        sampler.sync_weights(
            Qwen3ForCausalLM(dataclasses.replace(CONFIG, hidden_size=16), rngs=nnx.Rngs(0))
        )


@pytest.mark.parametrize(
    "cache",
    [{}, {"paged": True}, {"paged": True, "paged_attention": "pallas"}],
    ids=["dense", "paged", "paged, Pallas kernel"],
)
def test_sharded_over_eight_devices_matches_forward_argmax(model, cache):
    """Weights, and the cache's kv heads, split over tensor=2 (the Pallas kernel then runs per
    device in a shard_map, each on its own kv heads and their query heads)."""
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    # 101 vocabulary rows do not split over tensor=2: the rules replicate them.
    rules = (*DEFAULT_RULES, ("vocab", None), ("act_vocab", None))
    sampler = JaxSampler(
        model, max_batch=4, max_cache_len=32, mesh=mesh, rules=rules, min_prefill_len=16, **cache
    )
    requests = requests_of(SHAPES)
    completions = asyncio.run(sampler.generate(requests))
    sampler.close()
    for request, completion in zip(requests, completions, strict=True):
        assert_greedy(model, request, completion)
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(sampler.generate(requests))


def test_sample_next_tokens_truncates_top_k_and_top_p_but_reports_full_logprobs():
    probs = jnp.array([0.5, 0.3, 0.15, 0.05])
    logits = jnp.tile(jnp.log(probs), (256, 1))
    ones = jnp.ones(256)
    keys = jax.random.split(jax.random.key(0), 256)

    def draw(temperature, top_p, top_k):
        return sample_next_tokens(
            logits, keys, temperature * ones, top_p * ones, jnp.full(256, top_k, jnp.int32)
        )

    tokens, logprobs = draw(1.0, 1.0, 0)
    assert set(np.asarray(tokens).tolist()) == {0, 1, 2, 3}
    np.testing.assert_allclose(logprobs, jnp.log(probs)[tokens], rtol=1e-5)
    tokens, logprobs = draw(1.0, 1.0, 2)
    assert set(np.asarray(tokens).tolist()) == {0, 1}
    np.testing.assert_allclose(logprobs, jnp.log(probs)[tokens], rtol=1e-5)  # untruncated
    tokens, _ = draw(1.0, 0.8, 0)  # 0.5 + 0.3 reaches 0.8: the nucleus is tokens {0, 1}
    assert set(np.asarray(tokens).tolist()) == {0, 1}
    tokens, _ = draw(1.0, 0.9, 3)
    assert set(np.asarray(tokens).tolist()) == {0, 1, 2}
    tokens, logprobs = draw(0.5, 1.0, 0)
    np.testing.assert_allclose(logprobs, jax.nn.log_softmax(logits / 0.5)[0][tokens], rtol=1e-5)
    tokens, logprobs = draw(0.0, 1.0, 0)
    assert set(np.asarray(tokens).tolist()) == {0}
    np.testing.assert_allclose(logprobs, jnp.log(0.5), rtol=1e-5)


def test_first_argmax_and_sampled_draws_equal_jax_argmax_and_categorical():
    """The sampler's argmax (a max and a min, faster on CPU) keeps jnp.argmax's answers, ties
    and NaN included, and its Gumbel-max draws are jax.random.categorical's for the same key
    (one key per row)."""
    logits = jax.random.normal(jax.random.key(1), (64, 1000))
    logits = logits.at[1, 7].set(10.0).at[1, 9].set(10.0)  # a tie: the first index wins
    logits = logits.at[2, 5].set(jnp.nan)  # a NaN counts as the maximum, as in jnp.argmax
    np.testing.assert_array_equal(first_argmax(logits), jnp.argmax(logits, axis=-1))
    logits = jnp.nan_to_num(logits)
    keys, ones = jax.random.split(jax.random.key(3), 64), jnp.ones(64)
    tokens, _ = sample_next_tokens(logits, keys, ones, ones, jnp.zeros(64, jnp.int32))
    expected = jax.vmap(lambda k, row: jax.random.categorical(k, row))(keys, logits)
    np.testing.assert_array_equal(tokens, expected)


def test_a_seeded_request_samples_the_same_tokens_alone_or_beside_others(model):
    """SamplingParams.seed: a request's draws come from its seed and token index alone, so the
    same request at T=1.0 gives the same completion served alone (a fresh prefill) and later among
    others, which change its row, its batch and its path (an extend after its cached prompt);
    another seed gives another completion. Before, one key per device call was shared by all rows,
    so a request's tokens depended on what else ran."""
    sampler = JaxSampler(model, max_batch=2, max_cache_len=MAX_CACHE_LEN, min_prefill_len=16)
    try:
        [base] = requests_of([(20, 10)], temperature=1.0)  # over one 16-token cache block

        def seeded(seed: int) -> GenerateRequest:
            return dataclasses.replace(base, params=dataclasses.replace(base.params, seed=seed))

        [alone] = asyncio.run(sampler.generate([seeded(7)]))
        others = requests_of([(9, 6), (3, 10), (12, 5)], temperature=1.0)
        beside = asyncio.run(sampler.generate([others[0], seeded(7), *others[1:]]))[1]
        [again] = asyncio.run(sampler.generate([seeded(7)]))
        [other_seed] = asyncio.run(sampler.generate([seeded(8)]))
    finally:
        sampler.close()
    assert sampler.prefill_counts.reused_tokens > 0  # some prompts ran as extends of cached ones
    assert beside.token_ids == alone.token_ids == again.token_ids
    np.testing.assert_allclose(beside.logprobs, alone.logprobs, atol=1e-5)
    assert other_seed.token_ids != alone.token_ids


def test_per_layer_weights_sample_what_stacked_weights_sample_and_are_held_once(model):
    """The CPU layout (`per_layer_weights`, sampling/weights.py: each layer's weights arrays of
    their own) against the stacked one: the same greedy and seeded tokens and logprobs through
    prefills, extends of cached prompts and decode steps, before and after `sync_weights`; and the
    per-layer arrays replace the stacked ones (each weight is held once)."""
    requests = requests_of(SHAPES) + [
        dataclasses.replace(r, params=dataclasses.replace(r.params, seed=3))
        for r in requests_of([(14, 8)], temperature=1.0)
    ]
    outputs, held = {}, {}
    for per_layer in (False, True):
        sampler = JaxSampler(
            model, max_batch=2, max_cache_len=MAX_CACHE_LEN, min_prefill_len=16,
            per_layer_weights=per_layer,
        )  # fmt: skip
        try:
            first = asyncio.run(sampler.generate(requests))
            # The next turns (prompt + completion + 2 tokens), the last cached first: extends.
            continued = [
                dataclasses.replace(r, prompt_ids=r.prompt_ids + c.token_ids + (5, 6))
                for r, c in zip(requests[::-1], first[::-1], strict=True)
                if len(r.prompt_ids) + len(c.token_ids) + 2 <= MAX_CACHE_LEN - 4
            ]
            second = asyncio.run(sampler.generate(continued))
            sampler.sync_weights(make_model(1))
            third = asyncio.run(sampler.generate(requests))
            assert sampler.prefill_counts.reused_tokens > 0
            held[per_layer] = sum(x.nbytes for x in jax.tree.leaves(sampler._weights))
        finally:
            sampler.close()
        outputs[per_layer] = first + second + third
    for stacked, per_layer in zip(outputs[False], outputs[True], strict=True):
        assert per_layer.token_ids == stacked.token_ids
        np.testing.assert_allclose(per_layer.logprobs, stacked.logprobs, atol=1e-5)
    params = sum(x.nbytes for x in jax.tree.leaves(nnx.state(model)))
    assert held == {False: params, True: params}


def test_layers_are_held_one_array_each_by_default_on_cpus_when_they_are_large():
    """The default layout: per layer on CPUs for layers of 4 MiB or more (a ~100M model's 25
    MiB: faster), stacked for small layers (this file's model: the switch costs more than the
    copies) and on GPUs."""
    large = dataclasses.replace(CONFIG, hidden_size=512, intermediate_size=1024)
    abstract = {
        name: nnx.state(nnx.eval_shape(lambda c=c: Qwen3ForCausalLM(c, rngs=nnx.Rngs(0))))
        for name, c in (("small", CONFIG), ("large", large))
    }
    assert per_layer_by_default(abstract["large"], "cpu")
    assert not per_layer_by_default(abstract["small"], "cpu")
    assert not per_layer_by_default(abstract["large"], "gpu")


def test_a_model_with_lora_adapters_keeps_its_layers_stacked_and_samples_with_them():
    """LoRA adapters live beside the layers' kernels and only the stacked layers' code merges
    them (model/lora.py): a per-layer layout would sample the base kernels alone. A model with
    adapters (B nonzero, so they change the tokens) keeps the stacked layout by default, samples
    its own forward's argmax, and asking for per-layer weights is refused, saying what to do."""
    large = dataclasses.replace(CONFIG, hidden_size=512, intermediate_size=1024)
    model = Qwen3ForCausalLM(dataclasses.replace(large, initializer_range=0.5), rngs=nnx.Rngs(0))
    apply_lora(model, LoRAConfig(rank=4, alpha=8.0), rngs=nnx.Rngs(1))
    for name in ("q_proj", "gate_proj"):
        adapter = getattr(model.layers, f"{name}_lora_b")
        adapter[...] = jax.random.normal(jax.random.key(2), adapter[...].shape)
    assert per_layer_by_default(nnx.state(make_model(0)), "cpu") is False  # small layers
    assert per_layer_by_default(nnx.state(merge_lora(model)), "cpu")  # large, plain
    assert not per_layer_by_default(nnx.state(model), "cpu")
    sampler = JaxSampler(model, max_batch=2, max_cache_len=MAX_CACHE_LEN, min_prefill_len=16)
    try:
        requests = requests_of(SHAPES[:2])
        for request, completion in zip(
            requests, asyncio.run(sampler.generate(requests)), strict=True
        ):
            assert_greedy(model, request, completion)
    finally:
        sampler.close()
    with pytest.raises(ValueError, match="lora_a.*merge_lora"):
        JaxSampler(model, max_batch=2, max_cache_len=MAX_CACHE_LEN, per_layer_weights=True)
