"""The resumable store of an evaluation's output directory.

    eval_config.json     the settings that decide the results (`run.eval_identity`); resuming
                         with other settings is refused (`check_or_write_identity`)
    trajectories.jsonl   one Trajectory per finished (task, run), appended as each ends
    scores.jsonl         one CandidateScores record per scored (task, run)

Both jsonl files are `JsonlStore`s: append-only, one fsync'd line per record, read back on
resume; a later record for a (task, run) replaces an earlier one.
"""

from __future__ import annotations

import json
import logging
import os
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.verify.select import CandidateScores

logger = logging.getLogger(__name__)

EVAL_CONFIG_FILE = "eval_config.json"
TRAJECTORIES_FILE = "trajectories.jsonl"
SCORES_FILE = "scores.jsonl"

PairKey = tuple[str, int]  # (instance_id, run index)

_SHORT_REPR = reprlib.Repr()  # values in error messages: a list of task ids shows its start
_SHORT_REPR.maxstring, _SHORT_REPR.maxlist, _SHORT_REPR.maxtuple = 200, 4, 4


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
    one torn last line (no newline yet), which opening drops (and removes from the file unless
    `repair` is False: a reader of another process's file, which may be mid-write). A whole
    line that does not decode was not torn: it is refused, and the file left as it is. A later
    record for a key replaces an earlier one. Lines end at "\n" only: records may hold other
    line breaks (U+2028, U+0085) that json.dumps(ensure_ascii=False) writes as they are.
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
        *whole, last = path.read_bytes().split(b"\n")
        for number, line in enumerate(whole, 1):
            if not line.strip():
                continue
            try:
                record = decode(line.decode("utf-8"))
            except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError included
                raise ValueError(
                    f"{path}, line {number}, is not a record this version reads ({error}); it "
                    "was written whole, so no interrupted write explains it. Evaluate into a "
                    f"new output directory, or move {path.name} away to run its pairs again"
                ) from error
            self.records[key(record)] = record
        if not last:
            return
        try:
            record = decode(last.decode("utf-8"))
        except ValueError:
            logger.warning("dropping the torn last line of %s (an interrupted write)", path)
            kept = whole
        else:  # written whole but for its newline
            self.records[key(record)] = record
            kept = [*whole, last]
        if repair:
            path.write_bytes(b"".join(line + b"\n" for line in kept))

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


def replace_lines(path: Path, lines: Iterable[str]) -> None:
    """Writes `lines` (one record each) as the file `path`, replacing it whole at the end."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(partial, path)
