"""The Ctrl-C soak of the main job in CI (issue 26): bench/soak_interrupts.py with its five
marker moments (SFT start and step, GRPO++ rollouts and step, evaluation episodes; the episode
moments come after the first episode ended: a signal while containers are still starting can
leave one behind, EnvPool's race noted in BENCHMARKS.md's "Ctrl-C soak"), each
interrupted by one to three SIGINTs and rerun; every interruption exits 130 with one line and
leaves no container, temporary checkpoint folder or half-written file, and the final rerun
completes with one metrics row per step. The 30 random moments with the parameter comparison
are BENCHMARKS.md's ("Ctrl-C soak")."""

from __future__ import annotations

import pytest

from bench import soak_interrupts


@pytest.mark.timeout(1800)  # about 15 minutes on 2 loaded cores (BENCHMARKS.md)
def test_five_interruptions_of_the_main_job_lose_nothing(tmp_path):
    report = soak_interrupts.soak(tmp_path, 5, markers=True, seed=0, reference=False)
    assert report["problems"] == []
    assert report["interrupted"] == 5, report
    assert all(report["by_stage"].values()), report["by_stage"]
    [job] = report["jobs"].values()
    assert job["sft_metric_steps"] == [1, 2, 3, 4]
    assert job["rl_metric_steps"] == list(range(1, soak_interrupts.RL_STEPS + 1))
    assert job["eval_summary"]
