#!/usr/bin/env python3
"""file_editor <command> --path P [...]: view, create and edit files (R2E-Gym interface).

Commands:
  view         a file as `cat -n` (6-wide line number, tab, text); `--view_range "[a, b]"`
               shows lines a..b (b = -1: to the end); `--concise True` elides function
               bodies of Python files (applied automatically to .py files over 110 lines
               viewed whole). A directory lists its non-hidden entries 2 levels deep.
  create       write `--file_text` to a new file (fails if the path exists).
  str_replace  replace the single occurrence of `--old_str` by `--new_str` (fails when
               old_str occurs 0 or several times); prints a numbered snippet of the edit.
  insert       insert `--new_str` after line `--insert_line` (0 = at the top).
  undo_edit    restore the file as it was before its last edit.

Edit history persists across calls in STATE_FILE. Errors start with "ERROR:" (exit
status 1). Output over 10,000 characters is clipped with a note suggesting `grep -n`.
"""

import argparse
import ast
import json
import os
import sys

STATE_FILE = "/var/tmp/deepswe_file_editor_state.json"
SNIPPET_LINES = 4
MAX_RESPONSE_CHARS = 10000
AUTO_CONCISE_LINES = 110
CLIPPED_NOTE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in order "
    "to find the line numbers of what you are looking for.</NOTE>"
)
COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


class EditorError(Exception):
    """A usage or file-system error; its message is shown after "ERROR: "."""


def clip(text):
    if len(text) <= MAX_RESPONSE_CHARS:
        return text
    return text[:MAX_RESPONSE_CHARS] + CLIPPED_NOTE


def numbered(lines, first_line):
    """`cat -n` rendering of `lines`, numbering from `first_line`."""
    return "\n".join(f"{first_line + i:6}\t{line}" for i, line in enumerate(lines))


