"""A SWE-bench predictions file as an evaluation policy: each task's patch is its prediction's.

    policy = read_predictions("preds.json")      # or predictions.jsonl
    tasks = predicted_tasks(load_tasks("tasks.jsonl"), policy)

The file is what swebench's run_evaluation reads (`swebench.harness.utils.get_predictions_
from_file`): a .jsonl of rows, or a .json holding a list of rows or an object keyed by
instance_id (mini-swe-agent's preds.json); each row has `instance_id`, `model_name_or_path` and
`model_patch` (a string, or null for no patch). A row without them is refused, naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepswe_jax.env.tasks import Task

PREDICTIONS_POLICY = "predictions"


class PredictionsError(ValueError):
    """A predictions file that cannot be graded as it is (the message names the row)."""


@dataclass(frozen=True)
class PredictionsPolicy:
    """The patches of a predictions file: {instance_id: model_patch (None: no patch)}.

    model_name: the rows' model_name_or_path. source: the file. digest: sha256 of its bytes,
    so that resuming an evaluation with another file is refused.
    """

    patches: Mapping[str, str | None]
    model_name: str
    source: str
    digest: str

    def patch(self, task: Task) -> str | None:
        return self.patches[task.instance_id]


def read_predictions(path: str | os.PathLike) -> PredictionsPolicy:
    """The predictions of `path` (.jsonl, or .json with a list or an object of rows)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"predictions file {path} does not exist")
    data = path.read_bytes()
    rows = _rows(path, data.decode("utf-8"))
    if not rows:
        raise PredictionsError(f"{path} holds no predictions; give at least one row")
    patches: dict[str, str | None] = {}
    names: set[str] = set()
    for where, row in rows:
        instance_id, model_name, patch = _checked_row(path, where, row)
        if instance_id in patches:
            raise PredictionsError(
                f"{path}, {where}: a second prediction for {instance_id!r}; keep one per task"
            )
        patches[instance_id] = patch
        names.add(model_name)
    if len(names) > 1:
        raise PredictionsError(
            f"{path} mixes model_name_or_path values {sorted(names)}; an evaluation grades one "
            "model, so split the file by model"
        )
    return PredictionsPolicy(
        patches=patches,
        model_name=names.pop(),
        source=str(path.resolve()),
        digest=hashlib.sha256(data).hexdigest(),
    )


def predicted_tasks(
    tasks: Sequence[Task], policy: PredictionsPolicy, *, only: bool = False
) -> list[Task]:
    """The tasks that have a prediction, in task-file order. A prediction for a task not in
    `tasks` is refused (as swebench's run_evaluation refuses it), unless `only` says `tasks`
    is a chosen subset (--instance_ids)."""
    known = {task.instance_id for task in tasks}
    unknown = sorted(set(policy.patches) - known)
    if unknown and not only:
        raise PredictionsError(
            f"{policy.source} predicts {len(unknown)} instance(s) the task file does not hold "
            f"(first {unknown[:3]}); pass the task file they come from (--tasks)"
        )
    return [task for task in tasks if task.instance_id in policy.patches]


def _rows(path: Path, text: str) -> list[tuple[str, Any]]:
    """(where, row) pairs: 'line N' for .jsonl, 'row N' / 'key K' for .json."""
    if path.suffix.lower() == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise PredictionsError(
                    f"{path}, line {number}: not valid JSON ({e.msg}); each line holds one "
                    "prediction object"
                ) from e
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PredictionsError(f"{path}: not valid JSON ({e}); or name it .jsonl") from e
    if isinstance(data, list):
        return [(f"row {i}", row) for i, row in enumerate(data)]
    if isinstance(data, dict):
        return [(f"key {key!r}", row) for key, row in data.items()]
    raise PredictionsError(f"{path}: expected a list or an object of predictions")


def _checked_row(path: Path, where: str, row: Any) -> tuple[str, str, str | None]:
    if not isinstance(row, Mapping):
        raise PredictionsError(f"{path}, {where}: expected an object, got {type(row).__name__}")
    fix = "each prediction has instance_id, model_name_or_path and model_patch (string or null)"
    for key in ("instance_id", "model_name_or_path"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise PredictionsError(f"{path}, {where}: {key} is missing or not a string; {fix}")
    if "model_patch" not in row:
        raise PredictionsError(f"{path}, {where}: model_patch is missing; {fix}")
    patch = row["model_patch"]
    if patch is not None and not isinstance(patch, str):
        raise PredictionsError(
            f"{path}, {where}: model_patch is a {type(patch).__name__}, not a string; {fix}"
        )
    return row["instance_id"], row["model_name_or_path"], patch
