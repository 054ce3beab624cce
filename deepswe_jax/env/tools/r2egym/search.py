#!/usr/bin/env python3
"""search --search_term T [--path P], behaving as R2E-Gym's (agentica-project/R2E-Gym@353348a,
src/r2egym/agenthub/tools/search.py).

- On a file: `grep -n T FILE` (T is a basic regular expression and may be read as an option),
  under 'Matches for "T" in FILE:'.
- Otherwise (default `.`): a walk of the directory in the file system's own order, skipping
  hidden folders and files and, unless --python_only is given as an empty string, files not
  ending in .py; one line per file with its number of lines holding T as plain text. With more
  than 100 such files, only their count is reported ("Please narrow your search.").

Pure standard library (Python >= 3.7): it runs with the repository's interpreter.
"""

import argparse
import os
import subprocess
import sys

MAX_FILES = 100


def count_lines_with(term, path):
    """How many lines of the file at `path` contain `term`; None if it cannot be read."""
    try:
        with open(path, errors="ignore") as handle:
            return sum(1 for line in handle if term in line)
    except (UnicodeDecodeError, PermissionError):
        return None


def search_directory(term, directory, python_only):
    directory = os.path.realpath(directory)
    if not os.path.isdir(directory):
        print(f"Directory '{directory}' not found or not a directory.")
        sys.exit(1)
    counts = {}
    for root, folders, files in os.walk(directory):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            if name.startswith(".") or (python_only and not name.endswith(".py")):
                continue
            path = os.path.join(root, name)
            count = count_lines_with(term, path)
            if count:
                counts[path] = count
    if not counts:
        print(f'No matches found for "{term}" in {directory}')
        return
    if len(counts) > MAX_FILES:
        print(
            f'More than {len(counts)} files matched for "{term}" in {directory}. '
            "Please narrow your search."
        )
        return
    print(f'Found {sum(counts.values())} matches for "{term}" in {directory}:')
    for path, count in counts.items():
        shown = os.path.relpath(path, start=os.getcwd())
        if not shown.startswith("./"):
            shown = "./" + shown
        print(f"{shown} ({count} matches)")
    print(f'End of matches for "{term}" in {directory}')


def search_file(term, path):
    path = os.path.realpath(path)
    grep = subprocess.run(["grep", "-n", term, path], capture_output=True, text=True)
    if grep.returncode == 1:
        print(f'No matches found for "{term}" in {path}')
        return
    if grep.returncode != 0:
        print(f"Error executing grep:\n{grep.stderr}")
        sys.exit(grep.returncode)
    print(f'Matches for "{term}" in {path}:')
    print(grep.stdout.strip())


def main():
    # The original's descriptions, so --help reads the same.
    parser = argparse.ArgumentParser(
        description="search tool: run subcommands such as `search` for files or directories."
    )
    parser.add_argument("--search_term", help="Term to search for in files.", required=True)
    parser.add_argument(
        "--path", help="File or directory to search in (defaults to current dir).", default="."
    )
    parser.add_argument(
        "--python_only",
        default=True,
        help="If set, only search for matches in .py files when searching a directory.",
    )
    args = parser.parse_args()
    if os.path.isfile(args.path):
        search_file(args.search_term, args.path)
    else:
        search_directory(args.search_term, args.path, args.python_only)


if __name__ == "__main__":
    main()
