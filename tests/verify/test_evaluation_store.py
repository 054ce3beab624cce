"""verify.evaluation.store: the resumable store of an evaluation's output directory (torn lines
of a killed run dropped, other damage refused with the file kept, eval_config.json checked)."""

from __future__ import annotations

import json

import pytest

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.verify.evaluation import run, store
from tests.agent.test_trajectory_records import DICT_GRADE_LINE
from tests.verify.test_evaluation_run import agent_settings

RECORD = {"instance_id": "a-1", "run": 0, "verifier": 0.5}


def test_a_torn_last_line_is_dropped_when_resuming(tmp_path):
    path = tmp_path / store.SCORES_FILE
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps({**RECORD, "run": 1})[:20])
    scores = store.score_store(tmp_path)
    assert list(scores.records) == [("a-1", 0)]
    assert path.read_text() == json.dumps(RECORD) + "\n"
    scores.add({**RECORD, "run": 1}, json.dumps({**RECORD, "run": 1}))
    assert list(store.score_store(tmp_path).records) == [("a-1", 0), ("a-1", 1)]


def test_a_reader_of_another_process_leaves_its_torn_line(tmp_path):
    path = tmp_path / store.SCORES_FILE
    text = json.dumps(RECORD) + "\n" + json.dumps({**RECORD, "run": 1})[:20]
    path.write_text(text)
    assert list(store.score_store(tmp_path, repair=False).records) == [("a-1", 0)]
    assert path.read_text() == text


def test_a_whole_line_that_does_not_decode_is_refused_and_kept(tmp_path):
    """Only a kill mid-write tears the last line; a complete bad line (another version's record,
    a damaged file) would be run again and lost if dropped, so it is refused by number."""
    path = tmp_path / store.SCORES_FILE
    text = json.dumps(RECORD) + "\n" + '["not a score"]\n' + json.dumps({**RECORD, "run": 1}) + "\n"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"scores.jsonl, line 2, is not a record .*new output"):
        store.score_store(tmp_path)
    assert path.read_text() == text


def test_records_holding_unicode_line_separators_read_back(tmp_path):
    """json.dumps(ensure_ascii=False) writes U+2028 and U+0085 as they are; str.splitlines
    would split the record there."""
    trajectory = Trajectory.from_json(DICT_GRADE_LINE)
    trajectory = Trajectory.from_json(
        json.dumps({**json.loads(trajectory.to_json()), "patch": "+a\u2028b\x85c\n"})
    )
    trajectories = store.trajectory_store(tmp_path)
    trajectories.add(trajectory, json.dumps(json.loads(trajectory.to_json()), ensure_ascii=False))
    assert "\u2028" in (tmp_path / store.TRAJECTORIES_FILE).read_text(encoding="utf-8")
    assert store.trajectory_store(tmp_path).records == {("calc-1", 0): trajectory}


def test_trajectories_written_with_a_dict_grade_resume(tmp_path):
    (tmp_path / store.TRAJECTORIES_FILE).write_text(DICT_GRADE_LINE + "\n")
    [trajectory] = store.trajectory_store(tmp_path).records.values()
    assert trajectory.resolved and trajectory.grade.status == "resolved"


def test_resuming_with_other_settings_is_refused(tmp_path):
    settings = agent_settings()
    store.check_or_write_identity(tmp_path, run.eval_identity("/ckpt", "m", settings))
    store.check_or_write_identity(tmp_path, run.eval_identity("/ckpt", "m", settings))
    colder = agent_settings(temperature=0.2)
    with pytest.raises(ValueError, match=r"other settings \(temperature: 1.0 -> 0.2\)"):
        store.check_or_write_identity(tmp_path, run.eval_identity("/ckpt", "m", colder))
