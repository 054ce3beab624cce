#!/usr/bin/env python3
"""file_editor COMMAND --path P [...], behaving as R2E-Gym's (agentica-project/R2E-Gym@353348a,
src/r2egym/agenthub/tools/r2egym/file_editor.py), the editor DeepSWE-Preview was trained with.

Commands and what they print (every message is the original's, byte for byte):
  view         a directory: `find P -maxdepth 2` listing folders and .py files, hidden ones
               left out, in the file system's order. A file: only .py files are shown (others
               are refused), as a 6-wide line number, one space and the line; --view_range
               "[a, b]" (b = -1: to the end). A .py file of more than 110 lines viewed whole,
               or any .py file with --concise True, is condensed: function bodies of four or
               more lines (nested ones too) and long class docstrings become
               "... eliding lines a-b ..." markers.
  create       writes --file_text to a new file and echoes it `cat -n` style (tab after the
               number); an existing path is refused.
  str_replace  replaces --old_str, which must occur exactly once, by --new_str; echoes the
               edited region with 4 lines of context.
  insert       inserts --new_str after line --insert_line (0 = at the top); echoes the region.
  undo_edit    restores the file's text before its last edit (an undone create leaves an
               empty file).
Output over 10,000 characters is clipped with a note suggesting `grep -n`. Errors print
"ERROR: ..." and the tool still exits 0; an unexpected exception prints its traceback (on
stderr, so it comes first) and "ERROR: Unhandled exception: ...". --enable_linting (any
non-empty value) refuses edits that leave a .py file unparsable. The edit history lives in
STATE_FILE, keyed by the path as given.

Files are decoded as the original decodes them: in the encoding `chardet` detects (utf-8 when
it detects none), so valid UTF-8 with few non-ASCII characters is misread (chardet 5.2.0 takes a
lone em dash for Windows-1252) and written back garbled, as DeepSWE-Preview saw it. chardet is
imported from the repository's environment, as the original imports it, else from VENDOR_DIR,
where `env.r2egym.install_tools` puts the host's chardet 5.2.0. A directory listing that fails
(a file name that is not UTF-8) prints the original's "Ran into ..." error. --help prints the
original's descriptions.

Otherwise the standard library (Python >= 3.8): it runs with the repository's interpreter.
"""

import argparse
import ast
import io
import json
import subprocess
import sys
import traceback
from collections import defaultdict
from pathlib import Path

VENDOR_DIR = "/usr/local/lib/r2egym-tools"
try:
    import chardet
except ImportError:
    sys.path.append(VENDOR_DIR)
    import chardet

STATE_FILE = "/var/tmp/editor_state.json"
SNIPPET_LINES = 4
MAX_RESPONSE_LEN = 10000
AUTO_CONCISE_LINES = 110
TRUNCATED_MESSAGE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
    "You should retry this tool after you have searched inside the file with `grep -n` in "
    "order to find the line numbers of what you are looking for.</NOTE>"
)
LINT_ERROR_HEADER = (
    "Your proposed edit has introduced new syntax error(s).\n"
    "Please read this error message carefully and then retry editing the file.\n"
    "ERRORS:\n"
)
CONDENSED_HEADER = (
    "Here is a condensed view for file: {path}; [Note: Useful for understanding file structure "
    "in a concise manner. Please use specific view_range without concise cmd if you want to "
    "explore further into the relevant parts.]\n"
)


class EditorError(Exception):
    """A refusal; main() prints it as "ERROR: <message>"."""


class Outcome:
    """What a command shows: `output`, then "ERROR: <error>" on its own line when set."""

    def __init__(self, output, error=""):
        self.output = output
        self.error = error


def emit(text):
    """Print `text`; characters stdout cannot encode (from undecodable arguments) become '?'."""
    try:
        print(text)
    except UnicodeEncodeError:
        print(text.encode("utf-8", errors="replace").decode("utf-8", errors="replace"))


def clip(text):
    if len(text) <= MAX_RESPONSE_LEN:
        return text
    return text[:MAX_RESPONSE_LEN] + TRUNCATED_MESSAGE


def read_text(path):
    """The text of `path` in the encoding chardet detects, with universal newlines (so CRLF
    files are rewritten with LF)."""
    encoding = chardet.detect(path.read_bytes())["encoding"] or "utf-8"
    return path.read_text(encoding=encoding)


