"""Evaluate a policy on a task set: k runs per task, SWE-bench outputs, Pass@1, pass@k, Best@k.

    await evaluate(tasks, policy, output_dir, num_runs=16, env_pool=pool, episode=settings, seed=0)

Policies: 'gold' grades each task's own patch, 'empty' grades no patch (both check the task
set and the grader, no episodes), or an `AgentPolicy` (sampler + tokenizer) whose episodes
run in containers (`agent.rollout.run_episode`) with the `EpisodeSettings`' limits and
sampling parameters. experiment.run_evaluation builds pool, policy and scorer from a config.

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

Several processes: `run_evaluation(..., process_id=i, num_processes=n)` evaluates every n-th
task from i into output_dir/shard_i-of-n, an output directory as above plus shard.json (the
`ShardPlan`: the whole task list, runs, selectors, seed). Once all n have finished,
`merge_shards(output_dir)` writes the outputs above at output_dir, as one process evaluating
the whole task set would have.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import re
import reprlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tqdm

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.interface import DEEPSWE_JAX
from deepswe_jax.agent.r2egym import R2EGymInterface
from deepswe_jax.agent.rollout import EpisodeSettings, run_episode
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.grading import GradeResult
from deepswe_jax.env.images import ensure_task_images
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.runtime import RuntimeFactory
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
SHARD_PLAN_FILE = "shard.json"
# Process i of n of a multi-process evaluation writes output_dir/shard_i-of-n.
SHARD_DIRECTORY = re.compile(r"shard_(\d+)-of-(\d+)")
# Grading statuses the SWE-bench run report counts as errors (the harness produced no verdict).
ERROR_STATUSES = frozenset({"apply_failed", "timeout", "infra_error"})

# One task's candidates (its runs, in run order) -> one CandidateScores per candidate.
CandidateScorer = Callable[[Task, Sequence[Trajectory]], Sequence[CandidateScores]]
PairKey = tuple[str, int]  # (instance_id, run index)

_SHORT_REPR = reprlib.Repr()  # values in error messages: a list of task ids shows its start
_SHORT_REPR.maxstring, _SHORT_REPR.maxlist, _SHORT_REPR.maxtuple = 200, 4, 4


@dataclass(frozen=True)
class AgentPolicy:
    """A policy that works in containers: `sampler` generates, `tokenizer` builds the chat."""

    sampler: Sampler
    tokenizer: ChatTokenizer
    policy_version: int = 0


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


def run_directory(output_dir: str | os.PathLike, run_index: int) -> Path:
    """output_dir/run_03 for run 3."""
    return Path(output_dir) / f"run_{run_index:02d}"


def shard_directory(output_dir: str | os.PathLike, process_id: int, num_processes: int) -> Path:
    """output_dir/shard_1-of-4 for process 1 of 4."""
    return Path(output_dir) / f"shard_{process_id}-of-{num_processes}"


@dataclass(frozen=True)
class ShardPlan:
    """What the processes of a multi-process evaluation evaluate together, recorded in each
    shard's shard.json: process i of `num_processes` takes instance_ids[i::num_processes],
    `num_runs` runs each, Best@k for `selectors` drawn with `seed`."""

    num_processes: int
    instance_ids: tuple[str, ...]
    num_runs: int
    selectors: tuple[str, ...]
    seed: int

    def shard_ids(self, process_id: int) -> tuple[str, ...]:
        return self.instance_ids[process_id :: self.num_processes]

    def write(self, shard_dir: Path) -> None:
        (shard_dir / SHARD_PLAN_FILE).write_text(
            json.dumps(dataclasses.asdict(self), indent=2) + "\n"
        )

    @classmethod
    def read(cls, shard_dir: Path) -> ShardPlan:
        record = json.loads((shard_dir / SHARD_PLAN_FILE).read_text())
        for name in ("instance_ids", "selectors"):
            record[name] = tuple(record[name])
        return cls(**record)


def eval_identity(policy_name: str, model_name: str, episode: EpisodeSettings) -> dict:
    """The settings that decide an evaluation's results; a resumed run must have the same."""
    identity: dict[str, Any] = {"policy": policy_name, "model_name_or_path": model_name}
    if policy_name not in FIXED_PATCH_POLICIES:
        identity.update(
            max_steps=episode.max_steps,
            max_prompt_tokens=episode.max_prompt_tokens,
            max_context=episode.max_context,
            temperature=float(episode.temperature),
            top_p=float(episode.top_p),
            top_k=episode.top_k,
        )
        interface = episode.interface
        if interface.name != DEEPSWE_JAX:  # ours is the default, not recorded
            identity.update(interface=interface.name)
        if isinstance(interface, R2EGymInterface):
            identity.update(prompts_file=interface.prompts.source)
    return identity


