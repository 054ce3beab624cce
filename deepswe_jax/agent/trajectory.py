"""One episode as training data: tokens exactly as sampled, loss mask, reward, why it stopped.

Trajectories are stored as jsonl, one file per RL iteration
(`trajectories_path(run_dir, iteration)`), one `Trajectory.to_json()` line each. The grade is
stored as the grader's `GradeResult` fields, so files written when `Trajectory.grade` was a
dict of them read back as they are.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from deepswe_jax.env.grading.grading import GradeResult


class StopReason(str, enum.Enum):
    """Why an episode ended.

    finished: the agent called finish. max_steps / max_context: the step or
    token budget ran out. timeout: the whole-episode wall-clock limit passed.
    env_error: the container failed (an infrastructure error, not a wrong answer).
    limit_exceeded: the episode's own processes exhausted its container's disk or memory
      (runtime.ResourceLimitError): the policy's doing, so reward 0 and trained on.
    """

    finished = "finished"
    max_steps = "max_steps"
    max_context = "max_context"
    timeout = "timeout"
    env_error = "env_error"
    limit_exceeded = "limit_exceeded"

    @property
    def compact_filtered(self) -> bool:
        """A budget (steps, tokens, time), not the policy, ended the episode: DeepSWE's compact
        filtering masks it out of the loss but keeps it in the group's baseline with reward 0."""
        return self in (StopReason.max_steps, StopReason.max_context, StopReason.timeout)

    @property
    def env_failure(self) -> bool:
        """The environment broke (container died mid-episode): like an infrastructure error, the
        rollout is masked, counted separately and left out of the baseline."""
        return self is StopReason.env_error


@dataclass(frozen=True)
class Trajectory:
    """One episode of one task.

    `token_ids`, `loss_mask` and `sampler_logprobs` are all [num_tokens]: the
    prompt (`prompt_ids`, a prefix of `token_ids`) then every assistant turn
    and observation. `loss_mask` is 1 exactly on sampled assistant tokens
    (their closing <|im_end|> included); `sampler_logprobs` is 0.0 where the
    mask is 0. `reward` is 1.0 only for a finished episode whose patch resolved
    the task. `infra_error` marks container or grader failures. `timings` holds
    wall-clock seconds (acquire, generation, tool, patch, grading, total);
    `steps` one dict per agent turn (text, action, observation, timings), plus
    a final {"env_error": message} entry when the container or grader failed;
    `num_steps` counts the turns. `grade` is the grader's result for the final
    patch, or None when the patch was not graded.
    """

    task_id: str
    rollout_index: int
    policy_version: int
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    sampler_logprobs: tuple[float, ...]
    reward: float
    stop_reason: StopReason
    infra_error: bool
    num_steps: int
    patch: str
    timings: dict[str, float]
    steps: tuple[dict, ...]
    grade: GradeResult | None

    def __post_init__(self):
        lengths = {len(self.token_ids), len(self.loss_mask), len(self.sampler_logprobs)}
        if len(lengths) != 1:
            raise ValueError(
                f"token_ids, loss_mask and sampler_logprobs must have one length, got "
                f"{len(self.token_ids)}, {len(self.loss_mask)}, {len(self.sampler_logprobs)}"
            )
        if tuple(self.token_ids[: len(self.prompt_ids)]) != tuple(self.prompt_ids):
            raise ValueError("prompt_ids must be a prefix of token_ids")
        if self.grade is not None and not isinstance(self.grade, GradeResult):
            raise TypeError(
                f"grade must be the grader's GradeResult (or None), got "
                f"{type(self.grade).__name__}; an env pool's grade() returns one"
            )
        if self.grade is not None and self.grade.infra_error and not self.infra_error:
            raise ValueError("a grade with status infra_error needs infra_error=True")

    @property
    def resolved(self) -> bool:
        """The grader resolved the final patch (every FAIL_TO_PASS and PASS_TO_PASS test
        passes), however the episode stopped: SWE-bench's verdict on the prediction. The RL
        reward asks more (a finished episode); see `reward`."""
        return self.grade is not None and self.grade.resolved

    @property
    def num_response_tokens(self) -> int:
        """Tokens after the prompt (assistant turns and observations)."""
        return len(self.token_ids) - len(self.prompt_ids)

    @property
    def compact_filtered(self) -> bool:
        """True when the stop reason is one compact filtering masks."""
        return self.stop_reason.compact_filtered

    def to_json(self) -> str:
        """One jsonl line (no trailing newline)."""
        record = asdict(self)
        record["stop_reason"] = self.stop_reason.value
        return json.dumps(record, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        """Reads what `to_json` wrote."""
        record: dict[str, Any] = json.loads(line)
        names = {f.name for f in fields(cls)}
        if set(record) != names:
            raise ValueError(
                f"trajectory record fields differ from Trajectory's: missing "
                f"{sorted(names - set(record))}, unexpected {sorted(set(record) - names)}"
            )
        record["stop_reason"] = StopReason(record["stop_reason"])
        if record["grade"] is not None:
            record["grade"] = grade_from_record(record["grade"])
        for name in ("prompt_ids", "token_ids", "loss_mask", "sampler_logprobs", "steps"):
            record[name] = tuple(record[name])
        return cls(**record)


def grade_from_record(record: dict[str, Any]) -> GradeResult:
    """The GradeResult of its stored fields (`dataclasses.asdict`); fields added to GradeResult
    since a file was written take their defaults (e.g. `report`, absent before the harnesses
    made reports)."""
    known = {f.name for f in fields(GradeResult)}
    unexpected = sorted(set(record) - known)
    missing = sorted(
        f.name
        for f in fields(GradeResult)
        if f.name not in record and f.default is MISSING and f.default_factory is MISSING
    )
    if unexpected or missing:
        raise ValueError(
            f"grade record fields differ from GradeResult's: missing {missing}, unexpected "
            f"{unexpected}"
        )
    return GradeResult(**record)


def trajectories_path(run_dir: str | os.PathLike, iteration: int) -> Path:
    """Where iteration `iteration`'s trajectories go: run_dir/trajectories/iter_000012.jsonl."""
    return Path(run_dir) / "trajectories" / f"iter_{iteration:06d}.jsonl"


def write_trajectories(path: str | os.PathLike, trajectories: Iterable[Trajectory]) -> None:
    """Writes one trajectory per line, replacing `path` atomically (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as f:
            for trajectory in trajectories:
                f.write(trajectory.to_json() + "\n")
        partial.replace(path)
    except BaseException:  # Ctrl-C mid-write: no half-written file stays
        partial.unlink(missing_ok=True)
        raise


def read_trajectories(path: str | os.PathLike) -> list[Trajectory]:
    """Reads a file written by `write_trajectories`."""
    with Path(path).open(encoding="utf-8") as f:
        return [Trajectory.from_json(line) for line in f if line.strip()]
