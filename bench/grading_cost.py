"""Fixed cost of one grade on a SWE-bench-style image: ours vs the swebench harness's own
`run_instance`.

Both grade the gold patch of the same row on the same locally built image
(tests/env/official_layouts.py, the pytest row "textfmt": conda testbed stand-in, the row's
eval script, a two-second-free test run), one after the other, --repeats times each:

  ours    grading.grade_patch: a fresh container with the tool server as PID 1, apply, git
          status before/after and restore, the eval script, swebench's get_eval_report;
  theirs  swebench.harness.run_evaluation.run_instance (swebench 5.0.2) with the same TestSpec:
          a container running `tail -f /dev/null`, copy and `git apply` the patch, `git diff`
          before and after, copy and run eval.sh, get_eval_report, then `docker stop --time=15`
          and `docker rm` (its cleanup_container). `tail` as PID 1 ignores SIGTERM, so the stop
          waits its full 15 s; "theirs w/o stop" takes that wait (from its run_instance.log
          timestamps) out.

Times are wall seconds per grade, container removal included, medians over the repeats.

    PYTHONPATH=. python bench/grading_cost.py --repeats=5
"""

from __future__ import annotations

import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path

import docker
from absl import app, flags

from deepswe_jax.env.docker.images import ensure_base_image
from deepswe_jax.env.grading.grading import grade_patch
from deepswe_jax.env.grading.harness_swebench import swebench_spec
from tests.env.official_layouts import textfmt_row

_REPEATS = flags.DEFINE_integer("repeats", 5, "Grades per side.")


def their_grade(client: docker.DockerClient, task, index: int, logs: Path) -> tuple[float, float]:
    """(wall seconds, seconds of its docker stop) of one swebench run_instance."""
    from swebench.harness.run_evaluation import run_instance

    run_id = f"deepswe-bench-{os.getpid()}-{index}"
    prediction = {
        "instance_id": task.instance_id,
        "model_name_or_path": "gold",
        "model_patch": task.patch,
    }
    cwd = os.getcwd()
    os.chdir(logs)  # run_instance writes logs/run_evaluation/<run_id>/... under the cwd
    try:
        started = time.monotonic()
        _, report = run_instance(swebench_spec(task), prediction, client, run_id, timeout=300)
        wall = time.monotonic() - started
    finally:
        os.chdir(cwd)
    assert report[task.instance_id]["resolved"], report
    log = next(logs.rglob(f"{run_id}/**/run_instance.log")).read_text()
    return wall, _stop_seconds(log)


def _stop_seconds(log: str) -> float:
    """Seconds between "Attempting to stop container" and "stopped successfully" in a
    run_instance.log (its lines start with an asctime timestamp)."""

    def stamp(marker: str) -> datetime.datetime:
        line = next(line for line in log.splitlines() if marker in line)
        return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")

    return (stamp("stopped successfully") - stamp("Attempting to stop container")).total_seconds()


def main(argv: list[str]) -> None:
    del argv
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="deepswe-grading-cost-") as scratch:
        scratch = Path(scratch)
        task = textfmt_row(client, ensure_base_image(client), scratch).task
        ours, theirs, stops = [], [], []
        for index in range(_REPEATS.value):
            started = time.monotonic()
            result = grade_patch(task, task.patch, client=client, run_label="bench-grading-cost")
            ours.append(time.monotonic() - started)
            assert result.resolved, result.test_log[-2000:]
            wall, stop = their_grade(client, task, index, scratch)
            theirs.append(wall)
            stops.append(stop)
            print(f"repeat {index}: ours {ours[-1]:.2f} s, theirs {wall:.2f} s (stop {stop:.2f} s)")
    ours_s = statistics.median(ours)
    theirs_s = statistics.median(theirs)
    without_stop = statistics.median(w - s for w, s in zip(theirs, stops, strict=True))
    print()
    print("| grader | s per grade (median) | ours / theirs |")
    print("|---|---|---|")
    print(f"| ours: grading.grade_patch | {ours_s:.2f} | 1.00 |")
    print(f"| swebench run_instance | {theirs_s:.2f} | {ours_s / theirs_s:.2f} |")
    print(
        f"| swebench run_instance w/o its 15 s stop | {without_stop:.2f} | "
        f"{ours_s / without_stop:.2f} |"
    )


if __name__ == "__main__":
    app.run(main)