def cat_n(text, descriptor, first_line=1):
    """The `cat -n` echo of edits: clipped, tabs expanded, "<number:6>\\t<line>" per line."""
    lines = clip(text).expandtabs().split("\n")
    body = "\n".join(f"{first_line + index:6}\t{line}" for index, line in enumerate(lines))
    return f"Here's the result of running `cat -n` on {descriptor}:\n{body}\n"


def syntax_error(text, path):
    """str() of the SyntaxError parsing `text` raises, or "" when it parses."""
    try:
        ast.parse(text, filename=path)
    except SyntaxError as error:
        return str(error)
    return ""


def elided_lines(path):
    """(0-based line index, text) of a .py file with long function bodies and long class
    docstrings replaced by one "... eliding lines a-b ..." entry each, in line order."""
    text = read_text(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise EditorError(f"Syntax error for file {path}: {error}") from None
    hidden_ranges = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first, last = node.body[0].lineno - 1, node.body[-1].end_lineno - 1
            if last - first >= 3:
                hidden_ranges.append((first, last))
        if isinstance(node, ast.ClassDef) and node.body:
            head = node.body[0]
            is_docstring = (
                isinstance(head, ast.Expr)
                and isinstance(head.value, ast.Constant)
                and isinstance(head.value.value, str)
            )
            if is_docstring and head.end_lineno - head.lineno >= 4:
                hidden_ranges.append((head.lineno, head.end_lineno - 2))
    hidden = {index for first, last in hidden_ranges for index in range(first, last + 1)}
    markers = [
        (first, f"... eliding lines {first + 1}-{last + 1} ...") for first, last in hidden_ranges
    ]
    kept = [(index, line) for index, line in enumerate(text.splitlines()) if index not in hidden]
    # A stable sort: a marker comes before a kept line of the same index (there is none).
    return sorted(markers + kept, key=lambda entry: entry[0])


def list_directory(path):
    try:
        find = run_find(path)
    except Exception as error:  # output that is not UTF-8 text (a file's name)
        return Outcome("", f"Ran into {error} while trying to list directory contents of {path}.")
    if find.stderr.strip():
        return Outcome("", find.stderr.strip())
    header = f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden:\n"
    return Outcome(clip(header + find.stdout))


def run_find(path):
    return subprocess.run(
        [
            "find",
            str(path),
            "-maxdepth",
            "2",
            "-not",
            "-path",
            "*/.*",
            "(",
            "-type",
            "d",
            "-o",
            "-name",
            "*.py",
            ")",
        ],
        capture_output=True,
        text=True,
    )


class Editor:
    """The five commands over a persistent edit history ({path: [texts before each edit]})."""

    def __init__(self, history, enable_linting=False):
        self.history = defaultdict(list, history)
        self.enable_linting = enable_linting

    def run(
        self,
        command,
        path_str,
        file_text=None,
        view_range=None,
        old_str=None,
        new_str=None,
        insert_line=None,
        concise=False,
    ):
        path = Path(path_str)
        self.check_path(command, path)
        if command == "view":
            return self.view(path, view_range, concise)
        if command == "create":
            return self.create(path, file_text)
        if command == "str_replace":
            return self.str_replace(path, old_str, new_str)
        if command == "insert":
            return self.insert(path, insert_line, new_str)
        if command == "undo_edit":
            return self.undo_edit(path)
        raise EditorError(
            f"Unrecognized command '{command}'. "
            "Allowed commands: view, create, str_replace, insert, undo_edit."
        )

    @staticmethod
    def check_path(command, path):
        if command == "create" and path.exists():
            raise EditorError(f"File already exists at: {path}. Cannot overwrite with 'create'.")
        if command != "create" and not path.exists():
            raise EditorError(f"The path '{path}' does not exist.")
        if command != "view" and path.is_dir():
            raise EditorError(
                f"The path '{path}' is a directory. Only 'view' can be used on directories."
            )

    def lint(self, text, path):
        """The refusal for an edit that leaves a .py file unparsable (with --enable_linting)."""
        if self.enable_linting and path.suffix == ".py":
            error = syntax_error(text, str(path))
            if error:
                return Outcome("", LINT_ERROR_HEADER + error)
        return None

    def view(self, path, view_range, concise):
        if path.is_dir():
            return list_directory(path)
        if path.suffix != ".py":
            return Outcome(
                "",
                "ERROR: Viewing non-Python files is disallowed for saving context. "
                f"File '{path.name}' is not a .py file.",
            )
        if (
            not view_range
            and not concise
            and len(read_text(path).splitlines()) > AUTO_CONCISE_LINES
        ):
            concise = True
        if concise:
            entries = elided_lines(path)
        else:
            entries = list(enumerate(read_text(path).splitlines()))
        if view_range:
            start, end = view_range
            # Bounds count entries, which a condensed view has fewer of than lines.
            total = len(entries)
            if not 1 <= start <= total:
                return Outcome(
                    "", f"Invalid view_range {view_range}: start line must be in [1, {total}]"
                )
            if end != -1 and not start <= end <= total:
                return Outcome(
                    "",
                    f"Invalid view_range {view_range}: end must be >= start and <= {total}, "
                    "or -1 to view until end.",
                )
            entries = [
                (i, line) for i, line in entries if start <= i + 1 and (end == -1 or i + 1 <= end)
            ]
        if concise:
            header = CONDENSED_HEADER.format(path=path)
        else:
            header = f"Here's the result of running `cat -n` on the file: {path}:\n"
        return Outcome(clip(header + "\n".join(f"{i + 1:6d} {line}" for i, line in entries)))

    def create(self, path, file_text):
        if file_text is None:
            raise EditorError("Cannot create file without 'file_text' parameter.")
        refusal = self.lint(file_text, path)
        if refusal:
            return refusal
        try:
            path.write_text(file_text, encoding="utf-8")
            self.history[str(path)].append("")
        except Exception as error:
            raise EditorError(f"Error creating file at {path}: {error}") from None
        return Outcome(
            f"File created at {path}. {cat_n(file_text, str(path))}"
            "Review the file and make sure that it is as expected. Edit the file if necessary."
        )

    def str_replace(self, path, old_str, new_str):
        if old_str is None:
            raise EditorError("Missing required parameter 'old_str' for 'str_replace'.")
        text = self.read(path)
        occurrences = text.count(old_str)
        if occurrences == 0:
            raise EditorError(f"No occurrences of '{old_str}' found in {path} for replacement.")
        if occurrences > 1:
            raise EditorError(
                f"Multiple occurrences of '{old_str}' found in {path}. "
                "Please ensure it is unique before using str_replace."
            )
        new_str = new_str or ""
        updated = text.replace(old_str, new_str)
        refusal = self.lint(updated, path)
        if refusal:
            return refusal
        self.history[str(path)].append(text)
        self.write(path, updated)
        edit_line = text.split(old_str)[0].count("\n")
        first = max(0, edit_line - SNIPPET_LINES)
        last = edit_line + SNIPPET_LINES + new_str.count("\n")
        snippet = "\n".join(updated.split("\n")[first : last + 1])
        return Outcome(
            f"The file {path} has been edited. {cat_n(snippet, f'a snippet of {path}', first + 1)}"
            "Review the changes and make sure they are as expected. "
            "Edit the file again if necessary."
        )

    def insert(self, path, insert_line, new_str):
        if new_str is None:
            raise EditorError("Missing required parameter 'new_str' for 'insert'.")
        text = self.read(path)
        file_text_lines = text.split("\n")
        # A missing --insert_line (None) fails this comparison: an unhandled TypeError whose
        # traceback shows this line, worded as the original's.
        if insert_line < 0 or insert_line > len(file_text_lines):
            raise EditorError(
                f"Invalid insert_line {insert_line}. Must be in [0, {len(file_text_lines)}]."
            )
        inserted = new_str.split("\n")
        updated = "\n".join(
            file_text_lines[:insert_line] + inserted + file_text_lines[insert_line:]
        )
        refusal = self.lint(updated, path)
        if refusal:
            return refusal
        self.history[str(path)].append(text)
        self.write(path, updated)
        before = file_text_lines[max(0, insert_line - SNIPPET_LINES) : insert_line]
        after = file_text_lines[insert_line : insert_line + SNIPPET_LINES]
        snippet = "\n".join(before + inserted + after)
        first = max(1, insert_line - SNIPPET_LINES + 1)
        return Outcome(
            f"The file {path} has been edited. "
            f"{cat_n(snippet, 'a snippet of the edited file', first)}"
            "Review the changes and make sure they are as expected (correct indentation, "
            "no duplicate lines, etc). Edit the file again if necessary."
        )

    def undo_edit(self, path):
        edits = self.history[str(path)]
        if not edits:
            raise EditorError(f"No previous edits found for {path} to undo.")
        previous = edits.pop()
        self.write(path, previous)
        return Outcome(f"Last edit to {path} undone successfully. {cat_n(previous, str(path))}")

    @staticmethod
    def read(path):
        try:
            return read_text(path)
        except Exception as error:
            raise EditorError(f"Failed to read file {path}: {error}") from None

    @staticmethod
    def write(path, text):
        try:
            path.write_text(text, encoding="utf-8")
        except Exception as error:
            raise EditorError(f"Failed to write file {path}: {error}") from None


def load_history():
    try:
        with open(STATE_FILE, encoding="utf-8") as handle:
            return dict(json.load(handle))
    except FileNotFoundError:
        return {}
    except Exception as error:
        emit(f"Warning: Could not load editor history from {STATE_FILE}: {error}")
        return {}


def save_history(history):
    try:
        with open(STATE_FILE, "w", encoding="utf-8") as handle:
            json.dump(history, handle)
    except Exception as error:
        emit(f"Warning: Could not write editor history to {STATE_FILE}: {error}")


def line_range(text):
    """--view_range: two integers, e.g. "[10, 20]" or "10 20"."""
    text = text.strip().strip("[]()")
    parts = text.replace(",", " ").split()
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"Expected two numbers, got: {text}")
    try:
        return [int(parts[0]), int(parts[1])]
    except ValueError:
        raise argparse.ArgumentTypeError(f"Could not convert {parts} to integers.") from None


