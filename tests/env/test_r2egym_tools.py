"""Our R2E-Gym tools print what the original scripts print, call for call.

tests/assets/r2egym/calls_recorded.jsonl holds the exit status and merged output of R2E-Gym's
own scripts (agentica-project/R2E-Gym@353348a) for 69 calls beyond the 45 recorded replies
(argument errors, view ranges, condensed views of classes, CRLF and Latin-1 files, linting,
undo, tracebacks, dash, signals, grep options...), run in order on a fresh confini container
through the same command line `env.r2egym.call_tool` uses (tests/assets/r2egym/record_calls.py
recorded them). Here our scripts (env/tools/r2egym/) run the same calls the same way. Only the
line numbers a traceback gives for the tool script itself may differ.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from deepswe_jax.env.images import ensure_task_image
from deepswe_jax.env.pool import EnvPool
from deepswe_jax.env.r2egym import install_tools, shell_command
from deepswe_jax.env.tasks import Task, load_tasks

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED = REPO_ROOT / "tests" / "assets" / "r2egym" / "calls_recorded.jsonl"
PREPARE = "mkdir -p /root/.venv/bin && ln -sf /usr/bin/python3 /root/.venv/bin/python"
STEP_TIMEOUT_S = 90.0
TOOL_FRAME_LINE = re.compile(r'(File "/usr/local/bin/\w+", line )\d+')


@pytest.fixture(scope="module")
def confini_task(docker_client) -> Task:
    task = next(
        t for t in load_tasks(REPO_ROOT / "tasks" / "tasks.jsonl") if t.instance_id == "confini-1"
    )
    ensure_task_image(task, docker_client)
    return task


async def run_calls(task: Task, client, run_label: str, records: list[dict]) -> list[tuple]:
    results = []
    async with EnvPool(max_envs=1, run_label=run_label, client=client) as pool:
        async with pool.acquire(task) as env:
            assert (await env.run(PREPARE)).exit_code == 0
            await install_tools(env)
            for record in records:
                command = shell_command(record["name"], record["params"], STEP_TIMEOUT_S)
                result = await env.run(command, timeout=STEP_TIMEOUT_S + 5)
                results.append((result.exit_code, result.output))
    return results


def test_our_scripts_print_what_r2egym_scripts_print(confini_task, docker_client, run_label):
    records = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]
    results = asyncio.run(run_calls(confini_task, docker_client, run_label, records))
    mismatches = [
        f"#{r['index']} {r['name']} {r['params']}\noriginal: {(r['exit_code'], r['output'])!r}\n"
        f"ours:     {(code, output)!r}"
        for r, (code, output) in zip(records, results, strict=True)
        if (code, TOOL_FRAME_LINE.sub(r"\1N", output))
        != (r["exit_code"], TOOL_FRAME_LINE.sub(r"\1N", r["output"]))
    ]
    assert not mismatches, "\n\n".join(mismatches)
    differing = [
        r["index"]
        for r, result in zip(records, results, strict=True)
        if result != (r["exit_code"], r["output"])
    ]
    through_tool_script = [r["index"] for r in records if TOOL_FRAME_LINE.search(r["output"])]
    assert differing == through_tool_script and len(differing) == 3
