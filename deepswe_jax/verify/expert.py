"""Expert trajectories for bootstrapping SFT: a scripted agent solves each task from its gold patch.

The expert works through the real agent loop (`agent.rollout.collect_rollouts`) and the real
tools, with one of two scripts (`EXPERT_SCRIPTS`, config.sft.expert_script):

- "view_edit_test": it views the file the patch touches, applies every hunk with
  `file_editor str_replace` (`agent.scripted_policy`), runs the test files of the task's
  failing tests, and calls finish;
- "edit": one `str_replace` per hunk holding only the lines that change
  (`scripted_policy.minimal_edit`), then finish: the shortest demonstration, for tasks whose
  issue names the file and the lines (tasks/oneline).

The patch is graded in a fresh container like any rollout. The replies are fed through a
`ScriptedSampler`, so the trajectories have the same format as the policy's own (prompt,
token-exact turns, loss mask on assistant tokens, observations as the environment wrote
them) and can go straight to `verify.rejection_sampling.select_for_sft` and `rl.sft`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.interface import AgentInterface, DeepSweJaxInterface
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.rollout import EpisodeSettings, RolloutContext, collect_rollouts
from deepswe_jax.agent.scripted_policy import (
    REPO_ROOT,
    edit_calls,
    gold_patch_replies,
    minimal_edit,
    parse_unified_diff,
    reply_ids,
)
from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.tasks import Task
from deepswe_jax.sampling.scripted import ScriptedSampler

if TYPE_CHECKING:
    from deepswe_jax.env.protocols import EnvPoolProtocol

TEST_OUTPUT_LINES = 5  # the tail of the pytest run the expert shows itself
VIEW_CONTEXT_LINES = 3  # lines shown around the first hunk
FIRST_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ", re.MULTILINE)
EXPERT_SCRIPTS = ("view_edit_test", "edit")


def _reply(thought: str, name: str, parameters: dict[str, str]) -> str:
    return f"<think>\n{thought}\n</think>\n\n{render_function_call(name, parameters)}"


def view_reply(task: Task) -> str:
    """A reply that views the lines of the first file the gold patch changes around its first
    hunk (the whole file when the patch creates it); whole files would fill small contexts."""
    first = parse_unified_diff(task.patch)[0]
    parameters = {"command": "view", "path": f"{REPO_ROOT}/{first.path}"}
    header = FIRST_HUNK.search(task.patch)
    if first.old is not None and header is not None:
        start, count = int(header.group(1)), int(header.group(2) or 1)
        first_line = max(1, start - VIEW_CONTEXT_LINES)
        parameters["view_range"] = f"[{first_line}, {start + count - 1 + VIEW_CONTEXT_LINES}]"
    return _reply("Look at the code the issue is about.", "file_editor", parameters)


def test_run_reply(task: Task) -> str:
    """A reply that runs the test files holding the task's FAIL_TO_PASS tests (the tests
    themselves are hidden from the agent; their files' other tests guard against regressions)."""
    files = sorted({node_id.split("::")[0] for node_id in task.FAIL_TO_PASS})
    command = (
        f"cd {REPO_ROOT} && python3 -m pytest -q {' '.join(map(shlex.quote, files))} 2>&1 "
        f"| tail -n {TEST_OUTPUT_LINES}"
    )
    return _reply("Run the tests of the code I changed.", "execute_bash", {"cmd": command})


def check_script(script: str) -> None:
    """Refuses an expert script that is not one of `EXPERT_SCRIPTS`."""
    if script not in EXPERT_SCRIPTS:
        raise ValueError(
            f"unknown expert script {script!r}; set config.sft.expert_script to one of "
            f"{EXPERT_SCRIPTS}"
        )


def expert_replies(task: Task, script: str = "view_edit_test") -> list[str]:
    """The expert's assistant replies. "view_edit_test": view around the first hunk, one edit
    per hunk (`scripted_policy.gold_patch_replies`), run the tests, finish. "edit": one minimal
    edit per hunk, finish."""
    check_script(script)
    view, *edits, finish = gold_patch_replies(task)
    if script == "edit":
        minimal = [minimal_edit(edit) for edit in parse_unified_diff(task.patch)]
        edits = [_reply("Apply the fix.", c.name, c.parameters) for c in edit_calls(minimal)]
        return [*edits, finish]
    return [view_reply(task), *edits, test_run_reply(task), finish]


def expert_sampler(
    tasks: Sequence[Task],
    tokenizer: ChatTokenizer,
    *,
    script: str = "view_edit_test",
    interface: AgentInterface | None = None,
    max_steps: int = 0,
) -> ScriptedSampler:
    """A sampler that answers each task's episode with `expert_replies(task, script)`, token by
    token; it knows an episode by its first messages under `interface` (ours by default) and
    `max_steps`."""
    interface = interface or DeepSweJaxInterface()
    scripts = {
        tuple(tokenizer.prompt_ids(interface.initial_messages(task, max_steps=max_steps))): [
            reply_ids(tokenizer, reply) for reply in expert_replies(task, script)
        ]
        for task in tasks
    }
    if len(scripts) != len(tasks):
        raise ValueError(
            "two tasks have the same prompt (problem statement), so their expert scripts "
            "cannot be told apart; deduplicate the task list"
        )

    def script_for(prompt: tuple[int, ...]) -> list[list[int]]:
        if prompt not in scripts:
            raise KeyError("the expert sampler got a prompt of a task it was not built for")
        return scripts[prompt]

    return ScriptedSampler(script_for)


def expert_settings(
    settings: EpisodeSettings, tasks: Sequence[Task], script: str = "view_edit_test"
) -> EpisodeSettings:
    """`settings` with max_steps raised to the longest expert script, so no expert episode
    stops for max_steps; the token and time budgets stay as configured."""
    longest = max(len(expert_replies(task, script)) for task in tasks)
    return dataclasses.replace(settings, max_steps=max(settings.max_steps, longest))


async def collect_expert_trajectories(
    tasks: Sequence[Task],
    env_pool: EnvPoolProtocol,
    tokenizer: ChatTokenizer,
    settings: EpisodeSettings,
    *,
    script: str = "view_edit_test",
    output_path: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> list[Trajectory]:
    """One expert episode per task through `env_pool` (the real `EnvPool`, or any
    EnvPoolProtocol), graded like rollouts; written to `output_path` as jsonl when given.

    `settings`: the episode limits (token/time budgets, sampling parameters; max_steps is
    raised by `expert_settings`; the interface and its prompt style are kept). `script`: one of
    `EXPERT_SCRIPTS`. Episodes that hit a token budget or an environment error come
    back unresolved and are dropped later by `select_for_sft`.
    """
    if not tasks:
        raise ValueError("no tasks to collect expert trajectories for")
    settings = expert_settings(settings, tasks, script)
    sampler = expert_sampler(
        tasks, tokenizer, script=script, interface=settings.interface, max_steps=settings.max_steps
    )
    return await collect_rollouts(
        RolloutContext(env_pool, sampler, tokenizer, settings),
        tasks,
        1,
        policy_version=0,
        output_path=output_path,
        show_progress=show_progress,
    )


def tool_call_success_rate(trajectories: Sequence[Trajectory]) -> float:
    """Share of agent turns whose reply parsed into a tool call (`agent.parsing`): the format
    the expert demonstrates. Turns cut off by the token budget count as failures."""
    turns = [step for t in trajectories for step in t.steps if "assistant" in step]
    if not turns:
        return 0.0
    return sum("action" in step for step in turns) / len(turns)