def parse_arguments():
    # The original's options, types, descriptions and help, so --help, usage lines and argument
    # errors read the same (help texts as in R2E-Gym's r2egym/file_editor.py).
    parser = argparse.ArgumentParser(
        description=(
            "A disk-backed file editing tool (view, create, str_replace, insert, undo_edit) "
            "with optional linting. Also supports a 'concise' view for Python files."
        )
    )
    parser.add_argument(
        "command", type=str, help="One of: view, create, str_replace, insert, undo_edit"
    )
    parser.add_argument(
        "--path",
        type=str,
        help="Path to the target file or directory (absolute path recommended)",
    )
    parser.add_argument("--file_text", type=str, default=None, help="File content (for 'create')")
    parser.add_argument(
        "--view_range",
        type=line_range,
        default=None,
        help="Line range to view [start_line, end_line], use -1 for end.",
    )
    parser.add_argument("--old_str", type=str, default=None, help="Old string (for 'str_replace')")
    parser.add_argument(
        "--new_str", type=str, default=None, help="New string (for 'str_replace' or 'insert')"
    )
    parser.add_argument(
        "--insert_line",
        type=int,
        default=None,
        help="Line number to insert text at (for 'insert')",
    )
    parser.add_argument(
        "--enable_linting",
        type=bool,
        default=False,
        help="Enable linting checks for Python files before saving changes.",
    )
    parser.add_argument(
        "--concise",
        type=str,
        default="False",
        help="If True, attempts to produce a condensed view for Python files, eliding large "
        "function bodies.",
    )
    parser.add_argument(
        "--python_only",
        type=bool,
        default=True,
        help="If True, attempts to limit view (for both dir and file level) to Python files only.",
    )
    return parser.parse_args()


def main():
    if hasattr(sys.stdout, "buffer"):
        # Block-buffered UTF-8: a traceback (stderr) shows before this output, as in the original.
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")
    args = parse_arguments()
    editor = Editor(load_history(), enable_linting=args.enable_linting)
    try:
        result = editor.run(
            command=args.command,
            path_str=args.path,
            file_text=args.file_text,
            view_range=args.view_range,
            old_str=args.old_str,
            new_str=args.new_str,
            insert_line=args.insert_line,
            concise=args.concise.lower() == "true",
        )
        emit(result.output)
        if result.error:
            emit(f"ERROR: {result.error}")
    except EditorError as error:
        emit(f"ERROR: {error}")
    except Exception as error:
        emit(f"ERROR: Unhandled exception: {error}")
        traceback.print_exc()
    save_history(dict(editor.history))


if __name__ == "__main__":
    main()
