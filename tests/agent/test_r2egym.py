"""The r2egym interface without containers: rLLM's parser, R2E-Gym's call lines and answers,
the step notes, and the prompts file (both formats, and every refusal naming the setting)."""

from __future__ import annotations

import asyncio

import ml_collections
import pytest

from configs import tiny
from deepswe_jax.agent.interface import DeepSweJaxInterface, Progress
from deepswe_jax.agent.parsing import FunctionCall
from deepswe_jax.agent.r2egym import (
    R2EGymInterface,
    R2EGymPrompts,
    parse_reply,
    render_answer,
    task_instruction,
)
from deepswe_jax.env.r2egym import ToolAnswer, answer, command_line, shell_command
from deepswe_jax.env.runtime import ExecResult
from deepswe_jax.experiment import agent_interface, episode_settings
from tests.agent.fake_env import make_task

PROMPTS = R2EGymPrompts("SYSTEM", "Issue:\n{problem_statement}\nin {working_dir}", "test")


# ------------------------------------------------------------------ parsing (rLLM v0.1)


def test_parser_strips_values_and_takes_the_first_block_even_inside_thinking():
    reply = (
        "<think>maybe <function=search><parameter=search_term> x </parameter></function></think>"
        "<function=file_editor>\n<parameter=command>insert</parameter>\n"
        "<parameter=new_str>\n    indented\n</parameter></function>"
    )
    parsed = parse_reply(reply)
    assert parsed.call == FunctionCall("search", {"search_term": "x"})
    assert parsed.thought == "<think>maybe"


def test_parser_keeps_the_last_of_a_repeated_parameter_and_tolerates_spaces_in_tags():
    parsed = parse_reply(
        "<function=execute_bash><parameter = cmd>ls</parameter>"
        "<parameter=cmd >pwd\n</parameter></function>"
    )
    assert parsed.call == FunctionCall("execute_bash", {"cmd": "pwd"})


@pytest.mark.parametrize(
    "reply",
    [
        "I think the bug is in reader.py.",
        "<function=file_editor><parameter=command>view</parameter>",  # never closed
        "<function=></function>",
    ],
)
def test_a_reply_without_a_call_gets_the_empty_observation(reply):
    parsed = parse_reply(reply)
    assert parsed.call is None and parsed.error == ""


# ------------------------------------------------------------------ calls and answers (R2E-Gym)


def test_call_lines_quote_values_and_put_command_first():
    assert (
        command_line("file_editor", {"path": "/testbed/a b.py", "command": "view"})
        == "file_editor view --path '/testbed/a b.py'"
    )
    assert command_line("execute_bash", {"cmd": "echo 'hi' && ls"}) == (
        "execute_bash --cmd 'echo '\"'\"'hi'\"'\"' && ls'"
    )
    assert command_line("finish", {"command": "submit"}) == "echo '<<<Finished>>>'"
    assert shell_command("search", {"search_term": "x"}, 90.0) == (
        "exec env -u SHLVL PATH=/root/.venv/bin:/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:"
        "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c "
        "'timeout 90 search --search_term x '"
    )


@pytest.mark.parametrize(
    "exit_code, timed_out, expected",
    [
        (0, False, ToolAnswer("red\nline", "0", 1.0)),
        (3, False, ToolAnswer("\x1b[31mred\x1b[0m\r\nline", "Error: Exit code 3", 1.0)),
        (124, False, ToolAnswer("The command took too long to execute (>5s)", "-1", 1.0)),
        (None, True, ToolAnswer("The command took too long to execute (>5s)", "-1", 1.0)),
    ],
)
def test_answers_follow_r2egym_runtime_run(exit_code, timed_out, expected):
    result = ExecResult(exit_code, "\x1b[31mred\x1b[0m\r\nline", timed_out, 1.0)
    assert answer(result, 5.0) == expected


def test_observations_wrap_bash_with_its_exit_code_and_truncate_long_output():
    long_output = "\n".join(str(i) for i in range(1, 101))
    text = render_answer("execute_bash", ToolAnswer(long_output, "Error: Exit code 2"))
    lines = text.splitlines()
    assert lines[:3] == [
        "Exit code: Error: Exit code 2",
        "Execution output of [execute_bash]:",
        "1",
    ]
    assert lines[42:45] == [
        "-" * 50,
        "<Observation truncated in middle for saving context>",
        "-" * 50,
    ]
    assert lines[-1] == "100" and len(lines) == 2 + 40 + 3 + 40
    assert render_answer("run_tests", ToolAnswer("", "-1")) == "Execution output of [run_tests]:\n"
    assert (
        render_answer("bash", ToolAnswer("", "-1"))
        == "Exit code: -1\nExecution output of [bash]:\n"
    )


def test_finish_ends_without_running_and_names_holding_finish_end_too():
    class NoContainer:
        step_timeout = 90.0

        async def run(self, cmd, *, timeout=None):
            raise AssertionError("nothing may run")

    interface = R2EGymInterface(PROMPTS)
    finished = asyncio.run(interface.step(NoContainer(), FunctionCall("submit", {})))
    assert finished.observation == "<<< Finished >>>" and finished.done
    other = asyncio.run(interface.step(NoContainer(), FunctionCall("finish_up", {"x": "1"})))
    assert other.observation == "Execution output of [finish_up]:\n" and other.done


# ------------------------------------------------------------------ messages and step notes


def test_first_messages_count_steps_as_rllm_and_unwrap_issue_tags():
    task = make_task(problem_statement="[ISSUE]\nadd() subtracts.\n[/ISSUE]\nhints")
    system, user = R2EGymInterface(PROMPTS).initial_messages(task, max_steps=50)
    assert system.content == "SYSTEM"
    assert user.content == "Issue:\n\nadd() subtracts.\n\nin /testbed\nSteps Remaining: 49"
    assert task_instruction("no tags") == "no tags"


