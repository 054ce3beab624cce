"""Prompt styles of our interface: the full prompt (default) and the compact prompt for small
models (config.agent.prompt), through the real episode loop and tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_env import FakeEnvPool, make_task
from test_rollout import FINISH, FIX, make_settings

from configs.common import get_config
from deepswe_jax.agent.chat import ChatTokenizer, Message
from deepswe_jax.agent.interface import DeepSweJaxInterface
from deepswe_jax.agent.parsing import parse_function_call
from deepswe_jax.agent.prompts import TOOLS, instance_prompt, system_prompt
from deepswe_jax.agent.rollout import RolloutContext, run_episode
from deepswe_jax.agent.scripted_policy import reply_ids
from deepswe_jax.agent.trajectory import StopReason
from deepswe_jax.experiment import episode_settings
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
    compact_messages = DeepSweJaxInterface(prompt="compact").initial_messages(task, max_steps=5)
    full_messages = DeepSweJaxInterface().initial_messages(task, max_steps=5)
    compact_ids = tokenizer.prompt_ids(compact_messages)
    full_ids = tokenizer.prompt_ids(full_messages)
    assert len(compact_ids) < 200 < 1000 < len(full_ids)
    assert full_messages == [
        Message("system", system_prompt()),
        Message("user", instance_prompt(ISSUE)),
    ]


def test_unknown_prompt_style_is_refused_with_the_config_field():
    with pytest.raises(ValueError, match="config.agent.prompt"):
        system_prompt("tiny")
    with pytest.raises(ValueError, match="config.agent.prompt"):
        instance_prompt(ISSUE, "tiny")
    with pytest.raises(ValueError, match="config.agent.prompt"):
        DeepSweJaxInterface(prompt="tiny")
    config = get_config()
    config.agent.prompt = "tiny"
    with pytest.raises(ValueError, match="config.agent.prompt"):
        episode_settings(config)


def test_the_root_builds_the_configured_prompt_style():
    config = get_config()
    assert episode_settings(config).interface == DeepSweJaxInterface(prompt="full")
    config.agent.prompt = "compact"
    assert episode_settings(config).interface == DeepSweJaxInterface(prompt="compact")
    config.agent.interface, config.agent.prompts_file = "r2egym", "/nonexistent.yaml"
    with pytest.raises(ValueError, match="prompt='full'"):
        episode_settings(config)


def test_an_episode_with_the_compact_prompt_parses_and_finishes_like_the_full_one(tokenizer):
    """Same parser, tools and observations: only the first two messages change."""
    interface = DeepSweJaxInterface(prompt="compact")
    settings = make_settings(interface=interface)
    task = make_task(problem_statement=ISSUE)
    script = [reply_ids(tokenizer, FIX), reply_ids(tokenizer, FINISH)]
    sampler = ScriptedSampler(script)
    trajectory = asyncio.run(
        run_episode(RolloutContext(FakeEnvPool(), sampler, tokenizer, settings), task, 0, 0)
    )
    assert trajectory.stop_reason is StopReason.finished and trajectory.reward == 1.0
    assert list(trajectory.prompt_ids) == tokenizer.prompt_ids(
        interface.initial_messages(task, max_steps=settings.max_steps)
    )
    assert parse_function_call(trajectory.steps[0]["assistant"]).call.name == "file_editor"
    assert "Steps Remaining:" in tokenizer.decode(
        trajectory.token_ids[len(trajectory.prompt_ids) :]
    )
