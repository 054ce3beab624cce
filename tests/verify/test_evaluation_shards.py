"""launch/evaluate.py split over two processes, then --merge_shards: the merged outputs are those
of one process evaluating the same tasks (real Docker grading and execution checks), and a
missing, unfinished or mismatched shard is refused with the process to run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.verify.evaluation import shards, store, summary
from tests.verify.test_evaluation_run import (
    ONE_PER_REPO,
    check_predictions,
    check_reports,
    run_evaluate,
)

TASK_IDS = ONE_PER_REPO[:3]  # shard 0 of 2 takes the first and third, shard 1 the second
FLAGS = ("--policy=gold", f"--instance_ids={','.join(TASK_IDS)}", "--num_runs=2")
# Best@k from candidate scores: the execution checks run each candidate's regression tests.
SELECT = "--select=execution"
# Timings and who-ran-what differ between the two evaluations; every other number must not.
SESSION_KEYS = {"wall_s", "mean_episode_s", "pairs_run_this_session", "merged_shards"}


def read_summary(output_dir: Path) -> dict:
    return json.loads((output_dir / summary.SUMMARY_FILE).read_text())


def results(output_dir: Path) -> dict[tuple[str, int], tuple]:
    """{(task, run): (reward, patch, grade status)} of trajectories.jsonl."""
    lines = (output_dir / store.TRAJECTORIES_FILE).read_text().splitlines()
    trajectories = map(Trajectory.from_json, lines)
    return {(t.task_id, t.rollout_index): (t.reward, t.patch, t.grade.status) for t in trajectories}


def test_merged_shards_equal_one_process_evaluation(tmp_path):
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    run_evaluate(single, *FLAGS, SELECT)
    run_evaluate(sharded, *FLAGS, SELECT, "--num_processes=2", "--process_id=0")
    with pytest.raises(FileNotFoundError, match=r"shard_1-of-2 is missing .*--process_id=1 "):
        shards.merge_shards(sharded)
    assert not (sharded / summary.SUMMARY_FILE).exists()
    run_evaluate(sharded, *FLAGS, SELECT, "--num_processes=2", "--process_id=1")
    run_evaluate(sharded, "--merge_shards")

    merged = read_summary(sharded)
    assert merged["merged_shards"] == ["shard_0-of-2", "shard_1-of-2"]
    assert merged["num_tasks"] == 3 and merged["num_runs"] == 2
    assert merged["pass_at_1"] == 1.0 and merged["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert merged["best_at_k"] == {"execution": {"1": 1.0, "2": 1.0}}
    single_summary = read_summary(single)
    assert {k: v for k, v in merged.items() if k not in SESSION_KEYS} == {
        k: v for k, v in single_summary.items() if k not in SESSION_KEYS
    }
    for run_index in range(2):
        run_dir, single_run_dir = sharded / f"run_{run_index:02d}", single / f"run_{run_index:02d}"
        rows = check_predictions(run_dir / "predictions.jsonl", TASK_IDS, "gold")
        assert rows == check_predictions(single_run_dir / "predictions.jsonl", TASK_IDS, "gold")
        reports = check_reports(run_dir / "report.json", TASK_IDS)
        assert reports == check_reports(single_run_dir / "report.json", TASK_IDS)
        run_report = json.loads((run_dir / "run_report.json").read_text())
        assert run_report["resolved_ids"] == TASK_IDS
        assert run_report == json.loads((single_run_dir / "run_report.json").read_text())
    assert results(sharded) == results(single)
    assert len(results(sharded)) == 6
    scores = [json.loads(line) for line in (sharded / "scores.jsonl").read_text().splitlines()]
    assert [(r["instance_id"], r["run"]) for r in scores] == [
        (i, r) for i in TASK_IDS for r in (0, 1)
    ]
    assert (sharded / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The merged folder is the evaluation one process would have left: resuming it runs nothing.
    output = run_evaluate(sharded, *FLAGS, SELECT)
    assert "6 pairs already done, running 0" in output

    unfinished = tmp_path / "unfinished"
    shutil.copytree(sharded, unfinished)
    shard_trajectories = unfinished / "shard_1-of-2" / store.TRAJECTORIES_FILE
    lines = shard_trajectories.read_text().splitlines(keepends=True)
    torn = "".join(lines[:-1]) + lines[-1][:50]  # a process killed while writing its last pair
    shard_trajectories.write_text(torn)
    with pytest.raises(
        ValueError, match=r"shard_1-of-2 has not finished: 1 of its 2 .*--process_id=1 "
    ):
        shards.merge_shards(unfinished)
    assert shard_trajectories.read_text() == torn  # read only: a live process may be writing it

    plan = json.loads((unfinished / "shard_1-of-2" / shards.SHARD_PLAN_FILE).read_text())
    (unfinished / "shard_1-of-2" / shards.SHARD_PLAN_FILE).write_text(
        json.dumps({**plan, "num_runs": 4})
    )
    with pytest.raises(ValueError, match=r"shard_1-of-2 evaluated other .*num_runs: 2 -> 4"):
        shards.merge_shards(unfinished)


def test_merging_a_folder_without_shards_says_how_to_make_them(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no shard_<i>-of-<n> folders .*--num_processes"):
        shards.merge_shards(tmp_path)
