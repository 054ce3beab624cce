"""tasks/oneline/build.py at sizes other than the shipped one (issue 15): the larger family the
held-out benchmark uses gets its own image tags and a held-out sample balanced by repository."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_larger_family_has_its_own_image_tags_and_a_balanced_held_out_sample(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "tasks/oneline/build.py",
            f"--out_dir={tmp_path}",
            "--num_names=24",
            "--held_out_sample=8",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    def rows(name):
        return [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]

    train, held_out, sample = rows("train"), rows("held_out"), rows("held_out_sample")
    assert len(train) + len(held_out) == 4 * 24
    shipped_rows = (REPO_ROOT / "tasks/oneline/train.jsonl").read_text().splitlines()
    shipped = {json.loads(line)["image"] for line in shipped_rows}
    assert {r["image"] for r in train + held_out} == {
        f"deepswe/{repo}:n24-h4" for repo in ("dials", "labels", "switches", "tallies")
    }
    assert not shipped & {r["image"] for r in train}
    assert Counter(r["repo"] for r in sample) == {
        f"deepswe/{repo}": 2 for repo in ("dials", "labels", "switches", "tallies")
    }
    sample_ids = {r["instance_id"] for r in sample}
    assert len(sample_ids) == 8
    assert sample_ids <= {r["instance_id"] for r in held_out}


def test_a_held_out_sample_larger_than_a_repository_is_refused(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "tasks/oneline/build.py",
            f"--out_dir={tmp_path}",
            "--num_names=8",
            "--held_out_sample=40",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "--held_out_sample=40" in result.stderr and "has only" in result.stderr
    assert not (tmp_path / "train.jsonl").exists()
