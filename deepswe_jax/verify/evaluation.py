"""Evaluate a policy on a task set: k runs per task, SWE-bench outputs, Pass@1, pass@k, Best@k.

    await evaluate(tasks, policy, output_dir, num_runs=16, env_pool=pool, config=config)

Policies: 'gold' grades each task's own patch, 'empty' grades no patch (both check the task
set and the grader, no episodes), or an `AgentPolicy` (sampler + tokenizer) whose episodes
run in containers (`agent.rollout.run_episode`) with config.agent's limits and
config.sampler's temperature.

A run is resolved when the grader resolves its final patch, however the episode stopped:
what the official SWE-bench harness says of predictions.jsonl (RL rewards count finished
episodes only).

output_dir:

    eval_config.json          what is evaluated; resuming with other settings is refused
    trajectories.jsonl        one Trajectory per finished (task, run), appended as each ends
    scores.jsonl              per-candidate scores for selection (with selectors)
    run_00/predictions.jsonl  SWE-bench predictions {instance_id, model_name_or_path, model_patch}
    run_00/report.json        {instance_id: SWE-bench per-instance report}, graded runs only
    run_00/run_report.json    SWE-bench run report: resolved / unresolved / empty_patch / error ids
    summary.json              Pass@1 +- stderr over runs, pass@k, Best@k, statuses, stop reasons,
                              mean steps and tokens
    curves.png                pass@k (and Best@k with selectors) against k

Resuming: started again on the same output_dir, finished (task, run) pairs are read back from
trajectories.jsonl and skipped (a line torn by a kill is dropped); pairs whose grading hit an
infrastructure error are run again. Outputs are rewritten from all finished pairs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_collections
import numpy as np
import tqdm

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.rollout import run_episode
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.grading import GradeResult
from deepswe_jax.env.images import ensure_task_images
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.tasks import Task, load_tasks
from deepswe_jax.sampling.base import Sampler
from deepswe_jax.verify import metrics
from deepswe_jax.verify.select import SELECTOR_SCORES, SELECTORS, CandidateScores

logger = logging.getLogger(__name__)

FIXED_PATCH_POLICIES: dict[str, Callable[[Task], str]] = {
    "gold": lambda task: task.patch,
    "empty": lambda task: "",
}
EVAL_CONFIG_FILE = "eval_config.json"
TRAJECTORIES_FILE = "trajectories.jsonl"
SCORES_FILE = "scores.jsonl"
SUMMARY_FILE = "summary.json"
CURVES_FILE = "curves.png"
# Grading statuses the SWE-bench run report counts as errors (the harness produced no verdict).
ERROR_STATUSES = frozenset({"apply_failed", "timeout", "infra_error"})

# One task's candidates (its runs, in run order) -> one CandidateScores per candidate.
CandidateScorer = Callable[[Task, Sequence[Trajectory]], Sequence[CandidateScores]]
PairKey = tuple[str, int]  # (instance_id, run index)


@dataclass(frozen=True)
class AgentPolicy:
    """A policy that works in containers: `sampler` generates, `tokenizer` builds the chat."""

    sampler: Sampler
    tokenizer: ChatTokenizer
    policy_version: int = 0


def policy_config(
    config: ml_collections.ConfigDict, checkpoint: str | os.PathLike
) -> ml_collections.ConfigDict:
    """A copy of `config` that loads the policy from `checkpoint` (a HF directory or an Orbax
    parameters / training checkpoint directory): init_from set, config.model taken from the
    checkpoint's own model config, and a HF directory's tokenizer when config.tokenizer is ''."""
    from deepswe_jax.checkpoint import read_model_config

    path = os.path.abspath(os.fspath(checkpoint))
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"policy {path!r} is not a directory; give a HF model directory, an Orbax checkpoint "
            "(launch/import_hf.py or launch/train.py output), 'gold' or 'empty'"
        )
    hf_config = os.path.join(path, "config.json")
    if os.path.isfile(hf_config):
        with open(hf_config) as f:
            saved = json.load(f)
    else:
        saved = read_model_config(path)
    config = ml_collections.ConfigDict(config.to_dict())
    config.init_from = path
    config.model.update({key: saved[key] for key in config.model.keys() if key in saved})
    if not config.tokenizer and os.path.isfile(os.path.join(path, "tokenizer.json")):
        config.tokenizer = path
    return config


def load_agent_policy(config: ml_collections.ConfigDict, *, seed: int) -> AgentPolicy:
    """The policy of config.init_from (see `policy_config`) in a JaxSampler on config.mesh,
    with room for config.agent.max_prompt_tokens + max_context tokens per episode."""
    # The model stack loads only for model policies; gold / empty evaluations never import it.
    from flax import nnx

    from deepswe_jax.experiment import initial_params, load_tokenizer, model_factory, sharding_rules
    from deepswe_jax.parallel import make_mesh
    from deepswe_jax.sampling.jax_sampler import JaxSampler

    rules = sharding_rules(config)
    mesh = make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
    params = initial_params(config, mesh, rules)
    graphdef, _ = nnx.split(nnx.eval_shape(model_factory(config)), nnx.Param)
    sampler = JaxSampler(
        nnx.merge(graphdef, params),
        max_batch=config.sampler.max_batch,
        max_cache_len=config.agent.max_prompt_tokens + config.agent.max_context,
        mesh=mesh,
        rules=rules,
        seed=seed,
    )
    return AgentPolicy(sampler, load_tokenizer(config))


def load_eval_tasks(path: str | os.PathLike, instance_ids: Sequence[str] = ()) -> list[Task]:
    """The tasks of `path`, or only `instance_ids` of them (in that order)."""
    tasks = load_tasks(path)
    if not instance_ids:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    missing = sorted(set(instance_ids) - set(by_id))
    if missing:
        raise ValueError(f"instance ids not in {path}: {missing}; check the names or the task file")
    return [by_id[instance_id] for instance_id in instance_ids]


def make_eval_pool(
    config: ml_collections.ConfigDict, *, run_label: str, grade_concurrency: int
) -> EnvPool:
    """An EnvPool with config.env's container limits, config.agent.step_timeout and
    `grade_concurrency` gradings at once."""
    return EnvPool(
        max_envs=config.env.max_envs,
        run_label=run_label,
        grade_concurrency=grade_concurrency,
        mem_limit=config.env.mem_limit,
        nano_cpus=int(config.env.cpus * 1e9),
        pids_limit=config.env.pids_limit,
        step_timeout=config.agent.step_timeout,
    )


def run_directory(output_dir: str | os.PathLike, run_index: int) -> Path:
    """output_dir/run_03 for run 3."""
    return Path(output_dir) / f"run_{run_index:02d}"


def eval_identity(policy_name: str, model_name: str, config: ml_collections.ConfigDict) -> dict:
    """The settings that decide an evaluation's results; a resumed run must have the same."""
    identity: dict[str, Any] = {"policy": policy_name, "model_name_or_path": model_name}
    if policy_name not in FIXED_PATCH_POLICIES:
        agent, sampler = config.agent, config.sampler
        identity.update(
            max_steps=int(agent.max_steps),
            max_prompt_tokens=int(agent.max_prompt_tokens),
            max_context=int(agent.max_context),
            temperature=float(sampler.temperature),
            top_p=float(sampler.top_p),
            top_k=int(sampler.top_k),
        )
    return identity


