"""MetricsWriter's TensorBoard file comes from tensorboardX imported without torch: torch's
import was 1.5-3 s of CPU in every launch script's start-up, and tensorboardX imports it only to
accept torch.Tensor values (rl/metrics.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.launch.test_train_main import tensorboard_tags

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_writer_neither_imports_torch_nor_stops_it_importing(tmp_path):
    script = f"""
import sys
from deepswe_jax.rl.metrics import MetricsWriter, read_metrics
with MetricsWriter({str(tmp_path)!r}) as writer:
    writer.write(1, {{"rollout/reward_mean": 0.5}})
    writer.write(2, {{"rollout/reward_mean": 0.75}})
print("torch" in sys.modules)
import torch
print(torch.ones(1).item())
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["False", "1.0"]
    assert tensorboard_tags(tmp_path / "tensorboard") == {"rollout/reward_mean": [1, 2]}
