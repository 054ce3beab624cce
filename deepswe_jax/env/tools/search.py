#!/usr/bin/env python3
"""search --search_term T [--path P]: find a term in a file or a directory (R2E-Gym interface).

On a file: every matching line with its line number. On a directory (default `.`):
recursive over non-hidden `.py` files, one line per file with its number of matching
lines; refuses to list more than 100 files ("narrow your search"). Plain substring
matching (no regular expressions).
"""

import argparse
import os
import sys

MAX_FILES = 100
MAX_RESPONSE_CHARS = 10000


def search_file(term, path):
    matches = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if term in line:
                matches.append("{}:{}".format(number, line.rstrip("\n")))
    if not matches:
        return f'No matches found for "{term}" in {path}\n'
    text = 'Matches for "{}" in {}:\n{}\n'.format(term, path, "\n".join(matches))
    if len(text) > MAX_RESPONSE_CHARS:
        text = text[:MAX_RESPONSE_CHARS] + "\n<response clipped: narrow your search>\n"
    return text


def search_directory(term, directory):
    counts = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    count = sum(1 for line in f if term in line)
            except OSError:
                continue
            if count:
                counts.append((path, count))
    if not counts:
        return f'No matches found for "{term}" in {directory}\n'
    if len(counts) > MAX_FILES:
        return f'More than {MAX_FILES} files matched for "{term}" in {directory}. Please narrow your search.\n'
    lines = [f'Found {sum(c for _, c in counts)} matches for "{term}" in {directory}:']
    for path, count in counts:
        relative = os.path.relpath(path)
        if not relative.startswith("."):
            relative = "./" + relative
        lines.append(f"{relative} ({count} matches)")
    lines.append(f'End of matches for "{term}" in {directory}')
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description="Search for a term in a file or a directory.")
    parser.add_argument("--search_term", required=True, help="The text to search for")
    parser.add_argument(
        "--path", default=".", help="File or directory to search (default: current directory)"
    )
    parser.add_argument(
        "--python_only", default="True", help="Accepted for R2E-Gym compatibility; always .py"
    )
    args = parser.parse_args()
    if not args.search_term:
        print("ERROR: the search term must not be empty.")
        sys.exit(1)
    path = os.path.abspath(args.path)
    if os.path.isfile(path):
        print(search_file(args.search_term, path), end="")
    elif os.path.isdir(path):
        print(search_directory(args.search_term, path), end="")
    else:
        print(f"ERROR: the path {path} does not exist. Please provide a valid file or directory.")
        sys.exit(1)


if __name__ == "__main__":
    main()