def check_or_write_identity(output_dir: Path, identity: dict) -> None:
    """Writes eval_config.json, or checks an existing one matches `identity`."""
    path = output_dir / EVAL_CONFIG_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        differing = sorted(
            k for k in saved.keys() | identity.keys() if saved.get(k) != identity.get(k)
        )
        if differing:
            details = ", ".join(f"{k}: {saved.get(k)!r} -> {identity.get(k)!r}" for k in differing)
            raise ValueError(
                f"{output_dir} holds an evaluation with other settings ({details}); pass a new "
                "output directory, or the same settings to resume it"
            )
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")


class JsonlStore:
    """An append-only jsonl file of records keyed by (instance_id, run), read back on resume.

    Each record is one line written with a single write and fsync'd, so a kill leaves at most
    one torn last line, which opening drops. A later record for a key replaces an earlier one.
    """

    def __init__(self, path: Path, decode: Callable[[str], Any], key: Callable[[Any], PairKey]):
        self.path = path
        self._key = key
        self.records: dict[PairKey, Any] = {}
        if not path.exists():
            return
        good_lines, repaired = [], False
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                record = decode(line)
            except ValueError:  # json.JSONDecodeError included
                logger.warning("dropping a torn line of %s (interrupted write)", path)
                repaired = True
                continue
            if not line.endswith("\n"):
                line, repaired = line + "\n", True
            good_lines.append(line)
            self.records[key(record)] = record
        if repaired:
            path.write_text("".join(good_lines), encoding="utf-8")

    def add(self, record: Any, line: str) -> None:
        self.records[self._key(record)] = record
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def trajectory_store(output_dir: Path) -> JsonlStore:
    return JsonlStore(
        output_dir / TRAJECTORIES_FILE,
        Trajectory.from_json,
        lambda t: (t.task_id, t.rollout_index),
    )


