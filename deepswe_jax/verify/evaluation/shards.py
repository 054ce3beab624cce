"""Several processes evaluating one task set, and the merge of what they wrote.

Process i of n (`run.run_evaluation(..., process_id=i, num_processes=n)`) evaluates every n-th
task from i into output_dir/shard_i-of-n: an output directory of its own plus shard.json (the
`ShardPlan`: the whole task list, runs, selectors, seed), set up by `prepare_shard`. Once all n
have finished, `merge_shards(output_dir)` writes at output_dir what one process evaluating the
whole task set would have.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.env.tasks import Task
from deepswe_jax.verify.evaluation.store import (
    EVAL_CONFIG_FILE,
    SCORES_FILE,
    TRAJECTORIES_FILE,
    PairKey,
    check_or_write_identity,
    describe_differences,
    replace_lines,
    score_store,
    stored_scores,
    trajectory_store,
)
from deepswe_jax.verify.evaluation.summary import write_results

SHARD_PLAN_FILE = "shard.json"
# Process i of n of a multi-process evaluation writes output_dir/shard_i-of-n.
SHARD_DIRECTORY = re.compile(r"shard_(\d+)-of-(\d+)")


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


def prepare_shard(
    tasks: Sequence[Task],
    output_dir: str | os.PathLike,
    process_id: int,
    num_processes: int,
    *,
    identity: Mapping[str, Any],
    num_runs: int,
    selectors: Sequence[str],
    seed: int,
) -> tuple[Path, list[Task]]:
    """Process `process_id` of `num_processes`' output directory, shard_<i>-of-<n> under
    `output_dir`, with its eval_config.json (`identity`, checked against one already there) and
    shard.json; returns it and the tasks the process evaluates, tasks[process_id::n]."""
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
    shard_dir = shard_directory(output_dir, process_id, num_processes)
    # Refused settings must not replace the plan of the evaluation the shard holds.
    check_or_write_identity(shard_dir, dict(identity))
    plan.write(shard_dir)
    return shard_dir, list(tasks[process_id::num_processes])


def merge_shards(output_dir: str | os.PathLike, *, max_subsets: int = 1000) -> dict[str, Any]:
    """Writes at `output_dir` the outputs (`deepswe_jax.verify.evaluation`) that one process
    evaluating the whole task set would have written, from the shard_<i>-of-<n> folders its n
    processes wrote (`run.run_evaluation` with num_processes=n; each shard is only read).
    Returns the summary (Best@k averaged over up to `max_subsets` k-subsets per task, as
    `run.evaluate`).

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
    replace_lines(output_dir / TRAJECTORIES_FILE, (trajectories[key].to_json() for key in all_keys))
    if plan.selectors:
        replace_lines(output_dir / SCORES_FILE, (json.dumps(score_records[k]) for k in all_keys))
    return write_results(
        output_dir,
        plan.instance_ids,
        trajectories,
        plan.num_runs,
        identity=identity,
        scores=(
            stored_scores(score_records, plan.instance_ids, plan.num_runs) if plan.selectors else {}
        ),
        selectors=plan.selectors,
        seed=plan.seed,
        max_subsets=max_subsets,
        session={
            "pairs_run_this_session": 0,
            "merged_shards": [directory.name for directory in directories],
            "wall_s": time.perf_counter() - started,
        },
    )
