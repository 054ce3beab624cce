#!/usr/bin/env python3
"""execute_bash --cmd C, behaving as R2E-Gym's (agentica-project/R2E-Gym@353348a,
src/r2egym/agenthub/tools/r2egym/execute_bash.py), the tool DeepSWE-Preview was trained with.

- The command runs through `/bin/sh` (dash on Debian/Ubuntu: no bash-isms) in the current
  directory; stdin is inherited, so `python` with no script reads end-of-file and exits.
- A command whose first word is git, ipython, jupyter or nohup is refused (exit status 1).
- Output: "[STDOUT]" and "[STDERR]" sections, each stripped; after a failure they follow
  "Error executing command:" and the tool exits with the command's status.
- Output is decoded as text (universal newlines), so bytes that are not valid in the locale's
  encoding end the tool with a traceback, as the original's do.

Pure standard library (Python >= 3.7): it runs with the repository's interpreter.
"""

import argparse
import subprocess
import sys

REFUSED_PROGRAMS = ("git", "ipython", "jupyter", "nohup")

# Tracebacks show the lines of code they pass through, and the model saw the original's: an
# empty command (no first word: IndexError) and output that is not valid text
# (UnicodeDecodeError) fail on lines that read as the original's do.


def run_command(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True)


def main():
    # The original's descriptions, so --help reads the same.
    parser = argparse.ArgumentParser(description="Execute a bash command.")
    parser.add_argument(
        "--cmd",
        required=True,
        help="The command (and optional arguments) to execute. For example: --cmd 'python "
        "my_script.py'",
    )
    args = parser.parse_args()

    first_token = args.cmd.strip().split()[0]
    if first_token in REFUSED_PROGRAMS:
        print(
            f"Bash command '{first_token}' is not allowed. Please use a different command or tool."
        )
        sys.exit(1)

    result = run_command(args.cmd)
    if result.returncode != 0:
        print("Error executing command:\n")
    print("[STDOUT]\n")
    print(result.stdout.strip(), "\n")
    print("[STDERR]\n")
    print(result.stderr.strip())
    if result.returncode != 0:
        sys.exit(result.returncode)


if __name__ == "__main__":
    main()
