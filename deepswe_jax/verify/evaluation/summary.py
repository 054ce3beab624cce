"""What an evaluation reports once every (task, run) has finished: summary.json (Pass@1 +-
standard error over runs, pass@k, Best@k, statuses, stop reasons, mean steps and tokens), the
SWE-bench files of `reports` and the curves of `plots`, written together by `write_results`.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.verify import metrics
from deepswe_jax.verify.evaluation.plots import CURVES_FILE, labelled_curves, plot_curves
from deepswe_jax.verify.evaluation.reports import pair_category, write_reports
from deepswe_jax.verify.evaluation.scoring import check_scores
from deepswe_jax.verify.evaluation.store import PairKey
from deepswe_jax.verify.select import SELECTORS, CandidateScores

logger = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"


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
        "first_infra_error": next(
            (
                f"{t.task_id}: {t.grade.error if t.grade else 'episode'}"
                for t in chosen
                if t.infra_error
            ),
            None,
        ),
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


def check_some_graded(summary: Mapping[str, Any]) -> None:
    """Raises when every (task, run) of `summary` was an infrastructure failure: no patch got a
    verdict, so its Pass@1 of 0 says nothing about the policy."""
    pairs = summary["num_tasks"] * summary["num_runs"]
    if pairs and summary["infra_errors"] == pairs:
        raise RuntimeError(
            f"every one of the {pairs} grades was an infrastructure failure, so nothing was "
            f"graded (first: {summary['first_infra_error']}); fix that, then run the same "
            "command again to regrade them"
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
    """The outputs of finished pairs: the per-run files (`write_reports`), summary.json
    (`identity`, `summarize` with the Best@k curve of each selector over `scores`, `session`)
    and curves.png. Returns the summary.

    scores: {instance_id: [CandidateScores per run]}, read for `selectors` only; Best@k
    averages up to `max_subsets` k-subsets per task drawn with `seed`.
    """
    resolved = resolved_matrix(instance_ids, trajectories, num_runs)
    best_at_k: dict[str, dict[int, float]] = {}
    for name in selectors:
        candidates = [scores[instance_id] for instance_id in instance_ids]
        check_scores(name, candidates)
        best_at_k[name] = metrics.best_at_k_curve(
            resolved, candidates, SELECTORS[name], max_subsets=max_subsets, seed=seed
        )
    model_name = identity["model_name_or_path"]
    write_reports(output_dir, instance_ids, trajectories, num_runs, model_name)
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
