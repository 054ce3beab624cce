"""The in-container tools through a real container: R2E-Gym interface and output formats."""

import pytest

from deepswe_jax.env.docker.docker_runtime import DockerRuntime

TIMEOUT = 30


@pytest.fixture(scope="module")
def runtime(tiny_task, docker_client, run_label):
    with DockerRuntime(tiny_task.image, run_label=run_label, client=docker_client) as rt:
        yield rt


def editor(runtime, **params):
    return runtime.call_tool("file_editor", params, timeout=TIMEOUT)


def test_view_file_is_cat_n_numbered(runtime):
    result = editor(runtime, command="view", path="/testbed/tinycalc/__init__.py")
    assert result.exit_code == 0
    assert result.output.startswith(
        "Here's the result of running `cat -n` on /testbed/tinycalc/__init__.py:\n"
    )
    assert "     1\tdef add(a, b):\n     2\t    return a - b\n" in result.output


def test_view_range_to_the_end_and_bad_range(runtime):
    result = editor(
        runtime, command="view", path="/testbed/tinycalc/__init__.py", view_range="[5, -1]"
    )
    lines = result.output.splitlines()[1:]
    assert lines == ["     5\tdef mul(a, b):", "     6\t    return a * b"]
    bad = editor(
        runtime, command="view", path="/testbed/tinycalc/__init__.py", view_range="[4, 99]"
    )
    assert bad.output.startswith("ERROR: Invalid view_range") and bad.exit_code == 1


def test_view_directory_two_levels_without_hidden(runtime):
    result = editor(runtime, command="view", path="/testbed")
    assert "up to 2 levels deep in /testbed, excluding hidden" in result.output
    listed = result.output.splitlines()[1:]
    assert "/testbed/tinycalc/__init__.py" in listed and "/testbed/tests/test_calc.py" in listed
    assert not any("/.git" in line for line in listed)


def test_create_then_create_again_fails(runtime):
    created = editor(runtime, command="create", path="/testbed/notes/new.py", file_text="x = 1\n")
    assert created.exit_code == 0 and "File created successfully" in created.output
    assert runtime.read_file("/testbed/notes/new.py") == b"x = 1\n"
    again = editor(runtime, command="create", path="/testbed/notes/new.py", file_text="y = 2\n")
    assert again.output.startswith("ERROR: File already exists at: /testbed/notes/new.py")
    assert runtime.read_file("/testbed/notes/new.py") == b"x = 1\n"


def test_str_replace_is_whitespace_exact_and_shows_a_snippet(runtime):
    runtime.write_file("/testbed/edit.py", "".join(f"line{i} = {i}\n" for i in range(1, 21)))
    result = editor(
        runtime,
        command="str_replace",
        path="/testbed/edit.py",
        old_str="line10 = 10\n",
        new_str="  - starts with a dash  \n\n",
    )
    assert result.exit_code == 0
    assert "has been edited" in result.output
    # About 4 lines of context on each side, numbered.
    assert (
        "     6\tline6 = 6\n" in result.output
        and "    10\t  - starts with a dash  \n" in result.output
    )
    assert "    15\tline14 = 14" in result.output and "line5 = 5" not in result.output
    text = runtime.read_file("/testbed/edit.py").decode()
    assert "line9 = 9\n  - starts with a dash  \n\nline11 = 11\n" in text


def test_str_replace_ambiguous_or_missing_is_an_error(runtime):
    runtime.write_file("/testbed/twice.py", "a = 1\nb = 2\na = 1\n")
    twice = editor(
        runtime, command="str_replace", path="/testbed/twice.py", old_str="a = 1", new_str="a = 3"
    )
    assert twice.exit_code == 1
    assert twice.output.startswith("ERROR: No replacement was performed. Multiple occurrences (2)")
    assert "lines [1, 3]" in twice.output
    missing = editor(
        runtime, command="str_replace", path="/testbed/twice.py", old_str="zzz", new_str=""
    )
    assert missing.output.startswith(
        "ERROR: No replacement was performed, old_str `zzz` did not appear"
    )
    assert runtime.read_file("/testbed/twice.py") == b"a = 1\nb = 2\na = 1\n"


def test_insert_at_top_and_after_a_line_then_undo_each(runtime):
    runtime.write_file("/testbed/ins.py", "one\ntwo\n")
    top = editor(runtime, command="insert", path="/testbed/ins.py", insert_line="0", new_str="zero")
    assert top.exit_code == 0 and "     1\tzero" in top.output
    after = editor(
        runtime, command="insert", path="/testbed/ins.py", insert_line="3", new_str="three\nfour"
    )
    assert after.exit_code == 0
    assert runtime.read_file("/testbed/ins.py") == b"zero\none\ntwo\nthree\nfour\n"
    bad = editor(runtime, command="insert", path="/testbed/ins.py", insert_line="9", new_str="x")
    assert bad.output.startswith("ERROR: Invalid insert_line 9: it must be in [0, 5].")
    # Undo history persists across calls (separate processes): two undos restore the original.
    assert (
        "undone successfully" in editor(runtime, command="undo_edit", path="/testbed/ins.py").output
    )
    assert runtime.read_file("/testbed/ins.py") == b"zero\none\ntwo\n"
    editor(runtime, command="undo_edit", path="/testbed/ins.py")
    assert runtime.read_file("/testbed/ins.py") == b"one\ntwo\n"
    nothing = editor(runtime, command="undo_edit", path="/testbed/ins.py")
    assert nothing.output.startswith("ERROR: No edit history found for /testbed/ins.py")


