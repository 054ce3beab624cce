"""R2E-Gym's agent interface as rLLM v0.1 drove it for DeepSWE-Preview, byte for byte.

Sources: rLLM@709dec4 (rllm/agents/swe_agent.py `parse_xml_response`, `SWEAgent.update_from_env`;
rllm/environments/swe/swe.py `SWEEnv.step`) over R2E-Gym@353348a (agenthub/action/action.py
`Action.from_string`, observation/observation.py `Observation.__str__`, environment/env.py
`RepoEnv.step`, runtime/docker.py `get_task_instruction`). Our own code, checked against the
original's recorded observations (tests/agent/test_r2egym_docker.py).

- First messages: the file's system prompt verbatim; the instance template filled with the
  issue (only the part inside [ISSUE]...[/ISSUE] when it is tagged), then
  "\\nSteps Remaining: {max_steps - 1}".
- A reply's call: the first `<function=...</function>` block anywhere in it (inside thinking
  too); the name and every parameter value are stripped of surrounding whitespace; a repeated
  parameter keeps its last value. No block (or no name): the observation is empty and nothing
  runs.
- finish / submit: the observation "<<< Finished >>>" and the episode ends; any other name
  holding "finish" or "submit" also ends it. The rest run as R2E-Gym calls (`env.r2egym`).
- Observations: "Exit code: {error_code}\\nExecution output of [execute_bash]:\\n{output}" (the
  first and last 40 of more than 80 lines) for execute_bash and bash, "Execution output of
  [{name}]:\\n{output}" for the others (an unknown name: nothing after the colon).
- After step k of N: "\\nSteps Remaining: {N - k - 1}", or once that is 0 or less "\\nYou have
  reached the maximum number of steps. Please submit your answer NOW."; then "\\nYou are running
  out of tokens. Please submit your answer NOW." when the response tokens before this reply had
  reached agent.submit_notice_tokens (28,000 in rLLM).

Prompts file (config.agent.prompts_file), either of:
  - YAML, R2E-Gym's `src/r2egym/agenthub/config/r2egym/edit_non_fn_calling.yaml`: the strings
    `system_prompt` and `instance_prompt` (other keys are ignored);
  - Python, rLLM's `rllm/agents/system_prompts.py`: the string assignments `SWE_SYSTEM_PROMPT`
    and `SWE_USER_PROMPT` (read with `ast`, never executed; DeepSWE-Preview was trained with
    these).
The instance template is a `str.format` template that may use {problem_statement} (required)
and {working_dir} (/testbed); R2E-Gym's other fields (gt_patch, candidate_patch, ...) would
show the model the answer and are refused.
"""

from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from deepswe_jax.agent.chat import Message
from deepswe_jax.agent.interface import R2EGYM, Progress
from deepswe_jax.agent.parsing import FunctionCall, ParseResult
from deepswe_jax.env.observation import truncate_lines
from deepswe_jax.env.protocols import StepResult
from deepswe_jax.env.r2egym import CommandEnv, ToolAnswer, call_tool, install_tools
from deepswe_jax.env.tasks import Task

CALL_BLOCK = re.compile(r"<function=.*?</function>", re.DOTALL)
FUNCTION_NAME = re.compile(r"<function\s*=\s*([^>]+)>")
PARAMETER = re.compile(r"<parameter\s*=\s*([^>]+)>(.*?)</parameter>", re.DOTALL)
ISSUE_TAGS = re.compile(r"\[ISSUE\](.*)\[/ISSUE\]", re.DOTALL)

FINISH_NAMES = ("finish", "submit")
BASH_NAMES = ("execute_bash", "bash")
FINISHED = "<<< Finished >>>"
STEPS_REMAINING = "\nSteps Remaining: {steps}"
NO_STEPS_LEFT = "\nYou have reached the maximum number of steps. Please submit your answer NOW."
OUT_OF_TOKENS = "\nYou are running out of tokens. Please submit your answer NOW."

WORKING_DIR = "/testbed"
YAML_FIELDS = ("system_prompt", "instance_prompt")
PYTHON_FIELDS = ("SWE_SYSTEM_PROMPT", "SWE_USER_PROMPT")
TEMPLATE_FIELDS = ("problem_statement", "working_dir")
PROMPTS_HELP = (
    "R2E-Gym's src/r2egym/agenthub/config/r2egym/edit_non_fn_calling.yaml (system_prompt, "
    "instance_prompt) or rLLM's rllm/agents/system_prompts.py (SWE_SYSTEM_PROMPT, "
    'SWE_USER_PROMPT); README: "Our interface and R2E-Gym\'s"'
)


class PromptFileError(ValueError):
    """The prompts file is missing or does not hold the two prompts."""


@dataclass(frozen=True)
class R2EGymPrompts:
    """The system prompt and the instance template, and the file they came from."""

    system: str
    instance_template: str
    source: str

    def instance(self, problem_statement: str) -> str:
        return self.instance_template.format(
            problem_statement=problem_statement, working_dir=WORKING_DIR
        )


