"""Images in the official benchmarks' layouts, built from a local repository on our Debian base
image (no registry, no network), so that SWE-bench and R2E-Gym rows can be written for any
repository and graded the way those harnesses grade them (`launch/build_images.py --layout`).

    built = build_layout_image("swebench", "path/to/repo", "myorg/widgets:base",
                               packages=["path/to/site-packages/attrs"])
    built.base_commit   # the row's base_commit

swebench   /testbed at the base commit; /opt/miniconda3 with `bin/activate` and `conda activate`
           (a stand-in for conda: `conda_standin/`, enough for SWE-bench's eval scripts and
           .bashrc), the base environment on PATH and a `testbed` environment (a venv over the
           image's python3 and its pytest) holding `packages` and the repository installed in it
           (a .pth file, as `pip install -e .` writes), activated in /root/.bashrc.
r2egym     /testbed at the base commit with the repository's venv at /testbed/.venv (untracked)
           holding `packages`, the runner /testbed/run_tests.sh (R2E-Gym's: pytest -rA over
           r2e_tests) and the hidden tests `r2e_tests` at /r2e_tests.

The repository is either a git checkout (cloned at `commit`, so the row's base_commit is the
repository's own) or a plain folder (committed as one commit, `commits.commit_tree`). An image is
rebuilt only when its build context changed (the `deepswe.context` label holds its hash).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepswe_jax.env.commits import commit_tree
from deepswe_jax.env.docker.images import ImageBuildError, default_client, ensure_base_image

LAYOUT_IMAGE_KINDS = ("swebench", "r2egym")
CONDA_STANDIN = Path(__file__).parent / "conda_standin"
LABEL_CONTEXT = "deepswe.context"
# R2E-Gym's runner: the repository's venv runs pytest over the hidden tests moved into /testbed.
R2E_RUN_TESTS = (
    "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "
    ".venv/bin/python -W ignore -m pytest -rA r2e_tests\n"
)

# Makes a venv by hand (the base has no ensurepip) at $env holding the folders of /tmp/deps.
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
class LayoutImage:
    """A built image and the commit its /testbed is at (the row's base_commit)."""

    image: str
    base_commit: str


def build_context_image(client: Any, tag: str, dockerfile: str, files: dict[str, Path]) -> str:
    """Builds `tag` from `dockerfile` and `files` ({path in the context: file or folder}) unless
    the image there was built from the same context (its `deepswe.context` label)."""
    import docker

    with tempfile.TemporaryDirectory(prefix="deepswe-layout-") as scratch:
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
        hashed = (p for p in context.rglob("*") if p.is_file() and ".git" not in p.parts)
        for path in sorted(hashed):
            digest.update(f"{path.relative_to(context)}\0{path.stat().st_mode & 0o111}\0".encode())
            digest.update(path.read_bytes())
        label = digest.hexdigest()[:16]
        try:
            if client.images.get(tag).labels.get(LABEL_CONTEXT) == label:
                return tag
        except docker.errors.ImageNotFound:
            pass
        try:
            client.images.build(
                path=str(context), tag=tag, labels={LABEL_CONTEXT: label}, rm=True, forcerm=True
            )
        except docker.errors.BuildError as e:
            log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in e.build_log)
            raise ImageBuildError(f"building {tag} failed:\n{log[-3000:]}") from e
    return tag


def checkout(repository: str | Path, dest: Path, commit: str | None = None) -> str:
    """`repository` at `dest`: a git checkout cloned at `commit` (default HEAD), else the folder
    committed as one commit; returns the commit."""
    repository = Path(repository).resolve()
    if not repository.is_dir():
        raise FileNotFoundError(f"repository {repository} is not a directory")
    if not (repository / ".git").exists():
        if commit is not None:
            raise ValueError(f"{repository} is not a git checkout, so it has no commit {commit}")
        return commit_tree(repository, dest)
    subprocess.run(["git", "clone", "-q", str(repository), str(dest)], check=True)
    git = ["git", "-C", str(dest)]
    subprocess.run([*git, "checkout", "-q", "--detach", commit or "HEAD"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def build_layout_image(
    layout: str,
    repository: str | Path,
    image: str,
    *,
    packages: Sequence[str | Path] = (),
    r2e_tests: str | Path | None = None,
    commit: str | None = None,
    name: str | None = None,
    client: Any = None,
    base_image: str | None = None,
) -> LayoutImage:
    """Builds `image` in `layout` (module docstring) from `repository` (at `commit`).

    packages: folders (importable packages or modules) put in the repository's environment.
    r2e_tests: the hidden tests' folder, required for r2egym. name: the installed package's
    name in swebench's editable-install files (default: the repository folder's name).
    base_image: the image to build on (default: our Debian base, built when missing).
    """
    if layout not in LAYOUT_IMAGE_KINDS:
        raise ValueError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUT_IMAGE_KINDS)}")
    if (layout == "r2egym") != (r2e_tests is not None):
        raise ValueError(
            "r2e_tests (the hidden tests' folder) is needed for r2egym, and only there"
        )
    client = client or default_client()
    base = base_image or ensure_base_image(client)
    name = name or Path(repository).resolve().name
    with tempfile.TemporaryDirectory(prefix="deepswe-layout-repo-") as scratch:
        testbed = Path(scratch) / "testbed"
        base_commit = checkout(repository, testbed, commit)
        files = {"testbed": testbed, "deps": Path(scratch) / "deps"}
        files["deps"].mkdir()
        for package in map(Path, packages):
            if not package.exists():
                raise FileNotFoundError(f"package {package} does not exist")
            files[f"deps/{package.name}"] = package
        if layout == "swebench":
            dockerfile = SWEBENCH_DOCKERFILE.format(base=base, make_venv=MAKE_VENV, name=name)
            files["conda"] = CONDA_STANDIN
        else:
            dockerfile = R2E_DOCKERFILE.format(base=base, make_venv=MAKE_VENV)
            files["r2e_tests"] = Path(r2e_tests)
            files["run_tests.sh"] = Path(scratch) / "run_tests.sh"
            files["run_tests.sh"].write_text(R2E_RUN_TESTS)
        build_context_image(client, image, dockerfile, files)
    return LayoutImage(image, base_commit)
