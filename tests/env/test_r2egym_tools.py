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

from deepswe_jax.env.docker.images import ensure_task_image
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


DASH_FILE = "/testbed/confini/dash.py"
LISTED = "/testbed/enc"
SIX_RECORDED = REPO_ROOT / "tests" / "assets" / "r2egym" / "six_calls_recorded.json"


async def prepare_differing_calls(env) -> None:
    """The six calls' files: a UTF-8 file with one em dash, a folder holding a Latin-1 name.
    (tests/assets/r2egym/record_calls.py prepares the original's container the same way.)"""
    await env.write_file(DASH_FILE, "x = 1  # a \u2014 b\n".encode())
    made = await env.run(f"mkdir -p {LISTED} && touch {LISTED}/$(printf 'caf\\351.py')")
    assert made.exit_code == 0


async def run_differing_calls(env) -> dict:
    """The six calls issue #30 found our R2E-Gym profile answering differently from the
    original: a listing with a non-UTF-8 name, `env` (SHLVL), each tool's --help, and viewing
    and editing the em-dash file (chardet's decoding); then the file's bytes."""

    async def call(name, params):
        command = shell_command(name, params, STEP_TIMEOUT_S)
        result = await env.run(command, timeout=STEP_TIMEOUT_S + 5)
        return [result.exit_code, result.output]

    return {
        "listing": await call("file_editor", {"command": "view", "path": LISTED}),
        "env": await call("execute_bash", {"cmd": "env"}),
        "help": [
            await call("execute_bash", {"cmd": f"{tool} --help"})
            for tool in ("file_editor", "search", "execute_bash")
        ],
        "view": await call("file_editor", {"command": "view", "path": DASH_FILE}),
        "edit": await call(
            "file_editor",
            {"command": "str_replace", "path": DASH_FILE, "old_str": "x = 1", "new_str": "x = 2"},
        ),
        "file_after_edit_utf8": (await asyncio.to_thread(env.runtime.read_file, DASH_FILE)).decode(
            "utf-8"
        ),
    }


async def differing_calls(task: Task, client, run_label: str) -> dict:
    """Our R2E-Gym profile's answers to the six calls, and the default profile's view of the
    em-dash file (key "default view")."""
    async with EnvPool(max_envs=1, run_label=run_label, client=client) as pool:
        async with pool.acquire(task) as env:
            await prepare_differing_calls(env)
            ours = await env.step("file_editor", {"command": "view", "path": DASH_FILE})
            assert (await env.run(PREPARE)).exit_code == 0
            await install_tools(env)
            return {"default view": ours.observation, **await run_differing_calls(env)}


def without_hostname(output: str) -> str:
    return re.sub(r"^HOSTNAME=\w+$", "HOSTNAME=<container>", output, flags=re.MULTILINE)


def test_r2egym_profile_answers_the_six_calls_as_the_original(
    confini_task, docker_client, run_label
):
    """Recorded with R2E-Gym's own scripts at agentica-project/R2E-Gym@353348a (and chardet
    5.2.0) by tests/assets/r2egym/record_calls.py: the listing error, `env` without SHLVL (only
    the container's host name differs), the original help texts, and chardet's reading of the
    em dash as Windows-1252, shown and written back garbled. The default profile keeps the em
    dash."""
    seen = asyncio.run(differing_calls(confini_task, docker_client, run_label))
    recorded = json.loads(SIX_RECORDED.read_text(encoding="utf-8"))
    assert seen["listing"] == recorded["listing"]
    assert "SHLVL" not in seen["env"][1]
    assert seen["env"][0] == recorded["env"][0]
    assert without_hostname(seen["env"][1]) == without_hostname(recorded["env"][1])
    assert seen["help"] == recorded["help"]
    assert seen["view"] == recorded["view"]
    assert "\u00e2\u20ac\u201d" in recorded["view"][1]  # what the original showed: mojibake
    assert seen["edit"] == recorded["edit"]
    assert seen["file_after_edit_utf8"] == recorded["file_after_edit_utf8"]
    assert "a \u2014 b" in seen["default view"]
