"""Candidate scores for Best@k selection: scorers (execution-free verifier, execution checks,
or both for hybrid selection) and the scoring of an evaluation's runs into scores.jsonl.

A scorer maps one task's candidates (its runs, in run order) to one `select.CandidateScores`
per candidate; the composition root (`experiment.evaluation.make_scorer`) builds the one a set
of selectors needs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import tqdm

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.runtime import RuntimeFactory
from deepswe_jax.env.tasks import Task
from deepswe_jax.verify import execution
from deepswe_jax.verify.evaluation.store import JsonlStore, PairKey, stored_scores
from deepswe_jax.verify.select import SELECTOR_SCORES, CandidateScores

if TYPE_CHECKING:  # the verifier's JAX model loads only where one is given
    from deepswe_jax.verify.verifier import TrajectoryVerifier

# One task's candidates (its runs, in run order) -> one CandidateScores per candidate.
CandidateScorer = Callable[[Task, Sequence[Trajectory]], Sequence[CandidateScores]]


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


def verifier_scorer(verifier: TrajectoryVerifier) -> CandidateScorer:
    """Scores candidates with an execution-free verifier (`verifier.load_verifier` of
    launch/train_verifier.py's output): p(YES) / (p(YES) + p(NO)) of each trajectory."""

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


def check_scores(selector: str, candidates: Sequence[Sequence[CandidateScores]]) -> None:
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
