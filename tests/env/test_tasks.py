"""Task loaders: every file format and row dialect, and errors for bad rows."""

import dataclasses
import json
import re
import subprocess

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deepswe_jax.env.commits import source_commit
from deepswe_jax.env.tasks import (
    TaskFormatError,
    is_test_path,
    load_tasks,
    swebench_image_name,
    unified_diff,
)

SWEBENCH_ROW = {
    "repo": "astropy/astropy",
    "instance_id": "astropy__astropy-12907",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "patch": "diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py\n",
    "test_patch": "diff --git a/astropy/modeling/tests/test_separable.py b/astropy/modeling/tests/test_separable.py\n",
    "problem_statement": "Modeling's `separability_matrix` does not compute separability correctly",
    "hints_text": "",
    "created_at": "2022-03-03T15:14:54Z",
    "version": "4.3",
    "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
    "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
    "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
}


def suite_row(instance_id: str = "mini-1", **overrides) -> dict:
    row = {
        "instance_id": instance_id,
        "repo": "deepswe/mini",
        "base_commit": "0" * 40,
        "problem_statement": "it is broken",
        "patch": "diff --git a/mini.py b/mini.py\n",
        "test_patch": "",
        "FAIL_TO_PASS": ["tests/test_mini.py::test_fixed"],
        "PASS_TO_PASS": ["tests/test_mini.py::test_param[a b-1]"],
        "image": "deepswe/mini:base",
        "source": "repos/mini",
        "created_at": "2024-05-01T00:00:00Z",
    }
    row.update(overrides)
    return row


@pytest.fixture
def suite_dir(tmp_path):
    (tmp_path / "repos" / "mini").mkdir(parents=True)
    return tmp_path


def test_jsonl_suite_rows_resolve_source_relative_to_the_file(
    suite_dir, tmp_path_factory, monkeypatch
):
    path = suite_dir / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(suite_row(f"mini-{i}")) for i in (1, 2)) + "\n\n")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    tasks = load_tasks(str(path))
    assert [t.instance_id for t in tasks] == ["mini-1", "mini-2"]
    task = tasks[0]
    assert task.source == str(suite_dir / "repos" / "mini")
    assert task.FAIL_TO_PASS == ("tests/test_mini.py::test_fixed",)
    assert task.PASS_TO_PASS == ("tests/test_mini.py::test_param[a b-1]",)
    assert (
        task.image == "deepswe/mini:base"
        and task.test_cmd is None
        and task.expected_output_json is None
    )


def test_json_list_and_parquet(suite_dir):
    rows = [
        suite_row("mini-1", docker_image=None),
        suite_row("mini-2", image=None, docker_image="other/mini:v2"),
    ]
    (suite_dir / "tasks.json").write_text(json.dumps(rows))
    from_json = load_tasks(suite_dir / "tasks.json")
    pq.write_table(pa.Table.from_pylist(rows), suite_dir / "tasks.parquet")
    from_parquet = load_tasks(suite_dir / "tasks.parquet")
    assert from_json == from_parquet
    assert [t.image for t in from_json] == ["deepswe/mini:base", "other/mini:v2"]


def test_huggingface_dataset_object_and_saved_directory(tmp_path):
    swegym_row = {**SWEBENCH_ROW, "instance_id": "getmoto__moto-5752", "repo": "getmoto/moto"}
    dataset = datasets.Dataset.from_list([SWEBENCH_ROW, swegym_row])
    from_object = load_tasks(dataset)
    dataset.save_to_disk(str(tmp_path / "single"))
    from_dir = load_tasks(tmp_path / "single")
    assert from_object == from_dir
    assert [t.instance_id for t in from_dir] == ["astropy__astropy-12907", "getmoto__moto-5752"]
    datasets.DatasetDict({"train": dataset}).save_to_disk(str(tmp_path / "dict"))
    assert load_tasks(tmp_path / "dict") == from_dir
    datasets.DatasetDict({"train": dataset, "test": dataset}).save_to_disk(str(tmp_path / "splits"))
    with pytest.raises(TaskFormatError, match="pass one split directory"):
        load_tasks(tmp_path / "splits")
    with pytest.raises(TaskFormatError, match="pass one split"):
        load_tasks(datasets.DatasetDict({"test": dataset}))


def test_swebench_row_with_json_string_test_lists_gets_the_swebench_image():
    (task,) = load_tasks([SWEBENCH_ROW])
    assert task.FAIL_TO_PASS == (
        "astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]",
    )
    assert task.PASS_TO_PASS == ("astropy/modeling/tests/test_separable.py::test_coord_matrix",)
    assert task.image == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    assert task.image == swebench_image_name(task.instance_id)
    assert (
        task.version == "4.3" and task.created_at == "2022-03-03T15:14:54Z" and task.source is None
    )


def test_swegym_row_with_lists_and_docker_image():
    row = {
        **SWEBENCH_ROW,
        "instance_id": "getmoto__moto-5752",
        "FAIL_TO_PASS": ["tests/test_ssm.py::test_get_parameter"],
        "PASS_TO_PASS": [],
        "docker_image": "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752",
        "version": 4.0,
    }
    (task,) = load_tasks([row])
    assert task.image == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752"
    assert task.PASS_TO_PASS == () and task.version == "4.0"


