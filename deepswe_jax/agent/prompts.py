"""Everything the agent is told, in one place: the functions it may call, the system prompt,
the per-task instance prompt and the notes appended to each observation.

The structure follows R2E-Gym / DeepSWE (four functions documented in the system prompt, the
`<function=NAME><parameter=KEY>VALUE</parameter></function>` call format, the issue inside
`<github_issue>`, "Steps Remaining: N" after each observation); the wording is ours.

Two prompt styles of our interface (`PROMPT_STYLES`, config.agent.prompt):
- "full" (default): R2E-Gym's structure above, about 1,000 tokens of instructions.
- "compact": for small models trained from scratch, a few lines naming each function and its
  parameters, the call format and the issue (about 150 tokens), so an episode is a few
  hundred tokens. Same functions, call format, parser and observations as "full".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolParameter:
    """One parameter of a function: `kind` is how the model should write it (all values are text)."""

    name: str
    kind: str
    required: bool
    description: str


@dataclass(frozen=True)
class ToolSpec:
    """A function the agent may call: the name the model writes and its parameters."""

    name: str
    description: str
    parameters: tuple[ToolParameter, ...]

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def required_parameters(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters if p.required)


FILE_EDITOR = ToolSpec(
    name="file_editor",
    description="""View, create and edit files. Edits are remembered, so undo_edit can revert them.
  - view: a file is shown with line numbers (like `cat -n`); a directory lists its non-hidden files and folders two levels deep.
  - create: writes a new file; fails when the path already exists.
  - str_replace: replaces old_str with new_str. old_str must match exactly one place in the file, whitespace included; add surrounding lines until it is unique.
  - insert: inserts new_str after line insert_line (0 inserts at the top).
  - undo_edit: reverts the last edit made to the file at path.
  Long output is clipped; look inside large files with search or `grep -n`.""",
    parameters=(
        ToolParameter(
            "command",
            "string",
            True,
            "One of view, create, str_replace, insert, undo_edit.",
        ),
        ToolParameter(
            "path",
            "string",
            True,
            "Absolute path of a file or folder, e.g. /testbed/pkg/module.py.",
        ),
        ToolParameter("file_text", "string", False, "For create: the content of the new file."),
        ToolParameter(
            "old_str",
            "string",
            False,
            "For str_replace: the exact text to replace, copied from the file without line numbers.",
        ),
        ToolParameter(
            "new_str",
            "string",
            False,
            "For str_replace: the replacement (empty deletes old_str). For insert: the text to insert.",
        ),
        ToolParameter(
            "insert_line", "integer", False, "For insert: the line after which new_str goes."
        ),
        ToolParameter(
            "view_range",
            "array",
            False,
            "For view of a file: lines to show, e.g. [10, 40]; [10, -1] shows line 10 to the end.",
        ),
        ToolParameter(
            "concise",
            "boolean",
            False,
            "For view of a large Python file: True elides function bodies, False shows every line.",
        ),
    ),
)

EXECUTE_BASH = ToolSpec(
    name="execute_bash",
    description="""Run a bash command in /testbed and see its output and exit code.
  - Every call starts a fresh shell with a time limit; chain commands with && when they depend on each other.
  - Interactive programs (python without a script, ipython) and background servers are refused.
  - Long output keeps its first and last lines; redirect to a file and grep it when you need more.""",
    parameters=(ToolParameter("cmd", "string", True, "The command line to run."),),
)

SEARCH = ToolSpec(
    name="search",
    description="""Find a term in the repository's files.
  - On a folder (default: the current one) it lists the .py files that contain the term, with a count per file; it refuses when more than 100 files match, so narrow the term or the folder.
  - On a file it shows the matching lines with their line numbers.""",
    parameters=(
        ToolParameter("search_term", "string", True, "The text to look for."),
        ToolParameter(
            "path", "string", False, "The file or folder to search (default: the current folder)."
        ),
    ),
)

FINISH = ToolSpec(
    name="finish",
    description="""Submit your changes and end the task. Call it once the fix is made and tested; nothing after it runs.""",
    parameters=(
        ToolParameter("command", "string", False, "Write `submit`."),
        ToolParameter("result", "string", False, "A short summary of what you changed."),
    ),
)

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (FILE_EDITOR, EXECUTE_BASH, SEARCH, FINISH)
}

# Other names models trained on R2E-Gym use for the same functions.
TOOL_ALIASES: dict[str, str] = {"submit": "finish"}

SYSTEM_PROMPT_TEMPLATE = """You are a software engineering agent. You work inside a shell session on a Python repository and resolve GitHub issues by reading the code, running it and editing it.

You can call these functions:

{function_docs}

To call a function, first explain your reasoning in plain text, then write exactly one call in this format, with nothing after it:

<function=NAME>
<parameter=KEY>VALUE</parameter>
<parameter=KEY>
a value that
spans several lines
</parameter>
</function>

<IMPORTANT>
- A call starts with <function= and ends with </function>.
- Give every required parameter.
- Call one function per reply: only the first call in a reply runs.
- Reason first, then call; never write reasoning after the call.
- Values are used exactly as written: the one newline right after <parameter=KEY> and the one right before </parameter> are dropped, every other space and newline counts.
</IMPORTANT>"""

FUNCTION_DOC_TEMPLATE = """--- FUNCTION {number}: {name} ---
{description}
Parameters:
{parameters}
--- END FUNCTION {number} ---"""

PARAMETER_DOC_TEMPLATE = "  {number}. {name} ({kind}, {necessity}): {description}"

INSTANCE_PROMPT_TEMPLATE = """Here is a GitHub issue about the repository at /testbed:
<github_issue>
{problem_statement}
</github_issue>

Change the non-test files in /testbed so that the issue is resolved. The tests that check the issue are already taken care of: do not add, change or delete any test files.

Work through these steps:
1. Explore the repository to find the code involved (search and grep are faster than reading whole files).
2. Write a short script, e.g. /testbed/reproduce_issue.py, that shows the problem, and run it.
3. Find the root cause of the problem.
4. Fix it with a small, targeted edit to the source code.
5. Run your script again and confirm the problem is gone.
6. Run the existing tests related to your change and make sure they still pass.
7. Think about edge cases and make sure the fix handles them.
8. Submit with the finish function.

The working directory is /testbed."""

STEPS_REMAINING_TEMPLATE = "\nSteps Remaining: {steps_remaining}"
LAST_STEP_NOTICE = "\nThis is your last step: call finish now to submit your changes."
SUBMIT_NOW_NOTICE = "\nYou are running out of tokens. Call finish NOW to submit your changes."


COMPACT_SYSTEM_PROMPT_TEMPLATE = """You fix issues in the Python repository at /testbed. Reply with one function call:
<function=NAME>
<parameter=KEY>VALUE</parameter>
</function>
Functions and their parameters:
{function_list}"""

COMPACT_FUNCTION_TEMPLATE = "- {name}: {parameters}"

COMPACT_INSTANCE_PROMPT_TEMPLATE = """<github_issue>
{problem_statement}
</github_issue>
Fix the issue in /testbed, then call finish."""

PROMPT_STYLES = ("full", "compact")


def render_function_docs(tools: dict[str, ToolSpec] = TOOLS) -> str:
    """The numbered description of every function, as it appears in the system prompt."""
    docs = []
    for number, spec in enumerate(tools.values(), start=1):
        parameters = "\n".join(
            PARAMETER_DOC_TEMPLATE.format(
                number=i,
                name=p.name,
                kind=p.kind,
                necessity="required" if p.required else "optional",
                description=p.description,
            )
            for i, p in enumerate(spec.parameters, start=1)
        )
        docs.append(
            FUNCTION_DOC_TEMPLATE.format(
                number=number, name=spec.name, description=spec.description, parameters=parameters
            )
        )
    return "\n\n".join(docs)


def render_function_list(tools: dict[str, ToolSpec] = TOOLS) -> str:
    """One line per function with its parameter names, as the compact system prompt lists them."""
    return "\n".join(
        COMPACT_FUNCTION_TEMPLATE.format(name=spec.name, parameters=", ".join(spec.parameter_names))
        for spec in tools.values()
    )


def _check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ValueError(
            f"unknown prompt style {style!r}; set config.agent.prompt to one of {PROMPT_STYLES}"
        )


def system_prompt(style: str = "full") -> str:
    """The system message: the agent's role, its functions and the call format."""
    _check_style(style)
    if style == "compact":
        return COMPACT_SYSTEM_PROMPT_TEMPLATE.format(function_list=render_function_list())
    return SYSTEM_PROMPT_TEMPLATE.format(function_docs=render_function_docs())


def instance_prompt(problem_statement: str, style: str = "full") -> str:
    """The first user message of an episode: the issue (and, for "full", the steps to resolve it)."""
    _check_style(style)
    template = COMPACT_INSTANCE_PROMPT_TEMPLATE if style == "compact" else INSTANCE_PROMPT_TEMPLATE
    return template.format(problem_statement=problem_statement.strip("\n"))


def render_observation(observation: str, *, steps_remaining: int, submit_now: bool) -> str:
    """The user message after a step: the tool output, the steps left (counting the next one)
    and, when this is the last step or the token budget is nearly spent, a request to submit."""
    text = observation + STEPS_REMAINING_TEMPLATE.format(steps_remaining=steps_remaining)
    if steps_remaining == 1:
        text += LAST_STEP_NOTICE
    if submit_now:
        text += SUBMIT_NOW_NOTICE
    return text