def load_prompts(path: str) -> R2EGymPrompts:
    """The prompts in `path` (see the module docstring for the formats).

    Raises:
      PromptFileError: no path, no such file, or a file without the two prompts.
    """
    if not path:
        raise PromptFileError(
            "no prompts file given: the r2egym interface shows the model R2E-Gym's own system "
            f"and instance prompts, which are not shipped here; point it to {PROMPTS_HELP}"
        )
    file = Path(path)
    if not file.is_file():
        raise PromptFileError(f"{path} is not a file; point it to {PROMPTS_HELP}")
    text = file.read_text(encoding="utf-8")
    if file.suffix in (".yaml", ".yml"):
        system, instance = _yaml_prompts(text, path)
    elif file.suffix == ".py":
        system, instance = _python_prompts(text, path)
    else:
        raise PromptFileError(f"{path}: expected a .yaml/.yml or .py file, as {PROMPTS_HELP}")
    _check_instance_template(instance, path)
    return R2EGymPrompts(system, instance, str(file))


def _yaml_prompts(text: str, path: str) -> tuple[str, str]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PromptFileError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise PromptFileError(f"{path} holds no mapping with {' and '.join(YAML_FIELDS)}")
    return _two_strings(document, YAML_FIELDS, path)


def _python_prompts(text: str, path: str) -> tuple[str, str]:
    try:
        module = ast.parse(text, filename=path)
    except SyntaxError as error:
        raise PromptFileError(f"{path} is not valid Python: {error}") from None
    found: dict[str, object] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in PYTHON_FIELDS:
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                found[target.id] = None  # not a literal: reported below
    return _two_strings(found, PYTHON_FIELDS, path)


def _two_strings(found: dict, names: tuple[str, str], path: str) -> tuple[str, str]:
    values = []
    for name in names:
        value = found.get(name)
        if not isinstance(value, str):
            problem = "is missing" if name not in found else "is not a string literal"
            raise PromptFileError(
                f"{path}: {name} {problem}; the file must define {' and '.join(names)} as "
                f"strings, as {PROMPTS_HELP}"
            )
        values.append(value)
    return values[0], values[1]


def _check_instance_template(template: str, path: str) -> None:
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise PromptFileError(
            f"{path}: the instance prompt is not a str.format template ({error}); write literal "
            "braces as {{ and }}"
        ) from None
    unknown = sorted(fields - set(TEMPLATE_FIELDS))
    if unknown:
        raise PromptFileError(
            f"{path}: the instance prompt uses {', '.join('{' + f + '}' for f in unknown)}; only "
            f"{{problem_statement}} and {{working_dir}} are filled in (R2E-Gym's gt_patch, "
            "candidate_patch and hint fields would show the model the answer)"
        )
    if "problem_statement" not in fields:
        raise PromptFileError(f"{path}: the instance prompt has no {{problem_statement}} field")


def task_instruction(problem_statement: str) -> str:
    """The issue as R2E-Gym shows it: the text inside [ISSUE]...[/ISSUE] when tagged."""
    match = ISSUE_TAGS.search(problem_statement)
    return match.group(1) if match else problem_statement


def parse_reply(reply: str) -> ParseResult:
    """The first call of `reply` as rLLM reads it; no call: the empty observation (error "")."""
    block = CALL_BLOCK.search(reply)
    if block is None:
        return ParseResult(None, error="", thought=reply.strip())
    thought = reply[: block.start()].strip()
    name = FUNCTION_NAME.search(block.group(0))
    if name is None or not name.group(1).strip():
        return ParseResult(None, error="", thought=thought)
    parameters = {key.strip(): value.strip() for key, value in PARAMETER.findall(block.group(0))}
    return ParseResult(FunctionCall(name.group(1).strip(), parameters), thought=thought)


def render_answer(name: str, answer: ToolAnswer) -> str:
    """What the model sees after a call to `name` that R2E-Gym answered with `answer`."""
    if name in BASH_NAMES:
        return (
            f"Exit code: {answer.error_code}\nExecution output of [{name}]:\n"
            f"{truncate_lines(answer.output)}"
        )
    return f"Execution output of [{name}]:\n{answer.output}"


def steps_notice(steps_left: int) -> str:
    return STEPS_REMAINING.format(steps=steps_left) if steps_left > 0 else NO_STEPS_LEFT


@dataclass(frozen=True)
class R2EGymInterface:
    """R2E-Gym's interface (module docstring) with the prompts of a user's file."""

    prompts: R2EGymPrompts
    name: str = R2EGYM

    def initial_messages(self, task: Task, *, max_steps: int) -> list[Message]:
        instance = self.prompts.instance(task_instruction(task.problem_statement))
        return [
            Message("system", self.prompts.system),
            Message("user", instance + steps_notice(max_steps - 1)),
        ]

    async def prepare(self, env: CommandEnv) -> None:
        await install_tools(env)

    def parse(self, reply: str) -> ParseResult:
        return parse_reply(reply)

    async def step(
        self, env: CommandEnv, call: FunctionCall, *, timeout: float | None = None
    ) -> StepResult:
        """Run `call` (timeout: the step's limit in seconds, default the pool's)."""
        done = any(word in call.name.lower() for word in FINISH_NAMES)
        if call.name in FINISH_NAMES:
            return StepResult(FINISHED, True, 0, 0.0)
        timeout = env.step_timeout if timeout is None else timeout
        answer = await call_tool(env, call.name, call.parameters, timeout=timeout)
        return StepResult(
            render_answer(call.name, answer), done, answer.exit_code, answer.duration_s
        )

    def observation_message(self, observation: str, progress: Progress) -> str:
        text = observation + steps_notice(progress.max_steps - progress.steps_taken - 1)
        if progress.tokens_before_reply >= progress.submit_notice_tokens:
            text += OUT_OF_TOKENS
        return text
