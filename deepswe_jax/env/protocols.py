"""What the agent loop and the RL loop use of an environment pool, and of one environment.

`pool.EnvPool` (containers or pods) implements `EnvPoolProtocol`; so do the in-memory pools
of tests and benchmarks, which makes them interchangeable in `agent.rollout` and `rl.loop`:

    async with pool.acquire(task) as env:                    # an EnvProtocol
        result = await env.step("execute_bash", {"cmd": "ls"})   # a StepResult
        patch = await env.patch()
    grade = await pool.grade(task, patch, timeout=300)       # a grading.GradeResult
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from deepswe_jax.env.tasks import Task

if TYPE_CHECKING:
    from deepswe_jax.env.grading.grading import GradeResult

T = TypeVar("T")


@dataclass(frozen=True)
class StepResult:
    """One tool call as the agent sees it.

    observation: R2E-style text ("Exit code: N\\nExecution output of [execute_bash]:\\n...").
    done: the agent called finish/submit, or the environment failed (env_error).
    exit_code: the tool's exit status; None for a timeout, an unknown tool or env_error.
    env_error: the container died or stopped answering (an infrastructure failure, not
      the agent's fault); the episode cannot continue.
    """

    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool = False


class EnvProtocol(Protocol):
    """One started environment for one task."""

    async def step(self, tool: str, params: Mapping[str, object]) -> StepResult:
        """Run one tool call; `params` are the call's parameters as the model wrote them."""
        ...

    async def patch(self) -> str:
        """The agent's changes since the task's base commit, as a git patch."""
        ...


class EnvPoolProtocol(Protocol):
    """Environments for many concurrent episodes, their grading, and their counters."""

    def acquire(self, task: Task) -> AbstractAsyncContextManager[EnvProtocol]:
        """A started environment for `task`, removed when the block exits."""
        ...

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        """Grade `patch` on `task` in a fresh environment (never the agent's)."""
        ...

    async def run_with_retries(
        self,
        episode: Callable[[], Awaitable[T]],
        *,
        failed: Callable[[T], bool],
        name: str = "episode",
    ) -> T:
        """`episode()`, run again while `failed(result)` (an infrastructure failure) as often
        as the pool allows (once: no retries); returns the last result."""
        ...

    def metrics(self) -> dict[str, float]:
        """Counters for the metrics log, keyed "envs/<name>"."""
        ...

    async def close(self) -> None:
        """Remove every environment the pool still holds."""
        ...