def score_store(output_dir: Path) -> JsonlStore:
    def decode(line: str) -> dict:
        record = json.loads(line)
        if not isinstance(record, dict) or "instance_id" not in record:
            raise ValueError("not a score record")
        return record

    return JsonlStore(output_dir / SCORES_FILE, decode, lambda r: (r["instance_id"], r["run"]))


def fixed_patch_trajectory(
    task: Task, run_index: int, patch: str, grade: GradeResult, seconds: float
) -> Trajectory:
    """The record of grading a given patch (no episode: no tokens, no steps)."""
    return Trajectory(
        task_id=task.instance_id,
        rollout_index=run_index,
        policy_version=0,
        prompt_ids=(),
        token_ids=(),
        loss_mask=(),
        sampler_logprobs=(),
        reward=grade.reward,
        stop_reason=StopReason.finished,
        infra_error=grade.infra_error,
        num_steps=0,
        patch=patch,
        timings={"grading_s": grade.duration_s, "total_s": seconds},
        steps=(),
        grade=dataclasses.asdict(grade),
    )


async def run_pair(
    task: Task,
    run_index: int,
    policy: str | AgentPolicy,
    env_pool: EnvPool,
    config: ml_collections.ConfigDict,
) -> Trajectory:
    """Run `task` once with `policy` (an episode, or grading a fixed patch) and grade it."""
    if isinstance(policy, AgentPolicy):
        return await run_episode(
            task,
            env_pool,
            policy.sampler,
            policy.tokenizer,
            config,
            run_index,
            policy.policy_version,
        )
    started = time.perf_counter()
    patch = FIXED_PATCH_POLICIES[policy](task)
    grade = await env_pool.grade(task, patch, timeout=config.agent.reward_timeout)
    return fixed_patch_trajectory(task, run_index, patch, grade, time.perf_counter() - started)


def pair_category(trajectory: Trajectory) -> str:
    """'resolved' | 'unresolved' | 'empty_patch' | 'error' (SWE-bench run-report buckets)."""
    grade = trajectory.grade
    if grade is None or grade["status"] in ERROR_STATUSES:
        return "error"
    return grade["status"]


def is_resolved(trajectory: Trajectory) -> bool:
    """The grader resolved the run's final patch."""
    return trajectory.grade is not None and bool(trajectory.grade["resolved"])


def predictions(
    tasks: Sequence[Task],
    trajectories: Mapping[PairKey, Trajectory],
    run_index: int,
    model_name: str,
) -> list[dict[str, str]]:
    """SWE-bench prediction rows of one run, in task order."""
    return [
        {
            "instance_id": task.instance_id,
            "model_name_or_path": model_name,
            "model_patch": trajectories[task.instance_id, run_index].patch,
        }
        for task in tasks
    ]


def instance_reports(
    tasks: Sequence[Task], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, dict]:
    """{instance_id: SWE-bench report entry} for the graded runs of one run index."""
    reports: dict[str, dict] = {}
    for task in tasks:
        grade = trajectories[task.instance_id, run_index].grade
        if grade is not None:
            fields = {f.name for f in dataclasses.fields(GradeResult)}
            reports.update(
                GradeResult(**{k: v for k, v in grade.items() if k in fields}).to_report()
            )
    return reports


