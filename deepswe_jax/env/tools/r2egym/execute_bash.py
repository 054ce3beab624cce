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


def main():
    parser = argparse.ArgumentParser(description="Run a shell command in the repository.")
    parser.add_argument("--cmd", required=True, help="The command line, e.g. 'python run.py'.")
    args = parser.parse_args()

    # An empty command has no first word: IndexError, as in the original.
    program = args.cmd.strip().split()[0]
    if program in REFUSED_PROGRAMS:
        print(f"Bash command '{program}' is not allowed. Please use a different command or tool.")
        sys.exit(1)

    finished = subprocess.run(args.cmd, shell=True, capture_output=True, text=True)
    if finished.returncode != 0:
        print("Error executing command:\n")
    print("[STDOUT]\n")
    print(finished.stdout.strip(), "\n")
    print("[STDERR]\n")
    print(finished.stderr.strip())
    if finished.returncode != 0:
        sys.exit(finished.returncode)


if __name__ == "__main__":
    main()
