"""A request in flight inside JaxSampler, how its caller is answered, shape buckets, and prompts
packed into those shapes."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import numpy as np

from deepswe_jax.sampling.base import Completion, GenerateRequest, SamplingParams, check_prompt
from deepswe_jax.sampling.decoding import MAX_STOP_IDS


@dataclasses.dataclass(eq=False)
class InFlight:
    """A request in flight: where to deliver it and what it has generated so far."""

    prompt_ids: tuple[int, ...]
    params: SamplingParams
    budget: int  # max tokens to generate: min(max_new_tokens, cache room)
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    token_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    seed: int | None = None  # drawn when the request first takes a row (slots.py)

    @classmethod
    def of(
        cls,
        request: GenerateRequest,
        loop: asyncio.AbstractEventLoop,
        vocab_size: int,
        max_cache_len: int,
    ) -> InFlight:
        """`request` checked for a JaxSampler of `max_cache_len` slots per row (ValueError
        saying what to change), with a future on `loop`."""
        check_prompt(
            request.prompt_ids,
            vocab_size=vocab_size,
            max_len=max_cache_len,
            max_len_name="max_cache_len",
            remedy="build the sampler with a larger max_cache_len",
        )
        params = request.params
        if len(params.stop_token_ids) > MAX_STOP_IDS:
            raise ValueError(
                f"{len(params.stop_token_ids)} stop tokens; JaxSampler takes at most {MAX_STOP_IDS}"
            )
        if params.max_new_tokens < 0 or not 0.0 < params.top_p <= 1.0 or params.top_k < 0:
            raise ValueError(
                f"invalid {params}: need max_new_tokens >= 0, 0 < top_p <= 1, top_k >= 0"
            )
        budget = min(params.max_new_tokens, max_cache_len - len(request.prompt_ids))
        return cls(request.prompt_ids, params, budget, loop, loop.create_future())

    def append(self, token: int, logprob: float) -> Completion | None:
        """Records one sampled token; returns the Completion when the request is done."""
        self.token_ids.append(token)
        self.logprobs.append(logprob)
        if token in self.params.stop_token_ids:
            reason = "stop"
        elif len(self.token_ids) >= self.budget:
            reason = "length"
        else:
            return None
        return Completion(tuple(self.token_ids), tuple(self.logprobs), reason)


def powers_of_two_up_to(limit: int, start: int = 1) -> list[int]:
    """[start, 2*start, 4*start, ...] below limit, then limit itself."""
    sizes = []
    size = start
    while size < limit:
        sizes.append(size)
        size *= 2
    return sizes + [limit]


def bucket(size: int, buckets: Sequence[int]) -> int:
    return next(b for b in buckets if b >= size)


def pack_prompts(
    prompts: Sequence[Sequence[int]],
    starts: Sequence[int],
    rows: Sequence[int],
    shape: tuple[int, int],
    pad_row: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tokens prompt[start : start + t] of each prompt, right-padded into ids [n, t] (n, t =
    shape), with their lengths [n], starts [n] and cache rows [n]; the n - len(prompts) padding
    entries get length 1, start 0 and row `pad_row`."""
    ids = np.zeros(shape, np.int32)
    lengths, padded_starts = np.ones(shape[0], np.int32), np.zeros(shape[0], np.int32)
    padded_rows = np.full(shape[0], pad_row, np.int32)
    for i, (prompt, start, row) in enumerate(zip(prompts, starts, rows, strict=True)):
        part = prompt[start : start + shape[1]]
        ids[i, : len(part)] = part
        lengths[i], padded_starts[i], padded_rows[i] = len(part), start, row
    return ids, lengths, padded_starts, padded_rows


def deliver(sequence: InFlight, outcome: Completion | BaseException) -> None:
    """Resolves the caller's future on its own event loop (from the engine thread)."""

    def resolve() -> None:
        if sequence.future.done():
            return
        if isinstance(outcome, BaseException):
            sequence.future.set_exception(outcome)
        else:
            sequence.future.set_result(outcome)

    try:
        sequence.loop.call_soon_threadsafe(resolve)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass
