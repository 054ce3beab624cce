"""Reads the function call out of a model reply; never raises on bad output.

Rules (each one is tested in tests/agent/test_parsing.py):

- Thinking: when a reply starts with `<think>` (leading whitespace aside), the
  call is looked for only after the first `</think>`; a reply whose `<think>`
  is never closed has no call.
- The first `<function=NAME>` opens the call. Between it and `</function>`
  there may only be whitespace and `<parameter=KEY>VALUE</parameter>` entries.
- A value ends at the first `</parameter>` that is followed, after optional
  whitespace, by `<parameter=`, by `</function>` or by the end of the reply.
  So values may contain `</parameter>`, `</function>` or `<parameter=...>` as
  long as they do not contain `</parameter>` directly followed by one of those.
  When text after the call still holds a `</function>` (before any further
  `<function=`), the end of the call is ambiguous and the reply is rejected.
- Values are kept exactly, except the one newline the format puts right after
  `<parameter=KEY>` and the one right before `</parameter>`: each is dropped when
  present. No other whitespace is touched (indentation in `old_str` matters).
- A second call after the first is not run; the result carries a notice saying so.
- Function names and keys are checked against `prompts.TOOLS` (aliases from
  `prompts.TOOL_ALIASES`): unknown functions, unknown or repeated parameters and
  missing required parameters are errors.

Errors become `ParseResult.error`, an observation that tells the model what was
wrong and how to write the call instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from deepswe_jax.agent.prompts import TOOL_ALIASES, TOOLS

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
FUNCTION_OPEN = "<function="
PARAMETER_OPEN = "<parameter="
PARAMETER_CLOSE = "</parameter>"
FUNCTION_CLOSE = "</function>"
# A name never holds "<": each scan for a name's ">" stops at the next "<", so a reply of many
# unclosed "<function=" openings is read in linear time (not one scan to the end per opening).
FUNCTION_NAME = re.compile(r"[^<>\n]*")
PARAMETER_KEY = re.compile(r"[^>\n]*")
WHITESPACE = re.compile(r"\s*")

CALL_EXAMPLE = """<function=execute_bash>
<parameter=cmd>ls /testbed</parameter>
</function>"""

NO_CALL_ERROR = (
    "ERROR: no function call found in your reply. Every reply must end with exactly one call "
    "in this format:\n{example}\nWhen you are done, call finish."
)
UNCLOSED_THINK_ERROR = (
    "ERROR: your reply opened <think> but never closed it with </think>, so no function call "
    "was read. Close your thinking with </think>, then write one call such as:\n{example}"
)
UNKNOWN_FUNCTION_ERROR = (
    "ERROR: unknown function '{name}'. Available functions: {available}. Call one of them."
)
UNCLOSED_PARAMETER_ERROR = (
    "ERROR: parameter '{key}' of {name} is not closed. End every value with </parameter> and "
    "put the next <parameter=KEY> or </function> after it."
)
UNCLOSED_FUNCTION_ERROR = (
    "ERROR: the call to {name} is not closed. End every call with </function> after its last "
    "</parameter>."
)
STRAY_TEXT_ERROR = (
    "ERROR: unexpected text inside the call to {name}: {snippet!r}. Between <function={name}> "
    "and </function> write only <parameter=KEY>VALUE</parameter> entries."
)
AMBIGUOUS_END_ERROR = (
    "ERROR: could not tell where the call to {name} ends: text after its </function> holds "
    "another </function>. A value must not contain </parameter> directly followed by "
    "</function> or <parameter=; split such text (e.g. '</param' + 'eter>') and call again."
)
UNKNOWN_PARAMETER_ERROR = (
    "ERROR: {name} has no parameter '{key}'. Its parameters: {allowed}. Call it again with those."
)
REPEATED_PARAMETER_ERROR = (
    "ERROR: parameter '{key}' is given more than once in the call to {name}. Give it once."
)
MISSING_PARAMETER_ERROR = (
    "ERROR: {name} needs parameter(s) {missing}. Call it again with every required parameter."
)
EXTRA_CALLS_NOTICE = (
    "NOTE: your reply held {count} function calls; only the first one ran. Call one function "
    "per reply."
)


@dataclass(frozen=True)
class FunctionCall:
    """A parsed call: the canonical function name and its parameter values, exactly as meant."""

    name: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParseResult:
    """What a reply asked for.

    Exactly one of `call` and `error` is set. `error` is the observation to
    show the model instead of running anything. `notice` (only with a call)
    is a note to show alongside the call's output. `thought` is the reply's
    text before the call (thinking included).
    """

    call: FunctionCall | None
    error: str | None = None
    notice: str | None = None
    thought: str = ""


def strip_format_newlines(value: str) -> str:
    """Drops the single newline after `<parameter=KEY>` and the one before `</parameter>`."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def render_function_call(name: str, parameters: dict[str, str]) -> str:
    """The call in the model's format; `parse_function_call` reads it back exactly.

    Values holding a newline are written on their own lines (the format newlines
    added around them are the ones the parser drops); others stay inline.
    """
    lines = [f"<function={name}>"]
    for key, value in parameters.items():
        if "\n" in value:
            lines.append(f"<parameter={key}>\n{value}\n</parameter>")
        else:
            lines.append(f"<parameter={key}>{value}</parameter>")
    lines.append(FUNCTION_CLOSE)
    return "\n".join(lines)


