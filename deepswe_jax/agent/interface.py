"""The agent interface: what the model is shown and how its replies act on the environment.

Everything the policy sees and every way its text acts goes through one `AgentInterface`:
the first messages, tool installation, reading the call out of a reply, running it, and the
user message after each step. Two profiles (config.agent.interface):

  deepswe_jax  ours (default): our prompts, whitespace-exact parameter values, explanatory
               errors, bash, the tools of env/tools/ (README: "Our interface and R2E-Gym's").
  r2egym       R2E-Gym's as rLLM v0.1 drove it for DeepSWE-Preview, byte for byte
               (`agent.r2egym`); its prompts come from the user's file.

The episode loop (`agent.rollout`) only talks to this protocol; `rollout.EpisodeSettings`
carries the configured one (experiment.agent_interface builds it). Ours needs of the environment only `env.protocols.EnvProtocol`;
R2E-Gym's installs and runs its own scripts, so it needs commands and files as well
(`env.r2egym.CommandEnv`, which the pool's `environment.Env` provides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from deepswe_jax.agent.chat import Message
from deepswe_jax.agent.parsing import FunctionCall, ParseResult, parse_function_call
from deepswe_jax.agent.prompts import instance_prompt, render_observation, system_prompt
from deepswe_jax.env.tasks import Task

if TYPE_CHECKING:
    from deepswe_jax.env.protocols import EnvProtocol, StepResult

DEEPSWE_JAX = "deepswe_jax"
R2EGYM = "r2egym"
INTERFACES = (DEEPSWE_JAX, R2EGYM)


@dataclass(frozen=True)
class Progress:
    """Where an episode stands after a reply: `steps_taken` replies so far (this one included)
    of `max_steps`; response tokens (after the prompt) before and after this reply; the count
    past which the agent is told to submit."""

    steps_taken: int
    max_steps: int
    tokens_before_reply: int
    tokens_after_reply: int
    submit_notice_tokens: int


class AgentInterface(Protocol):
    """One profile of what the agent sees and how its calls run."""

    name: str

    def initial_messages(self, task: Task, *, max_steps: int) -> list[Message]:
        """The system and first user messages of an episode of `task`."""
        ...

    async def prepare(self, env: EnvProtocol) -> None:
        """Set up a freshly acquired environment (e.g. install the profile's tools)."""
        ...

    def parse(self, reply: str) -> ParseResult:
        """The call in `reply`, or (call None) the observation to show instead."""
        ...

    async def step(self, env: EnvProtocol, call: FunctionCall) -> StepResult:
        """Run `call` in `env` (within the pool's step timeout)."""
        ...

    def observation_message(self, observation: str, progress: Progress) -> str:
        """The user message after a step: `observation` plus the step and token notes."""
        ...


@dataclass(frozen=True)
class DeepSweJaxInterface:
    """Our interface: prompts of `agent.prompts`, the parser of `agent.parsing`, the tools of
    env/tools/ through `Env.step`, "Steps Remaining" counting the next step."""

    name: str = DEEPSWE_JAX

    def initial_messages(self, task: Task, *, max_steps: int) -> list[Message]:
        del max_steps  # our first prompt does not count steps
        return [
            Message("system", system_prompt()),
            Message("user", instance_prompt(task.problem_statement)),
        ]

    async def prepare(self, env: EnvProtocol) -> None:
        del env  # the pool installed our tools when it started the container

    def parse(self, reply: str) -> ParseResult:
        return parse_function_call(reply)

    async def step(self, env: EnvProtocol, call: FunctionCall) -> StepResult:
        return await env.step(call.name, call.parameters)

    def observation_message(self, observation: str, progress: Progress) -> str:
        return render_observation(
            observation,
            steps_remaining=progress.max_steps - progress.steps_taken,
            submit_now=progress.tokens_after_reply >= progress.submit_notice_tokens,
        )
