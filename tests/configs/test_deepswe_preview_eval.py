"""configs/deepswe_preview_eval.py: the released model's evaluation as its card says.

- The memory planner fits it on one node of 8 x 80 GB with vLLM (tensor parallelism 8), and
  says NO when the concurrency outgrows the KV cache.
- Without a prompts file it refuses to start, naming config.agent.prompts_file.
- Its miniature ('mini': the tiny model, the JAX sampler) runs end to end through
  launch/evaluate.py on CPU: r2egym interface with prompts from a file the test writes,
  2 runs of a shipped task, Pass@1 / pass@k and the hybrid Best@k.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from configs import deepswe_preview_eval
from deepswe_jax import experiment
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.trajectory import read_trajectories
from deepswe_jax.experiment.memory_plan import GB
from deepswe_jax.experiment.sampler_memory_plan import plan_sampler_memory

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"
TASK = "confini-1"
PROMPTS_YAML = """\
system_prompt: |-
  You are a programming agent. Call file_editor, execute_bash, search or finish.
instance_prompt: |-
  I have uploaded a python code repository in the {working_dir} directory.
  <github_issue>
  {problem_statement}
  </github_issue>
"""


def test_the_planner_fits_the_evaluation_on_8_h100_with_vllm():
    config = deepswe_preview_eval.get_config()
    plan = plan_sampler_memory(config, num_devices=8, device_memory_gb=80)
    assert (plan.tensor_parallel, plan.engines, plan.sequences_per_engine) == (8, 1, 24)
    assert plan.seq_len == 65536 <= config.model.max_position_embeddings
    assert plan.weights == pytest.approx(32_762_123_264 * 2 / 8, rel=1e-6)
    # 64 layers x (key + value) x 1 of 8 KV heads per device x 128 x bf16.
    assert plan.kv_bytes_per_token == 64 * 2 * 1 * 128 * 2
    assert plan.fits and plan.total < 0.9 * 80 * GB
    config.sampler.max_batch = 48  # R2E-Gym's 48 workers all generating at full length
    assert not plan_sampler_memory(config, num_devices=8, device_memory_gb=80).fits


def test_the_evaluation_refuses_to_start_without_prompts(tmp_path):
    config = deepswe_preview_eval.get_config("mini")
    with pytest.raises(ValueError, match=r"config\.agent\.prompts_file=''"):
        experiment.run_evaluation(config, str(tmp_path / "policy"), tmp_path, tasks=[], num_runs=1)
    assert not (tmp_path / "policy").exists() and list(tmp_path.iterdir()) == []


def test_the_miniature_evaluation_runs_end_to_end_on_cpu(tmp_path):
    from tests.verify.test_evaluation_run import save_random_policy_and_verifier

    config = deepswe_preview_eval.get_config("mini")
    save_random_policy_and_verifier(tmp_path, config)
    prompts_file = tmp_path / "edit_non_fn_calling.yaml"
    prompts_file.write_text(PROMPTS_YAML)
    output_dir = tmp_path / "eval"
    command = [
        sys.executable,
        "launch/evaluate.py",
        "--config=configs/deepswe_preview_eval.py:mini",
        f"--config.agent.prompts_file={prompts_file}",
        f"--policy={tmp_path / 'policy'}",
        f"--instance_ids={TASK}",
        "--num_runs=2",
        "--select=hybrid",
        f"--verifier={tmp_path / 'verifier'}",
        f"--output_dir={output_dir}",
    ]
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]

    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["num_runs"] == 2 and summary["max_steps"] == 3
    assert set(summary["best_at_k"]) == {"hybrid"}
    assert set(summary["pass_at_k"]) == {"1", "2"}
    identity = json.loads((output_dir / "eval_config.json").read_text())
    assert identity["interface"] == "r2egym"
    assert identity["prompts_file"] == str(prompts_file)
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    trajectories = read_trajectories(output_dir / "trajectories.jsonl")
    assert len(trajectories) == 2
    for trajectory in trajectories:
        prompt = tokenizer.decode(trajectory.prompt_ids)
        assert "You are a programming agent. Call file_editor" in prompt
        assert "</github_issue>\nSteps Remaining: 2" in prompt
        assert trajectory.grade is not None and not trajectory.infra_error
