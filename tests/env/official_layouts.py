"""Small images with the official layouts, built from the repositories in layout_images/ by
`deepswe_jax.env.docker.official_images.build_layout_image` (what `launch/build_images.py --layout`
runs), and the task rows that go with them (tests/env/test_layouts.py).

SWE-bench-style (one image per row, like swebench's instance images; the layout is described in
official_images): the rows are swebench >= 5 rows: their eval_script has the shape of the
dataset's (activation, reset of the test files, test patch in a heredoc, the test command
between the ">>>>> Start/End Test Output" markers).

  django   Django-shaped: tests/runtests.py with module labels, Django's verbose unittest output,
           ids like "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)".
  sympy    sympy-shaped: bin/test -C --verbose.
  textfmt  pytest with parametrized ids that contain spaces (the dataset keeps them cut at the
           first space, as swebench's pytest parser reads them).

R2E-Gym-style (`r2e_row`): /testbed with the repository's venv at /testbed/.venv (untracked), the
runner /testbed/run_tests.sh and hidden tests at /r2e_tests; the row is an R2E-Gym-Subset row
whose parsed_commit_content adds a new test file (old_file_content "") and whose
expected_output_json is the status map R2E-Gym records for the gold patch.

Images are labelled with a hash of their build context, so they are built once per content change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import docker

from deepswe_jax.env.docker.official_images import build_layout_image
from deepswe_jax.env.tasks import Task, load_tasks, unified_diff

SOURCES = Path(__file__).parent / "layout_images"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
HEREDOC = "EOF_114329324912"


@dataclass(frozen=True)
class Row:
    """One task of a layout image: the row to load, and patches to grade against it."""

    task: Task
    wrong_patch: str
    dependency: str  # importable in the repository's environment only
    edit_path: str  # a source file the agent edits


def _edit(name: str, path: str, old: str, new: str, count: int = -1) -> str:
    """A patch replacing `old` by `new` (`count` times, -1: all) in repos/<name>/<path>."""
    text = (SOURCES / "repos" / name / path).read_text()
    assert old in text, (name, path, old)
    return unified_diff(path, text, text.replace(old, new, count))


def eval_script(base_commit: str, test_files: list[str], test_patch: str, test_cmd: str) -> str:
    """An eval script of the shape swebench >= 5 datasets carry (and swebench < 5 made)."""
    files = " ".join(test_files)
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        "cd /testbed",
        "git config --global --add safe.directory /testbed",
        "cd /testbed",
        "git status",
        f"git -c core.fileMode=false diff {base_commit}",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        f"git checkout {base_commit} {files}",
        f"git apply -v - <<'{HEREDOC}'\n{test_patch}{HEREDOC}",
        f": '{START}'",
        test_cmd,
        f": '{END}'",
        f"git checkout {base_commit} {files}",
    ]
    return "\n".join(lines) + "\n"


def _swebench_row(
    client: docker.DockerClient,
    base_image: str,
    name: str,
    *,
    repo: str,
    dependency: str,
    edit_path: str,
    gold: str,
    wrong: str,
    test_patch: str,
    test_cmd: str,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    log_parser: str,
) -> Row:
    built = build_layout_image(
        "swebench",
        SOURCES / "repos" / name,
        f"deepswe-test/swebench-{name}:latest",
        packages=[SOURCES / "deps" / dependency],
        client=client,
        base_image=base_image,
    )
    image, base_commit = built.image, built.base_commit
    test_files = sorted({line[6:] for line in test_patch.splitlines() if line.startswith("+++ b/")})
    row = {
        "repo": repo,
        "instance_id": f"{repo.replace('/', '__')}-{name}",
        "base_commit": base_commit,
        "patch": gold,
        "test_patch": test_patch,
        "problem_statement": f"{name}: see the failing tests",
        "version": "0.0",
        "FAIL_TO_PASS": json.dumps(fail_to_pass),
        "PASS_TO_PASS": json.dumps(pass_to_pass),
        "image": image,
        "eval_script": eval_script(base_commit, test_files, test_patch, test_cmd),
        "log_parser": log_parser,
        "eval_type": "pass_and_fail",
    }
    (task,) = load_tasks([row])
    return Row(task, wrong, dependency, edit_path)


def django_row(client: docker.DockerClient, base_image: str) -> Row:
    """Django-shaped: a username regex that accepts a trailing newline (django__django-11099)."""
    path, old, new = "django/contrib/auth/validators.py", r'r"^[\w.@+-]+$"', r'r"\A[\w.@+-]+\Z"'
    return _swebench_row(
        client,
        base_image,
        "django",
        repo="django/django",
        dependency="asgiref",
        edit_path=path,
        gold=_edit("django", path, old, new),
        wrong=_edit("django", path, old, new, count=1),  # fixes ASCII only: partially resolved
        test_patch=_edit(
            "django",
            "tests/auth_tests/test_validators.py",
            '"o\'connell",',
            '"trailingnewline\\n", "o\'connell",',
        ),
        test_cmd="./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
        "auth_tests.test_validators",
        fail_to_pass=[
            "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)",
            "test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)",
        ],
        pass_to_pass=["test_validate (auth_tests.test_validators.MinimumLengthValidatorTest)"],
        log_parser="parse_log_django",
    )


def sympy_row(client: docker.DockerClient, base_image: str) -> Row:
    """sympy-shaped: nextprime(p) returns p itself for a prime p."""
    path = "sympy/ntheory/primes.py"
    test_patch = _edit(
        "sympy",
        "sympy/ntheory/tests/test_primes.py",
        "    assert nextprime(8) == 11\n",
        "    assert nextprime(8) == 11\n\n\ndef test_nextprime_of_prime():\n"
        "    assert nextprime(7) == 11\n",
    )
    return _swebench_row(
        client,
        base_image,
        "sympy",
        repo="sympy/sympy",
        dependency="mpmath",
        edit_path=path,
        gold=_edit("sympy", path, "candidate = n\n", "candidate = n + 1\n"),
        wrong=_edit("sympy", path, "candidate = n\n", "candidate = n - 1\n"),
        test_patch=test_patch,
        test_cmd="PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C "
        "--verbose sympy/ntheory/tests/test_primes.py",
        fail_to_pass=["test_nextprime_of_prime"],
        pass_to_pass=["test_isprime", "test_nextprime_of_composite"],
        log_parser="parse_log_sympy",
    )


def textfmt_row(client: docker.DockerClient, base_image: str) -> Row:
    """pytest with spaces in parametrized ids: pad() does not count spaces. The ids are cut at
    the first space, as SWE-bench Verified keeps hundreds of its ids."""
    path = "textfmt/__init__.py"
    test_patch = _edit(
        "textfmt",
        "tests/test_fmt.py",
        "def test_pad_single_word():",
        '@pytest.mark.parametrize("text", ["a b", "hello world"])\n'
        "def test_pad_counts_spaces(text):\n"
        "    assert len(pad(text, 12)) == 12\n\n\n"
        "def test_pad_single_word():",
    )
    return _swebench_row(
        client,
        base_image,
        "textfmt",
        repo="deepswe/textfmt",
        dependency="wcwidth",
        edit_path=path,
        gold=_edit("textfmt", path, 'wcswidth(text.replace(" ", ""))', "wcswidth(text)"),
        wrong=_edit("textfmt", path, 'wcswidth(text.replace(" ", ""))', "wcswidth(text) + 1"),
        test_patch=test_patch,
        test_cmd="pytest -rA tests/test_fmt.py",
        fail_to_pass=[
            "tests/test_fmt.py::test_pad_counts_spaces[a",
            "tests/test_fmt.py::test_pad_counts_spaces[hello",
        ],
        pass_to_pass=[
            "tests/test_fmt.py::test_pad_single_word",
            "tests/test_fmt.py::test_pad_wider_than_field[too",
        ],
        log_parser="parse_log_pytest",
    )


SWEBENCH_ROWS = {"django": django_row, "sympy": sympy_row, "textfmt": textfmt_row}


def r2e_row(client: docker.DockerClient, base_image: str) -> Row:
    """R2E-Gym-style: tinyini's parser does not skip ';' comments. The commit adds a new test
    file; the hidden tests in /r2e_tests include an xfail test, which R2E-Gym does not record."""
    built = build_layout_image(
        "r2egym",
        SOURCES / "repos" / "tinyini",
        "deepswe-test/r2e-tinyini:latest",
        packages=[SOURCES / "deps" / "tomlkit"],
        r2e_tests=SOURCES / "r2e" / "r2e_tests",
        client=client,
        base_image=base_image,
    )
    image, base_commit = built.image, built.base_commit
    path = "tinyini/__init__.py"
    old_code = (SOURCES / "repos" / "tinyini" / path).read_text()
    new_code = old_code.replace('line.startswith("#")', 'line.startswith(("#", ";"))')
    new_test = (
        "from tinyini import parse\n\n\ndef test_semicolon_comment():\n"
        '    assert parse("; c\\n[a]\\n")["a"] == {}\n'
    )
    commit = {
        "old_commit_hash": base_commit,
        "new_commit_hash": "f" * 40,
        "commit_message": "Skip ';' comments",
        "commit_date": "2024-01-02T00:00:00",
        "file_diffs": [
            {
                "header": {"file": {"path": path}},
                "minus_file": {"path": f"a/{path}"},
                "plus_file": {"path": f"b/{path}"},
                "old_file_content": old_code,
                "new_file_content": new_code,
            },
            {  # a new file: R2E-Gym leaves old_file_content empty
                "header": {"file": {"path": "tests/test_comments.py"}},
                "old_file_content": "",
                "new_file_content": new_test,
            },
        ],
    }
    expected = {
        "test_hash_comment": "PASSED",
        "test_semicolon_comment": "PASSED",
        "TestSections.test_empty_section": "PASSED",
    }
    row = {
        "repo_name": "tinyini",
        "docker_image": image,
        "commit_hash": "f" * 40,
        "parsed_commit_content": json.dumps(commit),
        "execution_result_content": "{}",
        "modified_files": [path],
        "relevant_files": [path],
        "problem_statement": "[ISSUE]\nComments starting with ';' are read as keys.\n[/ISSUE]",
        "expected_output_json": json.dumps(expected),
        "prompt": "",
    }
    (task,) = load_tasks([row])
    wrong_code = old_code.replace('line.startswith("#")', 'line.startswith(("#", "; "))')
    wrong = unified_diff(path, old_code, wrong_code)
    return Row(task, wrong, "tomlkit", path)