def read_text(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise EditorError(f"Failed to read {path}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def write_text(path, text):
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise EditorError(f"Failed to write {path}: {e.strerror or e}") from None


def load_history():
    try:
        with open(STATE_FILE, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_history(history):
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(history, f)
    os.replace(tmp, STATE_FILE)


def split_lines(text):
    """Lines of `text` without a final empty element for a trailing newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse_view_range(value):
    parts = value.strip().strip("[]()").replace(",", " ").split()
    try:
        if len(parts) != 2:
            raise ValueError
        return [int(parts[0]), int(parts[1])]
    except ValueError:
        raise EditorError(
            f'Invalid view_range {value!r}: expected two integers like "[10, 20]" (use -1 as the end '
            "to view until the end of the file)."
        ) from None


def parse_bool(value):
    return str(value).strip().lower() in ("true", "1", "yes")


def elided_lines(text, path):
    """(line number, text) pairs of a Python file with long function bodies elided."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise EditorError(f"Cannot show a concise view of {path}: syntax error: {e}") from None
    ranges = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            start = node.body[0].lineno
            end = getattr(node.body[-1], "end_lineno", None) or start
            if end - start >= 3:
                ranges.append((start, end))
    hidden = set()
    for start, end in ranges:
        hidden.update(range(start, end + 1))
    starts = {}
    for start, end in ranges:
        if start not in starts or end > starts[start]:
            starts[start] = end
    result = []
    for number, line in enumerate(split_lines(text), 1):
        if number in starts and not any(s < number <= e for s, e in ranges):
            result.append((number, f"... eliding lines {number}-{starts[number]} ..."))
        if number not in hidden:
            result.append((number, line))
    return result


def view(path, view_range, concise):
    if os.path.isdir(path):
        if view_range is not None:
            raise EditorError("view_range is not allowed when `path` is a directory.")
        entries = [path]
        base_depth = path.rstrip("/").count("/")
        for root, dirs, files in os.walk(path, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            depth = root.rstrip("/").count("/") - base_depth
            for name in dirs + sorted(f for f in files if not f.startswith(".")):
                entries.append(os.path.join(root, name))
            if depth >= 1:
                dirs[:] = []
        listing = "\n".join(sorted(entries))
        return clip(
            f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden:\n{listing}\n"
        )
    text = read_text(path)
    lines = split_lines(text)
    if (
        path.endswith(".py")
        and view_range is None
        and not concise
        and len(lines) > AUTO_CONCISE_LINES
    ):
        concise = True
    if concise and path.endswith(".py"):
        pairs = elided_lines(text, path)
        header = (
            f"Here is a condensed view for file: {path}; [Note: Useful for understanding file structure in "
            "a concise manner. Please use specific view_range without concise cmd if you want to "
            "explore further into the relevant parts.]\n"
        )
    else:
        pairs = list(enumerate(lines, 1))
        header = f"Here's the result of running `cat -n` on {path}:\n"
    if view_range is not None:
        start, end = view_range
        total = len(lines)
        if not 1 <= start <= max(total, 1):
            raise EditorError(
                f"Invalid view_range {view_range}: the first line must be in [1, {total}]."
            )
        if end != -1 and not start <= end <= total:
            raise EditorError(
                f"Invalid view_range {view_range}: the last line must be in [{start}, {total}], or -1 to view until the "
                "end of the file."
            )
        pairs = [(n, line) for n, line in pairs if n >= start and (end == -1 or n <= end)]
    body = "\n".join(f"{n:6}\t{line}" for n, line in pairs)
    return clip(header + body + "\n")


def create(path, file_text, history):
    if file_text is None:
        raise EditorError("Parameter `file_text` is required for command: create.")
    if os.path.exists(path):
        raise EditorError(
            f"File already exists at: {path}. Cannot overwrite files using command `create`; use "
            "`str_replace` to edit it."
        )
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        try:
            os.makedirs(parent)
        except OSError as e:
            raise EditorError(f"Cannot create directory {parent}: {e.strerror or e}") from None
    write_text(path, file_text)
    history.setdefault(path, []).append(None)
    return f"File created successfully at: {path}\n"


def snippet(text, first_line, last_line):
    """Numbered lines first_line..last_line (1-based, clamped) of `text`."""
    lines = split_lines(text)
    first = max(first_line, 1)
    last = min(last_line, len(lines))
    return numbered(lines[first - 1 : last], first)


def str_replace(path, old_str, new_str, history):
    if old_str is None or old_str == "":
        raise EditorError(
            "Parameter `old_str` is required (and must not be empty) for command: str_replace."
        )
    new_str = new_str or ""
    text = read_text(path)
    count = text.count(old_str)
    if count == 0:
        raise EditorError(
            f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."
        )
    if count > 1:
        starts = []
        position = text.find(old_str)
        while position != -1:
            starts.append(text.count("\n", 0, position) + 1)
            position = text.find(old_str, position + 1)
        raise EditorError(
            f"No replacement was performed. Multiple occurrences ({count}) of old_str `{old_str}` in lines {starts}. "
            "Please ensure it is unique by including more surrounding context."
        )
    edit_line = text[: text.find(old_str)].count("\n") + 1
    updated = text.replace(old_str, new_str)
    write_text(path, updated)
    history.setdefault(path, []).append(text)
    first = edit_line - SNIPPET_LINES
    last = edit_line + new_str.count("\n") + SNIPPET_LINES
    return (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n{clip(snippet(updated, first, last))}\n"
        "Review the changes and make sure they are as expected. Edit the file again if necessary."
    )


def insert(path, insert_line, new_str, history):
    if new_str is None:
        raise EditorError("Parameter `new_str` is required for command: insert.")
    if insert_line is None:
        raise EditorError("Parameter `insert_line` is required for command: insert.")
    try:
        line = int(insert_line)
    except ValueError:
        raise EditorError(f"Invalid insert_line {insert_line!r}: expected an integer.") from None
    text = read_text(path)
    lines = split_lines(text)
    if not 0 <= line <= len(lines):
        raise EditorError(f"Invalid insert_line {line}: it must be in [0, {len(lines)}].")
    new_lines = split_lines(new_str) if new_str else [""]
    updated_lines = lines[:line] + new_lines + lines[line:]
    trailing = "\n" if text.endswith("\n") or text == "" else ""
    updated = "\n".join(updated_lines) + trailing
    write_text(path, updated)
    history.setdefault(path, []).append(text)
    first = line + 1 - SNIPPET_LINES
    last = line + len(new_lines) + SNIPPET_LINES
    return (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of the edited "
        f"file:\n{clip(snippet(updated, first, last))}\nReview the changes and make sure they are as expected (correct indentation, no "
        "duplicate lines, etc). Edit the file again if necessary."
    )


def undo_edit(path, history):
    edits = history.get(path)
    if not edits:
        raise EditorError(f"No edit history found for {path}.")
    previous = edits.pop()
    if previous is None:
        os.remove(path)
        return f"Last edit to {path} undone successfully: the file it created was removed.\n"
    write_text(path, previous)
    return f"Last edit to {path} undone successfully. Here's the result of running `cat -n` on {path}:\n{clip(numbered(split_lines(previous), 1))}\n"


def run(args, history):
    if args.command not in COMMANDS:
        raise EditorError(
            "Unrecognized command {!r}. The allowed commands are: {}.".format(
                args.command, ", ".join(COMMANDS)
            )
        )
    if not args.path:
        raise EditorError(f"Parameter `path` is required for command: {args.command}.")
    path = os.path.abspath(args.path)
    if args.command != "create" and not os.path.exists(path):
        raise EditorError(f"The path {path} does not exist. Please provide a valid path.")
    if args.command not in ("view", "create") and os.path.isdir(path):
        raise EditorError(
            f"The path {path} is a directory and only the `view` command can be used on directories."
        )
    if args.command == "view":
        view_range = parse_view_range(args.view_range) if args.view_range else None
        return view(path, view_range, parse_bool(args.concise))
    if args.command == "create":
        return create(path, args.file_text, history)
    if args.command == "str_replace":
        return str_replace(path, args.old_str, args.new_str, history)
    if args.command == "insert":
        return insert(path, args.insert_line, args.new_str, history)
    return undo_edit(path, history)


def main():
    parser = argparse.ArgumentParser(
        description="View, create and edit files; edits can be undone."
    )
    parser.add_argument("command", help="One of: " + ", ".join(COMMANDS))
    parser.add_argument(
        "--path", help="Absolute path of the file or directory, e.g. /testbed/file.py"
    )
    parser.add_argument("--file_text", help="Content of the new file (create)")
    parser.add_argument(
        "--view_range", help='Lines to view, e.g. "[10, 20]"; -1 as the end means to the end'
    )
    parser.add_argument("--old_str", help="Exact text to replace (str_replace)")
    parser.add_argument("--new_str", help="Replacement (str_replace) or text to insert (insert)")
    parser.add_argument(
        "--insert_line", help="Insert after this line; 0 inserts at the top (insert)"
    )
    parser.add_argument(
        "--concise", default="False", help="True: elide function bodies of Python files (view)"
    )
    parser.add_argument(
        "--enable_linting", default="False", help="Accepted for R2E-Gym compatibility; unused"
    )
    args = parser.parse_args()
    history = load_history()
    try:
        print(run(args, history), end="")
    except EditorError as e:
        print(f"ERROR: {e}")
        sys.exit(1)
    finally:
        try:
            save_history(history)
        except OSError as e:
            print(f"WARNING: could not save the edit history to {STATE_FILE}: {e}")


if __name__ == "__main__":
    main()
