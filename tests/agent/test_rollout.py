"""The episode loop against an in-memory env pool: token exactness, stops, budgets, release."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tokenizers
from fake_env import FIXED_SOURCE, SOURCE_PATH, FakeEnvPool, VirtualClockLoop, make_task

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.prompts import LAST_STEP_NOTICE, SUBMIT_NOW_NOTICE
from deepswe_jax.agent.rollout import (
    EpisodeSettings,
    RolloutContext,
    collect_rollouts,
    run_episode,
)
from deepswe_jax.agent.scripted_policy import reply_ids
from deepswe_jax.agent.trajectory import StopReason, read_trajectories
from deepswe_jax.sampling.scripted import ScriptedSampler

TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"

VIEW = render_function_call("file_editor", {"command": "view", "path": SOURCE_PATH})
FIX = render_function_call(
    "file_editor",
    {
        "command": "str_replace",
        "path": SOURCE_PATH,
        "old_str": "    return a - b",
        "new_str": "    return a + b",
    },
)
FINISH = render_function_call("finish", {"command": "submit"})


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(TOKENIZER_DIR)


def make_settings(**agent) -> EpisodeSettings:
    limits = dict(
        max_steps=6,
        max_prompt_tokens=4096,
        max_context=8192,
        trajectory_timeout=60.0,
        reward_timeout=60.0,
    )
    return EpisodeSettings(**{**limits, **agent})


def fix_script(tokenizer: ChatTokenizer) -> list[list[int]]:
    replies = [
        "<think>\nFirst read the file.\n</think>\n\n" + VIEW,
        "<think>\nThe operator is wrong.\n</think>\n\n" + FIX,
        "<think>\nDone.\n</think>\n\n" + FINISH,
    ]
    return [reply_ids(tokenizer, reply) for reply in replies]


def run(coroutine):
    return asyncio.run(coroutine)


def test_tokens_are_exactly_the_sampled_ids(tokenizer: ChatTokenizer):
    pool, script = FakeEnvPool(), fix_script(tokenizer)
    sampler = ScriptedSampler(script)
    trajectory = run(
        run_episode(RolloutContext(pool, sampler, tokenizer, make_settings()), make_task(), 2, 7)
    )

    assert trajectory.stop_reason is StopReason.finished
    assert (trajectory.reward, trajectory.num_steps, trajectory.infra_error) == (1.0, 3, False)
    assert (trajectory.rollout_index, trajectory.policy_version) == (2, 7)
    assert FIXED_SOURCE in trajectory.patch and trajectory.grade.status == "resolved"
    assert pool.acquired == pool.released == 1
    tokens, mask = trajectory.token_ids, trajectory.loss_mask
    expected_mask = [0] * len(tokens)
    for request, turn in zip(sampler.requests, script, strict=True):
        start = len(request.prompt_ids)
        assert tokens[:start] == request.prompt_ids  # each prompt is a prefix of the next
        assert list(tokens[start : start + len(turn)]) == turn
        expected_mask[start : start + len(turn)] = [1] * len(turn)
        assert list(trajectory.sampler_logprobs[start : start + len(turn)]) == [
            -((t % 100) + 1) / 100 for t in turn
        ]
    assert list(mask) == expected_mask
    assert sum(mask) == sum(len(turn) for turn in script)
    assert all(lp == 0.0 for lp, m in zip(trajectory.sampler_logprobs, mask, strict=True) if m == 0)
    assert tokens[-1] == tokenizer.im_end_id and mask[-1] == 1  # the sampled <|im_end|> is trained
    assert trajectory.prompt_ids == sampler.requests[0].prompt_ids
    assert [s["action"]["name"] for s in trajectory.steps] == [
        "file_editor",
        "file_editor",
        "finish",
    ]
    assert set(trajectory.timings) >= {
        "acquire_s",
        "generation_s",
        "tool_s",
        "patch_s",
        "grading_s",
        "total_s",
    }


def test_retokenizing_the_text_would_change_the_tokens(tokenizer: ChatTokenizer):
    # A sampler may emit a non-canonical split: here "print" one character per token.
    odd_split = [tokenizer.encode_text(c)[0] for c in "echo print"]
    bash = tokenizer.encode_text("<function=execute_bash>\n<parameter=cmd>")
    close = tokenizer.encode_text("</parameter>\n</function>")
    script = [bash + odd_split + close + [tokenizer.im_end_id], reply_ids(tokenizer, FINISH)]
    pool = FakeEnvPool()
    trajectory = run(
        run_episode(
            RolloutContext(pool, ScriptedSampler(script), tokenizer, make_settings()),
            make_task(),
            0,
            0,
        )
    )

    assert trajectory.stop_reason is StopReason.finished
    assert pool.steps[0] == ("execute_bash", {"cmd": "echo print"})
    start = len(trajectory.prompt_ids)
    assert list(trajectory.token_ids[start : start + len(script[0])]) == script[0]
    text = tokenizer.decode(trajectory.token_ids)
    retokenized = (
        tokenizers.Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json")).encode(text).ids
    )
    assert tokenizer.decode(retokenized) == text
    assert list(trajectory.token_ids) != retokenized
    assert len(retokenized) < len(trajectory.token_ids)


def test_observations_carry_steps_remaining_and_notices(tokenizer: ChatTokenizer):
    noop = reply_ids(tokenizer, render_function_call("execute_bash", {"cmd": "true"}))
    script = [noop, noop, reply_ids(tokenizer, FINISH)]
    settings = make_settings(max_steps=3, submit_notice_tokens=1)
    trajectory = run(
        run_episode(
            RolloutContext(FakeEnvPool(), ScriptedSampler(script), tokenizer, settings),
            make_task(),
            0,
            0,
        )
    )
    text = tokenizer.decode(trajectory.token_ids)
    assert "Steps Remaining: 2" in text and "Steps Remaining: 1" + LAST_STEP_NOTICE in text
    assert text.count(SUBMIT_NOW_NOTICE.strip()) == 2
    assert trajectory.stop_reason is StopReason.finished


def test_policy_that_never_calls_a_tool_stops_at_max_steps(tokenizer: ChatTokenizer):
    chatter = reply_ids(tokenizer, "<think>\nHmm.\n</think>\n\nI am not sure what to do.")
    pool = FakeEnvPool()
    sampler = ScriptedSampler([chatter] * 4)  # a fifth turn would raise: the loop must stop at 4
    trajectory = run(
        run_episode(
            RolloutContext(pool, sampler, tokenizer, make_settings(max_steps=4)), make_task(), 0, 0
        )
    )

    assert trajectory.stop_reason is StopReason.max_steps and trajectory.compact_filtered
    assert (trajectory.reward, trajectory.num_steps, trajectory.patch) == (0.0, 4, "")
    assert pool.steps == [] and pool.released == 1 and pool.graded == [""]
    assert all("no function call found" in s["parse_error"] for s in trajectory.steps)
    assert "Steps Remaining: 1" in tokenizer.decode(trajectory.token_ids)


def test_max_context_caps_each_turn_and_stops(tokenizer: ChatTokenizer):
    long_reply = reply_ids(tokenizer, "<think>\n" + "look closer " * 80 + "\n</think>\n\n" + VIEW)
    pool, sampler = FakeEnvPool(), ScriptedSampler([long_reply] * 3)
    settings = make_settings(max_context=len(long_reply) + 100)
    trajectory = run(
        run_episode(RolloutContext(pool, sampler, tokenizer, settings), make_task(), 0, 0)
    )

    assert trajectory.stop_reason is StopReason.max_context and trajectory.compact_filtered
    first, second = sampler.requests
    assert first.params.max_new_tokens == settings.max_context
    used_before_second = len(second.prompt_ids) - len(first.prompt_ids)
    assert second.params.max_new_tokens == settings.max_context - used_before_second
    assert trajectory.num_response_tokens == settings.max_context  # the cut turn used the rest
    assert (
        trajectory.steps[-1]["finish_reason"] == "length" and "action" not in trajectory.steps[-1]
    )
    assert trajectory.reward == 0.0 and pool.released == 1 and len(pool.steps) == 1


def test_max_context_when_the_observation_does_not_fit(tokenizer: ChatTokenizer):
    view = reply_ids(tokenizer, VIEW)
    pool = FakeEnvPool()
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler([view]), tokenizer, make_settings(max_context=len(view) + 5)
            ),
            make_task(),
            0,
            0,
        )
    )
    assert trajectory.stop_reason is StopReason.max_context
    assert trajectory.num_response_tokens == len(view) and pool.released == 1


def test_timeout_stops_the_episode_and_releases_the_env(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(step_delay_s=30.0)
    settings = make_settings(trajectory_timeout=0.2)
    # On the virtual clock the first step starts at 0 s whatever the load, and the 0.2 s
    # timeout fires during its 30 s.
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        trajectory = runner.run(
            run_episode(
                RolloutContext(pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, settings),
                make_task(),
                0,
                0,
            )
        )

    assert trajectory.stop_reason is StopReason.timeout and trajectory.compact_filtered
    assert trajectory.num_steps == 1 and trajectory.reward == 0.0
    assert pool.acquired == pool.released == 1 and pool.graded == [""]


def test_env_error_ends_the_episode_without_grading(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(fail_at_step=2)
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
            ),
            make_task(),
            0,
            0,
        )
    )

    assert trajectory.stop_reason is StopReason.env_error and trajectory.infra_error
    assert trajectory.grade is None and pool.graded == [] and pool.released == 1
    assert trajectory.num_steps == 2 and "container died" in trajectory.steps[-1]["env_error"]


def test_exhausting_its_own_container_scores_zero_and_is_trained_on(tokenizer: ChatTokenizer):
    """A limit of the episode's own container (disk, memory) is the policy's doing: no grading,
    reward 0, not an infrastructure error, not compact-filtered (issue 25)."""
    pool = FakeEnvPool(limit_at_step=2)
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
            ),
            make_task(),
            0,
            0,
        )
    )
    assert trajectory.stop_reason is StopReason.limit_exceeded and not trajectory.infra_error
    assert not trajectory.compact_filtered and trajectory.reward == 0.0
    assert trajectory.grade is None and pool.graded == [] and pool.released == 1
    assert "disk limit" in trajectory.steps[-1]["limit_exceeded"]


def test_a_patch_over_the_cap_is_graded_patch_too_large(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(patch_too_large=True)
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
            ),
            make_task(),
            0,
            0,
        )
    )
    assert trajectory.stop_reason is StopReason.finished and not trajectory.infra_error
    assert trajectory.grade.status == "patch_too_large" and trajectory.reward == 0.0
    assert pool.graded == []


def test_failed_acquire_is_an_env_error(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(fail_acquire=True)
    trajectory = run(
        run_episode(
            RolloutContext(pool, ScriptedSampler([]), tokenizer, make_settings()), make_task(), 0, 0
        )
    )
    assert trajectory.stop_reason is StopReason.env_error and trajectory.infra_error
    assert (
        trajectory.num_steps == 0
        and "image deepswe/calc:base not found" in trajectory.steps[0]["env_error"]
    )
    assert trajectory.token_ids == trajectory.prompt_ids


def test_grader_failure_is_infra_not_a_wrong_answer(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(fail_grade=True)
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
            ),
            make_task(),
            0,
            0,
        )
    )
    assert trajectory.stop_reason is StopReason.finished
    assert trajectory.infra_error and trajectory.reward == 0.0 and trajectory.grade is None


def test_sampler_errors_propagate_and_release_the_env(tokenizer: ChatTokenizer):
    pool = FakeEnvPool()
    with pytest.raises(RuntimeError, match="the script has 1 turns"):
        run(
            run_episode(
                RolloutContext(
                    pool, ScriptedSampler([reply_ids(tokenizer, VIEW)]), tokenizer, make_settings()
                ),
                make_task(),
                0,
                0,
            )
        )
    assert pool.acquired == pool.released == 1


def test_cancellation_releases_the_env(tokenizer: ChatTokenizer):
    pool = FakeEnvPool(step_delay_s=30.0)

    async def cancel_mid_step():
        episode = asyncio.ensure_future(
            run_episode(
                RolloutContext(
                    pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
                ),
                make_task(),
                0,
                0,
            )
        )
        while not pool.steps:
            await asyncio.sleep(0.01)
        episode.cancel()
        with pytest.raises(asyncio.CancelledError):
            await episode

    run(cancel_mid_step())
    assert pool.acquired == pool.released == 1


def test_prompt_over_the_limit_stops_before_acquiring(tokenizer: ChatTokenizer):
    pool = FakeEnvPool()
    trajectory = run(
        run_episode(
            RolloutContext(
                pool, ScriptedSampler([]), tokenizer, make_settings(max_prompt_tokens=50)
            ),
            make_task(),
            0,
            0,
        )
    )
    assert trajectory.stop_reason is StopReason.max_context and not trajectory.infra_error
    assert pool.acquired == 0 and trajectory.num_steps == 0


def test_turn_ended_by_endoftext_is_closed_with_unmasked_im_end(tokenizer: ChatTokenizer):
    view = tokenizer.encode_text(VIEW) + [tokenizer.end_of_text_id]
    script = [view, reply_ids(tokenizer, FINISH)]
    trajectory = run(
        run_episode(
            RolloutContext(FakeEnvPool(), ScriptedSampler(script), tokenizer, make_settings()),
            make_task(),
            0,
            0,
        )
    )
    start = len(trajectory.prompt_ids)
    after = start + len(view)
    assert trajectory.token_ids[after] == tokenizer.im_end_id and trajectory.loss_mask[after] == 0
    assert trajectory.steps[0]["action"]["name"] == "file_editor"


def test_two_calls_run_the_first_and_say_so(tokenizer: ChatTokenizer):
    script = [reply_ids(tokenizer, VIEW + "\n" + FIX), reply_ids(tokenizer, FINISH)]
    pool = FakeEnvPool()
    trajectory = run(
        run_episode(
            RolloutContext(pool, ScriptedSampler(script), tokenizer, make_settings()),
            make_task(),
            0,
            0,
        )
    )
    assert [tool for tool, _ in pool.steps] == ["file_editor", "finish"]
    assert pool.steps[0][1]["command"] == "view"
    assert trajectory.steps[0]["observation"].startswith("NOTE: your reply held 2 function calls")


def test_collect_rollouts_of_one_task_and_of_several(tokenizer: ChatTokenizer, tmp_path: Path):
    pool = FakeEnvPool()
    context = RolloutContext(
        pool, ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
    )
    group = run(collect_rollouts(context, [make_task()], 3, 1, show_progress=False))
    assert [t.rollout_index for t in group] == [0, 1, 2] and all(t.reward == 1.0 for t in group)
    assert pool.max_active == 3 and pool.released == 3

    tasks = [make_task("calc-1"), make_task("calc-2", "add() is wrong for negatives.")]
    out = tmp_path / "iter_000001.jsonl"
    trajectories = run(
        collect_rollouts(
            RolloutContext(
                FakeEnvPool(), ScriptedSampler(fix_script(tokenizer)), tokenizer, make_settings()
            ),
            tasks,
            2,
            1,
            output_path=out,
            show_progress=False,
        )
    )
    assert [(t.task_id, t.rollout_index) for t in trajectories] == [
        ("calc-1", 0),
        ("calc-1", 1),
        ("calc-2", 0),
        ("calc-2", 1),
    ]
    assert read_trajectories(out) == trajectories


def test_each_turn_requests_a_seed_of_its_own_that_a_rerun_repeats(tokenizer: ChatTokenizer):
    """EpisodeSettings.seed: every turn's request carries turn_seed(seed, task, rollout, version,
    turn); a rerun of the episode (a resumed run, a retried episode) asks for the same seeds, and
    no two turns or rollouts share one. None (rLLM's behaviour) leaves the seed to the sampler."""
    from deepswe_jax.agent.rollout import turn_seed

    task = make_task()

    def seeds(settings: EpisodeSettings, rollout_index: int, version: int) -> list[int | None]:
        sampler = ScriptedSampler(fix_script(tokenizer))
        context = RolloutContext(FakeEnvPool(), sampler, tokenizer, settings)
        run(run_episode(context, task, rollout_index, version))
        return [request.params.seed for request in sampler.requests]

    first = seeds(make_settings(seed=5), 0, 3)
    assert first == [turn_seed(5, task.instance_id, 0, 3, turn) for turn in range(3)]
    assert seeds(make_settings(seed=5), 0, 3) == first
    others = seeds(make_settings(seed=5), 1, 3) + seeds(make_settings(seed=6), 0, 3)
    others += seeds(make_settings(seed=5), 0, 4)
    assert len(set(first + others)) == 12
    assert all(0 <= seed < 2**32 for seed in first + others)
    assert seeds(make_settings(), 0, 3) == [None, None, None]
