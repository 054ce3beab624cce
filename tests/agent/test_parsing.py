"""The function-call parser on well-formed, tricky and malformed replies."""

from __future__ import annotations

import re

import pytest

from deepswe_jax.agent import parsing
from deepswe_jax.agent.parsing import (
    CALL_EXAMPLE,
    FunctionCall,
    Scanner,
    parse_function_call,
    render_function_call,
)
from deepswe_jax.agent.prompts import TOOLS, system_prompt

BASH_LS = "<function=execute_bash>\n<parameter=cmd>ls -la</parameter>\n</function>"

# (id, reply, expected call or None, substring of the error / notice)
CASES = [
    ("single_line", BASH_LS, FunctionCall("execute_bash", {"cmd": "ls -la"}), None),
    (
        "reasoning_then_call_then_trailing_text",
        "I will list files.\n" + BASH_LS + "\nThat should help.",
        FunctionCall("execute_bash", {"cmd": "ls -la"}),
        None,
    ),
    (
        "format_newlines_dropped",
        "<function=execute_bash>\n<parameter=cmd>\npython -m pytest -q\n</parameter>\n</function>",
        FunctionCall("execute_bash", {"cmd": "python -m pytest -q"}),
        None,
    ),
    (
        "indentation_kept_inline",
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/m.py</parameter>\n"
        "<parameter=old_str>    return a - b</parameter>\n"
        "<parameter=new_str>    return a + b</parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {
                "command": "str_replace",
                "path": "/testbed/m.py",
                "old_str": "    return a - b",
                "new_str": "    return a + b",
            },
        ),
        None,
    ),
    (
        "only_one_format_newline_each_side",
        "<function=file_editor>\n<parameter=command>create</parameter>\n"
        "<parameter=path>/testbed/a.py</parameter>\n"
        "<parameter=file_text>\n\n  x = 1  \n\n</parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {"command": "create", "path": "/testbed/a.py", "file_text": "\n  x = 1  \n"},
        ),
        None,
    ),
    (
        "tabs_and_trailing_spaces_kept",
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/Makefile</parameter>\n"
        "<parameter=old_str>\tcc -o a a.c   </parameter>\n"
        "<parameter=new_str>\tcc -O2 -o a a.c</parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {
                "command": "str_replace",
                "path": "/testbed/Makefile",
                "old_str": "\tcc -o a a.c   ",
                "new_str": "\tcc -O2 -o a a.c",
            },
        ),
        None,
    ),
    (
        "empty_value",
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/m.py</parameter>\n"
        "<parameter=old_str>debug = True\n</parameter>\n<parameter=new_str></parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {
                "command": "str_replace",
                "path": "/testbed/m.py",
                "old_str": "debug = True",
                "new_str": "",
            },
        ),
        None,
    ),
    (
        "close_parameter_inside_code_string",
        "<function=file_editor>\n<parameter=command>create</parameter>\n"
        "<parameter=path>/testbed/t.py</parameter>\n"
        '<parameter=file_text>\nEND = "</parameter>"\nprint(END)\n</parameter>\n</function>',
        FunctionCall(
            "file_editor",
            {
                "command": "create",
                "path": "/testbed/t.py",
                "file_text": 'END = "</parameter>"\nprint(END)',
            },
        ),
        None,
    ),
    (
        "nested_tags_in_code",
        "<function=file_editor>\n<parameter=command>create</parameter>\n"
        "<parameter=path>/testbed/tpl.py</parameter>\n"
        '<parameter=file_text>\nTEMPLATE = "<function=x>\\n<parameter=y>v</parameter>\\n</function>"\n'
        "</parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {
                "command": "create",
                "path": "/testbed/tpl.py",
                "file_text": 'TEMPLATE = "<function=x>\\n<parameter=y>v</parameter>\\n</function>"',
            },
        ),
        None,
    ),
    (
        "html_closing_function_tag_in_value",
        "<function=execute_bash>\n<parameter=cmd>echo '</function>' > f.txt</parameter>\n</function>",
        FunctionCall("execute_bash", {"cmd": "echo '</function>' > f.txt"}),
        None,
    ),
    (
        "unicode_values",
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/ü.py</parameter>\n"
        "<parameter=old_str>s = 'naïve'</parameter>\n"
        "<parameter=new_str>s = 'café ✓ 日本語 🚀'</parameter>\n</function>",
        FunctionCall(
            "file_editor",
            {
                "command": "str_replace",
                "path": "/testbed/ü.py",
                "old_str": "s = 'naïve'",
                "new_str": "s = 'café ✓ 日本語 🚀'",
            },
        ),
        None,
    ),
    (
        "call_inside_thinking_is_not_an_action",
        "<think>\nMaybe <function=finish>\n</function> right away? No.\n</think>\n\n" + BASH_LS,
        FunctionCall("execute_bash", {"cmd": "ls -la"}),
        None,
    ),
    (
        "finish_without_parameters",
        "Done.\n<function=finish>\n</function>",
        FunctionCall("finish", {}),
        None,
    ),
    (
        "submit_alias_is_finish",
        "<function=submit>\n<parameter=command>submit</parameter>\n</function>",
        FunctionCall("finish", {"command": "submit"}),
        None,
    ),
    (
        "two_calls_first_runs_with_notice",
        BASH_LS + "\n<function=finish>\n</function>",
        FunctionCall("execute_bash", {"cmd": "ls -la"}),
        "held 2 function calls; only the first one ran",
    ),
    ("no_call", "I think the bug is in parse().", None, "no function call found"),
    (
        "unclosed_thinking",
        "<think>\nLet me call " + BASH_LS,
        None,
        "never closed it with </think>",
    ),
    (
        "unknown_function",
        "<function=bash>\n<parameter=cmd>ls</parameter>\n</function>",
        None,
        "unknown function 'bash'. Available functions: file_editor, execute_bash, search, finish",
    ),
    (
        "missing_required_parameter",
        "<function=file_editor>\n<parameter=command>view</parameter>\n</function>",
        None,
        "file_editor needs parameter(s) path",
    ),
    (
        "unknown_parameter",
        "<function=execute_bash>\n<parameter=command>ls</parameter>\n</function>",
        None,
        "execute_bash has no parameter 'command'. Its parameters: cmd",
    ),
    (
        "repeated_parameter",
        "<function=execute_bash>\n<parameter=cmd>ls</parameter>\n<parameter=cmd>pwd</parameter>\n"
        "</function>",
        None,
        "'cmd' is given more than once",
    ),
    (
        "unclosed_function",
        "<function=execute_bash>\n<parameter=cmd>ls</parameter>\n",
        None,
        "the call to execute_bash is not closed",
    ),
    (
        "unclosed_parameter",
        "<function=execute_bash>\n<parameter=cmd>ls\n</function>",
        None,
        "parameter 'cmd' of execute_bash is not closed",
    ),
    (
        "stray_text_inside_call",
        "<function=execute_bash>ls -la</function>",
        None,
        "unexpected text inside the call to execute_bash: 'ls -la</function>'",
    ),
    (
        "ambiguous_end",
        "<function=execute_bash>\n<parameter=cmd>echo '</parameter>\n</function>'</parameter>\n"
        "</function>",
        None,
        "could not tell where the call to execute_bash ends",
    ),
    (
        "truncated_mid_value",
        "<function=file_editor>\n<parameter=command>create</parameter>\n"
        "<parameter=path>/testbed/a.py</parameter>\n<parameter=file_text>\ndef f():\n    ret",
        None,
        "parameter 'file_text' of file_editor is not closed",
    ),
]