OLD_CODE = "def add(a, b):\n    return a - b\n"
NEW_CODE = "def add(a, b):\n    return a + b\n"
NEW_TEST = (
    "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3"  # no final newline
)


def r2e_row() -> dict:
    commit = {
        "old_commit_hash": "a" * 40,
        "new_commit_hash": "b" * 40,
        "commit_message": "fix add",
        "commit_date": "2020-01-02T03:04:05",
        "file_diffs": [
            {
                "header": {"file": {"path": "calc.py"}},
                "old_file_content": OLD_CODE,
                "new_file_content": NEW_CODE,
            },
            {
                "header": {"file": {"path": "tests/test_calc.py"}},
                "old_file_content": None,
                "new_file_content": NEW_TEST,
            },
        ],
    }
    return {
        "repo_name": "calc",
        "docker_image": "namanjain12/calc_final:" + "b" * 40,
        "commit_hash": "b" * 40,
        "parsed_commit_content": json.dumps(commit),
        "execution_result_content": "{}",
        "modified_files": ["calc.py"],
        "relevant_files": ["calc.py"],
        "problem_statement": "add subtracts",
        "expected_output_json": json.dumps({"test_add": "PASSED"}),
        "prompt": "",
    }


def test_r2e_gym_row_rebuilds_patches_that_apply(tmp_path):
    (task,) = load_tasks([r2e_row()])
    assert task.instance_id == "calc__" + "b" * 40
    assert task.base_commit == "a" * 40 and task.image.startswith("namanjain12/calc_final:")
    assert task.expected_output_json == {"test_add": "PASSED"}
    assert task.test_cmd is None and task.FAIL_TO_PASS == () and task.PASS_TO_PASS == ()
    assert task.layout == "r2egym"
    assert "calc.py" in task.patch and "tests/" not in task.patch
    assert "tests/test_calc.py" in task.test_patch and "calc.py b/calc.py" not in task.test_patch
    (tmp_path / "calc.py").write_text(OLD_CODE)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for patch in (task.patch, task.test_patch):
        subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=patch, text=True, check=True)
    assert (tmp_path / "calc.py").read_text() == NEW_CODE
    assert (tmp_path / "tests" / "test_calc.py").read_text() == NEW_TEST


def test_unified_diff_of_a_deleted_file_applies(tmp_path):
    (tmp_path / "gone.py").write_text(OLD_CODE)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(
        ["git", "apply", "-"],
        cwd=tmp_path,
        input=unified_diff("gone.py", OLD_CODE, None),
        text=True,
        check=True,
    )
    assert not (tmp_path / "gone.py").exists()
    assert unified_diff("same.py", OLD_CODE, OLD_CODE) == ""


def test_task_rows_round_trip(suite_dir):
    (task,) = load_tasks([suite_row()], root=suite_dir)
    (suite_dir / "again.jsonl").write_text(
        json.dumps({**task.to_row(), "source": "repos/mini"}) + "\n"
    )
    assert load_tasks(suite_dir / "again.jsonl") == [task]
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.image = "x"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**SWEBENCH_ROW, "instance_id": ""}, r"row 1 .*'instance_id' is missing or empty"),
        (
            {k: v for k, v in SWEBENCH_ROW.items() if k != "base_commit"},
            r"row 1 \(instance_id='astropy__astropy-12907'\): required field 'base_commit'",
        ),
        (
            {**SWEBENCH_ROW, "FAIL_TO_PASS": "[not json"},
            r"row 1 .*'FAIL_TO_PASS' is not valid JSON",
        ),
        (
            {**SWEBENCH_ROW, "FAIL_TO_PASS": [1, 2]},
            r"row 1 .*'FAIL_TO_PASS' must be a list of pytest node ids",
        ),
        (
            {**SWEBENCH_ROW, "FAIL_TO_PASS": [], "PASS_TO_PASS": "[]"},
            r"row 1 .*nothing would be graded",
        ),
        ({**SWEBENCH_ROW, "repo": 7}, r"row 1 .*'repo' must be a string"),
        (
            {**SWEBENCH_ROW, "expected_output_json": "[1]"},
            r"row 1 .*expected_output_json must be an object",
        ),
        (
            {**SWEBENCH_ROW, "source": "no/such/dir"},
            r"row 1 .*source directory .*no/such/dir does not exist",
        ),
        (
            {**r2e_row(), "parsed_commit_content": "{}"},
            r"row 1 \(R2E-Gym, docker_image=.*'file_diffs' list",
        ),
        (
            {**r2e_row(), "expected_output_json": None},
            r"row 1 \(R2E-Gym.*expected_output_json is missing",
        ),
        ("not a row", r"row 1: expected a dict"),
    ],
)
def test_bad_rows_name_the_row_and_field(row, message):
    with pytest.raises(TaskFormatError, match=message):
        load_tasks([SWEBENCH_ROW | {"instance_id": "ok__ok-1"}, row])


