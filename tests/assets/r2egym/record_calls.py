"""Record what R2E-Gym's original tool scripts print for the calls in calls.json.

    python -m tests.assets.r2egym.record_calls --r2egym=/path/to/R2E-Gym --chardet=/path/to/chardet

The original scripts (src/r2egym/agenthub/tools/{r2egym/file_editor,search,r2egym/execute_bash,
finish}.py of a checkout of agentica-project/R2E-Gym at 353348a) are installed in a fresh
container of deepswe/confini:base, with `chardet` (a package directory; the original editor
imports it) and /root/.venv/bin/python -> /usr/bin/python3. Each call then runs, in order,
exactly as `env.r2egym.call_tool` runs it (`/bin/sh -c "timeout 90 <command line> "` with
R2E-Gym's PATH), and its exit status and merged output are written to calls_recorded.jsonl,
which tests/env/test_r2egym_tools.py compares with our scripts' output. Then, in another fresh
container prepared the same way, the six calls of issue #30 (`differing_calls` in that test: a
listing with a non-UTF-8 name, `env`, each tool's --help, viewing and editing a UTF-8 file with
an em dash) go to six_calls_recorded.json.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from absl import app, flags

from deepswe_jax.env.docker.images import ensure_task_image
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.r2egym import shell_command
from deepswe_jax.env.tasks import load_tasks
from tests.env.test_r2egym_tools import prepare_differing_calls, run_differing_calls

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
SCRIPTS = {
    "file_editor": "src/r2egym/agenthub/tools/r2egym/file_editor.py",
    "search": "src/r2egym/agenthub/tools/search.py",
    "execute_bash": "src/r2egym/agenthub/tools/r2egym/execute_bash.py",
    "finish": "src/r2egym/agenthub/tools/finish.py",
}
PACKAGES = "/usr/lib/python3/dist-packages"
PREPARE = "mkdir -p /root/.venv/bin && ln -sf /usr/bin/python3 /root/.venv/bin/python"
STEP_TIMEOUT_S = 90.0

_R2EGYM = flags.DEFINE_string("r2egym", None, "A checkout of agentica-project/R2E-Gym@353348a.")
_CHARDET = flags.DEFINE_string("chardet", None, "A `chardet` package directory (pure Python).")


async def install_originals(env, r2egym: Path, chardet: Path) -> None:
    assert (await env.run(PREPARE)).exit_code == 0
    files = {f"/usr/local/bin/{name}": r2egym / path for name, path in SCRIPTS.items()}
    for source in sorted(chardet.rglob("*.py")):
        files[f"{PACKAGES}/chardet/{source.relative_to(chardet)}"] = source
    for target, source in files.items():
        await asyncio.to_thread(env.runtime.write_file, target, source.read_bytes())
    assert (await env.run("chmod 755 /usr/local/bin/*")).exit_code == 0


async def record_differing_calls(task, r2egym: Path, chardet: Path) -> dict:
    async with EnvPool(max_envs=1, run_label=f"record-{uuid.uuid4().hex[:8]}") as pool:
        async with pool.acquire(task) as env:
            await prepare_differing_calls(env)
            await install_originals(env, r2egym, chardet)
            return await run_differing_calls(env)


async def record(r2egym: Path, chardet: Path) -> tuple[list[dict], dict]:
    task = next(
        t for t in load_tasks(REPO_ROOT / "tasks" / "tasks.jsonl") if t.instance_id == "confini-1"
    )
    ensure_task_image(task)
    calls = json.loads((HERE / "calls.json").read_text())
    records = []
    async with EnvPool(max_envs=1, run_label=f"record-{uuid.uuid4().hex[:8]}") as pool:
        async with pool.acquire(task) as env:
            await install_originals(env, r2egym, chardet)
            for index, (name, params) in enumerate(calls):
                command = shell_command(name, params, STEP_TIMEOUT_S)
                result = await env.run(command, timeout=STEP_TIMEOUT_S + 5)
                records.append(
                    dict(
                        index=index,
                        name=name,
                        params=params,
                        exit_code=result.exit_code,
                        output=result.output,
                    )
                )
    return records, await record_differing_calls(task, r2egym, chardet)


def main(argv: list[str]) -> None:
    del argv
    records, six = asyncio.run(record(Path(_R2EGYM.value), Path(_CHARDET.value)))
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    (HERE / "calls_recorded.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    six_text = json.dumps(six, ensure_ascii=False, indent=1) + "\n"
    (HERE / "six_calls_recorded.json").write_text(six_text, encoding="utf-8")
    print(f"recorded {len(records)} calls and the six calls of issue #30")


if __name__ == "__main__":
    flags.mark_flags_as_required(["r2egym", "chardet"])
    app.run(main)
