"""Docker images for tasks: one base image, one image per repository.

- `commit_tree(src, dest)` (from `commits`) makes the deterministic base commit of a source
  tree (the sha a task's `base_commit` must equal).
- `ensure_base_image()` builds `deepswe/base:<hash>` from Debian packages with
  debootstrap (no registry needed); the tag carries a hash of the recipe, so the
  image is rebuilt only when the recipe changes. `DEEPSWE_BASE_IMAGE=<image>`
  uses an existing local image instead (it must have python3, pytest, git, patch).
- `ensure_task_image(task)` builds `task.image` FROM the base with the task's
  `source` committed at /testbed; labels record the source commit and base image
  id, so an up-to-date image is reused as is.

Builds take a file lock, so concurrent processes never build the same image twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors

from deepswe_jax.env.commits import CommitError, commit_tree
from deepswe_jax.env.commits import source_commit as source_commit  # re-exported
from deepswe_jax.env.docker.hosts import default_client
from deepswe_jax.env.tasks import Task

BASE_REPOSITORY = "deepswe/base"
BASE_SUITE = "bookworm"
BASE_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-pytest", "git", "patch", "procps")
# Bump when the way images are made changes, so cached images are rebuilt.
RECIPE_VERSION = "1"
BASE_IMAGE_ENV = "DEEPSWE_BASE_IMAGE"
LABEL_RECIPE = "deepswe.recipe"
LABEL_SOURCE_COMMIT = "deepswe.source_commit"
LABEL_BASE_IMAGE = "deepswe.base_image"
TESTBED = "/testbed"

Progress = Callable[[str], None]


class ImageBuildError(RuntimeError):
    """An image could not be built or does not match its task."""


def _print_progress(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


def _lock_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    path = cache / "deepswe_jax" / "image-locks"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _build_lock(tag: str) -> Iterator[None]:
    """Exclusive lock per image tag, across threads and processes of this machine."""
    lock_file = _lock_dir() / (hashlib.sha256(tag.encode()).hexdigest()[:16] + ".lock")
    with open(lock_file, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _get_image(client: docker.DockerClient, tag: str):
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def base_image_tag() -> str:
    """`deepswe/base:<hash of the base recipe>`."""
    recipe = "\n".join([RECIPE_VERSION, BASE_SUITE, "minbase", *sorted(BASE_PACKAGES)])
    return f"{BASE_REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def ensure_base_image(
    client: docker.DockerClient | None = None, *, progress: Progress | None = None
) -> str:
    """Return the tag of the base image, building it with debootstrap if it is missing.

    The base is Debian bookworm minbase plus python3, python3-pytest, git, patch
    and procps. Set `DEEPSWE_BASE_IMAGE` to use an existing local image instead.
    Building needs root, `debootstrap` and access to deb.debian.org (about a minute).
    """
    client = client or default_client()
    progress = progress or _print_progress
    override = os.environ.get(BASE_IMAGE_ENV)
    if override:
        if _get_image(client, override) is None:
            raise ImageBuildError(
                f"{BASE_IMAGE_ENV}={override} but no such local image; build or load it, or unset "
                f"{BASE_IMAGE_ENV} to build the base with debootstrap"
            )
        return override
    tag = base_image_tag()
    if _get_image(client, tag) is not None:
        return tag
    with _build_lock(tag):
        if _get_image(client, tag) is None:
            _build_base_image(client, tag, progress)
    return tag


def _build_base_image(client: docker.DockerClient, tag: str, progress: Progress) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None or os.geteuid() != 0:
        raise ImageBuildError(
            f"base image {tag} is missing and cannot be built here: building needs root and "
            "debootstrap (apt-get install debootstrap). Alternatively set "
            f"{BASE_IMAGE_ENV} to a local image with python3, pytest, git and patch."
        )
    with tempfile.TemporaryDirectory(prefix="deepswe-base-") as scratch:
        root = Path(scratch) / "root"
        progress(f"building base image {tag}: debootstrap {BASE_SUITE} minbase (about a minute)")
        result = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                BASE_SUITE,
                str(root),
                BASE_MIRROR,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ImageBuildError(
                f"debootstrap failed while building {tag} (is {BASE_MIRROR} reachable?):\n"
                f"{(result.stdout + result.stderr)[-3000:]}"
            )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / cache, ignore_errors=True)
        # Images may be used by other uids than the one that owns /testbed.
        (root / "etc" / "gitconfig").write_text("[safe]\n\tdirectory = *\n")
        progress(f"importing {tag} into Docker")
        rootfs = Path(scratch) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(rootfs), "."], check=True)
        repository, version = tag.rsplit(":", 1)
        client.api.import_image_from_file(
            str(rootfs),
            repository=repository,
            tag=version,
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                f"LABEL {LABEL_RECIPE}={RECIPE_VERSION}",
                'CMD ["/bin/bash"]',
            ],
        )
    progress(f"built base image {tag}")


def ensure_task_image(
    task: Task, client: docker.DockerClient | None = None, *, progress: Progress | None = None
) -> str:
    """Return `task.image`, building it from `task.source` if it is missing or out of date.

    The image is the base image plus the source tree committed (see `commit_tree`)
    at /testbed. It is up to date when its labels record the same source commit,
    base image id and recipe version. Tasks without `source` must have their image
    present locally (e.g. pulled from a registry).

    Raises:
      ImageBuildError: the source does not commit to `task.base_commit`, or the
        build failed, or an image without source is missing.
    """
    client = client or default_client()
    progress = progress or _print_progress
    if task.source is None:
        if _get_image(client, task.image) is None:
            raise ImageBuildError(
                f"image {task.image} for task {task.instance_id} is not present and the task has no "
                f"'source' to build it from; pull or load it (docker pull {task.image})"
            )
        return task.image
    base_tag = ensure_base_image(client, progress=progress)
    base_id = client.images.get(base_tag).id
    with tempfile.TemporaryDirectory(prefix="deepswe-task-image-") as context:
        context = Path(context)
        try:
            sha = commit_tree(task.source, context / "testbed")
        except CommitError as e:
            raise ImageBuildError(f"task {task.instance_id}: {e}") from e
        if sha != task.base_commit:
            raise ImageBuildError(
                f"task {task.instance_id}: source {task.source} commits to {sha}, but base_commit is "
                f"{task.base_commit}; the source tree changed since the task was written. Set "
                f"base_commit to {sha} (and check the patch and test_patch still apply)."
            )
        labels = {LABEL_RECIPE: RECIPE_VERSION, LABEL_SOURCE_COMMIT: sha, LABEL_BASE_IMAGE: base_id}
        if _labels_match(client, task.image, labels):
            return task.image
        with _build_lock(task.image):
            if _labels_match(client, task.image, labels):
                return task.image
            progress(f"building {task.image} from {task.source} (base commit {sha[:12]})")
            (context / "Dockerfile").write_text(
                f"FROM {base_id}\n"
                f"COPY testbed {TESTBED}\n"
                f"WORKDIR {TESTBED}\n"
                # The index still holds host file stats; refresh it so `git status` is clean and fast.
                'RUN git update-index -q --refresh && test -z "$(git status --porcelain)"\n'
            )
            try:
                client.images.build(
                    path=str(context), tag=task.image, labels=labels, rm=True, forcerm=True
                )
            except docker.errors.BuildError as e:
                log = "".join(
                    str(chunk.get("stream", chunk.get("error", ""))) for chunk in e.build_log
                )
                raise ImageBuildError(f"building {task.image} failed:\n{log[-3000:]}") from e
    built_commit = image_base_commit(task.image, client)
    if built_commit != task.base_commit:
        raise ImageBuildError(
            f"image {task.image} has {TESTBED} at {built_commit}, expected base_commit {task.base_commit}"
        )
    progress(f"built {task.image}")
    return task.image


def _labels_match(client: docker.DockerClient, tag: str, labels: dict[str, str]) -> bool:
    image = _get_image(client, tag)
    if image is None:
        return False
    present = image.labels or {}
    return all(present.get(key) == value for key, value in labels.items())


def image_base_commit(image: str, client: docker.DockerClient | None = None) -> str:
    """The commit checked out at /testbed in `image` (runs a throwaway container)."""
    client = client or default_client()
    output = client.containers.run(
        image,
        ["git", "-C", TESTBED, "rev-parse", "HEAD"],
        remove=True,
        network_disabled=True,
        labels={"deepswe.run": "image-check"},
    )
    return output.decode().strip()


def ensure_task_images(
    tasks: Iterable[Task],
    client: docker.DockerClient | None = None,
    *,
    progress: Progress | None = None,
) -> list[str]:
    """Build every missing or outdated image of `tasks` (one per distinct image); return the tags.

    Raises ImageBuildError when two tasks name the same image with different sources, and,
    before building anything, when images of tasks without `source` are missing (naming them).
    """
    client = client or default_client()
    by_image: dict[str, Task] = {}
    for task in tasks:
        other = by_image.setdefault(task.image, task)
        if other.source != task.source or other.base_commit != task.base_commit:
            raise ImageBuildError(
                f"tasks {other.instance_id} and {task.instance_id} share image {task.image} but have "
                "different source or base_commit; give them distinct image tags"
            )
    missing = [
        task
        for task in by_image.values()
        if task.source is None and not _get_image(client, task.image)
    ]
    if missing:
        names = ", ".join(f"{task.image} (task {task.instance_id})" for task in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ImageBuildError(
            f"{len(missing)} task image(s) are not present and their tasks have no 'source' to "
            f"build them from: {names}{more}; pull or load them (docker pull <image>), or give "
            "the tasks a 'source'"
        )
    ensure_base_image(client, progress=progress)
    return [ensure_task_image(task, client, progress=progress) for task in by_image.values()]