@pytest.mark.parametrize(
    "reply, expected, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_parse_table(reply: str, expected: FunctionCall | None, message: str | None):
    result = parse_function_call(reply)
    assert result.call == expected
    if expected is None:
        assert result.error is not None and result.error.startswith("ERROR: ")
        assert message in result.error
        assert result.notice is None
    else:
        assert result.error is None
        if message is None:
            assert result.notice is None
        else:
            assert message in result.notice


def test_table_is_large_enough():
    assert len(CASES) >= 20


def test_thought_is_the_text_before_the_call():
    result = parse_function_call("<think>\nhmm\n</think>\nList it.\n" + BASH_LS)
    assert result.thought == "<think>\nhmm\n</think>\nList it.\n"


def test_errors_show_the_call_format_when_no_call():
    error = parse_function_call("just text").error
    assert CALL_EXAMPLE in error and "finish" in error


TRICKY_VALUES = [
    "",
    " ",
    "\n",
    "\n\n",
    "    indented\n\tand tabbed  ",
    "\nleading and trailing newline\n",
    'x = "</parameter>"',
    "<parameter=k>not a key</parameter> here",
    "ends with </function> tag",
    "ünïcödé ✓ 日本語",
    "line1\r\nline2",
]


@pytest.mark.parametrize("value", TRICKY_VALUES)
def test_render_then_parse_is_exact(value: str):
    parameters = {
        "command": "str_replace",
        "path": "/testbed/a.py",
        "old_str": value,
        "new_str": value,
    }
    result = parse_function_call(render_function_call("file_editor", parameters))
    assert result.call == FunctionCall("file_editor", parameters)


def test_system_prompt_documents_every_function_and_parameter():
    prompt = system_prompt()
    for spec in TOOLS.values():
        assert f": {spec.name} ---" in prompt
        for parameter in spec.parameters:
            necessity = "required" if parameter.required else "optional"
            assert f"{parameter.name} ({parameter.kind}, {necessity})" in prompt


def test_call_example_parses():
    assert parse_function_call(CALL_EXAMPLE).call == FunctionCall(
        "execute_bash", {"cmd": "ls /testbed"}
    )


# Replies built to make a backtracking scanner quadratic (issue 17: 100 KB of "<function=" took
# 4.5 s and 1 MB did not finish in 600 s, on the event loop every episode shares).
ADVERSARIAL_REPLIES = {
    "repeated_function_open": lambda n: "<function=" * (n // 10),
    "function_open_and_long_name": lambda n: ("<function=" + "a" * 90) * (n // 100),
    "repeated_parameter_open": lambda n: "<function=search>" + "<parameter=" * (n // 11),
    "repeated_parameter_close": lambda n: (
        "<function=search><parameter=search_term>" + "</parameter> x" * (n // 14)
    ),
    "many_calls": lambda n: "<function=finish></function>" * (n // 28),
    "repeated_think": lambda n: "<think>" * (n // 7),
}


# A linear parser passes over the reply a few times (2.7 at most today); a quadratic one about
# once per tag, thousands of times at 100 KB.
MAX_PASSES = 4


@pytest.mark.parametrize("make_reply", ADVERSARIAL_REPLIES.values(), ids=ADVERSARIAL_REPLIES)
def test_parse_work_grows_linearly_from_100kb_to_1mb(make_reply):
    """The characters the parser passes over, counted by its Scanner rather than timed, stay
    within MAX_PASSES passes over the reply at 100 KB and at 1 MB: a verdict load cannot change.
    Timing: bench/parse_time.py."""
    for size in (100_000, 1_000_000):
        scanner = Scanner(make_reply(size))
        parse_function_call(scanner)
        assert len(scanner.text) >= 0.999 * size
        passes = scanner.chars_scanned / len(scanner.text)
        assert 1 <= passes <= MAX_PASSES, f"parsing {size:,} characters took {passes:.1f} passes"


def test_scanner_reads_runs_without_backtracking():
    """Scanner.run_end counts a run as its length: true only for one repeated character class."""
    patterns = [value for value in vars(parsing).values() if isinstance(value, re.Pattern)]
    assert patterns
    for pattern in patterns:
        assert re.fullmatch(r"\[\^?[^\]]*\]\*|\\s\*", pattern.pattern), pattern.pattern
