"""Task records and loaders for SWE-bench, SWE-Gym, R2E-Gym and the shipped suite.

A `Task` is one repository at a base commit plus an issue to fix and the tests
that decide whether it was fixed. `load_tasks` reads jsonl, json, parquet, a
Hugging Face dataset saved with `save_to_disk`, a `datasets.Dataset` or a list
of dicts, and accepts three row dialects:

- SWE-bench / SWE-Gym: `instance_id, repo, base_commit, patch, test_patch,
  problem_statement, FAIL_TO_PASS, PASS_TO_PASS, ...` (test lists may be JSON
  strings); `image` (or `docker_image` / `image_name`) defaults to the public
  SWE-bench evaluation image of the instance. swebench >= 5 datasets also carry
  `eval_script`, `log_parser` and `eval_type`, which grading runs and reads
  (`harness_swebench`). Layout "swebench": conda's `testbed` environment.
- R2E-Gym-Subset: `repo_name, docker_image, commit_hash, parsed_commit_content
  (JSON), expected_output_json, problem_statement`; the gold patch and test
  patch are rebuilt from the commit's file contents (R2E-Gym's test-file rule
  splits them), the problem statement loses its `[ISSUE]` tags as in R2E-Gym, and
  grading runs the image's /r2e_tests and compares the status map with
  `expected_output_json` (`harness_r2egym`). Layout "r2egym": /testbed/.venv.
- The shipped suite (tasks/tasks.jsonl) and hidden tasks: SWE-bench fields plus
  `image` and `source`, a directory relative to the task file holding the
  repository at its base state (images are built from it, see
  `deepswe_jax.env.docker.images`); `base_commit` may be omitted, it is then derived from
  the source (`commits.source_commit`). Layout "deepswe": the image's python3.

A row may name its layout (`layout`: one of `layouts.LAYOUTS`) to override the dialect's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from deepswe_jax.env.commits import CommitError, source_commit
from deepswe_jax.env.diffs import unified_diff as unified_diff  # re-exported
from deepswe_jax.env.layouts import LAYOUTS
from deepswe_jax.env.r2egym_rows import (
    R2ERowError,
    r2e_file_diff,
    r2e_is_test_file,
    r2e_problem_statement,
)
from deepswe_jax.env.task_record import Task as Task  # re-exported
from deepswe_jax.env.task_record import TaskFormatError as TaskFormatError  # re-exported

# Only "tests": packages named test/ or testing/ are often library code (django.test, numpy.testing).
TEST_DIR_NAMES = frozenset({"tests"})


def is_test_path(path: str) -> bool:
    """True for files that belong to a test suite: under a `tests` folder,
    `test_*.py`, `*_test.py`, `tests.py` or `conftest.py`."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1]
    return (
        any(part in TEST_DIR_NAMES for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name in ("tests.py", "conftest.py")
    )


def swebench_image_name(instance_id: str) -> str:
    """Public SWE-bench evaluation image of an instance (Docker Hub `swebench/` namespace)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_').lower()}:latest"


def load_tasks(path_or_dataset: Any, *, root: str | os.PathLike | None = None) -> list[Task]:
    """Load tasks from a file, a saved Hugging Face dataset, or in-memory rows.

    Args:
      path_or_dataset: path to a `.jsonl`, `.json` (a list of rows), `.parquet`
        file or a `datasets` `save_to_disk` directory; or a `datasets.Dataset`
        / any iterable of row dicts.
      root: directory that relative `source` paths are resolved against;
        defaults to the task file's directory (the working directory for
        in-memory rows).

    Returns:
      The tasks in row order.

    Raises:
      FileNotFoundError: the path does not exist.
      TaskFormatError: a row is malformed (the message names the row and field), a SWE-bench
        row could not be graded (`check_gradable`), or there are no rows.
    """
    if isinstance(path_or_dataset, (str, os.PathLike)):
        path = Path(path_or_dataset).expanduser().resolve()
        rows = read_rows(path)
        base_dir = (
            Path(root).resolve() if root is not None else (path if path.is_dir() else path.parent)
        )
    else:
        if isinstance(path_or_dataset, Mapping):
            raise TaskFormatError(
                "load_tasks got a mapping (a DatasetDict or a single row); pass one split, "
                "e.g. load_tasks(ds['test']), or a list of rows"
            )
        rows = list(path_or_dataset)
        base_dir = Path(root).resolve() if root is not None else Path.cwd()
    if not rows:  # training, evaluation and validation would all "succeed" on nothing
        source = path if isinstance(path_or_dataset, (str, os.PathLike)) else "the dataset"
        raise TaskFormatError(
            f"{source} holds no tasks; give a task file with at least one row (e.g. "
            "tasks/tasks.jsonl)"
        )
    commits: dict[str, str] = {}  # source directory -> its commit, derived once per load
    tasks = [
        task_from_row(row, index=i, base_dir=base_dir, commits=commits)
        for i, row in enumerate(rows)
    ]
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.instance_id in seen:
            raise TaskFormatError(
                f"rows {seen[task.instance_id]} and {i} share instance_id {task.instance_id!r}; "
                "instance ids must be unique"
            )
        seen[task.instance_id] = i
    check_gradable(tasks)
    return tasks


def check_gradable(tasks: Iterable[Task]) -> None:
    """Refuses, when the tasks load rather than once containers are up, a SWE-bench row whose
    tests could not be run or read (`harness_swebench.check_gradable`), naming the row."""
    for i, task in enumerate(tasks):
        if task.layout != "swebench" or task.expected_output_json is not None:
            continue
        # Imported here: harness_swebench reads Task from this module.
        from deepswe_jax.env.grading.harness_swebench import SwebenchRowError
        from deepswe_jax.env.grading.harness_swebench import check_gradable as check_row

        try:
            check_row(task)
        except SwebenchRowError as e:
            raise TaskFormatError(f"row {i} cannot be graded: {e}") from e


def task_from_row(
    row: Mapping[str, Any],
    *,
    index: int = 0,
    base_dir: Path | None = None,
    commits: dict[str, str] | None = None,
) -> Task:
    """Build a `Task` from one SWE-bench, SWE-Gym, R2E-Gym or suite row.

    `index` only names the row in error messages; `base_dir` resolves a relative `source`;
    `commits` caches the commits derived for sources (rows with `source` and no base_commit).
    """
    if not isinstance(row, Mapping):
        raise TaskFormatError(f"row {index}: expected a dict of fields, got {type(row).__name__}")
    if "parsed_commit_content" in row or ("repo_name" in row and "repo" not in row):
        return _task_from_r2e_row(row, index)
    where = f"row {index} (instance_id={row.get('instance_id')!r})"
    instance_id = _required_str(row, "instance_id", where)
    image = _first_present(row, ("image", "docker_image", "image_name"))
    expected = _expected_output(row, where)
    source = _source_dir(row, where, base_dir or Path.cwd())
    task = Task(
        instance_id=instance_id,
        repo=_required_str(row, "repo", where),
        base_commit=_base_commit(row, source, where, {} if commits is None else commits),
        problem_statement=_required_str(row, "problem_statement", where),
        patch=_optional_str(row, "patch", where),
        test_patch=_optional_str(row, "test_patch", where),
        FAIL_TO_PASS=_test_ids(row, "FAIL_TO_PASS", where),
        PASS_TO_PASS=_test_ids(row, "PASS_TO_PASS", where),
        image=str(image) if image else swebench_image_name(instance_id),
        source=source,
        test_cmd=_optional_str(row, "test_cmd", where) or None,
        expected_output_json=expected,
        hints_text=_optional_str(row, "hints_text", where),
        version=_optional_str(row, "version", where),
        created_at=_optional_str(row, "created_at", where),
        layout=_layout(row, "deepswe" if source else "swebench", where),
        eval_script=_optional_str(row, "eval_script", where),
        log_parser=_optional_str(row, "log_parser", where),
        eval_type=_optional_str(row, "eval_type", where),
    )
    if not task.FAIL_TO_PASS and not task.PASS_TO_PASS and expected is None:
        raise TaskFormatError(
            f"{where}: FAIL_TO_PASS and PASS_TO_PASS are both empty, so nothing would be graded; "
            "list the pytest node ids that decide the task (or give expected_output_json)"
        )
    return task


def _task_from_r2e_row(row: Mapping[str, Any], index: int) -> Task:
    where = f"row {index} (R2E-Gym, docker_image={row.get('docker_image')!r})"
    repo = _required_str(row, "repo_name", where)
    commit = _parse_json_field(row, "parsed_commit_content", where)
    if not isinstance(commit, Mapping) or not isinstance(commit.get("file_diffs"), list):
        raise TaskFormatError(
            f"{where}: parsed_commit_content must be a JSON object with a 'file_diffs' list "
            "(R2E-Gym ParsedCommit); re-export the row from R2E-Gym-Subset"
        )
    base_commit = commit.get("old_commit_hash")
    if not isinstance(base_commit, str) or not base_commit:
        raise TaskFormatError(f"{where}: parsed_commit_content has no 'old_commit_hash'")
    code_diffs, test_diffs = [], []
    for diff_index, file_diff in enumerate(commit["file_diffs"]):
        try:
            path, text = r2e_file_diff(file_diff)
        except R2ERowError as e:
            raise TaskFormatError(f"{where}, file_diffs[{diff_index}]: {e}") from e
        (test_diffs if r2e_is_test_file(path) else code_diffs).append(text)
    expected = _expected_output(row, where)
    if expected is None:
        raise TaskFormatError(
            f"{where}: expected_output_json is missing; R2E-Gym rows are graded by it"
        )
    image = _first_present(row, ("image", "docker_image", "image_name"))
    if not image:
        raise TaskFormatError(f"{where}: docker_image is missing; R2E-Gym rows name their image")
    commit_hash = str(row.get("commit_hash") or commit.get("new_commit_hash") or base_commit)
    return Task(
        instance_id=str(row.get("instance_id") or f"{repo}__{commit_hash}"),
        repo=repo,
        base_commit=base_commit,
        problem_statement=r2e_problem_statement(_required_str(row, "problem_statement", where)),
        patch="".join(code_diffs),
        test_patch="".join(test_diffs),
        FAIL_TO_PASS=_test_ids(row, "FAIL_TO_PASS", where),
        PASS_TO_PASS=_test_ids(row, "PASS_TO_PASS", where),
        image=str(image),
        source=None,
        test_cmd=_optional_str(row, "test_cmd", where) or None,
        expected_output_json=expected,
        created_at=str(commit.get("commit_date") or ""),
        layout=_layout(row, "r2egym", where),
    )


def read_rows(path: Path) -> list[Any]:
    """The rows of a task file (.jsonl, .json, .parquet) or a `datasets` save_to_disk folder."""
    if not path.exists():
        raise FileNotFoundError(f"task file {path} does not exist")
    if path.is_dir():
        return _read_saved_dataset(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as f:
            for line_number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TaskFormatError(
                        f"{path}:{line_number}: not valid JSON ({e.msg}); each line must be one task object"
                    ) from e
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise TaskFormatError(f"{path}: not valid JSON ({e})") from e
        if not isinstance(data, list):
            raise TaskFormatError(
                f"{path}: a .json task file must hold a list of task objects, got {type(data).__name__}"
            )
        return data
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise TaskFormatError(
        f"{path}: unknown task file type {suffix!r}; use .jsonl, .json, .parquet "
        "or a directory written by datasets.Dataset.save_to_disk"
    )


def _read_saved_dataset(path: Path) -> list[Any]:
    """Rows of a `datasets` `save_to_disk` directory (Arrow stream files), read with pyarrow."""
    import pyarrow as pa

    if (path / "dataset_dict.json").exists():
        splits = json.loads((path / "dataset_dict.json").read_text())["splits"]
        if len(splits) != 1:
            raise TaskFormatError(
                f"{path} is a DatasetDict with splits {splits}; pass one split directory, "
                f"e.g. {path / splits[0]}"
            )
        path = path / splits[0]
    state_file = path / "state.json"
    if not state_file.exists():
        raise TaskFormatError(
            f"{path} is a directory without state.json; pass a task file or a directory "
            "written by datasets.Dataset.save_to_disk"
        )
    rows: list[Any] = []
    for data_file in json.loads(state_file.read_text())["_data_files"]:
        with pa.memory_map(str(path / data_file["filename"])) as source:
            rows.extend(pa.ipc.open_stream(source).read_all().to_pylist())
    return rows


def _first_present(row: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        if row.get(key) not in (None, ""):
            return row[key]
    return None


def _required_str(row: Mapping[str, Any], field: str, where: str) -> str:
    value = row.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise TaskFormatError(
            f"{where}: required field {field!r} is missing or empty; add it to the row"
        )
    if not isinstance(value, str):
        raise TaskFormatError(
            f"{where}: field {field!r} must be a string, got {type(value).__name__}"
        )
    return value


def _optional_str(row: Mapping[str, Any], field: str, where: str) -> str:
    value = row.get(field)
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        raise TaskFormatError(
            f"{where}: field {field!r} must be a string, got {type(value).__name__}"
        )
    return str(value)  # versions and dates may arrive as numbers / timestamps from parquet


def _parse_json_field(row: Mapping[str, Any], field: str, where: str) -> Any:
    value = row.get(field)
    if value is None:
        raise TaskFormatError(f"{where}: required field {field!r} is missing")
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise TaskFormatError(f"{where}: field {field!r} is not valid JSON ({e})") from e


def _test_ids(row: Mapping[str, Any], field: str, where: str) -> tuple[str, ...]:
    """A list of pytest node ids, given as a list or as a JSON-encoded list."""
    value = row.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        value = _parse_json_field(row, field, where)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TaskFormatError(
            f"{where}: field {field!r} must be a list of pytest node ids (or a JSON string of one), "
            f"got {value!r:.200}"
        )
    return tuple(value)


def _expected_output(row: Mapping[str, Any], where: str) -> dict | None:
    if row.get("expected_output_json") in (None, ""):
        return None
    expected = _parse_json_field(row, "expected_output_json", where)
    if not isinstance(expected, dict) or not all(isinstance(v, str) for v in expected.values()):
        raise TaskFormatError(
            f"{where}: expected_output_json must be an object mapping test names to statuses "
            '(e.g. {"test_add": "PASSED"})'
        )
    return expected


def _base_commit(
    row: Mapping[str, Any], source: str | None, where: str, commits: dict[str, str]
) -> str:
    """The row's base_commit; for a row with a local `source` and none, the source's commit."""
    if row.get("base_commit") not in (None, "") or source is None:
        return _required_str(row, "base_commit", where)
    if source not in commits:
        try:
            commits[source] = source_commit(source)
        except CommitError as e:
            raise TaskFormatError(f"{where}: cannot derive base_commit from {source}: {e}") from e
    return commits[source]


def _layout(row: Mapping[str, Any], default: str, where: str) -> str:
    layout = row.get("layout") or default
    if layout not in LAYOUTS:
        raise TaskFormatError(
            f"{where}: unknown layout {layout!r}; use one of {', '.join(LAYOUTS)} "
            "(or leave it out: SWE-bench rows get swebench, R2E-Gym rows r2egym, rows "
            "with a source deepswe)"
        )
    return str(layout)


def _source_dir(row: Mapping[str, Any], where: str, base_dir: Path) -> str | None:
    source = row.get("source")
    if source in (None, ""):
        return None
    if not isinstance(source, str):
        raise TaskFormatError(f"{where}: field 'source' must be a path string")
    resolved = (base_dir / source).resolve()
    if not resolved.is_dir():
        raise TaskFormatError(
            f"{where}: source directory {resolved} does not exist; 'source' is resolved relative "
            f"to the task file's directory ({base_dir})"
        )
    return str(resolved)
