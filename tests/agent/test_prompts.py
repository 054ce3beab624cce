"""Prompt styles: the R2E-Gym prompt (default) and the compact prompt for small models
(config.agent.prompt), through the real episode loop and tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_env import FakeEnvPool, make_task
from test_rollout import FINISH, FIX, make_config

from deepswe_jax.agent.chat import ChatTokenizer, Message
from deepswe_jax.agent.parsing import parse_function_call
from deepswe_jax.agent.prompts import TOOLS, instance_prompt, system_prompt
from deepswe_jax.agent.rollout import EpisodeSettings, initial_messages, run_episode
from deepswe_jax.agent.scripted_policy import reply_ids
from deepswe_jax.agent.trajectory import StopReason
from deepswe_jax.sampling.scripted import ScriptedSampler

TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"
ISSUE = (
    "ro_dial(2) returns 72 but should return 24. In /testbed/dials/ro.py, replace `36` with `12`.\n"
)


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(TOKENIZER_DIR)


def test_compact_prompt_names_every_function_and_parameter_in_few_tokens(tokenizer):
    compact = system_prompt("compact")
    for spec in TOOLS.values():
        assert f"- {spec.name}: {', '.join(spec.parameter_names)}" in compact
    assert "<function=NAME>\n<parameter=KEY>VALUE</parameter>\n</function>" in compact
    issue = instance_prompt(ISSUE, "compact")
    assert f"<github_issue>\n{ISSUE.strip()}\n</github_issue>" in issue
    task = make_task(problem_statement=ISSUE)
    compact_ids = tokenizer.prompt_ids(initial_messages(task, "compact"))
    r2e_ids = tokenizer.prompt_ids(initial_messages(task))
    assert len(compact_ids) < 200 < 1000 < len(r2e_ids)
    assert initial_messages(task) == [
        Message("system", system_prompt()),
        Message("user", instance_prompt(ISSUE)),
    ]


def test_unknown_prompt_style_is_refused_with_the_config_field():
    with pytest.raises(ValueError, match="config.agent.prompt"):
        system_prompt("tiny")
    with pytest.raises(ValueError, match="config.agent.prompt"):
        instance_prompt(ISSUE, "tiny")


def test_an_episode_with_the_compact_prompt_parses_and_finishes_like_r2e(tokenizer):
    """Same parser, tools and observations: only the first two messages change."""
    config = make_config(prompt="compact")
    assert EpisodeSettings.from_config(config).prompt == "compact"
    assert EpisodeSettings.from_config(make_config()).prompt == "r2e"
    task = make_task(problem_statement=ISSUE)
    script = [reply_ids(tokenizer, FIX), reply_ids(tokenizer, FINISH)]
    sampler = ScriptedSampler(script)
    trajectory = asyncio.run(run_episode(task, FakeEnvPool(), sampler, tokenizer, config, 0, 0))
    assert trajectory.stop_reason is StopReason.finished and trajectory.reward == 1.0
    assert list(trajectory.prompt_ids) == tokenizer.prompt_ids(initial_messages(task, "compact"))
    assert parse_function_call(trajectory.steps[0]["assistant"]).call.name == "file_editor"
    assert "Steps Remaining:" in tokenizer.decode(
        trajectory.token_ids[len(trajectory.prompt_ids) :]
    )