class Scanner:
    """A reply and the only ways the parser reads it, each counting the characters it passes.

    Every read is a forward search for a fixed string or a run of one character class, which
    the engine does in one pass with no backtracking, so `chars_scanned` is the parser's work:
    tests check it stays within a few passes over the reply, without a clock.
    """

    def __init__(self, text: str):
        self.text = text
        self.chars_scanned = 0

    def find(self, needle: str, start: int, stop: int | None = None) -> int:
        """The first index of `needle` in text[start:stop], or -1."""
        stop = len(self.text) if stop is None else stop
        found = self.text.find(needle, start, stop)
        self.chars_scanned += (stop if found < 0 else found + len(needle)) - start
        return found

    def startswith(self, prefix: str, position: int) -> bool:
        self.chars_scanned += len(prefix)
        return self.text.startswith(prefix, position)

    def run_end(self, character_run: re.Pattern[str], position: int) -> int:
        """Where the run of `character_run` (a pattern `[...]*` or `\\s*`) from `position` ends."""
        end = character_run.match(self.text, position).end()
        self.chars_scanned += end - position + 1  # the run and the character that stops it
        return end


@dataclass(frozen=True)
class _Opening:
    """A `<function=NAME>` tag: where it starts and ends, and NAME as written."""

    start: int
    end: int
    name: str


def _find_function_open(scanner: Scanner, position: int) -> _Opening | None:
    """The first complete `<function=NAME>` at or after `position`."""
    while (start := scanner.find(FUNCTION_OPEN, position)) >= 0:
        name_start = start + len(FUNCTION_OPEN)
        name_end = scanner.run_end(FUNCTION_NAME, name_start)
        if scanner.startswith(">", name_end):
            return _Opening(start, name_end + 1, scanner.text[name_start:name_end])
        position = name_end  # no "<" before name_end, so no other opening starts before it
    return None


def _find_value_end(scanner: Scanner, position: int) -> int:
    """The first `</parameter>` at or after `position` that ends a value (module doc), or -1."""
    while (close := scanner.find(PARAMETER_CLOSE, position)) >= 0:
        position = close + len(PARAMETER_CLOSE)
        after = scanner.run_end(WHITESPACE, position)
        if (
            after == len(scanner.text)
            or scanner.startswith(PARAMETER_OPEN, after)
            or scanner.startswith(FUNCTION_CLOSE, after)
        ):
            return close
    return -1


