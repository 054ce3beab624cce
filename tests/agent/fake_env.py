"""An in-memory stand-in for EnvPool/Env (same interface) for fast agent-loop unit tests.

The Docker-backed pool is exercised end to end in test_agent_docker.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.runtime import PatchTooLargeError, ResourceLimitError
from deepswe_jax.env.tasks import Task

BUGGY_SOURCE = "def add(a, b):\n    return a - b\n"
FIXED_SOURCE = "def add(a, b):\n    return a + b\n"
SOURCE_PATH = "/testbed/calc.py"


def make_task(instance_id: str = "calc-1", problem_statement: str = "add() subtracts.") -> Task:
    return Task(
        instance_id=instance_id,
        repo="calc",
        base_commit="0" * 40,
        problem_statement=problem_statement,
        patch="",
        test_patch="",
        FAIL_TO_PASS=("tests/test_calc.py::test_add",),
        PASS_TO_PASS=(),
        image="deepswe/calc:base",
    )


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer whenever nothing is ready to run, so
    sleeps and timeouts fire in the order they are due however slow the machine is (CPU work
    takes no time on this clock). Only for code that waits on timers, not threads or sockets."""

    def __init__(self):
        super().__init__()
        self._now = 0.0
        poll = self._selector.select

        def select(timeout: float | None = None):
            if timeout is None:  # no timer pending: only I/O can wake the loop
                return poll(None)
            self._now += timeout
            return poll(0)

        self._selector.select = select

    def time(self) -> float:
        return self._now


@dataclass(frozen=True)
class FakeStepResult:
    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool


class FakeEnv:
    """One file, /testbed/calc.py; str_replace edits it, execute_bash echoes, finish ends."""

    def __init__(self, task: Task, pool: FakeEnvPool):
        self.task = task
        self.pool = pool
        self.source = BUGGY_SOURCE

    async def step(self, tool: str, params: dict[str, str]) -> FakeStepResult:
        self.pool.steps.append((tool, dict(params)))
        await asyncio.sleep(self.pool.step_delay_s)
        if len(self.pool.steps) == self.pool.fail_at_step:
            return FakeStepResult("container died", False, None, 0.0, True)
        if len(self.pool.steps) == self.pool.limit_at_step:
            raise ResourceLimitError("the container holds more than its disk limit")
        if tool == "finish":
            return FakeStepResult("<<< Finished >>>", True, 0, 0.0, False)
        if tool == "file_editor" and params["command"] == "str_replace":
            if self.source.count(params["old_str"]) != 1:
                return FakeStepResult("ERROR: no unique match", False, 1, 0.0, False)
            self.source = self.source.replace(params["old_str"], params.get("new_str", ""))
            return FakeStepResult(
                "Execution output of [file_editor]:\nedited", False, 0, 0.0, False
            )
        output = f"Exit code: 0\nExecution output of [{tool}]:\nran {params}"
        return FakeStepResult(output, False, 0, 0.0, False)

    async def patch(self) -> str:
        if self.pool.patch_too_large:
            raise PatchTooLargeError("the patch has 9000000 bytes, over 4194304")
        return "" if self.source == BUGGY_SOURCE else f"--- calc.py\n+++ calc.py\n{self.source}"


@dataclass
class FakeEnvPool:
    """Counts acquisitions/releases; grades 1.0 when calc.py holds the fix (an
    env.protocols.EnvPoolProtocol: episodes run once, no retries)."""

    step_delay_s: float = 0.0
    fail_at_step: int | None = None
    fail_acquire: bool = False
    fail_grade: bool = False
    limit_at_step: int | None = None  # this step exhausts the container's disk
    patch_too_large: bool = False
    acquired: int = 0
    released: int = 0
    max_active: int = 0
    steps: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    graded: list[str] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def acquire(self, task: Task):
        if self.fail_acquire:
            raise RuntimeError("image deepswe/calc:base not found")
        self.acquired += 1
        self.max_active = max(self.max_active, self.acquired - self.released)
        try:
            yield FakeEnv(task, self)
        finally:
            self.released += 1

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        self.graded.append(patch)
        if self.fail_grade:
            raise RuntimeError("grader container failed to start")
        resolved = FIXED_SOURCE in patch
        status = "resolved" if resolved else "unresolved"
        return GradeResult(task.instance_id, status, float(resolved), True, resolved)

    async def run_with_retries(self, episode, *, failed, name: str = "episode"):
        return await episode()  # no infrastructure to fail

    def metrics(self) -> dict[str, float]:
        return {"envs/started": self.acquired, "envs/graded": len(self.graded)}

    async def close(self) -> None:
        pass