def check_or_write_identity(output_dir: Path, identity: dict) -> None:
    """Writes eval_config.json, or checks an existing one matches `identity`."""
    path = output_dir / EVAL_CONFIG_FILE
    if path.exists():
        details = describe_differences(json.loads(path.read_text()), identity)
        if details:
            raise ValueError(
                f"{output_dir} holds an evaluation with other settings ({details}); pass a new "
                "output directory, or the same settings to resume it"
            )
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")


def describe_differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """'key: before -> after, ...' over the keys whose values differ ('' when none);
    long values are shortened."""
    differing = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return ", ".join(
        f"{k}: {_SHORT_REPR.repr(before.get(k))} -> {_SHORT_REPR.repr(after.get(k))}"
        for k in differing
    )


class JsonlStore:
    """An append-only jsonl file of records keyed by (instance_id, run), read back on resume.

    Each record is one line written with a single write and fsync'd, so a kill leaves at most
    one torn last line, which opening drops (and removes from the file unless `repair` is
    False: a reader of another process's file). A later record for a key replaces an earlier
    one.
    """

    def __init__(
        self,
        path: Path,
        decode: Callable[[str], Any],
        key: Callable[[Any], PairKey],
        *,
        repair: bool = True,
    ):
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
        if repaired and repair:
            path.write_text("".join(good_lines), encoding="utf-8")

    def add(self, record: Any, line: str) -> None:
        self.records[self._key(record)] = record
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def trajectory_store(output_dir: Path, *, repair: bool = True) -> JsonlStore:
    return JsonlStore(
        output_dir / TRAJECTORIES_FILE,
        Trajectory.from_json,
        lambda t: (t.task_id, t.rollout_index),
        repair=repair,
    )


def score_store(output_dir: Path, *, repair: bool = True) -> JsonlStore:
    def decode(line: str) -> dict:
        record = json.loads(line)
        if not isinstance(record, dict) or "instance_id" not in record:
            raise ValueError("not a score record")
        return record

    return JsonlStore(
        output_dir / SCORES_FILE, decode, lambda r: (r["instance_id"], r["run"]), repair=repair
    )


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
        grade=grade,
    )


async def run_pair(
    task: Task,
    run_index: int,
    policy: str | AgentPolicy,
    env_pool: EnvPool,
    episode: EpisodeSettings,
) -> Trajectory:
    """Run `task` once with `policy` (an episode, or grading a fixed patch) and grade it."""
    if isinstance(policy, AgentPolicy):
        return await run_episode(
            task,
            env_pool,
            policy.sampler,
            policy.tokenizer,
            episode,
            run_index,
            policy.policy_version,
        )
    started = time.perf_counter()
    patch = FIXED_PATCH_POLICIES[policy](task)
    grade = await env_pool.grade(task, patch, timeout=episode.reward_timeout)
    return fixed_patch_trajectory(task, run_index, patch, grade, time.perf_counter() - started)


def pair_category(trajectory: Trajectory) -> str:
    """'resolved' | 'unresolved' | 'empty_patch' | 'error' (SWE-bench run-report buckets)."""
    grade = trajectory.grade
    if grade is None or grade.status in ERROR_STATUSES:
        return "error"
    return grade.status


def predictions(
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    run_index: int,
    model_name: str,
) -> list[dict[str, str]]:
    """SWE-bench prediction rows of one run, in task order."""
    return [
        {
            "instance_id": instance_id,
            "model_name_or_path": model_name,
            "model_patch": trajectories[instance_id, run_index].patch,
        }
        for instance_id in instance_ids
    ]