def parse_function_call(reply: str | Scanner) -> ParseResult:
    """Parses the first complete `<function=...>...</function>` block of `reply` (see module doc).

    Pass a `Scanner` to read afterwards how many characters parsing passed over.
    """
    scanner = reply if isinstance(reply, Scanner) else Scanner(reply)
    reply = scanner.text
    search_from = 0
    if scanner.startswith(THINK_OPEN, scanner.run_end(WHITESPACE, 0)):
        think_end = scanner.find(THINK_CLOSE, 0)
        if think_end < 0:
            return ParseResult(None, error=UNCLOSED_THINK_ERROR.format(example=CALL_EXAMPLE))
        search_from = think_end + len(THINK_CLOSE)

    opening = _find_function_open(scanner, search_from)
    if opening is None:
        return ParseResult(None, error=NO_CALL_ERROR.format(example=CALL_EXAMPLE))
    thought = reply[: opening.start]
    written_name = opening.name.strip()
    name = TOOL_ALIASES.get(written_name, written_name)

    parameters: list[tuple[str, str]] = []
    position = opening.end
    while True:
        position = scanner.run_end(WHITESPACE, position)
        if scanner.startswith(FUNCTION_CLOSE, position):
            call_end = position + len(FUNCTION_CLOSE)
            break
        if position == len(reply):
            return ParseResult(
                None, error=UNCLOSED_FUNCTION_ERROR.format(name=written_name), thought=thought
            )
        key_end = -1
        if scanner.startswith(PARAMETER_OPEN, position):
            key_end = scanner.run_end(PARAMETER_KEY, position + len(PARAMETER_OPEN))
        if key_end < 0 or not scanner.startswith(">", key_end):
            snippet = reply[position : position + 40]
            return ParseResult(
                None,
                error=STRAY_TEXT_ERROR.format(name=written_name, snippet=snippet),
                thought=thought,
            )
        key = reply[position + len(PARAMETER_OPEN) : key_end].strip()
        value_start = key_end + 1
        value_end = _find_value_end(scanner, value_start)
        if value_end < 0:
            return ParseResult(
                None,
                error=UNCLOSED_PARAMETER_ERROR.format(key=key, name=written_name),
                thought=thought,
            )
        parameters.append((key, strip_format_newlines(reply[value_start:value_end])))
        position = value_end + len(PARAMETER_CLOSE)

    next_call = _find_function_open(scanner, call_end)
    before_next_call = len(reply) if next_call is None else next_call.start
    if scanner.find(FUNCTION_CLOSE, call_end, before_next_call) >= 0:
        return ParseResult(
            None, error=AMBIGUOUS_END_ERROR.format(name=written_name), thought=thought
        )

    error = _check_call(name, written_name, parameters)
    if error is not None:
        return ParseResult(None, error=error, thought=thought)
    notice = None
    if next_call is not None:
        count = 2
        while (next_call := _find_function_open(scanner, next_call.end)) is not None:
            count += 1
        notice = EXTRA_CALLS_NOTICE.format(count=count)
    return ParseResult(FunctionCall(name, dict(parameters)), notice=notice, thought=thought)


def _check_call(name: str, written_name: str, parameters: list[tuple[str, str]]) -> str | None:
    """The error message for a call that does not fit its function's signature, else None."""
    spec = TOOLS.get(name)
    if spec is None:
        return UNKNOWN_FUNCTION_ERROR.format(name=written_name, available=", ".join(TOOLS))
    seen: set[str] = set()
    for key, _ in parameters:
        if key not in spec.parameter_names:
            return UNKNOWN_PARAMETER_ERROR.format(
                name=name, key=key, allowed=", ".join(spec.parameter_names)
            )
        if key in seen:
            return REPEATED_PARAMETER_ERROR.format(name=name, key=key)
        seen.add(key)
    missing = [key for key in spec.required_parameters if key not in seen]
    if missing:
        return MISSING_PARAMETER_ERROR.format(name=name, missing=", ".join(missing))
    return None
