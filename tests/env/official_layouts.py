"""Small images with the official layouts, built here from the Debian base (no registry), and
the task rows that go with them (tests/env/test_layouts.py).

SWE-bench-style (one image per row, like swebench's instance images): /testbed at the base
commit, /opt/miniconda3 with `bin/activate` and `conda activate` stand-ins (layout_images/conda),
the base environment on PATH and a `testbed` environment (a venv) holding a dependency the base
lacks and the repository installed in it (a .pth file, as `pip install -e .` writes), `conda
activate testbed` in /root/.bashrc, and an untracked egg-info in /testbed as that install leaves. The rows are swebench >= 5 rows: their eval_script has the shape of
the dataset's (activation, reset of the test files, test patch in a heredoc, the test command
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

Images are tagged by a hash of their build context, so they are built once per content change.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker

from deepswe_jax.env.commits import commit_tree
from deepswe_jax.env.tasks import Task, load_tasks, unified_diff

SOURCES = Path(__file__).parent / "layout_images"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
HEREDOC = "EOF_114329324912"

# Makes a venv by hand (the base has no ensurepip) at $env holding the files of /tmp/deps.
MAKE_VENV = (
    "mkdir -p $env/bin && ln -s /usr/bin/python3 $env/bin/python3 && ln -s python3 $env/bin/python"
    " && printf 'home = /usr/bin\\ninclude-system-site-packages = true\\n' > $env/pyvenv.cfg"
    " && site=$($env/bin/python -c 'import site; print(site.getsitepackages()[0])')"
    ' && mkdir -p "$site" && cp -r /tmp/deps/. "$site/" && rm -rf /tmp/deps'
)
SWEBENCH_DOCKERFILE = """\
FROM {base}
COPY conda /opt/miniconda3
COPY deps /tmp/deps
RUN ln -s /usr/bin/python3 /opt/miniconda3/bin/python3 && ln -s python3 /opt/miniconda3/bin/python \\
 && env=/opt/miniconda3/envs/testbed && {make_venv} \\
 && echo /testbed > "$site/__editable__.{name}.pth" \\
 && printf '#!%s/bin/python\\nimport sys\\nimport pytest\\nsys.exit(pytest.console_main())\\n' $env \\
    > $env/bin/pytest && chmod +x $env/bin/pytest
COPY testbed /testbed
ENV PATH=/opt/miniconda3/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN echo 'source /opt/miniconda3/etc/profile.d/conda.sh && conda activate testbed' >> /root/.bashrc \\
 && mkdir -p /testbed/{name}.egg-info && echo 'Name: {name}' > /testbed/{name}.egg-info/PKG-INFO \\
 && git -C /testbed update-index -q --refresh
WORKDIR /testbed
"""
R2E_DOCKERFILE = """\
FROM {base}
COPY testbed /testbed
COPY r2e_tests /r2e_tests
COPY run_tests.sh /testbed/run_tests.sh
COPY deps /tmp/deps
RUN env=/testbed/.venv && {make_venv} && git -C /testbed update-index -q --refresh
WORKDIR /testbed
"""


@dataclass(frozen=True)
class Row:
    """One task of a layout image: the row to load, and patches to grade against it."""

    task: Task
    wrong_patch: str
    dependency: str  # importable in the repository's environment only
    edit_path: str  # a source file the agent edits


def build_image(
    client: docker.DockerClient, name: str, dockerfile: str, files: dict[str, Path]
) -> str:
    """`deepswe-test/<name>:<hash of the context>`, built from `dockerfile` and `files`
    ({path in the context: source file or folder}) unless an image with that tag exists."""
    with tempfile.TemporaryDirectory(prefix=f"deepswe-{name}-") as scratch:
        context = Path(scratch)
        for target, source in files.items():
            (context / target).parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, context / target, symlinks=True)
            else:
                shutil.copy2(source, context / target)
        (context / "Dockerfile").write_text(dockerfile)
        digest = hashlib.sha256()
        # testbed/.git holds file stats of this checkout; the files it commits are hashed.
        files_to_hash = (p for p in context.rglob("*") if p.is_file() and ".git" not in p.parts)
        for path in sorted(files_to_hash):
            digest.update(f"{path.relative_to(context)}\0{path.stat().st_mode & 0o111}\0".encode())
            digest.update(path.read_bytes())
        tag = f"deepswe-test/{name}:{digest.hexdigest()[:12]}"
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
    return tag


def _committed(name: str, scratch: Path) -> tuple[Path, str]:
    """The repository layout_images/repos/<name> committed (commits.commit_tree) in scratch."""
    tree = scratch / name
    return tree, commit_tree(SOURCES / "repos" / name, tree)


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
    scratch: Path,
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
    testbed, base_commit = _committed(name, scratch)
    dockerfile = SWEBENCH_DOCKERFILE.format(base=base_image, make_venv=MAKE_VENV, name=name)
    files = {
        "conda": SOURCES / "conda",
        f"deps/{dependency}": SOURCES / "deps" / dependency,
        "testbed": testbed,
    }
    image = build_image(client, f"swebench-{name}", dockerfile, files)
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


def django_row(client: docker.DockerClient, base_image: str, scratch: Path) -> Row:
    """Django-shaped: a username regex that accepts a trailing newline (django__django-11099)."""
    path, old, new = "django/contrib/auth/validators.py", r'r"^[\w.@+-]+$"', r'r"\A[\w.@+-]+\Z"'
    return _swebench_row(
        client,
        base_image,
        scratch,
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


def sympy_row(client: docker.DockerClient, base_image: str, scratch: Path) -> Row:
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
        scratch,
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


def textfmt_row(client: docker.DockerClient, base_image: str, scratch: Path) -> Row:
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
        scratch,
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


def r2e_row(client: docker.DockerClient, base_image: str, scratch: Path) -> Row:
    """R2E-Gym-style: tinyini's parser does not skip ';' comments. The commit adds a new test
    file; the hidden tests in /r2e_tests include an xfail test, which R2E-Gym does not record."""
    testbed, base_commit = _committed("tinyini", scratch)
    files = {
        "testbed": testbed,
        "r2e_tests": SOURCES / "r2e" / "r2e_tests",
        "run_tests.sh": SOURCES / "r2e" / "run_tests.sh",
        "deps/tomlkit": SOURCES / "deps" / "tomlkit",
    }
    dockerfile = R2E_DOCKERFILE.format(base=base_image, make_venv=MAKE_VENV)
    image = build_image(client, "r2e-tinyini", dockerfile, files)
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