def run_report(
    tasks: Sequence[Task], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, Any]:
    """SWE-bench's run report (schema_version 2) for one run index."""
    ids: dict[str, list[str]] = {"resolved": [], "unresolved": [], "empty_patch": [], "error": []}
    for task in tasks:
        ids[pair_category(trajectories[task.instance_id, run_index])].append(task.instance_id)
    submitted = [task.instance_id for task in tasks]
    completed = ids["resolved"] + ids["unresolved"]
    return {
        "total_instances": len(tasks),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(completed),
        "incomplete_ids": [],
        "empty_patch_ids": ids["empty_patch"],
        "submitted_ids": submitted,
        "resolved_ids": ids["resolved"],
        "unresolved_ids": ids["unresolved"],
        "error_ids": ids["error"],
        "schema_version": 2,
    }


def resolved_matrix(
    tasks: Sequence[Task], trajectories: Mapping[PairKey, Trajectory], num_runs: int
) -> np.ndarray:
    """[num_tasks, num_runs] bool: run r of task t resolved it."""
    return np.array(
        [[is_resolved(trajectories[t.instance_id, r]) for r in range(num_runs)] for t in tasks],
        dtype=bool,
    )


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


def summarize(
    tasks: Sequence[Task],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    *,
    best_at_k: Mapping[str, Mapping[int, float]] | None = None,
) -> dict[str, Any]:
    """The summary.json numbers of finished pairs (every (task, run) must be present)."""
    resolved = resolved_matrix(tasks, trajectories, num_runs)
    pass_at_1 = metrics.averaged_pass_at_1(resolved)
    chosen = [trajectories[t.instance_id, r] for t in tasks for r in range(num_runs)]
    statuses = Counter(t.grade["status"] if t.grade else "not_graded" for t in chosen)
    summary: dict[str, Any] = {
        "num_tasks": len(tasks),
        "num_runs": num_runs,
        "pass_at_1": pass_at_1.mean,
        "pass_at_1_stderr": _json_number(pass_at_1.stderr),
        "pass_at_1_per_run": list(pass_at_1.per_run),
        "pass_at_k": {str(k): v for k, v in metrics.pass_at_k_curve(resolved).items()},
        "resolved_tasks_any_run": int(resolved.any(axis=1).sum()),
        "statuses": dict(sorted(statuses.items())),
        "categories": dict(sorted(Counter(pair_category(t) for t in chosen).items())),
        "stop_reasons": dict(sorted(Counter(t.stop_reason.value for t in chosen).items())),
        "infra_errors": sum(t.infra_error for t in chosen),
        "mean_steps": float(np.mean([t.num_steps for t in chosen])),
        "mean_response_tokens": float(np.mean([t.num_response_tokens for t in chosen])),
        "mean_total_tokens": float(np.mean([len(t.token_ids) for t in chosen])),
        "mean_episode_s": float(np.mean([t.timings.get("total_s", 0.0) for t in chosen])),
    }
    if best_at_k:
        summary["best_at_k"] = {
            name: {str(k): v for k, v in curve.items()} for name, curve in best_at_k.items()
        }
    return summary


