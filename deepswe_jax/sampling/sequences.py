"""A request in flight inside JaxSampler, how its caller is answered, and shape buckets."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from deepswe_jax.sampling.base import Completion, SamplingParams


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
