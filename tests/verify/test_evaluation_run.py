"""launch/evaluate.py and verify.evaluation.run on the shipped tasks, with real Docker grading.

gold resolves all 30 tasks (and resumes after a kill -9 without regrading what was done),
empty resolves none, a scripted agent policy gives Best@k curves and a plot, and an Orbax
checkpoint runs episodes through the JaxSampler. Outputs are checked against the schemas the
official SWE-bench harness reads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker

from configs import tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.rollout import EpisodeSettings, initial_messages
from deepswe_jax.agent.scripted_policy import gold_patch_replies, reply_ids
from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.docker.docker_runtime import PID_LABEL
from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import load_tasks
from deepswe_jax.experiment import episode_settings
from deepswe_jax.sampling.scripted import ScriptedSampler
from deepswe_jax.verify.evaluation import run, scoring, store
from deepswe_jax.verify.select import CandidateScores

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_FILE = REPO_ROOT / "tasks" / "tasks.jsonl"
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"
ALL_TASK_IDS = [task.instance_id for task in load_tasks(TASKS_FILE)]
ONE_PER_REPO = list({task.repo: task.instance_id for task in load_tasks(TASKS_FILE)}.values())

# What SWE-bench's run_evaluation reads from a predictions file, as a JSON schema.
PREDICTION_SCHEMA = {
    "type": "object",
    "required": ["instance_id", "model_name_or_path", "model_patch"],
    "properties": {
        "instance_id": {"type": "string"},
        "model_name_or_path": {"type": "string"},
        "model_patch": {"type": ["string", "null"]},
    },
}
TEST_LISTS = {"type": "object", "required": ["success", "failure"]}
REPORT_SCHEMA = {
    "type": "object",
    "required": [
        "patch_is_None",
        "patch_exists",
        "patch_successfully_applied",
        "resolved",
        "infra_failure",
    ],
    "properties": {
        "patch_is_None": {"type": "boolean"},
        "infra_failure": {"type": "boolean"},
        "patch_exists": {"type": "boolean"},
        "patch_successfully_applied": {"type": "boolean"},
        "resolved": {"type": "boolean"},
        "tests_status": {
            "type": "object",
            "required": ["FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"],
            "properties": {
                key: TEST_LISTS
                for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")
            },
        },
    },
}
JSON_TYPES = {
    "object": dict,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "array": list,
}


def schema_errors(value, schema, where="$") -> list[str]:
    """The violations of a JSON-schema subset (type, required, properties)."""
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if types and not any(isinstance(value, JSON_TYPES[t]) for t in types):
        return [f"{where}: {type(value).__name__} is not {' or '.join(types)}"]
    errors = [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
    for key, sub_schema in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value:
            errors += schema_errors(value[key], sub_schema, f"{where}.{key}")
    return errors


def check_predictions(path: Path, instance_ids: list[str], model_name: str) -> list[dict]:
    """predictions.jsonl as the SWE-bench harness reads it: one object per line, each valid,
    one per instance, names from the task set."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        assert schema_errors(row, PREDICTION_SCHEMA) == [], row
        assert row["model_name_or_path"] == model_name
    assert [row["instance_id"] for row in rows] == instance_ids
    return rows


def check_reports(path: Path, instance_ids: list[str]) -> dict:
    reports = json.loads(path.read_text())
    assert sorted(reports) == sorted(instance_ids)
    for instance_id, report in reports.items():
        assert schema_errors(report, REPORT_SCHEMA, instance_id) == []
        for lists in report.get("tests_status", {}).values():
            assert all(isinstance(test, str) for test in lists["success"] + lists["failure"])
    return reports


def evaluate_command(output_dir: Path, *flags: str) -> list[str]:
    return [sys.executable, "launch/evaluate.py", f"--output_dir={output_dir}", *flags]


