"""What swebench 4.x knew per repository to build an eval script, for rows from before swebench 5
(no `eval_script` in the row). swebench 5 dropped these tables; the values here are swebench
4.x's (`swebench/harness/constants/python.py`: TEST_* commands and SPECS_<REPO>'s `test_cmd`,
`eval_commands`, `install`; `swebench/harness/test_spec/python.py`: `get_test_directives`),
for the repositories whose tests are not plain `pytest -rA`.

    spec = repo_spec("django/django", "3.0")
    command = " ".join([spec.test_cmd, *test_directives("django/django", test_patch)])

Not reproduced: `pre_install` and environment setup (they built the image, which exists).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# swebench 4.x constants/python.py; TEST_PYTEST is defined twice there and "pytest -rA" wins.
TEST_PYTEST = "pytest -rA"
TEST_ASTROPY_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no"
TEST_DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
TEST_DJANGO_NO_PARALLEL = "./tests/runtests.py --verbosity 2"
TEST_SEABORN = "pytest --no-header -rA"
TEST_SPHINX = "tox --current-env -epy39 -v --"
TEST_SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

# SPECS_DJANGO's eval_commands: 1.7-2.2 export a UTF-8 locale, 3.0-3.2 also generate it.
_DJANGO_LOCALE = (
    "export LANG=en_US.UTF-8",
    "export LC_ALL=en_US.UTF-8",
    "export PYTHONIOENCODING=utf8",
    "export LANGUAGE=en_US:en",
)
_DJANGO_LOCALE_GEN = (
    "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen",
    "export LANG=en_US.UTF-8",
    "export LANGUAGE=en_US:en",
    "export LC_ALL=en_US.UTF-8",
)
# swebench 4.x get_test_directives: the files a test patch touches (`diff --git` targets); a
# patch without git headers names them in its `+++ b/` lines.
_DIFF_GIT_TARGET = re.compile(r"diff --git a/.* b/(.*)")
_PLUS_TARGET = re.compile(r"^\+\+\+ b/(.*?)(?:\t.*)?$", re.MULTILINE)


@dataclass(frozen=True)
class RepoSpec:
    """How swebench 4.x ran one repository version's tests: `test_cmd` (directives appended),
    `eval_commands` run before it, `install` re-run so the tests see the patched code."""

    test_cmd: str
    eval_commands: tuple[str, ...] = ()
    install: str = ""


def _django(version: str) -> RepoSpec:
    test_cmd = TEST_DJANGO_NO_PARALLEL if version == "1.9" else TEST_DJANGO
    if version in ("1.4", "1.5", "1.6"):
        return RepoSpec(test_cmd, install="python setup.py install")
    if version in ("1.7", "1.8", "1.9", "1.10", "1.11", "2.0", "2.1", "2.2"):
        return RepoSpec(test_cmd, _DJANGO_LOCALE, "python setup.py install")
    if version in ("3.0", "3.1", "3.2"):
        return RepoSpec(test_cmd, _DJANGO_LOCALE_GEN, "python -m pip install -e .")
    return RepoSpec(test_cmd, install="python -m pip install -e .")  # 4.0 and later


def repo_spec(repo: str, version: str) -> RepoSpec | None:
    """swebench 4.x's spec of `repo` at `version` where it is not plain pytest; None else."""
    if repo == "django/django":
        return _django(version)
    if repo == "sympy/sympy":
        return RepoSpec(TEST_SYMPY, install="python -m pip install -e .")
    if repo == "astropy/astropy":
        return RepoSpec(TEST_ASTROPY_PYTEST)
    if repo == "mwaskom/seaborn":
        return RepoSpec(TEST_SEABORN)
    if repo == "sphinx-doc/sphinx":
        return RepoSpec(TEST_SPHINX)
    return None


def eval_directives(repo: str, test_patch: str, non_test_exts: tuple[str, ...]) -> list[str]:
    """swebench 4.x get_test_directives: the test patch's files without data files
    (`non_test_exts`); for Django, module labels (tests/a/b.py -> a.b) as runtests.py takes."""
    targets = _DIFF_GIT_TARGET.findall(test_patch) or _PLUS_TARGET.findall(test_patch)
    paths = [p for p in targets if not p.endswith(non_test_exts)]
    if repo != "django/django":
        return paths
    labels = []
    for path in paths:
        path = path.removesuffix(".py")
        path = path.removeprefix("tests/")
        labels.append(path.replace("/", "."))
    return labels
