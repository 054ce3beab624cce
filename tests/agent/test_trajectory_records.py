"""Trajectory records (jsonl), ScriptedSampler, the gold-patch script and the tokenizer build."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe_jax.agent.scripted_policy import FileEdit, gold_patch_replies, parse_unified_diff
from deepswe_jax.agent.trajectory import (
    StopReason,
    Trajectory,
    read_trajectories,
    trajectories_path,
    write_trajectories,
)
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.tasks import unified_diff
from deepswe_jax.sampling.base import GenerateRequest, SamplingParams
from deepswe_jax.sampling.scripted import ScriptedSampler, scripted_logprob
from tests.assets.build_tokenizer import build_tokenizer
from tests.bench.test_gpu_bench import blocking_environment


def make_trajectory(**changes) -> Trajectory:
    fields = dict(
        task_id="calc-1",
        rollout_index=3,
        policy_version=12,
        prompt_ids=(1, 2),
        token_ids=(1, 2, 7, 8, 9),
        loss_mask=(0, 0, 1, 1, 0),
        sampler_logprobs=(0.0, 0.0, -0.125, -1e-9, 0.0),
        reward=1.0,
        stop_reason=StopReason.finished,
        infra_error=False,
        num_steps=1,
        patch="diff --git a/x b/x\n+é\n",
        timings={"generation_s": 0.5, "total_s": 1.25},
        steps=({"step": 0, "assistant": "<think>\n✓\n</think>", "action": None},),
        grade=GradeResult(
            "calc-1",
            "resolved",
            1.0,
            patch_successfully_applied=True,
            resolved=True,
            tests_status={"FAIL_TO_PASS": {"success": ["t"], "failure": []}},
            report={"calc-1": {"resolved": True}},
        ),
    )
    fields.update(changes)
    return Trajectory(**fields)


def test_json_round_trip_is_exact(tmp_path: Path):
    trajectories = [
        make_trajectory(),
        make_trajectory(stop_reason=StopReason.timeout, reward=0.0, grade=None),
    ]
    path = trajectories_path(tmp_path / "run", 12)
    assert path == tmp_path / "run" / "trajectories" / "iter_000012.jsonl"
    write_trajectories(path, trajectories)
    assert read_trajectories(path) == trajectories
    assert len(path.read_text().splitlines()) == 2
    assert json.loads(path.read_text().splitlines()[1])["stop_reason"] == "timeout"
    assert read_trajectories(path)[1].stop_reason is StopReason.timeout


# A line of trajectories.jsonl as written while Trajectory.grade was a dict of GradeResult's
# fields (`dataclasses.asdict`), from before GradeResult had `report`.
DICT_GRADE_LINE = (
    '{"task_id": "calc-1", "rollout_index": 0, "policy_version": 3, "prompt_ids": [1, 2], '
    '"token_ids": [1, 2, 7], "loss_mask": [0, 0, 1], "sampler_logprobs": [0.0, 0.0, -0.5], '
    '"reward": 1.0, "stop_reason": "finished", "infra_error": false, "num_steps": 1, '
    '"patch": "diff", "timings": {"total_s": 2.0}, "steps": [{"step": 0}], "grade": '
    '{"instance_id": "calc-1", "status": "resolved", "reward": 1.0, '
    '"patch_successfully_applied": true, "resolved": true, "tests_status": {"FAIL_TO_PASS": '
    '{"success": ["tests/test_calc.py::test_add"], "failure": []}, "PASS_TO_PASS": '
    '{"success": [], "failure": []}}, "test_log": "1 passed", "duration_s": 1.5, '
    '"patch_exists": true, "patch_is_none": false, "error": ""}}'
)


def test_trajectories_written_with_a_dict_grade_still_load():
    trajectory = Trajectory.from_json(DICT_GRADE_LINE)
    assert isinstance(trajectory.grade, GradeResult) and trajectory.grade.report is None
    assert trajectory.grade.tests_status["FAIL_TO_PASS"]["success"] == [
        "tests/test_calc.py::test_add"
    ]
    assert trajectory.resolved and trajectory.grade.to_report()["calc-1"]["resolved"] is True
    # Written again, the line is the old one with the new fields' defaults.
    expected = json.loads(DICT_GRADE_LINE)
    expected["grade"].update(report=None, suspected_forgery=False)
    assert json.loads(trajectory.to_json()) == expected
    assert Trajectory.from_json(trajectory.to_json()) == trajectory


def test_trajectories_load_without_the_docker_package(tmp_path):
    """Training reads trajectories on machines without docker (the GPU machine): the grade's
    type comes from env.grading, which loads docker only to grade in a local container."""
    code = (
        "import sys; from deepswe_jax.agent.trajectory import Trajectory; "
        "t = Trajectory.from_json(sys.stdin.read()); assert t.resolved; "
        "assert 'docker' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=DICT_GRADE_LINE,
        env=blocking_environment(tmp_path),
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_resolved_is_the_graders_verdict_on_the_final_patch():
    unresolved = dataclasses.replace(
        make_trajectory().grade, status="unresolved", reward=0.0, resolved=False
    )
    assert make_trajectory().resolved
    assert not make_trajectory(grade=None).resolved
    assert not make_trajectory(grade=unresolved, reward=0.0).resolved
    # SWE-bench's verdict: a patch that resolves counts however the episode stopped (the RL
    # reward, 0 here, asks for a finished episode as well).
    assert make_trajectory(stop_reason=StopReason.max_steps, reward=0.0).resolved


def test_grades_are_the_graders_result():
    with pytest.raises(TypeError, match="grade must be the grader's GradeResult"):
        make_trajectory(grade={"status": "resolved", "resolved": True})
    infra = GradeResult("calc-1", "infra_error", 0.0, False, False, error="docker died")
    with pytest.raises(ValueError, match="needs infra_error=True"):
        make_trajectory(grade=infra, reward=0.0)
    assert make_trajectory(grade=infra, reward=0.0, infra_error=True).grade.infra_error
    line = json.loads(DICT_GRADE_LINE)
    del line["grade"]["resolved"]
    line["grade"]["verdict"] = "yes"
    with pytest.raises(ValueError, match=r"missing \['resolved'\], unexpected \['verdict'\]"):
        Trajectory.from_json(json.dumps(line))


def test_stop_reason_sets_live_on_the_enum():
    compact = {reason for reason in StopReason if reason.compact_filtered}
    assert compact == {StopReason.max_steps, StopReason.max_context, StopReason.timeout}
    assert {reason for reason in StopReason if reason.env_failure} == {StopReason.env_error}
    assert make_trajectory(stop_reason=StopReason.max_steps).compact_filtered
    assert not make_trajectory(stop_reason=StopReason.env_error).compact_filtered


def test_inconsistent_records_are_refused():
    with pytest.raises(ValueError, match="must have one length"):
        make_trajectory(loss_mask=(0, 0, 1))
    with pytest.raises(ValueError, match="prefix"):
        make_trajectory(prompt_ids=(5,))
    line = json.loads(make_trajectory().to_json())
    del line["patch"]
    with pytest.raises(ValueError, match=r"missing \['patch'\]"):
        Trajectory.from_json(json.dumps(line))


def test_scripted_sampler_truncates_and_tracks_conversations():
    sampler = ScriptedSampler([[5, 6, 99, 7], [8, 9, 10]])
    params = SamplingParams(max_new_tokens=2, stop_token_ids=(99,))

    async def conversation():
        first = (
            await sampler.generate(
                [GenerateRequest((1, 2), SamplingParams(max_new_tokens=10, stop_token_ids=(99,)))]
            )
        )[0]
        other = (await sampler.generate([GenerateRequest((1, 2), params)]))[0]  # a new conversation
        second = (await sampler.generate([GenerateRequest((1, 2, *first.token_ids, 50), params)]))[
            0
        ]
        return first, other, second

    first, other, second = asyncio.run(conversation())
    assert (first.token_ids, first.finish_reason) == ((5, 6, 99), "stop")
    assert first.logprobs == tuple(scripted_logprob(t) for t in (5, 6, 99))
    assert (other.token_ids, other.finish_reason) == ((5, 6), "length")
    assert (second.token_ids, second.finish_reason) == ((8, 9), "length")


def test_unified_diff_to_edits_round_trip():
    old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
    new = "a\nB\nc\nd\ne\nf\ng\nh\ni\nJ\nk"  # second hunk also drops the final newline
    patch = unified_diff("pkg/m.py", old, new) + unified_diff("new.py", None, "x = 1\n")
    patch += unified_diff("gone.py", "bye\n", None)
    edits = parse_unified_diff(patch)
    assert edits[2:] == [FileEdit("new.py", None, "x = 1\n"), FileEdit("gone.py", "bye\n", None)]
    text = old
    for edit in edits[:2]:
        assert edit.path == "pkg/m.py" and text.count(edit.old) == 1
        text = text.replace(edit.old, edit.new)
    assert text == new


def test_gold_patch_replies_fail_clearly_without_hunks():
    from fake_env import make_task

    with pytest.raises(ValueError, match="no hunks"):
        gold_patch_replies(make_task())


def test_tokenizer_build_is_deterministic():
    corpus = ["def add(a, b):\n    return a + b\n" * 50, "The agent edits files. " * 50] * 20
    first, second = build_tokenizer(corpus), build_tokenizer(corpus)
    assert first.to_str() == second.to_str()
    assert first.token_to_id("</think>") == first.get_vocab_size(with_added_tokens=True) - 1