def plot_curves(
    path: str | os.PathLike,
    pass_at_k: Mapping[int, float],
    best_at_k: Mapping[str, Mapping[int, float]],
    *,
    title: str = "",
) -> None:
    """A PNG of pass@k and each Best@k curve against k (log2 x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    curves = {"pass@k": pass_at_k, **{f"Best@k ({name})": c for name, c in best_at_k.items()}}
    for label, curve in curves.items():
        ks = sorted(curve)
        axes.plot(ks, [100 * curve[k] for k in ks], marker="o", label=label)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(pass_at_k), [str(k) for k in sorted(pass_at_k)])
    axes.set_xlabel("k (candidates per task)")
    axes.set_ylabel("% resolved")
    axes.set_ylim(0, 100)
    axes.grid(alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def combine_scorers(*scorers: CandidateScorer) -> CandidateScorer:
    """One scorer whose CandidateScores take each field from the first scorer that sets it
    (e.g. a verifier scorer and an execution scorer for hybrid selection)."""

    def score(task: Task, candidates: Sequence[Trajectory]) -> list[CandidateScores]:
        merged = [{} for _ in candidates]
        for scorer in scorers:
            scores = scorer(task, candidates)
            if len(scores) != len(candidates):
                raise ValueError(
                    f"a scorer gave {len(scores)} scores for {len(candidates)} candidates"
                )
            for fields, candidate_scores in zip(merged, scores, strict=True):
                for name, value in dataclasses.asdict(candidate_scores).items():
                    if value is not None:
                        fields.setdefault(name, value)
        return [CandidateScores(**fields) for fields in merged]

    return score


def verifier_scorer(verifier_dir: str | os.PathLike) -> CandidateScorer:
    """Scores candidates with the execution-free verifier saved in `verifier_dir`
    (launch/train_verifier.py output): p(YES) / (p(YES) + p(NO)) of each trajectory."""
    from deepswe_jax.verify.verifier import load_verifier

    verifier = load_verifier(verifier_dir)

    def score(task: Task, candidates: Sequence[Trajectory]) -> list[CandidateScores]:
        scores = verifier.score(candidates, {task.instance_id: task.problem_statement})
        return [CandidateScores(verifier=float(value)) for value in scores]

    return score


def execution_scorer(*, timeout: float, workers: int, run_label: str) -> CandidateScorer:
    """Scores candidates by running the task's passing existing tests (regression) against
    each patch in fresh containers (`verify.execution`); no reproduction tests."""
    from deepswe_jax.verify import execution

    def score(task: Task, candidates: Sequence[Trajectory]) -> list[CandidateScores]:
        results = execution.score_candidates(
            task,
            [candidate.patch for candidate in candidates],
            timeout=timeout,
            workers=workers,
            run_label=run_label,
        )
        return [result.candidate_scores() for result in results]

    return score


def make_scorer(
    selectors: Sequence[str],
    *,
    verifier_dir: str | os.PathLike | None,
    timeout: float,
    workers: int,
    run_label: str,
) -> CandidateScorer | None:
    """The scorer `selectors` need: the verifier of `verifier_dir` for 'verifier' / 'hybrid',
    execution checks (`timeout` seconds per test run, `workers` containers at once) for
    'execution' / 'hybrid'; None without selectors."""
    unknown = sorted(set(selectors) - set(SELECTORS))
    if unknown:
        raise ValueError(f"unknown selectors {unknown}; choose from {sorted(SELECTORS)}")
    needed = set().union(*(SELECTOR_SCORES[name] for name in selectors))
    scorers = []
    if "verifier" in needed:
        if verifier_dir is None:
            raise ValueError(
                f"selectors {sorted(selectors)} need an execution-free verifier; pass its "
                "directory (launch/evaluate.py --verifier=DIR; launch/train_verifier.py writes "
                "<workdir>/verifier)"
            )
        scorers.append(verifier_scorer(verifier_dir))
    if needed & {"regression", "reproduction"}:
        scorers.append(execution_scorer(timeout=timeout, workers=workers, run_label=run_label))
    return combine_scorers(*scorers) if scorers else None


async def score_candidates(
    tasks: Sequence[Task],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    scorer: CandidateScorer,
    store: JsonlStore,
    rerun_ids: set[str],
    show_progress: bool,
) -> dict[str, list[CandidateScores]]:
    """{instance_id: [CandidateScores per run]}, scoring (in a worker thread) the tasks whose
    runs are not all in `store` yet or that have runs in `rerun_ids` (run again this session)."""
    scores: dict[str, list[CandidateScores]] = {}
    for task in tqdm.tqdm(tasks, desc="scoring candidates", disable=not show_progress):
        keys = [(task.instance_id, r) for r in range(num_runs)]
        if task.instance_id in rerun_ids or not all(key in store.records for key in keys):
            candidates = [trajectories[key] for key in keys]
            task_scores = await asyncio.to_thread(scorer, task, candidates)
            for run_index, candidate_scores in enumerate(task_scores):
                record = {
                    "instance_id": task.instance_id,
                    "run": run_index,
                    **dataclasses.asdict(candidate_scores),
                }
                store.add(record, json.dumps(record))
        scores[task.instance_id] = [
            CandidateScores(
                **{k: v for k, v in store.records[key].items() if k not in ("instance_id", "run")}
            )
            for key in keys
        ]
    return scores


def write_outputs(
    output_dir: Path,
    tasks: Sequence[Task],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    model_name: str,
) -> None:
    """Per run index: predictions.jsonl, report.json and run_report.json."""
    for run_index in range(num_runs):
        directory = run_directory(output_dir, run_index)
        directory.mkdir(parents=True, exist_ok=True)
        rows = predictions(tasks, trajectories, run_index, model_name)
        (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        reports = instance_reports(tasks, trajectories, run_index)
        (directory / "report.json").write_text(json.dumps(reports, indent=2) + "\n")
        report = run_report(tasks, trajectories, run_index)
        (directory / "run_report.json").write_text(json.dumps(report, indent=2) + "\n")


async def evaluate(
    tasks: Sequence[Task],
    policy: str | AgentPolicy,
    output_dir: str | os.PathLike,
    *,
    num_runs: int,
    env_pool: EnvPool,
    config: ml_collections.ConfigDict,
    model_name: str,
    policy_name: str | None = None,
    selectors: Sequence[str] = (),
    scorer: CandidateScorer | None = None,
    max_subsets: int = 1000,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Runs (or resumes) the evaluation of the module docstring; returns the summary.

    policy: 'gold', 'empty' or an AgentPolicy. config: root config (agent.* limits and
    reward_timeout, sampler.* sampling parameters). model_name: model_name_or_path of the
    predictions. policy_name: recorded in eval_config.json (default: `policy` for fixed
    patches, `model_name` otherwise). selectors: names in `select.SELECTORS`, scored with
    `scorer`, reported as Best@k curves averaged over up to `max_subsets` k-subsets per task.
    """
    if num_runs < 1:
        raise ValueError(f"num_runs must be at least 1, got {num_runs}")
    if isinstance(policy, str) and policy not in FIXED_PATCH_POLICIES:
        raise ValueError(
            f"policy {policy!r} is neither one of {sorted(FIXED_PATCH_POLICIES)} nor an AgentPolicy"
        )
    unknown = sorted(set(selectors) - set(SELECTORS))
    if unknown:
        raise ValueError(f"unknown selectors {unknown}; choose from {sorted(SELECTORS)}")
    if selectors and scorer is None:
        raise ValueError(f"selectors {list(selectors)} need a candidate scorer")
    ids = [task.instance_id for task in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("the task set names some instance_id twice; give each task once")

    started = time.perf_counter()
    output_dir = Path(output_dir)
    if policy_name is None:
        policy_name = policy if isinstance(policy, str) else model_name
    check_or_write_identity(output_dir, eval_identity(policy_name, model_name, config))
    store = trajectory_store(output_dir)
    pairs = [(task, r) for task in tasks for r in range(num_runs)]
    done = {
        (task.instance_id, r): store.records[task.instance_id, r]
        for task, r in pairs
        if (task.instance_id, r) in store.records
        and not store.records[task.instance_id, r].infra_error
    }
    todo = [(task, r) for task, r in pairs if (task.instance_id, r) not in done]
    logger.info(
        "evaluating %s: %d tasks x %d runs; %d pairs already done, running %d",
        policy_name,
        len(tasks),
        num_runs,
        len(done),
        len(todo),
    )
    resolved_count = sum(map(is_resolved, done.values()))
    with tqdm.tqdm(
        total=len(pairs),
        initial=len(done),
        desc=f"eval {model_name}",
        disable=not show_progress,
    ) as progress:
        progress.set_postfix(resolved=resolved_count, refresh=False)

        async def run_and_store(task: Task, run_index: int) -> None:
            nonlocal resolved_count
            trajectory = await run_pair(task, run_index, policy, env_pool, config)
            store.add(trajectory, trajectory.to_json())
            resolved_count += is_resolved(trajectory)
            progress.set_postfix(resolved=resolved_count, refresh=False)
            progress.update(1)

        jobs = [asyncio.ensure_future(run_and_store(task, r)) for task, r in todo]
        try:
            await asyncio.gather(*jobs)
        except BaseException:
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)
            raise

    trajectories = store.records
    best_at_k: dict[str, dict[int, float]] = {}
    if selectors:
        scores = await score_candidates(
            tasks,
            trajectories,
            num_runs,
            scorer,
            score_store(output_dir),
            {task.instance_id for task, _ in todo},
            show_progress,
        )
        resolved = resolved_matrix(tasks, trajectories, num_runs)
        candidates = [scores[task.instance_id] for task in tasks]
        for name in selectors:
            _check_scores(name, candidates)
            best_at_k[name] = metrics.best_at_k_curve(
                resolved, candidates, SELECTORS[name], max_subsets=max_subsets, seed=config.seed
            )

    write_outputs(output_dir, tasks, trajectories, num_runs, model_name)
    summary = {
        **eval_identity(policy_name, model_name, config),
        **summarize(tasks, trajectories, num_runs, best_at_k=best_at_k),
        "pairs_run_this_session": len(todo),
        "wall_s": time.perf_counter() - started,
    }
    (output_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    plot_curves(
        output_dir / CURVES_FILE,
        metrics.pass_at_k_curve(resolved_matrix(tasks, trajectories, num_runs)),
        best_at_k,
        title=f"{model_name}: {len(tasks)} tasks, {num_runs} runs each",
    )
    logger.info("%s", format_summary(summary))
    return summary


def _check_scores(selector: str, candidates: Sequence[Sequence[CandidateScores]]) -> None:
    """Refuses a selector none of whose scores the scorer produced."""
    present = {
        name
        for task_candidates in candidates
        for candidate in task_candidates
        for name, value in dataclasses.asdict(candidate).items()
        if value is not None
    }
    if not SELECTOR_SCORES[selector] & present:
        raise ValueError(
            f"selector {selector!r} reads {sorted(SELECTOR_SCORES[selector])} but the scorer "
            f"set only {sorted(present)}; give the scorer it needs"
        )


def format_summary(summary: Mapping[str, Any]) -> str:
    """A few lines for the log: Pass@1 +- stderr, pass@k, Best@k, statuses, stop reasons."""
    stderr = summary["pass_at_1_stderr"]
    lines = [
        f"{summary['model_name_or_path']}: {summary['num_tasks']} tasks x {summary['num_runs']} "
        f"runs: Pass@1 {100 * summary['pass_at_1']:.1f}%"
        + (f" +- {100 * stderr:.1f}" if stderr is not None else ""),
        "pass@k: " + ", ".join(f"{k}: {100 * v:.1f}%" for k, v in summary["pass_at_k"].items()),
    ]
    for name, curve in summary.get("best_at_k", {}).items():
        lines.append(
            f"Best@k ({name}): " + ", ".join(f"{k}: {100 * v:.1f}%" for k, v in curve.items())
        )
    lines.append(f"statuses: {summary['statuses']}; stop reasons: {summary['stop_reasons']}")
    lines.append(
        f"mean steps {summary['mean_steps']:.1f}, mean response tokens "
        f"{summary['mean_response_tokens']:.0f}"
    )
    return "\n".join(lines)


def run_evaluation(
    config: ml_collections.ConfigDict,
    policy: str,
    output_dir: str | os.PathLike,
    *,
    tasks: Sequence[Task],
    num_runs: int,
    model_name: str | None = None,
    selectors: Sequence[str] = (),
    verifier_dir: str | os.PathLike | None = None,
    grade_concurrency: int = 2,
    show_progress: bool = True,
) -> dict[str, Any]:
    """`evaluate` with everything built from `config`: task images, the env pool, for a
    policy directory (`policy_config`) the policy in a JaxSampler, and the scorer `selectors`
    need (`make_scorer`). Returns the summary.

    policy: 'gold', 'empty' or a policy directory. model_name: default `policy` for gold /
    empty, else the directory's name.
    """
    run_label = f"eval-{uuid.uuid4().hex[:8]}"
    scorer = make_scorer(
        selectors,
        verifier_dir=verifier_dir,
        timeout=config.agent.reward_timeout,
        workers=grade_concurrency,
        run_label=run_label,
    )
    ensure_task_images(tasks)
    agent_policy = None
    if policy in FIXED_PATCH_POLICIES:
        policy_name = policy
        model_name = model_name or policy
    else:
        config = policy_config(config, policy)
        policy_name = config.init_from
        model_name = model_name or os.path.basename(policy_name)
        agent_policy = load_agent_policy(config, seed=config.seed)

    async def run() -> dict[str, Any]:
        pool = make_eval_pool(config, run_label=run_label, grade_concurrency=grade_concurrency)
        async with pool:
            return await evaluate(
                tasks,
                agent_policy or policy,
                output_dir,
                num_runs=num_runs,
                env_pool=pool,
                config=config,
                model_name=model_name,
                policy_name=policy_name,
                selectors=selectors,
                scorer=scorer,
                show_progress=show_progress,
            )

    try:
        return asyncio.run(run())
    finally:
        if agent_policy is not None:
            agent_policy.sampler.close()