def test_bad_files(tmp_path):
    (tmp_path / "bad.jsonl").write_text(json.dumps(SWEBENCH_ROW) + "\n{oops\n")
    with pytest.raises(TaskFormatError, match=r"bad.jsonl:2: not valid JSON"):
        load_tasks(tmp_path / "bad.jsonl")
    (tmp_path / "dict.json").write_text(json.dumps(SWEBENCH_ROW))
    with pytest.raises(TaskFormatError, match="must hold a list of task objects"):
        load_tasks(tmp_path / "dict.json")
    (tmp_path / "tasks.csv").write_text("")
    with pytest.raises(TaskFormatError, match="unknown task file type '.csv'"):
        load_tasks(tmp_path / "tasks.csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tasks(tmp_path / "missing.jsonl")
    with pytest.raises(TaskFormatError, match=r"rows 0 and 1 share instance_id"):
        load_tasks([SWEBENCH_ROW, SWEBENCH_ROW])


def test_a_task_source_without_tasks_is_refused(tmp_path):
    """An empty task file used to give "0/0 tasks ok" and exit 0 (issue 17)."""
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    (tmp_path / "empty.json").write_text("[]")
    for name in ("empty.jsonl", "blank.jsonl", "empty.json"):
        with pytest.raises(TaskFormatError, match=f"{name} holds no tasks"):
            load_tasks(tmp_path / name)
    with pytest.raises(TaskFormatError, match="the dataset holds no tasks"):
        load_tasks([])


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_a.py", True),
        ("pkg/tests/helpers.py", True),
        ("test_a.py", True),
        ("pkg/a_test.py", True),
        ("conftest.py", True),
        ("pkg/test/test_x.py", True),
        ("django/test/testcases.py", False),
        ("numpy/testing/utils.py", False),
        ("pkg/contest.py", False),
        ("pkg/attest.py", False),
        ("pkg/latest/x.py", False),
    ],
)
def test_is_test_path(path, expected):
    assert is_test_path(path) is expected


def test_r2e_row_new_files_issue_tags_and_test_file_rule_follow_r2e_gym():
    row = r2e_row()
    commit = json.loads(row["parsed_commit_content"])
    # R2E-Gym leaves old_file_content "" for a new file (FileDiff.is_new); its test-file rule
    # counts test/ and Tests/ folders too.
    commit["file_diffs"][1]["old_file_content"] = ""
    commit["file_diffs"].append(
        {
            "header": {
                "file": {"path": "pkg/Tests/helpers.py"},
                "misc_line": "new file mode 100644",
            },
            "minus_file": {"path": "/dev/null"},
            "plus_file": {"path": "b/pkg/Tests/helpers.py"},
            "old_file_content": "",
            "new_file_content": "HELPER = 1\n",
        }
    )
    row["parsed_commit_content"] = json.dumps(commit)
    row["problem_statement"] = "Title\n[ISSUE]\nadd subtracts\n[/ISSUE]\ntrailer"
    (task,) = load_tasks([row])
    assert task.problem_statement == "\nadd subtracts\n"
    assert "--- /dev/null\n+++ b/tests/test_calc.py" in task.test_patch
    assert "new file mode 100644\n--- /dev/null\n+++ b/pkg/Tests/helpers.py" in task.test_patch
    assert "Tests/" not in task.patch and "calc.py" in task.patch


def test_row_with_source_and_no_base_commit_gets_the_source_commit(suite_dir):
    (suite_dir / "repos" / "mini" / "mini.py").write_text("x = 1\n")
    rows = [suite_row("mini-1", base_commit=None), suite_row("mini-2", base_commit="")]
    tasks = load_tasks(rows, root=suite_dir)
    expected = source_commit(suite_dir / "repos" / "mini")
    assert [task.base_commit for task in tasks] == [expected, expected]
    assert tasks[0].layout == "deepswe"
    with pytest.raises(TaskFormatError, match=r"row 0 .*unknown layout 'conda'"):
        load_tasks([suite_row(layout="conda")], root=suite_dir)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"repo": "acme/widgets", "log_parser": "parse_log_django"},
            "row 1 cannot be graded: acme__widgets-1 (acme/widgets) has no eval_script",
        ),
        ({"log_parser": "parse_log_nonsense"}, "log_parser 'parse_log_nonsense' is not one of"),
        ({"eval_type": "pass_only"}, "eval_type 'pass_only' is not one of"),
    ],
)
def test_ungradable_swebench_rows_are_refused_when_the_file_loads(tmp_path, fields, message):
    """Refused by load_tasks (so by every entry point) before any container starts, naming the
    row and what to change; Django and sympy rows without eval_script get swebench 4.x's."""
    rows = [
        dict(SWEBENCH_ROW, repo="django/django", version="3.0"),
        dict(SWEBENCH_ROW, instance_id="acme__widgets-1", **fields),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(TaskFormatError, match=re.escape(message)) as refused:
        load_tasks(path)
    assert "eval_script" in str(refused.value) or "leave it empty" in str(refused.value)
    assert [task.repo for task in load_tasks(rows[:1])] == ["django/django"]
