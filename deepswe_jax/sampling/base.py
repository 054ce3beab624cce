"""The sampler protocol: what the agent loop asks of any token generator.

A request is a prompt (token ids) plus sampling parameters; a completion is the
generated token ids, one log-probability per generated token (under the
sampler's own weights, before any top-p/top-k truncation bias is corrected)
and why generation stopped. Samplers never see text: the agent keeps exactly
the ids they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """How to sample one completion (keyword arguments only).

    `top_k = 0` turns top-k off. Generation ends after a token in
    `stop_token_ids` (which is kept in the completion) or after
    `max_new_tokens` tokens. `seed` (vLLM's per-request seed): the
    completion's random draws come from it alone, so the same prompt, seed and
    weights give the same completion whatever else the sampler serves at the
    time (up to the batch's float rounding); None draws from the sampler's own
    stream, which depends on arrival order. Samplers use it modulo 2**32. Copies
    of one seeded request give equal completions: give each rollout its own.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class GenerateRequest:
    """One prompt to continue. `prompt_ids` is the full context, [prompt_len]."""

    prompt_ids: tuple[int, ...]
    params: SamplingParams


@dataclass(frozen=True)
class Completion:
    """Generated tokens: `token_ids` and `logprobs` are both [num_generated].

    `finish_reason` is 'stop' when the last token is a stop token (or the
    sampler otherwise ended the turn) and 'length' when `max_new_tokens` ran out.
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason


def check_prompt(
    prompt_ids: Sequence[int], *, vocab_size: int, max_len: int, max_len_name: str, remedy: str
) -> None:
    """Raises ValueError unless `prompt_ids` is a prompt a sampler can continue: at least one
    token, fewer than the `max_len` positions a sequence may fill (`max_len_name` names that
    limit in the message, `remedy` says how to make room), and every id in [0, vocab_size)."""
    prompt_len = len(prompt_ids)
    if prompt_len == 0:
        raise ValueError("empty prompt: a request needs at least one prompt token")
    if prompt_len >= max_len:
        raise ValueError(
            f"prompt of {prompt_len} tokens leaves no room in {max_len_name}={max_len}; "
            f"shorten the prompt or {remedy}"
        )
    if min(prompt_ids) < 0 or max(prompt_ids) >= vocab_size:
        raise ValueError(f"prompt token ids must lie in [0, {vocab_size})")


class Sampler(Protocol):
    """A token generator the agent loop can drive from many coroutines at once."""

    @property
    def syncs_global_arrays(self) -> bool:
        """Whether `sync_weights` takes the trainer's params as they are, sharded global arrays
        included, and extracts what it needs itself (the vLLM sampler); False: with several JAX
        processes it needs a whole host copy on each (`rl.loop.published_weights`)."""
        ...

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[Completion]:
        """One completion per request, in request order."""
        ...

    def sync_weights(self, params: Any) -> None:
        """Makes the next `generate` calls sample from `params`."""
        ...

    def sleep(self) -> None:
        """Frees the sampler's accelerator memory while the trainer steps, where it can (a
        colocated vLLM engine's sleep mode); the next `sync_weights` brings it back. A no-op
        for samplers that hold no memory worth freeing or cannot free it."""
        ...

    def wake(self) -> None:
        """Takes the memory `sleep` freed back without new weights; a no-op where `sleep` is."""
        ...

    def close(self) -> None:
        """Releases devices, engines and threads."""
        ...
