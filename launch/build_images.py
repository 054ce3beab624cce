"""Build task images: the base image and every missing or outdated image of a task file, or one
image in an official benchmark's layout from a local repository.

  python launch/build_images.py --tasks=tasks/tasks.jsonl

  # SWE-bench's layout (conda `testbed` env, /testbed at the base commit) or R2E-Gym's
  # (/testbed/.venv, run_tests.sh, hidden tests at /r2e_tests) from a checkout or a folder
  python launch/build_images.py --layout=swebench --repo=path/to/repo --image=me/widgets:base \\
      --packages=path/to/site-packages/attrs
  python launch/build_images.py --layout=r2egym --repo=path/to/repo --image=me/widgets:r2e \\
      --r2e_tests=path/to/hidden_tests

The layout build prints the image and the commit /testbed is at: the row's `image` and
`base_commit` (deepswe_jax.env.docker.official_images describes what each layout holds).
"""

import os
import sys

# Run as a script (python launch/build_images.py), the repository root is not on sys.path;
# deepswe_jax/ lives there.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.docker.images import ensure_task_images  # noqa: E402
from deepswe_jax.env.docker.official_images import (  # noqa: E402
    LAYOUT_IMAGE_KINDS,
    build_layout_image,
)
from deepswe_jax.env.tasks import load_tasks  # noqa: E402

_TASKS = flags.DEFINE_string(
    "tasks", "tasks/tasks.jsonl", "Task file (jsonl, json, parquet or a saved HF dataset)."
)
_LAYOUT = flags.DEFINE_enum(
    "layout",
    None,
    list(LAYOUT_IMAGE_KINDS),
    "Build one image in this benchmark's layout from --repo instead of a task file's images.",
)
_REPO = flags.DEFINE_string(
    "repo", None, "With --layout: the repository, a git checkout or a plain folder."
)
_IMAGE = flags.DEFINE_string("image", None, "With --layout: the image's tag.")
_COMMIT = flags.DEFINE_string(
    "commit", None, "With --layout: the commit of a git checkout to build (default HEAD)."
)
_PACKAGES = flags.DEFINE_list(
    "packages",
    [],
    "With --layout: package folders put into the repository's environment (its dependencies; "
    "the image's python3 with pytest is there already).",
)
_R2E_TESTS = flags.DEFINE_string(
    "r2e_tests", None, "With --layout=r2egym: the hidden tests' folder, put at /r2e_tests."
)
_NAME = flags.DEFINE_string(
    "name", None, "With --layout=swebench: the installed package's name (default: the folder's)."
)


def main(argv: list[str]) -> None:
    del argv
    if _LAYOUT.value is None:
        tasks = load_tasks(_TASKS.value)
        tags = ensure_task_images(tasks)
        print(f"{len(tags)} image(s) up to date for {len(tasks)} task(s): {', '.join(tags)}")
        return
    if not _REPO.value or not _IMAGE.value:
        raise app.UsageError("--layout needs --repo (the repository) and --image (its tag)")
    built = build_layout_image(
        _LAYOUT.value,
        _REPO.value,
        _IMAGE.value,
        packages=_PACKAGES.value,
        r2e_tests=_R2E_TESTS.value,
        commit=_COMMIT.value,
        name=_NAME.value,
    )
    print(f"built {built.image} ({_LAYOUT.value} layout): /testbed at {built.base_commit}")
    print(f'row fields: "image": "{built.image}", "base_commit": "{built.base_commit}"')


if __name__ == "__main__":
    cli.run(main)
