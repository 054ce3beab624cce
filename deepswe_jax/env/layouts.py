"""Image layouts: where a task image keeps the repository's Python environment, how it is
activated for the agent's commands, and which files in /testbed belong to the benchmark.

    deepswe   our images (`images.ensure_task_image`): the repository's dependencies are the
              image's python3; nothing to activate.
    swebench  SWE-bench / SWE-Gym images: conda at /opt/miniconda3 with the base environment on
              PATH and the repository's in the `testbed` environment, activated only by the eval
              script and .bashrc (`source /opt/miniconda3/bin/activate; conda activate testbed`).
    r2egym    R2E-Gym images: the repository's venv at /testbed/.venv, tests at /r2e_tests and
              their runner at /testbed/run_tests.sh; R2E-Gym runs its tools with
              PATH=/root/.venv/bin:... and links /root/.venv to /testbed/.venv
              (r2egym/agenthub/runtime/docker.py, DOCKER_PATH and setup_env).

`runtime.prepare_runtime(runtime, layout)` runs `prepare_script(layout)` once in an agent's
runtime after it starts: the layout's set-up, the list of paths never to put in the agent's patch
(files untracked at the start, like run_tests.sh or .venv, plus the layout's harness paths;
`runtime.git_diff_script` reads it) and the environment the activation produces, saved for `execute_bash` (tools/execute_bash.py reads
ENV_FILE). The tool server itself keeps the image's own python3 (conda's base in SWE-bench
images), so it never runs on the repository's Python version. The grader needs none of this:
its commands activate what they need (swebench eval scripts, run_tests.sh).

This module imports nothing of env/, so `tasks` can validate layout names with it and `runtime`
can name its files.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

STATE_DIR = "/opt/deepswe"
# NUL-separated NAME=value pairs of the activated environment; execute_bash runs commands in it.
ENV_FILE = f"{STATE_DIR}/env"
# NUL-separated repository-relative paths that never enter the agent's patch.
DIFF_EXCLUDE_FILE = f"{STATE_DIR}/diff-excludes"

# R2E-Gym's DOCKER_PATH, the PATH of every command its runtime runs.
R2E_PATH = (
    "/root/.venv/bin:/root/.local/bin:/root/.cargo/bin:"
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)
# R2E-Gym's setup_env: /root/.venv and /root/.local/bin point at the repository's venv, and
# run_tests.sh leaves /testbed. R2E-Gym moves /r2e_tests to /root, where the agent can still
# read them; we delete them, since grading runs in a fresh container from the image.
R2E_SETUP = """\
ln -sfn /testbed/.venv /root/.venv
mkdir -p /root/.local/bin
ln -sf /testbed/.venv/bin/python /root/.local/bin/python
ln -sf /testbed/.venv/bin/python /root/.local/bin/python3
find /testbed/.venv/bin -type f -executable -exec ln -sf {} /root/.local/bin/ \\;
if [ -e /testbed/run_tests.sh ]; then mv /testbed/run_tests.sh /root/run_tests.sh; fi
rm -rf /r2e_tests /testbed/r2e_tests
"""


# R2E-Gym's setup_env_swebench: /root/.venv is the testbed environment, so commands run with
# R2E-Gym's PATH (the r2egym agent interface, env/r2egym.py) use the repository's Python.
SWEBENCH_SETUP = "ln -sfn /opt/miniconda3/envs/testbed /root/.venv\n"


class LayoutError(RuntimeError):
    """The image does not have the layout its task names (e.g. no conda `testbed`)."""


@dataclass(frozen=True)
class Layout:
    """How one kind of task image is laid out.

    activate: bash that enters the repository's environment ("" when the image's default
      environment is the repository's).
    setup: bash run once in /testbed of an agent's runtime before its first step.
    harness_paths: repository-relative paths that are the benchmark's, never the agent's patch.
    """

    name: str
    activate: str = ""
    setup: str = ""
    harness_paths: tuple[str, ...] = ()

    @property
    def needs_preparing(self) -> bool:
        return bool(self.activate or self.setup or self.harness_paths)


LAYOUTS: dict[str, Layout] = {
    "deepswe": Layout("deepswe"),
    "swebench": Layout(
        "swebench",
        activate="source /opt/miniconda3/bin/activate && conda activate testbed",
        setup=SWEBENCH_SETUP,
    ),
    "r2egym": Layout(
        "r2egym",
        activate=f"export PATH={R2E_PATH}",
        setup=R2E_SETUP,
        harness_paths=("run_tests.sh", "install.sh", ".venv", "r2e_tests"),
    ),
}


def prepare_script(layout: Layout) -> str:
    """The bash script `runtime.prepare_runtime` runs in /testbed (see the module docstring)."""
    harness = " ".join(shlex.quote(path) for path in layout.harness_paths)
    activate = layout.activate or "true"
    return (
        f"{layout.setup}"
        f"mkdir -p {STATE_DIR}\n"
        "{ git -c safe.directory='*' ls-files --others --exclude-standard --directory -z\n"
        f"  printf '%s\\0' {harness}\n"
        f"}} > {DIFF_EXCLUDE_FILE}\n"
        f"{{ {activate}; }} > {STATE_DIR}/activate.log 2>&1 || "
        f"{{ cat {STATE_DIR}/activate.log; exit 3; }}\n"
        f"env -0 > {ENV_FILE}\n"
    )
