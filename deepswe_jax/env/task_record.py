"""The task record: one repository at a base commit, an issue, and the tests that grade a fix
(`Task`), and the error a malformed row raises. Loaders are in `tasks` (which re-exports both),
so that the graders, which `tasks.load_tasks` asks whether a row can be graded, need not import
the loaders.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from deepswe_jax.env.layouts import LAYOUTS


class TaskFormatError(ValueError):
    """A task row is missing a field or has a field of the wrong shape."""


@dataclass(frozen=True)
class Task:
    """One repository at a base commit, an issue, and the tests that grade a fix.

    `FAIL_TO_PASS` / `PASS_TO_PASS` are pytest node ids relative to the
    repository root (e.g. "tests/test_parse.py::test_iso_week"). `source` is an
    absolute path after loading (or None when the image comes from a registry).
    `expected_output_json` (R2E-Gym) maps test names to statuses; when set,
    grading requires the parsed statuses to equal it exactly. `layout` names the image's
    layout (`layouts.LAYOUTS`: where its Python environment is and how it is activated).
    `eval_script`, `log_parser` and `eval_type` are a swebench >= 5 row's own (its eval
    script, the name of its log parser in swebench's PARSER_REGISTRY, pass_and_fail or
    fail_only); empty for other rows.
    """

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    image: str
    source: str | None = None
    test_cmd: str | None = None
    expected_output_json: dict | None = None
    hints_text: str = ""
    version: str = ""
    created_at: str = ""
    layout: str = "deepswe"
    eval_script: str = ""
    log_parser: str = ""
    eval_type: str = ""

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise TaskFormatError(
                f"task {self.instance_id}: unknown layout {self.layout!r}; "
                f"use one of {', '.join(LAYOUTS)}"
            )

    def to_row(self) -> dict[str, Any]:
        """JSON-serializable row (lists for the test ids) that `load_tasks` reads back."""
        row = asdict(self)
        row["FAIL_TO_PASS"] = list(self.FAIL_TO_PASS)
        row["PASS_TO_PASS"] = list(self.PASS_TO_PASS)
        return row