def run_evaluate(output_dir: Path, *flags: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    result = subprocess.run(
        evaluate_command(output_dir, *flags),
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    return output


def finished_lines(path: Path) -> list[str]:
    """The complete trajectory lines of `path` (a torn last line excluded)."""
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        try:
            Trajectory.from_json(line)
        except ValueError:
            continue
        lines.append(line)
    return lines


def eval_containers(client: docker.DockerClient, pid: int) -> list:
    """Evaluation containers started by process `pid` (other evaluations may share the engine)."""
    return [
        container
        for container in client.containers.list(all=True, filters={"label": f"{PID_LABEL}={pid}"})
        if container.labels.get(RUN_LABEL, "").startswith("eval-")
    ]


def test_gold_resolves_every_shipped_task_and_resumes_after_kill(tmp_path):
    output_dir = tmp_path / "gold"
    trajectories = output_dir / store.TRAJECTORIES_FILE
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    process = subprocess.Popen(
        evaluate_command(output_dir, "--policy=gold"),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while len(finished_lines(trajectories)) < 5 and process.poll() is None:
        assert time.monotonic() < deadline, "no 5 graded tasks within 300 s"
        time.sleep(0.2)
    process.kill()
    process.wait()
    before = finished_lines(trajectories)
    assert 5 <= len(before) < 30

    output = run_evaluate(output_dir, "--policy=gold")
    assert f"{len(before)} pairs already done, running {30 - len(before)}" in output
    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["pass_at_1"] == 1.0
    assert summary["pairs_run_this_session"] == 30 - len(before)  # nothing graded twice
    assert summary["statuses"] == {"resolved": 30}
    after = finished_lines(trajectories)
    assert after[: len(before)] == before  # the killed run's results are kept as they were
    pairs = [(t.task_id, t.rollout_index) for t in map(Trajectory.from_json, after)]
    assert sorted(pairs) == sorted((instance_id, 0) for instance_id in ALL_TASK_IDS)

    rows = check_predictions(output_dir / "run_00" / "predictions.jsonl", ALL_TASK_IDS, "gold")
    gold_patches = {task.instance_id: task.patch for task in load_tasks(TASKS_FILE)}
    assert all(row["model_patch"] == gold_patches[row["instance_id"]] for row in rows)
    reports = check_reports(output_dir / "run_00" / "report.json", ALL_TASK_IDS)
    assert all(report["resolved"] and "tests_status" in report for report in reports.values())
    run_report = json.loads((output_dir / "run_00" / "run_report.json").read_text())
    assert run_report["resolved_ids"] == ALL_TASK_IDS
    assert run_report["resolved_instances"] == run_report["total_instances"] == 30
    assert run_report["unresolved_ids"] == run_report["error_ids"] == []
    assert eval_containers(docker.from_env(), process.pid) == []  # the killed run's were reaped


def test_empty_policy_resolves_nothing(tmp_path):
    output_dir = tmp_path / "empty"
    flags = ["--policy=empty", f"--instance_ids={','.join(ONE_PER_REPO)}", "--num_runs=2"]
    run_evaluate(output_dir, *flags)
    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["pass_at_1"] == 0.0 and summary["pass_at_1_stderr"] == 0.0
    assert summary["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert summary["statuses"] == {"empty_patch": 2 * len(ONE_PER_REPO)}
    for run_index in range(2):
        directory = output_dir / f"run_{run_index:02d}"
        rows = check_predictions(directory / "predictions.jsonl", ONE_PER_REPO, "empty")
        assert all(row["model_patch"] == "" for row in rows)
        reports = check_reports(directory / "report.json", ONE_PER_REPO)
        assert not any(report["resolved"] or report["patch_exists"] for report in reports.values())
        # swebench's report of a patch that was not run has no tests_status
        assert not any("tests_status" in report for report in reports.values())
        run_report = json.loads((directory / "run_report.json").read_text())
        assert run_report["empty_patch_ids"] == ONE_PER_REPO
        assert run_report["resolved_ids"] == []
    assert (output_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"


def agent_settings(**sampling) -> EpisodeSettings:
    config = tiny.get_config()
    config.agent.update(
        max_steps=10, max_prompt_tokens=4096, max_context=16384, submit_notice_tokens=16000
    )
    return dataclasses.replace(episode_settings(config), **sampling)


def test_agent_policy_reports_best_at_k_curves_and_resumes(tmp_path):
    """Two runs per task from a scripted policy: one conversation of each task applies the gold
    patch, the other gives up at once. Execution checks (real containers) find both keep the
    existing tests passing, a tie; a stand-in verifier (score 1 for a non-empty patch) lets
    the verifier and hybrid selectors find the resolved run."""
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    tasks = run.load_eval_tasks(TASKS_FILE, ONE_PER_REPO[:2])
    give_up = render_function_call("finish", {"command": "submit"})
    scripts = {}
    for task in tasks:
        prompt = tuple(tokenizer.prompt_ids(initial_messages(task)))
        scripts[prompt] = [
            [reply_ids(tokenizer, reply) for reply in gold_patch_replies(task)],
            [reply_ids(tokenizer, f"<think>\nNo idea.\n</think>\n\n{give_up}")],
        ]
    sampler = ScriptedSampler(lambda prompt: scripts[tuple(prompt)].pop(0))
    scored = []

    def patch_verifier(task, candidates):
        scored.append(task.instance_id)
        return [CandidateScores(verifier=float(bool(c.patch.strip()))) for c in candidates]

    run_label = f"eval-{uuid.uuid4().hex[:8]}"
    execution = scoring.execution_scorer(timeout=120, workers=2, run_label=run_label)
    scorer = scoring.combine_scorers(patch_verifier, execution)

    async def evaluate_scripted(scorer):
        async with EnvPool(max_envs=4, run_label=run_label) as pool:
            return await run.evaluate(
                tasks,
                run.AgentPolicy(sampler, tokenizer),
                tmp_path,
                num_runs=2,
                env_pool=pool,
                episode=agent_settings(),
                seed=0,
                model_name="scripted",
                selectors=("verifier", "execution", "hybrid"),
                scorer=scorer,
                show_progress=False,
            )

    summary = asyncio.run(evaluate_scripted(scorer))
    assert summary["pass_at_1"] == 0.5 and summary["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert summary["stop_reasons"] == {"finished": 4}
    assert summary["mean_steps"] > 1 and summary["mean_response_tokens"] > 0
    assert summary["best_at_k"] == {
        "verifier": {"1": 0.5, "2": 1.0},
        "execution": {"1": 0.5, "2": 0.5},  # both keep every existing test passing: a tie
        "hybrid": {"1": 0.5, "2": 1.0},
    }
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for run_index in range(2):
        directory = tmp_path / f"run_{run_index:02d}"
        check_predictions(directory / "predictions.jsonl", ONE_PER_REPO[:2], "scripted")
        check_reports(directory / "report.json", ONE_PER_REPO[:2])
    trajectories = [
        Trajectory.from_json(line) for line in finished_lines(tmp_path / "trajectories.jsonl")
    ]
    assert all(t.num_steps >= 1 and t.loss_mask.count(1) > 0 for t in trajectories)

    def must_not_score(task, candidates):
        raise AssertionError("scores were cached in scores.jsonl")

    scores = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert sorted((r["instance_id"], r["run"]) for r in scores) == [
        (instance_id, run_index) for instance_id in sorted(ONE_PER_REPO[:2]) for run_index in (0, 1)
    ]
    assert all(r["regression"] == 1.0 and r["reproduction"] is None for r in scores)

    resumed = asyncio.run(evaluate_scripted(must_not_score))
    assert resumed["pairs_run_this_session"] == 0
    assert resumed["best_at_k"] == summary["best_at_k"]
    assert sorted(scored) == sorted(ONE_PER_REPO[:2])


def save_random_policy_and_verifier(directory: Path, config) -> None:
    """A random config.model saved as an Orbax policy (directory/policy) and, with the same
    weights, as a verifier (directory/verifier)."""
    from flax import nnx

    from deepswe_jax.checkpoint import save_params
    from deepswe_jax.experiment import model_factory
    from deepswe_jax.verify.verifier import save_verifier

    params = nnx.state(model_factory(config)(), nnx.Param)
    save_params(directory / "policy", params, model_config=config.model.to_dict())
    save_verifier(
        directory / "verifier",
        params,
        model_config=config.model.to_dict(),
        tokenizer_dir=TOKENIZER_DIR,
        max_prompt_tokens=1024,
        compute_dtype="float32",
    )


def test_checkpoint_policy_runs_through_the_jax_sampler_and_the_verifier_scores_it(tmp_path):
    config = tiny.get_config()
    save_random_policy_and_verifier(tmp_path, config)
    output_dir = tmp_path / "eval"
    flags = [
        f"--policy={tmp_path / 'policy'}",
        "--config=configs/tiny.py",
        f"--instance_ids={ONE_PER_REPO[0]}",
        "--num_runs=2",
        "--max_steps=2",
        "--max_context=32",
        "--temperature=0.7",
        "--select=verifier",
        f"--verifier={tmp_path / 'verifier'}",
    ]
    run_evaluate(output_dir, *flags)
    summary = json.loads((output_dir / "summary.json").read_text())
    # A random model emits noise until the 32-token budget runs out.
    assert summary["stop_reasons"] == {"max_context": 2}
    assert summary["temperature"] == 0.7 and summary["max_context"] == 32
    assert summary["mean_response_tokens"] == 32
    assert summary["best_at_k"] == {"verifier": {"1": 0.0, "2": 0.0}}
    scores = [json.loads(line) for line in (output_dir / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 2 and all(0.0 < r["verifier"] < 1.0 for r in scores)
    for run_index in range(2):
        rows = check_predictions(
            output_dir / f"run_{run_index:02d}" / "predictions.jsonl", ONE_PER_REPO[:1], "policy"
        )
        assert rows[0]["model_patch"] == ""
