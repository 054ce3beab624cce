"""JaxSampler's prefix reuse, on the dense cache and on the paged one: a multi-turn episode and a
group of rollouts give the same tokens and log-probs with reuse on and off, while the shared
prefixes are computed once; eviction, waiting for a row and new weights never make it reuse the
wrong keys/values. The paged cache shares whole pages only (as vLLM's prefix caching shares
whole blocks), so a prompt there recomputes up to PAGE - 1 more tokens than on the dense one."""

import asyncio

import numpy as np
import pytest
from flax import nnx

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.model.kv_cache import PAGE
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams, jax_sampler
from deepswe_jax.sampling.prefix_cache import BLOCK, Placement, RowPrefixCache

CONFIG = Qwen3Config(
    vocab_size=101,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    initializer_range=0.5,  # peaked next-token distributions: greedy choices are not near-ties
)
MAX_CACHE_LEN = 384
SIZES = dict(max_cache_len=MAX_CACHE_LEN, min_prefill_len=64)  # few shape buckets to compile


def random_ids(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    return tuple(int(t) for t in rng.integers(0, CONFIG.vocab_size, n))


def greedy(new_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=new_tokens)


@pytest.fixture(scope="module")
def model() -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(CONFIG, rngs=nnx.Rngs(0))


def reused(prompt_len: int, cached_len: int, paged: bool) -> int:
    """Tokens of a prompt whose first `cached_len` tokens are cached that are not computed: the
    last prompt token is always computed, and the paged cache reuses whole pages only."""
    shared = min(cached_len, prompt_len - 1)
    return shared // PAGE * PAGE if paged else shared


@pytest.fixture(scope="module", params=[False, True], ids=["dense", "paged"])
def paged(request) -> bool:
    return request.param


@pytest.fixture(scope="module")
def samplers(model, paged):
    """(reuse on, reuse off), 2 rows each."""
    on = JaxSampler(model, max_batch=2, **SIZES, prefix_caching=True, paged=paged)
    off = JaxSampler(model, max_batch=2, **SIZES, prefix_caching=False, paged=paged)
    yield on, off
    on.close()
    off.close()


def run_episode(sampler: JaxSampler, turns: int = 9, evict_after: int = 4):
    """A scripted agent episode: each turn's prompt is the previous prompt + completion + an
    observation; after `evict_after` turns two unrelated prompts take both rows."""
    rng = np.random.default_rng(1)
    prompt = random_ids(rng, 37)
    tokens, logprobs = [], []
    for turn in range(turns):
        [completion] = asyncio.run(
            sampler.generate([GenerateRequest(prompt, greedy(int(rng.integers(3, 12))))])
        )
        tokens.append(completion.token_ids)
        logprobs.append(completion.logprobs)
        prompt = prompt + completion.token_ids + random_ids(rng, int(rng.integers(5, 15)))
        if turn == evict_after:
            others = [GenerateRequest(random_ids(rng, 20), greedy(4)) for _ in range(2)]
            asyncio.run(sampler.generate(others))
    return tokens, logprobs, len(prompt)


def test_multi_turn_episode_is_identical_with_and_without_reuse(samplers):
    on, off = samplers
    before = on.prefill_counts
    tokens_on, logprobs_on, final_len = run_episode(on)
    counts = on.prefill_counts
    tokens_off, logprobs_off, _ = run_episode(off)
    assert final_len > 8 * BLOCK  # the turns cross many block boundaries
    assert tokens_on == tokens_off
    for a, b in zip(logprobs_on, logprobs_off, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    computed = counts.computed_tokens - before.computed_tokens
    prompts = counts.prompt_tokens - before.prompt_tokens
    assert off.prefill_counts.reused_tokens == 0
    # Without the eviction only each turn's new tokens would be computed; with it, one prompt
    # is computed whole again (plus the two unrelated prompts).
    assert computed < prompts / 2


def test_group_of_rollouts_computes_the_shared_prompt_once(model, samplers, paged):
    _, off = samplers
    sampler = JaxSampler(model, max_batch=4, **SIZES, paged=paged)
    rng = np.random.default_rng(2)
    shared = random_ids(rng, 100)
    same = [GenerateRequest(shared, greedy(6)) for _ in range(4)]
    completions = asyncio.run(sampler.generate(same))
    # The prompt once, then only its last token (whose logits start each completion) per copy,
    # or (paged) its last partial page.
    assert sampler.prefill_counts.computed_tokens == 100 + 3 * (100 - reused(100, 100, paged))
    [expected] = asyncio.run(off.generate(same[:1]))
    for completion in completions:
        assert completion.token_ids == expected.token_ids
        np.testing.assert_allclose(completion.logprobs, expected.logprobs, atol=1e-5)

    # Suffixes that part from the cached completions and from each other at their first token.
    first = expected.token_ids[0]
    suffixes = [((first + i) % CONFIG.vocab_size,) + random_ids(rng, 19) for i in range(1, 5)]
    forked = [GenerateRequest(shared + s, greedy(6)) for s in suffixes]
    before = sampler.prefill_counts.computed_tokens
    completions = asyncio.run(sampler.generate(forked))
    computed = 4 * (120 - reused(120, 100, paged))  # the shared part is cached
    assert sampler.prefill_counts.computed_tokens - before == computed
    expected = [c for r in forked for c in asyncio.run(off.generate([r]))]
    assert [c.token_ids for c in completions] == [c.token_ids for c in expected]
    for a, b in zip(completions, expected, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    sampler.close()


def test_extends_of_any_count_and_suffix_length_compile_nothing_new(
    model, samplers, paged, monkeypatch
):
    """Episodes continuing alone and together, with suffixes shorter and longer than one extend
    call takes, run on the programs their first continuation compiled, with the tokens and
    log-probs reuse-off gives."""
    monkeypatch.setattr(jax_sampler, "EXTEND_CHUNK", 64)  # longer suffixes run in 64-token calls
    _, off = samplers
    sampler = JaxSampler(model, max_batch=4, **SIZES, paged=paged)
    rng = np.random.default_rng(5)
    prompts = [random_ids(rng, 30 + 10 * i) for i in range(3)]
    cached = [0, 0, 0]  # tokens of each episode the cache holds after its last turn
    expected_computed = []
    # (episodes continuing at once, observation tokens each then appends)
    turns = [((0, 1, 2), 20), ((0,), 130), ((0, 1, 2), 5), ((1, 2), 0)]
    compiled, computed = [], []
    for episodes, observation in turns:
        requests = [GenerateRequest(prompts[i], greedy(4)) for i in episodes]
        expected_computed.append(
            sum(len(prompts[i]) - reused(len(prompts[i]), cached[i], paged) for i in episodes)
        )
        before = sampler.prefill_counts.computed_tokens
        got = asyncio.run(sampler.generate(requests))
        computed.append(sampler.prefill_counts.computed_tokens - before)
        compiled.append(sampler.compilation_count)
        expected = [c for r in requests for c in asyncio.run(off.generate([r]))]
        assert [c.token_ids for c in got] == [c.token_ids for c in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        for i, completion in zip(episodes, got, strict=True):
            cached[i] = len(prompts[i]) + len(completion.token_ids) - 1  # the last is not fed
            prompts[i] += completion.token_ids + random_ids(rng, observation)
    # Each turn computes only each prompt's last reply token and the observation after it (and
    # its partial last page when paged); the 131-token suffix takes three calls.
    assert computed == expected_computed
    if not paged:
        assert computed[1:] == [21, 131 + 21 + 21, 6 + 6]
    # Count 1, then counts 3 and 2 with suffixes of 6 to 131 tokens: no new program.
    assert compiled[1] == compiled[2] == compiled[3]
    sampler.close()


def test_more_requests_than_rows_wait_and_stay_exact(samplers):
    on, off = samplers
    rng = np.random.default_rng(3)
    shared = random_ids(rng, 50)
    requests = [
        GenerateRequest(shared[: 20 + 5 * i] + random_ids(rng, i + 1), greedy(5 + i))
        for i in range(6)
    ]

    async def concurrently(sampler):
        return await asyncio.gather(*(sampler.generate([r]) for r in requests))

    got, expected = asyncio.run(concurrently(on)), asyncio.run(concurrently(off))
    assert [c.token_ids for [c] in got] == [c.token_ids for [c] in expected]


def test_new_weights_are_never_served_from_old_keys_and_values(model, paged):
    other = Qwen3ForCausalLM(CONFIG, rngs=nnx.Rngs(1))
    sampler = JaxSampler(model, max_batch=2, **SIZES, paged=paged)
    fresh = JaxSampler(other, max_batch=2, **SIZES, prefix_caching=False)
    prompt = random_ids(np.random.default_rng(4), 60)
    [first] = asyncio.run(sampler.generate([GenerateRequest(prompt, greedy(8))]))
    sampler.sync_weights(other)
    follow_up = GenerateRequest(prompt + first.token_ids + (5, 6, 7), greedy(8))
    before = sampler.prefill_counts.computed_tokens
    assert asyncio.run(sampler.generate([follow_up])) == asyncio.run(fresh.generate([follow_up]))
    assert sampler.prefill_counts.computed_tokens - before == len(follow_up.prompt_ids)
    sampler.close()
    fresh.close()


def test_row_prefix_cache_places_copies_in_a_later_wave_and_evicts_least_recently_used():
    cache = RowPrefixCache(rows=4, max_len=128)
    a = list(range(40))
    b = list(range(100, 140))
    placed = cache.place([a, b], free_rows=[0, 1, 2, 3])
    assert placed == [Placement(0, 0, 0, 0), Placement(1, 1, 0, 0)]
    for row in (0, 1):
        cache.release(row)
    # Two rollouts continuing a: the first reuses row 0 in place, the second copies its prompt
    # (filled in wave 0) in wave 1; the last prompt token is always computed.
    placed = cache.place([a + [7], a + [8]], free_rows=[0, 1, 2, 3])
    assert placed == [Placement(0, 0, 40, 0), Placement(2, 0, 40, 1)]
    cache.fed(0, 9)  # a decode step wrote a token after row 0's prompt
    assert cache.filled(0) == 42
    for row in (0, 2):
        cache.release(row)
    # New prompts take the empty row first, then the least recently used one (1, prompt b).
    placed = cache.place([list(range(200, 220)), list(range(300, 320))], free_rows=[0, 1, 2, 3])
    assert [p.row for p in placed] == [3, 1] and [p.reused for p in placed] == [0, 0]
    for row in (1, 3):
        cache.release(row)
    cache.invalidate()
    assert cache.place([a + [7, 9, 1]], free_rows=[0, 1, 2, 3])[0].reused == 0
    assert cache.place([a], free_rows=[]) == []
