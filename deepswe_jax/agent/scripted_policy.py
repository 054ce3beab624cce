"""A policy that replays a task's gold patch through the agent's own tools.

The script views the first file the patch touches, applies every hunk with
`file_editor str_replace` (new files with `create`, deleted ones with `rm`),
then calls `finish`. Fed to `ScriptedSampler`, it checks the whole agent path
(prompt, parser, tools, patch extraction, grading) with reward 1 expected.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import FunctionCall, render_function_call
from deepswe_jax.env.tasks import Task

REPO_ROOT = "/testbed"
WORDS = re.compile(r"\S+|\s+")  # a line as words and the whitespace between them
HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class FileEdit:
    """One hunk of a unified diff: `old` becomes `new` in `path` (None: the file is absent)."""

    path: str
    old: str | None
    new: str | None


def _diff_path(header_value: str) -> str | None:
    """`a/pkg/m.py` -> `pkg/m.py`; `/dev/null` -> None."""
    path = header_value.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_unified_diff(patch: str) -> list[FileEdit]:
    """The hunks of a (git) unified diff, in order, each with its old and new text."""
    edits: list[FileEdit] = []
    lines = patch.splitlines(keepends=True)
    old_path = new_path = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("--- "):
            old_path = _diff_path(line[4:])
        elif line.startswith("+++ "):
            new_path = _diff_path(line[4:])
        elif header := HUNK_HEADER.match(line):
            old_left = int(header.group(1) or 1)
            new_left = int(header.group(2) or 1)
            old: list[str] = []
            new: list[str] = []
            sides: tuple[list[str], ...] = ()
            while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
                body = lines[i]
                i += 1
                if body.startswith("\\"):
                    for side in sides:
                        side[-1] = side[-1].removesuffix("\n")
                    continue
                # A context line may have lost its leading space to an editor ("\n" alone).
                kind, text = (body[0], body[1:]) if body[0] in " -+" else (" ", body)
                sides = {" ": (old, new), "-": (old,), "+": (new,)}[kind]
                for side in sides:
                    side.append(text)
                old_left -= kind in " -"
                new_left -= kind in " +"
            edits.append(
                FileEdit(
                    path=new_path or old_path,
                    old=None if old_path is None else "".join(old),
                    new=None if new_path is None else "".join(new),
                )
            )
    return edits


def minimal_edit(edit: FileEdit) -> FileEdit:
    """`edit` cut down to what a person types into `str_replace`: only the lines that change
    (the unchanged lines around them dropped), without their last newline; within a single
    changed line, only the words that change (`RO_STEP = 36` -> `RO_STEP = 12` becomes
    `36` -> `12`). `str_replace` replaces a substring, so this makes the same change whenever
    the shorter old text is still unique in the file. Creations, deletions and pure insertions
    (no old line left) stay as they are."""
    if edit.old is None or edit.new is None:
        return edit
    old, new = edit.old.splitlines(keepends=True), edit.new.splitlines(keepends=True)
    while old and new and old[0] == new[0]:
        old, new = old[1:], new[1:]
    while old and new and old[-1] == new[-1]:
        old, new = old[:-1], new[:-1]
    if not old or not new:
        return edit
    old_text, new_text = "".join(old), "".join(new)
    if old_text.endswith("\n") and new_text.endswith("\n"):
        old_text, new_text = old_text[:-1], new_text[:-1]
    if "\n" not in old_text and "\n" not in new_text:
        old_words, new_words = WORDS.findall(old_text), WORDS.findall(new_text)
        while old_words and new_words and old_words[0] == new_words[0]:
            old_words, new_words = old_words[1:], new_words[1:]
        while old_words and new_words and old_words[-1] == new_words[-1]:
            old_words, new_words = old_words[:-1], new_words[:-1]
        if old_words and new_words:
            old_text, new_text = "".join(old_words), "".join(new_words)
    return FileEdit(edit.path, old_text, new_text)


def edit_calls(edits: Sequence[FileEdit]) -> list[FunctionCall]:
    """The tool calls that make `edits` in /testbed."""
    calls = []
    for edit in edits:
        path = f"{REPO_ROOT}/{edit.path}"
        if edit.old is None:
            parameters = {"command": "create", "path": path, "file_text": edit.new}
            calls.append(FunctionCall("file_editor", parameters))
        elif edit.new is None:
            calls.append(FunctionCall("execute_bash", {"cmd": f"rm {shlex.quote(path)}"}))
        else:
            parameters = {
                "command": "str_replace",
                "path": path,
                "old_str": edit.old,
                "new_str": edit.new,
            }
            calls.append(FunctionCall("file_editor", parameters))
    return calls


def gold_patch_replies(task: Task) -> list[str]:
    """Assistant replies (thinking, then one call each) that apply `task.patch` and finish."""
    edits = parse_unified_diff(task.patch)
    if not edits:
        raise ValueError(f"task {task.instance_id} has no hunks in its gold patch")
    first = FunctionCall("file_editor", {"command": "view", "path": f"{REPO_ROOT}/{edits[0].path}"})
    steps = [("Look at the code the issue is about.", first)]
    steps += [("Apply the fix.", call) for call in edit_calls(edits)]
    steps.append(("The fix is in; submit.", FunctionCall("finish", {"command": "submit"})))
    return [
        f"<think>\n{thought}\n</think>\n\n{render_function_call(call.name, call.parameters)}"
        for thought, call in steps
    ]


def reply_ids(tokenizer: ChatTokenizer, reply: str) -> list[int]:
    """A reply as a sampler would return it: its tokens, then the closing `<|im_end|>`."""
    return tokenizer.encode_text(reply) + [tokenizer.im_end_id]