def instance_reports(
    instance_ids: Sequence[str], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, dict]:
    """{instance_id: SWE-bench report entry} for the graded runs of one run index."""
    reports: dict[str, dict] = {}
    for instance_id in instance_ids:
        grade = trajectories[instance_id, run_index].grade
        if grade is not None:
            reports.update(grade.to_report())
    return reports


def run_report(
    instance_ids: Sequence[str], trajectories: Mapping[PairKey, Trajectory], run_index: int
) -> dict[str, Any]:
    """SWE-bench's run report (schema_version 2) for one run index."""
    ids: dict[str, list[str]] = {"resolved": [], "unresolved": [], "empty_patch": [], "error": []}
    for instance_id in instance_ids:
        ids[pair_category(trajectories[instance_id, run_index])].append(instance_id)
    submitted = list(instance_ids)
    completed = ids["resolved"] + ids["unresolved"]
    return {
        "total_instances": len(instance_ids),
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
    instance_ids: Sequence[str], trajectories: Mapping[PairKey, Trajectory], num_runs: int
) -> np.ndarray:
    """[num_tasks, num_runs] bool: run r of task t resolved it."""
    return np.array(
        [[trajectories[i, r].resolved for r in range(num_runs)] for i in instance_ids],
        dtype=bool,
    )


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