def test_undo_of_create_removes_the_file(runtime):
    editor(runtime, command="create", path="/testbed/tmp_created.py", file_text="pass\n")
    editor(runtime, command="undo_edit", path="/testbed/tmp_created.py")
    with pytest.raises(FileNotFoundError):
        runtime.read_file("/testbed/tmp_created.py")


def test_long_output_is_clipped_with_a_grep_hint(runtime):
    runtime.write_file(
        "/testbed/big.txt", "".join(f"row {i} " + "x" * 80 + "\n" for i in range(400))
    )
    result = editor(runtime, command="view", path="/testbed/big.txt")
    assert "<response clipped>" in result.output and "grep -n" in result.output
    assert len(result.output) < 10_500


def test_concise_view_elides_long_function_bodies(runtime):
    body = "".join(f"    v{i} = {i}\n" for i in range(8))
    runtime.write_file("/testbed/long.py", f"def f():\n{body}    return 1\n\n\nX = 2\n")
    result = editor(runtime, command="view", path="/testbed/long.py", concise="True")
    assert "Here is a condensed view for file: /testbed/long.py" in result.output
    assert "     1\tdef f():" in result.output and "... eliding lines 2-10 ..." in result.output
    assert "v3 = 3" not in result.output and "    13\tX = 2" in result.output


def test_unknown_command_and_missing_path(runtime):
    assert editor(runtime, command="delete", path="/testbed").output.startswith(
        "ERROR: Unrecognized command 'delete'"
    )
    assert editor(runtime, command="view", path="/testbed/nope.py").output.startswith(
        "ERROR: The path /testbed/nope.py does not exist."
    )


def bash(runtime, cmd):
    return runtime.call_tool("execute_bash", {"cmd": cmd}, timeout=TIMEOUT)


def test_execute_bash_sections_and_exit_code(runtime):
    ok = bash(runtime, "pwd; echo to-stderr >&2")
    assert ok.exit_code == 0
    assert ok.output == "[STDOUT]\n\n/testbed \n\n[STDERR]\n\nto-stderr\n"
    failed = bash(runtime, "echo partial; exit 3")
    assert failed.exit_code == 3
    assert failed.output.startswith("Error executing command:\n\n[STDOUT]\n\npartial")


def test_execute_bash_keeps_quotes_and_newlines_verbatim(runtime):
    result = bash(runtime, "printf '%s|' \"a  b\" 'c\"d' $'e\\tf'\nprintf 'second line\\n'")
    assert result.output.startswith('[STDOUT]\n\na  b|c"d|e\tf|second line')


@pytest.mark.parametrize(
    "cmd",
    [
        "ipython",
        "python",
        "python3 -i",
        "jupyter notebook",
        "sleep 100 &",
        "nohup sleep 100",
        "vim x.py",
    ],
)
def test_execute_bash_refuses_interactive_and_background(runtime, cmd):
    result = bash(runtime, cmd)
    assert result.exit_code == 1
    assert "is not allowed" in result.output


def test_search_file_and_directory(runtime):
    in_file = runtime.call_tool(
        "search",
        {"search_term": "return", "path": "/testbed/tinycalc/__init__.py"},
        timeout=TIMEOUT,
    )
    assert in_file.output == (
        'Matches for "return" in /testbed/tinycalc/__init__.py:\n2:    return a - b\n6:    return a * b\n'
    )
    in_dir = runtime.call_tool("search", {"search_term": "def "}, timeout=TIMEOUT)
    assert in_dir.output.startswith("Found ")
    assert "./tinycalc/__init__.py (2 matches)" in in_dir.output
    assert "./tests/test_calc.py (1 matches)" in in_dir.output
    none = runtime.call_tool("search", {"search_term": "no-such-text-anywhere"}, timeout=TIMEOUT)
    assert none.output.startswith('No matches found for "no-such-text-anywhere"')


def test_search_refuses_more_than_100_files(runtime):
    runtime.run(
        "mkdir -p /testbed/many && for i in $(seq 101); do echo needle > /testbed/many/m$i.py; done",
        timeout=TIMEOUT,
    )
    result = runtime.call_tool(
        "search", {"search_term": "needle", "path": "/testbed/many"}, timeout=TIMEOUT
    )
    assert "Please narrow your search" in result.output


def test_tools_are_on_path_for_the_agent(runtime):
    result = runtime.run(
        "file_editor view --path /testbed/tinycalc/__init__.py && submit", timeout=TIMEOUT
    )
    assert result.exit_code == 0
    assert "     1\tdef add(a, b):" in result.output and "<<< Finished >>>" in result.output
