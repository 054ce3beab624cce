"""A sampler that replays fixed token sequences: for tests and scripted policies.

Each conversation replays its script turn by turn. A request continues a
conversation when its prompt starts with that conversation's last prompt plus
the completion returned for it; any other prompt starts a new conversation.
So concurrent episodes of one task each get the whole script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from deepswe_jax.sampling.base import Completion, GenerateRequest

Script = Sequence[Sequence[int]]


def scripted_logprob(token_id: int) -> float:
    """The log-probability `ScriptedSampler` reports for `token_id`: a fixed, token-dependent value."""
    return -((token_id % 100) + 1) / 100.0


class ScriptedSampler:
    """Returns the k-th completion of a script for the k-th turn of each conversation.

    `script` is either one script for every conversation (a sequence of turns,
    each a sequence of token ids) or a function from a conversation's first
    prompt (token ids) to its script, e.g. one script per task. Completions are
    cut after the first stop token ('stop') or at `max_new_tokens` ('length');
    a turn that ends without a stop token also finishes with 'stop'.
    Asking for more turns than the script holds raises `RuntimeError`.
    """

    syncs_global_arrays = False  # sync_weights records whatever it is given

    def __init__(self, script: Script | Callable[[tuple[int, ...]], Script]):
        self._script_for = script if callable(script) else (lambda _prompt: script)
        # (context so far: last prompt + completion, script, index of the next turn)
        self._conversations: list[tuple[tuple[int, ...], Script, int]] = []
        self.requests: list[GenerateRequest] = []
        self.weights: Any = None
        self.closed = False

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[Completion]:
        """One completion per request, in order; yields to the event loop once, like a real sampler."""
        await asyncio.sleep(0)
        return [self._complete(request) for request in requests]

    def sync_weights(self, params: Any) -> None:
        """Records `params` (the script does not depend on them)."""
        self.weights = params

    def sleep(self) -> None:
        """Nothing to free."""

    def wake(self) -> None:
        """Nothing to take back."""

    def close(self) -> None:
        self.closed = True

    def _complete(self, request: GenerateRequest) -> Completion:
        self.requests.append(request)
        prompt = request.prompt_ids
        script, turn = self._continue_conversation(prompt)
        if turn >= len(script):
            raise RuntimeError(
                f"ScriptedSampler: the script has {len(script)} turns but a conversation asked "
                f"for turn {turn + 1}; give the script more turns or check the episode's step limit"
            )
        token_ids = tuple(script[turn])
        params = request.params
        finish_reason = "stop"
        for position, token_id in enumerate(token_ids):
            if token_id in params.stop_token_ids:
                token_ids = token_ids[: position + 1]
                break
        if len(token_ids) > params.max_new_tokens:
            token_ids = token_ids[: params.max_new_tokens]
            finish_reason = "length"
        self._conversations.append((prompt + token_ids, script, turn + 1))
        return Completion(
            token_ids=token_ids,
            logprobs=tuple(scripted_logprob(t) for t in token_ids),
            finish_reason=finish_reason,
        )

    def _continue_conversation(self, prompt: tuple[int, ...]) -> tuple[Script, int]:
        """The script and turn index for `prompt`; forgets the continued conversation's old context."""
        best = None
        for index, (context, _, _) in enumerate(self._conversations):
            if len(context) <= len(prompt) and prompt[: len(context)] == context:
                if best is None or len(context) > len(self._conversations[best][0]):
                    best = index
        if best is None:
            return self._script_for(prompt), 0
        _, script, turn = self._conversations.pop(best)
        return script, turn
