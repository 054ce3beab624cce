"""What the agent sees after a tool call, worded as R2E-Gym (and so DeepSWE's model) expects.

    Exit code: 0
    Execution output of [execute_bash]:
    <output; over 80 lines: the first 40, a marker, the last 40>

Other tools: "Execution output of [<name>]:" and the output. Every observation is
also capped at MAX_OBSERVATION_CHARS (head and tail kept), so a single huge line
cannot flood the context.
"""

from __future__ import annotations

BASH_TOOLS = frozenset({"execute_bash", "bash"})
KEEP_LINES = 40
MAX_OBSERVATION_CHARS = 20_000
DIVIDER = "-" * 50
TRUNCATION_MARKER = "<Observation truncated in middle for saving context>"
FINISHED_OBSERVATION = "<<< Finished >>>"
TIMEOUT_EXIT_CODE = -1


def truncate_lines(text: str, keep: int = KEEP_LINES) -> str:
    """Keep the first and last `keep` lines of `text` when it has more than 2 * keep."""
    lines = text.splitlines()
    if len(lines) <= 2 * keep:
        return text
    return "\n".join([*lines[:keep], DIVIDER, TRUNCATION_MARKER, DIVIDER, *lines[-keep:]])


def clip_chars(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """Keep the first and last `limit // 2` characters of `text` when it is longer."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[-half:]}"


def format_observation(tool: str, output: str, exit_code: int | None) -> str:
    """The observation for a finished tool call (exit_code None is shown as -1)."""
    if tool in BASH_TOOLS:
        code = TIMEOUT_EXIT_CODE if exit_code is None else exit_code
        text = f"Exit code: {code}\nExecution output of [{tool}]:\n{truncate_lines(output)}"
    else:
        text = f"Execution output of [{tool}]:\n{output}"
    return clip_chars(text)


def timeout_observation(tool: str, timeout: float, partial_output: str = "") -> str:
    """The observation for a call killed at its deadline."""
    message = (
        f"The command took too long to execute (>{timeout:g}s) and was killed. "
        "Avoid long-running or interactive commands; run a narrower command instead."
    )
    if partial_output.strip():
        message += f"\nOutput before it was killed:\n{partial_output}"
    return format_observation(tool, message, TIMEOUT_EXIT_CODE)


def unknown_tool_observation(tool: str, known: tuple[str, ...]) -> str:
    """The observation for a call to a function that does not exist."""
    return (
        f"ERROR: unknown function '{tool}'. The available functions are: "
        f"{', '.join(known)}. Call one of them."
    )
