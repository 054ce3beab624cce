"""Shared Docker fixtures for environment tests.

- `docker_client`: a client of the local engine; tests fail (never skip) when none answers.
- `base_image`: tag of the base image (built once with debootstrap when missing).
- `run_label`: label value for this session's containers; they are removed at the end.
- `tiny_task` / `tiny_files`: a one-bug repository built in a temp dir (image built) and its files.
- every test starts with no cached environment probe (`verdict_guards` caches one per image and
  process), so what a test sees does not depend on the tests its process ran before.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import docker
import pytest

from deepswe_jax.env.docker.images import commit_tree, ensure_base_image, ensure_task_image
from deepswe_jax.env.grading import verdict_guards
from deepswe_jax.env.tasks import Task, unified_diff

TINY_IMAGE = "deepswe-test/tinycalc:base"


@pytest.fixture(autouse=True)
def no_cached_environment_probes(monkeypatch):
    # Stop 26's CI: a test asserting the grading commands failed only on a worker where no
    # earlier test had probed its image.
    monkeypatch.setattr(verdict_guards, "_environments", {})


TINY_FILES = {
    "README.md": "tinycalc: a calculator with one bug.\n",
    "pyproject.toml": '[project]\nname = "tinycalc"\nversion = "0.1"\n',
    "tinycalc/__init__.py": textwrap.dedent(
        """\
        def add(a, b):
            return a - b


        def mul(a, b):
            return a * b
        """
    ),
    "tests/test_calc.py": textwrap.dedent(
        """\
        from tinycalc import mul


        def test_mul():
            assert mul(2, 3) == 6
        """
    ),
}

TINY_GOLD_PATCH = """\
diff --git a/tinycalc/__init__.py b/tinycalc/__init__.py
--- a/tinycalc/__init__.py
+++ b/tinycalc/__init__.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def mul(a, b):
"""

TINY_TESTS_AFTER = textwrap.dedent(
    """\
    import pytest

    from tinycalc import add, mul


    def test_mul():
        assert mul(2, 3) == 6


    def test_add():
        assert add(2, 3) == 5


    @pytest.mark.parametrize("a,b", [("a b", "c d")])
    def test_add_strings(a, b):
        assert add(a, b) == a + b
    """
)
TINY_TEST_PATCH = unified_diff(
    "tests/test_calc.py", TINY_FILES["tests/test_calc.py"], TINY_TESTS_AFTER
)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: text} under root; return root."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        pytest.fail(
            f"no Docker engine answers ({e}); environment tests need one: start dockerd "
            "(.ci/run does this) or set DOCKER_HOST",
            pytrace=False,
        )
    return client


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    return ensure_base_image(docker_client)


@pytest.fixture(scope="session")
def run_label(docker_client: docker.DockerClient):
    label = f"pytest-{uuid.uuid4().hex[:10]}"
    yield label
    for container in docker_client.containers.list(
        all=True, filters={"label": f"deepswe.run={label}"}
    ):
        container.remove(force=True)


@pytest.fixture(scope="session")
def tiny_files() -> dict[str, str]:
    """{relative path: text} of the tiny repository at its base commit."""
    return dict(TINY_FILES)


@pytest.fixture(scope="session")
def tiny_task(tmp_path_factory, docker_client: docker.DockerClient, base_image: str) -> Task:
    """tinycalc: `add` subtracts. F2P: test_add and a parametrized id with spaces; P2P: test_mul."""
    source = write_tree(tmp_path_factory.mktemp("tinycalc") / "tinycalc", TINY_FILES)
    base_commit = commit_tree(source, tmp_path_factory.mktemp("tinycalc-commit") / "tree")
    task = Task(
        instance_id="tinycalc-1",
        repo="deepswe/tinycalc",
        base_commit=base_commit,
        problem_statement="add(2, 3) returns -1 instead of 5.",
        patch=TINY_GOLD_PATCH,
        test_patch=TINY_TEST_PATCH,
        FAIL_TO_PASS=(
            "tests/test_calc.py::test_add",
            "tests/test_calc.py::test_add_strings[a b-c d]",
        ),
        PASS_TO_PASS=("tests/test_calc.py::test_mul",),
        image=TINY_IMAGE,
        source=str(source),
    )
    ensure_task_image(task, docker_client)
    return task