def progress(steps_taken, tokens_before=0, tokens_after=0, max_steps=50):
    return Progress(steps_taken, max_steps, tokens_before, tokens_after, 28000)


def test_step_notes_follow_rllm_and_ours_stay_as_they_were():
    r2egym, ours = R2EGymInterface(PROMPTS), DeepSweJaxInterface()
    assert r2egym.observation_message("out", progress(1)) == "out\nSteps Remaining: 48"
    assert r2egym.observation_message("", progress(48)) == "\nSteps Remaining: 1"
    assert r2egym.observation_message("out", progress(49)) == (
        "out\nYou have reached the maximum number of steps. Please submit your answer NOW."
    )
    # rLLM compares the tokens before this reply with the threshold.
    assert r2egym.observation_message("out", progress(1, 27999, 29000)).endswith("48")
    assert r2egym.observation_message("out", progress(1, 28000, 29000)).endswith(
        "48\nYou are running out of tokens. Please submit your answer NOW."
    )
    assert ours.observation_message("out", progress(1)) == "out\nSteps Remaining: 49"
    assert ours.observation_message("out", progress(1, 0, 28000)).endswith(
        "Call finish NOW to submit your changes."
    )


# ------------------------------------------------------------------ prompts from a file


R2EGYM_YAML = """\
system_prompt: |-
  You are a programming agent.

  –– BEGIN FUNCTION #1: file_editor ––
instance_prompt: |-
  I have uploaded a python code repository in the {working_dir} directory.
  <github_issue>
  {problem_statement}
  </github_issue>
command_files:
  - "./src/r2egym/agenthub/tools/r2egym/file_editor.py"
"""

RLLM_MODULE = '''\
SWE_SYSTEM_PROMPT_FN_CALL = """not this one"""

SWE_SYSTEM_PROMPT = """You are a programming agent.
"""

SWE_USER_PROMPT = (
    "Consider the following github issue:\\n<github_issue>\\n{problem_statement}\\n</github_issue>\\n"
)
'''


def agent_config(**fields) -> ml_collections.ConfigDict:
    """configs/tiny.py with `fields` in config.agent (read by experiment.agent_interface)."""
    config = tiny.get_config()
    config.agent.update(fields)
    return config


def test_prompts_load_from_r2egym_yaml_and_rllm_module(tmp_path):
    yaml_file = tmp_path / "edit_non_fn_calling.yaml"
    yaml_file.write_text(R2EGYM_YAML, encoding="utf-8")
    interface = agent_interface(agent_config(interface="r2egym", prompts_file=str(yaml_file)))
    assert (
        interface.prompts.system
        == "You are a programming agent.\n\n–– BEGIN FUNCTION #1: file_editor ––"
    )
    assert interface.prompts.instance("bug") == (
        "I have uploaded a python code repository in the /testbed directory.\n"
        "<github_issue>\nbug\n</github_issue>"
    )
    module = tmp_path / "system_prompts.py"
    module.write_text(RLLM_MODULE + "raise SystemExit('never executed')\n")
    prompts = agent_interface(agent_config(interface="r2egym", prompts_file=str(module))).prompts
    assert prompts.system == "You are a programming agent.\n"
    assert prompts.instance("bug") == (
        "Consider the following github issue:\n<github_issue>\nbug\n</github_issue>\n"
    )


def test_r2egym_without_a_prompts_file_is_refused_naming_the_setting(tmp_path):
    for prompts_file in ("", str(tmp_path / "missing.yaml")):
        with pytest.raises(ValueError, match=r"config\.agent\.prompts_file=.*edit_non_fn_calling"):
            agent_interface(agent_config(interface="r2egym", prompts_file=prompts_file))
    with pytest.raises(ValueError, match=r"config\.agent\.prompts_file=''"):
        episode_settings(agent_config(interface="r2egym", prompts_file=""))


@pytest.mark.parametrize(
    "name, text, problem",
    [
        ("p.yaml", "system_prompt: s\n", r"instance_prompt is missing"),
        ("p.yaml", "- a list\n", r"holds no mapping"),
        (
            "p.yaml",
            "system_prompt: s\ninstance_prompt: '{gt_patch} {problem_statement}'\n",
            r"\{gt_patch\}",
        ),
        ("p.yaml", "system_prompt: s\ninstance_prompt: 'no issue'\n", r"no \{problem_statement\}"),
        (
            "p.yaml",
            "system_prompt: s\ninstance_prompt: '{problem_statement} {'\n",
            r"literal braces",
        ),
        ("p.py", "SWE_SYSTEM_PROMPT = make()\nSWE_USER_PROMPT = ''\n", r"not a string literal"),
        ("p.py", "def broken(:\n", r"not valid Python"),
        ("p.txt", "system_prompt: s\n", r"expected a \.yaml/\.yml or \.py file"),
    ],
)
def test_malformed_prompts_files_are_refused_with_what_is_wrong(tmp_path, name, text, problem):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=problem) as refusal:
        agent_interface(agent_config(interface="r2egym", prompts_file=str(path)))
    assert str(refusal.value).startswith(f"config.agent.prompts_file={str(path)!r}")


def test_interface_setting_is_checked():
    assert agent_interface(agent_config()) == DeepSweJaxInterface()
    with pytest.raises(ValueError, match=r"config\.agent\.interface='r2e' is not one of"):
        agent_interface(agent_config(interface="r2e"))
    with pytest.raises(ValueError, match=r"only read by config\.agent\.interface='r2egym'"):
        agent_interface(agent_config(interface="deepswe_jax", prompts_file="x.yaml"))
