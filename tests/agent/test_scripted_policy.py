"""The scripted expert's edits: hunks of a unified diff and the minimal str_replace a person
would type (the "edit" expert script of verify/expert.py)."""

from __future__ import annotations

import pytest

from deepswe_jax.agent.scripted_policy import FileEdit, minimal_edit
from deepswe_jax.env.tasks import Task, unified_diff
from deepswe_jax.verify.expert import expert_replies

MODULE = '"""The ro dial."""\n\nRO_STEP = 36\n\n\ndef ro_dial(turns):\n    return RO_STEP * turns\n'


@pytest.mark.parametrize(
    "old, new, want_old, want_new",
    [
        ("x = 1\nRO_STEP = 36\n\n", "x = 1\nRO_STEP = 12\n\n", "36", "12"),  # only the value
        ("    return level > 42\n", "    return level >= 42\n", ">", ">="),
        ("    return max(values)\n", "    return sum(values)\n", "max(values)", "sum(values)"),
        ('A = "rvo"\n', 'A = "ro"\n', '"rvo"', '"ro"'),
        ("a\nb\nz\n", "a\nc\nd\nz\n", "b", "c\nd"),  # several lines: whole changed lines
        ("a = 1\n", "a = 1\nb = 2\n", "a = 1\n", "a = 1\nb = 2\n"),  # pure insertion: kept
    ],
)
def test_minimal_edit_keeps_only_what_changes(old, new, want_old, want_new):
    edit = minimal_edit(FileEdit("m.py", old, new))
    assert (edit.path, edit.old, edit.new) == ("m.py", want_old, want_new)
    assert old.count(edit.old) == 1 and old.replace(edit.old, edit.new) == new


def test_creations_and_deletions_are_not_cut():
    for edit in (FileEdit("m.py", None, "x\n"), FileEdit("m.py", "x\n", None)):
        assert minimal_edit(edit) == edit


def test_edit_script_is_one_minimal_str_replace_then_finish():
    task = Task(
        instance_id="dials-ro",
        repo="deepswe/dials",
        base_commit="0" * 40,
        problem_statement="In /testbed/dials/ro.py, replace `36` with `12`.",
        patch=unified_diff("dials/ro.py", MODULE, MODULE.replace("36", "12")),
        test_patch="",
        FAIL_TO_PASS=("tests/test_dials.py::test_ro",),
        PASS_TO_PASS=(),
        image="deepswe/dials:base",
    )
    edit, finish = expert_replies(task, "edit")
    assert edit.endswith(
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        "<parameter=path>/testbed/dials/ro.py</parameter>\n<parameter=old_str>36</parameter>\n"
        "<parameter=new_str>12</parameter>\n</function>"
    )
    assert finish.endswith("<function=finish>\n<parameter=command>submit</parameter>\n</function>")
    assert len(expert_replies(task)) == 4  # view, edit, test run, finish
    with pytest.raises(ValueError, match="expert script"):
        expert_replies(task, "fast")
