"""JaxSampler's host record of its cache rows ("slots"): the request each row serves, its
sampling parameters, seed and stop tokens, and the token it feeds next (the device cache is the
authority on lengths).

A request's tokens are drawn from its seed (SamplingParams.seed) and each token's index alone
(decoding.row_keys). A request without a seed gets one from the sampler's own stream (seeded by
JaxSampler's `seed`) when it takes its row, so its draws depend on the order requests arrive in.
"""

from __future__ import annotations

import numpy as np

from deepswe_jax.sampling.block_manager import PageTable
from deepswe_jax.sampling.decoding import MAX_STOP_IDS
from deepswe_jax.sampling.prefix_cache import RowPrefixCache
from deepswe_jax.sampling.sequences import InFlight, deliver


class Slots:
    """Per-row host state of a `rows`-row cache; rows leave `prefixes` (prefix_cache.py, or
    block_manager.py for a paged cache) informed of every token fed and every request that ends."""

    def __init__(self, rows: int, prefixes: RowPrefixCache | PageTable, seed: int = 0):
        self.requests: list[InFlight | None] = [None] * rows
        self.seeds = np.zeros(rows, np.uint32)
        self._unseeded = np.random.default_rng(seed)
        self.next_tokens = np.zeros(rows, np.int32)
        self.temperature = np.ones(rows, np.float32)
        self.top_p = np.ones(rows, np.float32)
        self.top_k = np.zeros(rows, np.int32)
        self.stop_ids = np.full((rows, MAX_STOP_IDS), -1, np.int32)
        self._prefixes = prefixes

    def free(self) -> list[int]:
        return [row for row, s in enumerate(self.requests) if s is None]

    def occupied(self) -> list[int]:
        return [row for row, s in enumerate(self.requests) if s is not None]

    def start(self, row: int, sequence: InFlight) -> None:
        """Gives `row` to `sequence`: its sampling parameters, seed and stop tokens."""
        p = sequence.params
        self.temperature[row], self.top_p[row], self.top_k[row] = p.temperature, p.top_p, p.top_k
        if sequence.seed is None:  # kept, so a preempted request restarts with the same draws
            sequence.seed = int(self._unseeded.integers(2**32) if p.seed is None else p.seed)
        self.seeds[row] = sequence.seed % 2**32
        self.stop_ids[row] = -1
        self.stop_ids[row, : len(p.stop_token_ids)] = p.stop_token_ids
        self.requests[row] = sequence

    def sampling(self, rows: list[int], count: int) -> tuple[np.ndarray, ...]:
        """temperature, top_p, top_k and seeds [count] of the requests in `rows`, then greedy
        padding."""
        temperature, top_p = np.zeros(count, np.float32), np.ones(count, np.float32)
        top_k, seeds = np.zeros(count, np.int32), np.zeros(count, np.uint32)
        temperature[: len(rows)] = self.temperature[rows]
        top_p[: len(rows)] = self.top_p[rows]
        top_k[: len(rows)] = self.top_k[rows]
        seeds[: len(rows)] = self.seeds[rows]
        return temperature, top_p, top_k, seeds

    def positions(self) -> np.ndarray:
        """[rows] int32: tokens each row's request has generated (the index of its next)."""
        return np.array([0 if s is None else len(s.token_ids) for s in self.requests], np.int32)

    def remaining(self) -> np.ndarray:
        """[rows] int32 tokens each row's request may still generate (0 for free rows)."""
        return np.array(
            [0 if s is None else s.budget - len(s.token_ids) for s in self.requests], np.int32
        )

    def record(self, rows: list[int], tokens: np.ndarray, logprobs: np.ndarray) -> None:
        """Appends each row's new token; finished rows are delivered and freed."""
        for row, token, logprob in zip(rows, tokens.tolist(), logprobs.tolist(), strict=True):
            sequence = self.requests[row]
            if sequence.token_ids:  # the step fed the previous token into the row
                self._prefixes.fed(row, sequence.token_ids[-1])
            self.next_tokens[row] = token
            completion = sequence.append(token, logprob)
            if completion is not None:  # the row is free before its caller hears
                self.requests[row] = None
                self._prefixes.release(row)
                deliver(sequence, completion)

    def preempt(self, row: int) -> InFlight:
        """Takes `row`'s request back to be run again from its prompt (its tokens so far are
        dropped; with its seed kept it draws them again). The caller released the row's pages."""
        sequence = self.requests[row]
        self.requests[row] = None
        sequence.token_ids.clear()
        sequence.logprobs.clear()
        return sequence

    def fail(self, error: BaseException) -> None:
        """Delivers `error` to every row's request and frees the rows."""
        for row in self.occupied():
            sequence, self.requests[row] = self.requests[row], None
            self._prefixes.release(row)
            deliver(sequence, error)
