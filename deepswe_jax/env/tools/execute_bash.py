#!/usr/bin/env python3
"""execute_bash --cmd '<command>': run a bash command in /testbed (R2E-Gym interface).

Prints "[STDOUT]" and "[STDERR]" sections; on a non-zero exit status the output
starts with "Error executing command:" and the tool exits with the command's
status. Interactive programs (ipython, jupyter, editors, a bare `python`) and
background jobs (trailing `&`, nohup, disown, setsid) are refused: they would
hang until the step timeout or outlive the step. Each stream keeps at most its
first and last 64 KiB, so huge outputs cannot exhaust the container's memory.

Commands run in the repository's environment when the image has one: ENV_FILE holds
the environment its activation produced (conda `testbed` in SWE-bench images, R2E-Gym's
PATH in R2E-Gym images; written by deepswe_jax.env.runtime.prepare_runtime).
"""

import argparse
import os
import re
import selectors
import shlex
import subprocess
import sys

WORKDIR = "/testbed"
ENV_FILE = "/opt/deepswe/env"
# Shell bookkeeping of the shell that captured ENV_FILE, not part of the environment.
SHELL_STATE = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
STREAM_LIMIT = 128 * 1024
INTERACTIVE_PROGRAMS = (
    "ipython",
    "jupyter",
    "vi",
    "vim",
    "nano",
    "emacs",
    "top",
    "htop",
    "less",
    "more",
)
BACKGROUND_PROGRAMS = ("nohup", "disown", "setsid", "screen", "tmux")
PYTHON_NAMES = re.compile(r"^python(\d+(\.\d+)?)?$")
TRAILING_AMPERSAND = re.compile(r"(?<![&|>])&\s*$")


def refusal(cmd):
    """Why `cmd` is refused, or None when it may run."""
    try:
        tokens = shlex.split(cmd, comments=True)
    except ValueError:
        tokens = cmd.split()
    if not tokens:
        return "ERROR: empty command. Pass a bash command with --cmd."
    program = os.path.basename(tokens[0])
    if program in INTERACTIVE_PROGRAMS:
        return (
            f"Bash command '{program}' is not allowed: interactive programs cannot be used here. "
            "Please use a different command or tool."
        )
    if program in BACKGROUND_PROGRAMS or TRAILING_AMPERSAND.search(cmd.strip()):
        return (
            f"Bash command '{cmd.strip()}' is not allowed: background processes and daemons cannot be used "
            "here. Run the command in the foreground instead."
        )
    if PYTHON_NAMES.match(program) and (len(tokens) == 1 or tokens[1:] == ["-i"]):
        return (
            f"Bash command '{cmd.strip()}' is not allowed: an interactive Python session cannot be used here. "
            "Run a script (python script.py) or `python -c '...'` instead."
        )
    return None


def command_environment():
    """The activated environment saved in ENV_FILE, or None (inherit this process's)."""
    try:
        with open(ENV_FILE, "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name and os.fsdecode(name) not in SHELL_STATE:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env or None


def run_bounded(cmd, cwd):
    """Run `cmd` with bash; return (exit status, stdout text, stderr text), each stream bounded."""
    proc = subprocess.Popen(
        ["bash", "-c", cmd],
        cwd=cwd,
        env=command_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    captured = {
        proc.stdout: [bytearray(), bytearray(), 0],
        proc.stderr: [bytearray(), bytearray(), 0],
    }
    half = STREAM_LIMIT // 2
    selector = selectors.DefaultSelector()
    for stream in captured:
        selector.register(stream, selectors.EVENT_READ)
    open_streams = 2
    while open_streams:
        for key, _ in selector.select():
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                selector.unregister(key.fileobj)
                open_streams -= 1
                continue
            head, tail, _ = state = captured[key.fileobj]
            room = half - len(head)
            if room > 0:
                head += data[:room]
                data = data[room:]
            tail += data
            if len(tail) > half:
                state[2] += len(tail) - half
                del tail[: len(tail) - half]
    returncode = proc.wait()

    def text(state):
        head, tail, dropped = state
        middle = f"\n[... {dropped} bytes omitted ...]\n" if dropped else ""
        return head.decode("utf-8", "replace") + middle + tail.decode("utf-8", "replace")

    return returncode, text(captured[proc.stdout]), text(captured[proc.stderr])


def main():
    parser = argparse.ArgumentParser(description="Execute a bash command in the repository.")
    parser.add_argument(
        "--cmd", required=True, help="The bash command to execute, e.g. --cmd 'python reproduce.py'"
    )
    args = parser.parse_args()
    reason = refusal(args.cmd)
    if reason:
        print(reason)
        sys.exit(1)
    cwd = WORKDIR if os.path.isdir(WORKDIR) else "/"
    returncode, stdout, stderr = run_bounded(args.cmd, cwd)
    if returncode != 0:
        print("Error executing command:\n")
    print("[STDOUT]\n")
    print(stdout.strip(), "\n")
    print("[STDERR]\n")
    print(stderr.strip())
    sys.stdout.flush()
    # Like bash: death by signal N is status 128 + N.
    sys.exit(returncode if returncode >= 0 else 128 - returncode)


if __name__ == "__main__":
    main()
