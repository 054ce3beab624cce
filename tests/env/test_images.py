"""Image building: deterministic base commits, cached base and task images, rebuild on change."""

import dataclasses
import os
import shutil
import subprocess
import threading

import docker
import pytest

from deepswe_jax.env.docker.images import (
    LABEL_SOURCE_COMMIT,
    ImageBuildError,
    commit_tree,
    ensure_base_image,
    ensure_task_image,
    ensure_task_images,
    image_base_commit,
    source_commit,
)


def write_tree(root, files):
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def contract_commit(tree):
    """The base commit exactly as CONTRACTS.md describes it, with plain git commands."""
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    git = ["git", "-c", "user.name=deepswe", "-c", "user.email=deepswe@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=tree, env=env, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tree, env=env, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], cwd=tree, env=env, check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], cwd=tree, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_commit_tree_is_the_contract_commit_whatever_the_git_config(
    tmp_path, tiny_files, monkeypatch
):
    source = write_tree(tmp_path / "src", tiny_files)
    (source / "tinycalc" / "__pycache__").mkdir()
    (source / "tinycalc" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    expected = contract_commit(write_tree(tmp_path / "plain", tiny_files))
    (tmp_path / "gitconfig").write_text("[user]\n\tname = someone\n[commit]\n\tgpgsign = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "someone else")
    sha = commit_tree(source, tmp_path / "dest")
    assert sha == expected == source_commit(source)
    assert not (tmp_path / "dest" / "tinycalc" / "__pycache__").exists()
    assert (tmp_path / "dest" / "tinycalc" / "__init__.py").read_text() == tiny_files[
        "tinycalc/__init__.py"
    ]
    os.chmod(source / "README.md", 0o755)
    assert source_commit(source) != sha  # modes are part of the content
    with pytest.raises(FileExistsError):
        commit_tree(source, tmp_path / "dest")


def test_base_image_is_cached(docker_client, base_image):
    first = docker_client.images.get(base_image).id
    assert ensure_base_image(docker_client) == base_image
    assert docker_client.images.get(base_image).id == first
    versions = docker_client.containers.run(
        base_image,
        ["bash", "-c", "python3 -m pytest --version && git --version && patch --version"],
        remove=True,
    ).decode()
    assert "git version" in versions and "GNU patch" in versions


def test_task_image_holds_the_base_commit_and_is_reused(tiny_task, docker_client):
    image = docker_client.images.get(tiny_task.image)
    assert image.labels[LABEL_SOURCE_COMMIT] == tiny_task.base_commit
    assert image_base_commit(tiny_task.image, docker_client) == tiny_task.base_commit
    status = docker_client.containers.run(
        tiny_task.image, ["git", "status", "--porcelain"], remove=True
    )
    assert status == b""  # /testbed is exactly the base commit
    messages = []
    assert ensure_task_image(tiny_task, docker_client, progress=messages.append) == tiny_task.image
    assert docker_client.images.get(tiny_task.image).id == image.id
    assert messages == []


@pytest.fixture
def scratch_tag(docker_client):
    tag = "deepswe-test/rebuild:base"
    yield tag
    try:
        docker_client.images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass


def test_changed_source_is_rebuilt_once_and_checked_against_base_commit(
    tiny_task, tmp_path, docker_client, scratch_tag
):
    source = tmp_path / "src"
    shutil.copytree(tiny_task.source, source)
    (source / "tinycalc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    stale = dataclasses.replace(tiny_task, image=scratch_tag, source=str(source))
    new_commit = source_commit(source)
    with pytest.raises(
        ImageBuildError,
        match=f"commits to {new_commit}, but base_commit is {tiny_task.base_commit}",
    ):
        ensure_task_image(stale, docker_client)

    task = dataclasses.replace(stale, base_commit=new_commit)
    messages = []
    threads = [
        threading.Thread(
            target=ensure_task_image,
            args=(task, docker_client),
            kwargs={"progress": messages.append},
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (
        sum(message.startswith("building") for message in messages) == 1
    )  # the lock let one build
    first_id = docker_client.images.get(scratch_tag).id
    assert image_base_commit(scratch_tag, docker_client) == new_commit

    (source / "NEWS").write_text("changed\n")
    changed = dataclasses.replace(task, base_commit=source_commit(source))
    ensure_task_image(changed, docker_client, progress=messages.append)
    assert docker_client.images.get(scratch_tag).id != first_id
    assert docker_client.images.get(scratch_tag).labels[LABEL_SOURCE_COMMIT] == changed.base_commit


def test_task_without_source_needs_its_image(tiny_task, docker_client):
    remote = dataclasses.replace(tiny_task, source=None, image="deepswe-test/not-built:base")
    with pytest.raises(ImageBuildError, match="docker pull deepswe-test/not-built:base"):
        ensure_task_image(remote, docker_client)
    assert (
        ensure_task_image(dataclasses.replace(tiny_task, source=None), docker_client)
        == tiny_task.image
    )


def test_tasks_sharing_an_image_must_share_the_source(tiny_task, tmp_path, docker_client):
    other = dataclasses.replace(tiny_task, instance_id="tinycalc-2", source=str(tmp_path))
    with pytest.raises(
        ImageBuildError, match="share image deepswe-test/tinycalc:base but have different source"
    ):
        ensure_task_images([tiny_task, other], docker_client)
    assert ensure_task_images(
        [tiny_task, dataclasses.replace(tiny_task, instance_id="tinycalc-2")], docker_client
    ) == [tiny_task.image]