def summarize(
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    *,
    best_at_k: Mapping[str, Mapping[int, float]] | None = None,
) -> dict[str, Any]:
    """The summary.json numbers of finished pairs (every (task, run) must be present)."""
    resolved = resolved_matrix(instance_ids, trajectories, num_runs)
    pass_at_1 = metrics.averaged_pass_at_1(resolved)
    chosen = [trajectories[i, r] for i in instance_ids for r in range(num_runs)]
    statuses = Counter(t.grade.status if t.grade else "not_graded" for t in chosen)
    summary: dict[str, Any] = {
        "num_tasks": len(instance_ids),
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


def labelled_curves(
    pass_at_k: Mapping[int, float], best_at_k: Mapping[str, Mapping[int, float]]
) -> dict[str, Mapping[int, float]]:
    """{'pass@k': pass_at_k, 'Best@k (<selector>)': curve, ...}: the curves `plot_curves` draws."""
    return {"pass@k": pass_at_k, **{f"Best@k ({name})": c for name, c in best_at_k.items()}}


def plot_curves(
    path: str | os.PathLike,
    curves: Mapping[str, Mapping[int, float]],
    *,
    title: str = "",
) -> None:
    """A PNG of each {k: fraction resolved} curve of `curves` (by label) against k (log2 x
    axis), e.g. `labelled_curves(...)`, or several evaluations' with their names in the labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, curve in curves.items():
        ks = sorted(curve)
        axes.plot(ks, [100 * curve[k] for k in ks], marker="o", label=label)
    all_ks = sorted({k for curve in curves.values() for k in curve})
    axes.set_xscale("log", base=2)
    axes.set_xticks(all_ks, [str(k) for k in all_ks])
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


def execution_scorer(
    *,
    timeout: float,
    workers: int,
    run_label: str,
    runtime_factory: RuntimeFactory | None = None,
) -> CandidateScorer:
    """Scores candidates by running the task's passing existing tests (regression) against
    each patch in fresh containers (`verify.execution`); no reproduction tests. Containers are
    runtimes of `runtime_factory` (an env pool's, e.g. Kubernetes pods), else local Docker."""
    from deepswe_jax.verify import execution

    def score(task: Task, candidates: Sequence[Trajectory]) -> list[CandidateScores]:
        results = execution.score_candidates(
            task,
            [candidate.patch for candidate in candidates],
            timeout=timeout,
            workers=workers,
            run_label=run_label,
            runtime_factory=runtime_factory,
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
    runtime_factory: RuntimeFactory | None,
) -> CandidateScorer | None:
    """The scorer `selectors` need: the verifier of `verifier_dir` for 'verifier' / 'hybrid',
    execution checks (`timeout` seconds per test run, `workers` containers at once, made by
    `runtime_factory`: the env pool's, None for local Docker) for 'execution' / 'hybrid'; None
    without selectors."""
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
        scorers.append(
            execution_scorer(
                timeout=timeout,
                workers=workers,
                run_label=run_label,
                runtime_factory=runtime_factory,
            )
        )
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
    return stored_scores(store.records, [task.instance_id for task in tasks], num_runs)


def stored_scores(
    records: Mapping[PairKey, Mapping[str, Any]], instance_ids: Sequence[str], num_runs: int
) -> dict[str, list[CandidateScores]]:
    """{instance_id: [CandidateScores per run]} of score records (`score_store`'s)."""
    return {
        instance_id: [
            CandidateScores(
                **{
                    k: v
                    for k, v in records[instance_id, run_index].items()
                    if k not in ("instance_id", "run")
                }
            )
            for run_index in range(num_runs)
        ]
        for instance_id in instance_ids
    }


def write_outputs(
    output_dir: Path,
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    model_name: str,
) -> None:
    """Per run index: predictions.jsonl, report.json and run_report.json."""
    for run_index in range(num_runs):
        directory = run_directory(output_dir, run_index)
        directory.mkdir(parents=True, exist_ok=True)
        rows = predictions(instance_ids, trajectories, run_index, model_name)
        (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        reports = instance_reports(instance_ids, trajectories, run_index)
        (directory / "report.json").write_text(json.dumps(reports, indent=2) + "\n")
        report = run_report(instance_ids, trajectories, run_index)
        (directory / "run_report.json").write_text(json.dumps(report, indent=2) + "\n")


def write_results(
    output_dir: Path,
    instance_ids: Sequence[str],
    trajectories: Mapping[PairKey, Trajectory],
    num_runs: int,
    *,
    identity: Mapping[str, Any],
    scores: Mapping[str, Sequence[CandidateScores]],
    selectors: Sequence[str],
    seed: int,
    max_subsets: int,
    session: Mapping[str, Any],
) -> dict[str, Any]:
    """The outputs of finished pairs: the per-run files (`write_outputs`), summary.json
    (`identity`, `summarize` with the Best@k curve of each selector over `scores`, `session`)
    and curves.png. Returns the summary.

    scores: {instance_id: [CandidateScores per run]}, read for `selectors` only; Best@k
    averages up to `max_subsets` k-subsets per task drawn with `seed`.
    """
    resolved = resolved_matrix(instance_ids, trajectories, num_runs)
    best_at_k: dict[str, dict[int, float]] = {}
    for name in selectors:
        candidates = [scores[instance_id] for instance_id in instance_ids]
        _check_scores(name, candidates)
        best_at_k[name] = metrics.best_at_k_curve(
            resolved, candidates, SELECTORS[name], max_subsets=max_subsets, seed=seed
        )
    model_name = identity["model_name_or_path"]
    write_outputs(output_dir, instance_ids, trajectories, num_runs, model_name)
    summary = {
        **identity,
        **summarize(instance_ids, trajectories, num_runs, best_at_k=best_at_k),
        **session,
    }
    (output_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    plot_curves(
        output_dir / CURVES_FILE,
        labelled_curves(metrics.pass_at_k_curve(resolved), best_at_k),
        title=f"{model_name}: {len(instance_ids)} tasks, {num_runs} runs each",
    )
    logger.info("%s", format_summary(summary))
    return summary


async def evaluate(
    tasks: Sequence[Task],
    policy: str | AgentPolicy,
    output_dir: str | os.PathLike,
    *,
    num_runs: int,
    env_pool: EnvPool,
    episode: EpisodeSettings,
    seed: int,
    model_name: str,
    policy_name: str | None = None,
    selectors: Sequence[str] = (),
    scorer: CandidateScorer | None = None,
    max_subsets: int = 1000,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Runs (or resumes) the evaluation of the module docstring; returns the summary.

    policy: 'gold', 'empty' or an AgentPolicy. episode: the episodes' limits, reward timeout and
    sampling parameters. seed: draws Best@k's k-subsets. model_name: model_name_or_path of the
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
    identity = eval_identity(policy_name, model_name, episode)
    check_or_write_identity(output_dir, identity)
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
    resolved_count = sum(t.resolved for t in done.values())
    with tqdm.tqdm(
        total=len(pairs),
        initial=len(done),
        desc=f"eval {model_name}",
        disable=not show_progress,
    ) as progress:
        progress.set_postfix(resolved=resolved_count, refresh=False)

        async def run_and_store(task: Task, run_index: int) -> None:
            nonlocal resolved_count
            trajectory = await run_pair(task, run_index, policy, env_pool, episode)
            store.add(trajectory, trajectory.to_json())
            resolved_count += trajectory.resolved
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

    scores: dict[str, list[CandidateScores]] = {}
    if selectors:
        scores = await score_candidates(
            tasks,
            store.records,
            num_runs,
            scorer,
            score_store(output_dir),
            {task.instance_id for task, _ in todo},
            show_progress,
        )
    return write_results(
        output_dir,
        ids,
        store.records,
        num_runs,
        identity=identity,
        scores=scores,
        selectors=selectors,
        seed=seed,
        max_subsets=max_subsets,
        session={"pairs_run_this_session": len(todo), "wall_s": time.perf_counter() - started},
    )


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
    tasks: Sequence[Task],
    policy: str | Callable[[], AgentPolicy],
    output_dir: str | os.PathLike,
    *,
    env_pool: EnvPool,
    episode: EpisodeSettings,
    seed: int,
    num_runs: int,
    policy_name: str,
    model_name: str,
    selectors: Sequence[str] = (),
    scorer: CandidateScorer | None = None,
    show_progress: bool = True,
    process_id: int = 0,
    num_processes: int = 1,
) -> dict[str, Any]:
    """`evaluate` in its own event loop with `env_pool` (entered here; a Docker pool builds
    missing task images first); returns the summary (of this process's share).

    policy: 'gold', 'empty', or a function that loads the AgentPolicy, called only once the
    output directory's settings are checked (its sampler is closed at the end). With
    num_processes > 1, evaluates only tasks[process_id::num_processes], into
    output_dir/shard_<process_id>-of-<num_processes> with the `ShardPlan` that `merge_shards`
    reads. experiment.run_evaluation builds every argument from a config.
    """
    if num_processes > 1:
        if not 0 <= process_id < num_processes:
            raise ValueError(f"process id {process_id} is outside 0..{num_processes - 1}")
        if num_processes > len(tasks):
            raise ValueError(
                f"{num_processes} processes for {len(tasks)} tasks leave some with none; "
                f"use at most {len(tasks)} processes"
            )
        plan = ShardPlan(
            num_processes,
            tuple(task.instance_id for task in tasks),
            num_runs,
            tuple(selectors),
            seed,
        )
        output_dir = shard_directory(output_dir, process_id, num_processes)
        # Refused settings must not replace the plan of the evaluation the shard holds.
        check_or_write_identity(output_dir, eval_identity(policy_name, model_name, episode))
        plan.write(output_dir)
        tasks = tasks[process_id::num_processes]
    if env_pool.build_images:  # a Kubernetes pool's nodes pull task images from a registry
        ensure_task_images(tasks)
    agent_policy = None if isinstance(policy, str) else policy()

    async def run() -> dict[str, Any]:
        async with env_pool:
            return await evaluate(
                tasks,
                agent_policy or policy,
                output_dir,
                num_runs=num_runs,
                env_pool=env_pool,
                episode=episode,
                seed=seed,
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


def merge_shards(output_dir: str | os.PathLike, *, max_subsets: int = 1000) -> dict[str, Any]:
    """Writes at `output_dir` the outputs of the module docstring that one process evaluating
    the whole task set would have written, from the shard_<i>-of-<n> folders its n processes
    wrote (`run_evaluation` with num_processes=n; each shard is only read). Returns the summary
    (Best@k averaged over up to `max_subsets` k-subsets per task, as `evaluate`).

    Refuses, naming the shard and the process to run, when a shard is missing, has not finished
    every (task, run) pair (and its candidate scores, with selectors), or evaluated other
    settings or tasks than the others.
    """
    started = time.perf_counter()
    output_dir = Path(output_dir)
    counts = sorted(
        {
            int(match[2])
            for path in (output_dir.iterdir() if output_dir.is_dir() else ())
            if path.is_dir() and (match := SHARD_DIRECTORY.fullmatch(path.name))
        }
    )
    if not counts:
        raise FileNotFoundError(
            f"no shard_<i>-of-<n> folders under {output_dir}; launch/evaluate.py "
            "--num_processes=n --process_id=i writes them, one per process"
        )
    if len(counts) > 1:
        raise ValueError(
            f"{output_dir} holds shards of evaluations split {counts} ways; move the folders of "
            "the ones not to merge elsewhere"
        )
    num_processes = counts[0]
    directories = [shard_directory(output_dir, i, num_processes) for i in range(num_processes)]

    def run_process(process_id: int) -> str:
        return (
            f"run process {process_id} of {num_processes} (launch/evaluate.py "
            f"--num_processes={num_processes} --process_id={process_id} with the same "
            "--output_dir and flags as the others) to the end, then merge again"
        )

    not_started = [i for i, d in enumerate(directories) if not (d / SHARD_PLAN_FILE).is_file()]
    if not_started:
        raise FileNotFoundError(
            "; ".join(
                f"{directories[i].name} is missing under {output_dir} (no {SHARD_PLAN_FILE}): "
                + run_process(i)
                for i in not_started
            )
        )
    plans = [ShardPlan.read(directory) for directory in directories]
    identities = [json.loads((d / EVAL_CONFIG_FILE).read_text()) for d in directories]
    for i in range(1, num_processes):
        differences = describe_differences(
            dataclasses.asdict(plans[0]), dataclasses.asdict(plans[i])
        ) or describe_differences(identities[0], identities[i])
        if differences:
            raise ValueError(
                f"{directories[i].name} evaluated other settings or tasks than "
                f"{directories[0].name} ({differences}); evaluate every shard with the same "
                f"flags: {run_process(i)}"
            )

    plan, identity = plans[0], identities[0]
    trajectories: dict[PairKey, Trajectory] = {}
    score_records: dict[PairKey, dict[str, Any]] = {}
    for process_id, directory in enumerate(directories):
        keys = [(i, r) for i in plan.shard_ids(process_id) for r in range(plan.num_runs)]
        stores = [trajectory_store(directory, repair=False)]
        if plan.selectors:
            stores.append(score_store(directory, repair=False))
        for store in stores:
            absent = [key for key in keys if key not in store.records]
            if absent:
                raise ValueError(
                    f"{directory.name} has not finished: {len(absent)} of its {len(keys)} "
                    f"(task, run) pairs have no record in {store.path.name} (first {absent[0]}); "
                    + run_process(process_id)
                )
        trajectories.update({key: stores[0].records[key] for key in keys})
        if plan.selectors:
            score_records.update({key: stores[1].records[key] for key in keys})

    check_or_write_identity(output_dir, identity)
    all_keys = [(i, r) for i in plan.instance_ids for r in range(plan.num_runs)]
    _replace_lines(
        output_dir / TRAJECTORIES_FILE, (trajectories[key].to_json() for key in all_keys)
    )
    if plan.selectors:
        _replace_lines(output_dir / SCORES_FILE, (json.dumps(score_records[k]) for k in all_keys))
    return write_results(
        output_dir,
        plan.instance_ids,
        trajectories,
        plan.num_runs,
        identity=identity,
        scores=stored_scores(score_records, plan.instance_ids, plan.num_runs),
        selectors=plan.selectors,
        seed=plan.seed,
        max_subsets=max_subsets,
        session={
            "pairs_run_this_session": 0,
            "merged_shards": [directory.name for directory in directories],
            "wall_s": time.perf_counter() - started,
        },
    )


def _replace_lines(path: Path, lines: Iterable[str]) -> None:
    """Writes `lines` (one record each) as the file `path`, replacing it whole at the end."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(partial, path)
