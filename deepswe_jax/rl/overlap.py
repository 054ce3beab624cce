"""When each iteration's rollouts run: after the previous update (synchronous) or during it.

    scheduler = RolloutScheduler(runner, collect, sampler.sync_weights, max_staleness=1,
                                 start=0, stop=total_steps)
    scheduler.publish(0, state.params)                    # the policy before any update
    for iteration in range(total_steps):
        rollouts = scheduler.next_batch(iteration)        # blocks until they are collected
        state = scheduler.run_while_collecting(update, state, rollouts.result)
        scheduler.publish(iteration + 1, state.params)

A policy version is the number of optimizer updates (iterations trained) behind a set of
weights. Iteration j's rollouts start once the previous iteration's rollouts are done and a
policy of version >= j - max_staleness is published; they sample from the newest published
policy. Iteration j trains on policy version j, so its data is at most max_staleness versions
old. max_staleness = 0 is the synchronous loop (roll out with the current policy, then train);
with 1, iteration j+1's rollouts run on version j while iteration j trains.

The train step runs in a worker thread while the asyncio loop (environments, sampler calls)
keeps collecting. With stale data the loss's importance ratio is taken against the log-probs
the trainer recomputes under its current weights (Trainer: old == current for one update per
batch), never against the stale sampler's, so the PPO clip keeps its meaning; the sampler's
log-probs only measure the mismatch (train/sampler_approx_kl). Published weights are copied
(one extra copy of the parameters) because the next update donates the trainer's buffers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import jax

Result = TypeVar("Result")
Output = TypeVar("Output")


@dataclasses.dataclass(frozen=True)
class ScheduledRollouts(Generic[Result]):
    """One iteration's rollouts and when they ran.

    result: what `collect` returned. policy_version: the version the sampler served.
    sync_s / rollout_s: seconds syncing weights and collecting. started / finished:
    time.perf_counter() at the start of the sync and at the end of collection.
    """

    iteration: int
    policy_version: int
    result: Result
    sync_s: float
    rollout_s: float
    started: float
    finished: float


def check_staleness(iteration: int, policy_version: int, max_staleness: int) -> None:
    """Raises unless rollouts of `policy_version` may train iteration `iteration`."""
    if not iteration - max_staleness <= policy_version <= iteration:
        raise RuntimeError(
            f"rollouts of policy version {policy_version} reached iteration {iteration}, outside "
            f"max_staleness={max_staleness}; this is a scheduling bug"
        )


class RolloutScheduler(Generic[Result]):
    """Collects the rollouts of iterations start..stop-1 in order, up to max_staleness ahead.

    Args:
      runner: the asyncio.Runner whose loop drives environments and sampler calls.
      collect: (iteration, policy_version) -> awaitable of that iteration's rollouts; called
        once per iteration, in order, after the sampler holds that version.
      sync_weights: puts published parameters into the sampler.
      max_staleness: how many versions older than the trainer's rollouts may be (0: synchronous).
    """

    def __init__(
        self,
        runner: asyncio.Runner,
        collect: Callable[[int, int], Awaitable[Result]],
        sync_weights: Callable[[Any], None],
        *,
        max_staleness: int,
        start: int,
        stop: int,
    ):
        if max_staleness < 0:
            raise ValueError(
                f"max_staleness={max_staleness}; use 0 (synchronous) or k >= 1 versions of lag"
            )
        self.max_staleness = max_staleness
        self._runner = runner
        self._collect = collect
        self._sync_weights = sync_weights
        self._start, self._stop = start, stop
        self._version: int | None = None
        self._params: Any = None
        self._published = asyncio.Event()
        self._batches: dict[int, asyncio.Future] = {}
        self._producer: asyncio.Task | None = None

    @property
    def overlapped(self) -> bool:
        return self.max_staleness > 0

    def publish(self, version: int, params: Any) -> None:
        """Makes `params` (the policy after `version` updates) the one the next rollouts use.

        Overlapped, device arrays are copied: the caller's buffers may be donated to the next
        update while rollouts still sample from these.
        """
        if self._version is not None and version <= self._version:
            raise ValueError(f"published version {version} after version {self._version}")
        if self.overlapped:  # device arrays only: host copies are never donated
            params = jax.tree.map(lambda x: x.copy() if isinstance(x, jax.Array) else x, params)
        self._params = params
        self._version = version
        self._published.set()

    def next_batch(self, iteration: int) -> ScheduledRollouts[Result]:
        """Iteration `iteration`'s rollouts (blocks until collected); in order, once each."""
        if self._version is None:
            raise RuntimeError("publish the starting policy before asking for rollouts")
        if self._producer is None:
            self._producer = self._runner.run(self._start_producer())
        batch = self._runner.run(self._wait_for(iteration))
        check_staleness(iteration, batch.policy_version, self.max_staleness)
        return batch

    def run_while_collecting(self, function: Callable[..., Output], *args: Any) -> Output:
        """function(*args) in a worker thread while the loop keeps collecting rollouts ahead;
        synchronous (max_staleness 0): in this thread, nothing being collected."""
        if not self.overlapped:
            return function(*args)
        return self._runner.run(asyncio.to_thread(function, *args))

    def close(self) -> None:
        """Cancels rollouts still being collected."""
        if self._producer is not None and not self._producer.done():
            self._producer.cancel()
            self._runner.run(self._finish_producer())  # Runner.run takes a coroutine only

    async def _finish_producer(self) -> None:
        await asyncio.gather(self._producer, return_exceptions=True)

    def __enter__(self) -> RolloutScheduler[Result]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _start_producer(self) -> asyncio.Task:
        loop = asyncio.get_running_loop()
        for iteration in range(self._start, self._stop):
            self._batches[iteration] = loop.create_future()
        return asyncio.create_task(self._produce())

    async def _wait_for(self, iteration: int) -> ScheduledRollouts[Result]:
        if iteration not in self._batches:
            raise ValueError(
                f"iteration {iteration} is outside [{self._start}, {self._stop}) or was taken"
            )
        future = self._batches[iteration]
        await asyncio.wait({future, self._producer}, return_when=asyncio.FIRST_COMPLETED)
        if not future.done():
            self._producer.result()  # the producer stopped early: raise its error
        del self._batches[iteration]
        return future.result()

    async def _produce(self) -> None:
        for iteration in range(self._start, self._stop):
            while self._version < iteration - self.max_staleness:
                self._published.clear()
                await self._published.wait()
            version, params = self._version, self._params
            started = time.perf_counter()
            self._sync_weights(params)
            synced = time.perf_counter()
            result = await self._collect(iteration, version)
            finished = time.perf_counter()
            self._batches[iteration].set_result(
                ScheduledRollouts(
                    iteration=iteration,
                    policy_version=version,
                    result=result,
                    sync_s=synced - started,
                    rollout_s=finished - synced,
                    started=started,
                    finished=finished,
                )
            )
