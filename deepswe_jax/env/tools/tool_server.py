#!/usr/bin/env python3
"""Tool server: PID 1 of every environment container (pure stdlib, Python >= 3.8).

The host attaches to this process's stdin/stdout and sends one JSON request per
line; each answer is one JSON line (ASCII only, so Docker's detach keys can never
appear in the stream). Requests:

  {"id": n, "op": "ping"}
  {"id": n, "op": "run", "argv": [...], "cwd": "/testbed", "timeout": 90.0, "max_output": 2000000}
  {"id": n, "op": "tool", "name": "file_editor", "args": [...], "cwd": ..., "timeout": ..., "max_output": ...}
  {"id": n, "op": "write", "path": "/abs/path", "data": "<base64>"}
  {"id": n, "op": "read", "path": "/abs/path"}

"run" executes argv; "tool" runs the preloaded tool's main() in a fork (no interpreter
start-up per call). Either way the work runs in a fresh session with stdin from
/dev/null and stdout+stderr merged into one pipe. At the deadline, or when the
command exits but left processes behind, every process of that session is killed
with SIGKILL. Output beyond `max_output` bytes keeps its head and tail halves.

Being PID 1 makes the server immune to SIGKILL from inside the container (an agent's
`kill -9 -1` or `pkill python` cannot take it down) and makes it the reaper of orphans,
so killed process trees never pile up as zombies against the pids limit.
"""

import argparse
import base64
import gc
import importlib.machinery
import importlib.util
import io
import json
import os
import select
import signal
import sys
import time
import traceback

TOOLS_DIR = "/usr/local/bin"
TOOL_NAMES = ("file_editor", "execute_bash", "search", "finish", "submit")
READ_CHUNK = 65536
# After the command exits, processes it left holding the output pipe get this long.
LEFTOVER_GRACE_S = 0.5

_exit_status = {}
# Read end of the pipe SIGCHLD writes to (signal.set_wakeup_fd), so select() wakes when a child exits.
_wakeup_fd = -1


def load_tools():
    """Import every installed tool script once, so forks can call main() directly."""
    tools = {}
    for name in TOOL_NAMES:
        path = os.path.join(TOOLS_DIR, name)
        if not os.path.exists(path):
            continue
        loader = importlib.machinery.SourceFileLoader("deepswe_tool_" + name, path)
        spec = importlib.util.spec_from_loader(loader.name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        tools[name] = module
    return tools


def install_child_wakeup():
    global _wakeup_fd
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(write_fd)
    _wakeup_fd = read_fd


def drain_wakeup():
    try:
        while os.read(_wakeup_fd, 4096):
            pass
    except BlockingIOError:
        pass


def warm_up():
    """Do once here what every tool call would otherwise redo in its fork: argparse's first use
    loads gettext/locale state (milliseconds); freezing the heap keeps forks from copying it."""
    parser = argparse.ArgumentParser(description="warm-up")
    parser.add_argument("command", nargs="?")
    parser.add_argument("--flag", default="x", help="x")
    parser.parse_args(["view", "--flag=y"])
    parser.format_help()
    gc.freeze()


def reap():
    """Collect every exited child (our commands and orphans re-parented to PID 1)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _exit_status[pid] = status


def session_members(sid):
    """Pids of live (non-zombie) processes whose session id is `sid`."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/" + entry + "/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp session ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] != b"Z" and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def kill_session(sid):
    """SIGKILL every process of session `sid` until none is left; True on success."""
    for _ in range(2000):
        try:
            os.killpg(sid, signal.SIGKILL)
        except OSError:
            pass
        members = session_members(sid)
        if not members:
            reap()
            return True
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap()
        time.sleep(0.001)
    return False


class BoundedOutput:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data):
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.half
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self):
        head = self.head.decode("utf-8", "replace")
        if not self.dropped:
            return head + self.tail.decode("utf-8", "replace")
        marker = f"\n[... {self.dropped} bytes of output omitted ...]\n"
        return head + marker + self.tail.decode("utf-8", "replace")


def child_setup(read_fd, write_fd, cwd):
    """In the forked child: own session, stdin=/dev/null, stdout+stderr=pipe, default signals."""
    signal.set_wakeup_fd(-1)
    os.setsid()
    os.close(read_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    for fd in (devnull, write_fd):
        if fd > 2:
            os.close(fd)
    for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(cwd)


def run_tool_in_child(module, name, args):
    """Call the tool's main() with argv; never returns."""
    code = 0
    sys.argv = [name] + list(args)
    sys.stdin = open(os.devnull)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace"
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace"
    )
    try:
        module.main()
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            sys.stderr.write(str(e.code) + "\n")
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def execute(request, tools):
    """Run one "run" or "tool" request; returns the response fields."""
    timeout = float(request.get("timeout", 90.0))
    cwd = request.get("cwd") or "/"
    output = BoundedOutput(int(request.get("max_output", 2000000)))
    start = time.monotonic()
    if request["op"] == "tool" and request["name"] not in tools:
        return {"exit_code": 127, "output": "unknown tool " + request["name"], "timed_out": False}
    if request["op"] == "tool" and not os.path.isdir(cwd):
        cwd = "/"  # the agent deleted its working directory; its tools keep working
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(read_fd)
        os.close(write_fd)
        return {
            "exit_code": None,
            "output": f"could not start the command: {e}",
            "timed_out": False,
        }
    if pid == 0:
        try:
            child_setup(read_fd, write_fd, cwd)
            if request["op"] == "tool":
                run_tool_in_child(tools[request["name"]], request["name"], request["args"])
            argv = request["argv"]
            os.execvp(argv[0], argv)
        except BaseException as e:
            os.write(2, f"cannot run command: {e}\n".encode("utf-8", "replace"))
        os._exit(127)
    os.close(write_fd)
    deadline = start + timeout
    timed_out = False
    eof = False
    exited_at = None
    while True:
        reap()
        now = time.monotonic()
        if pid in _exit_status:
            if eof:
                break
            if exited_at is None:
                exited_at = now
            elif now - exited_at > LEFTOVER_GRACE_S:
                break
        if now >= deadline:
            timed_out = True
            break
        wait = deadline - now
        if exited_at is not None:
            wait = min(wait, exited_at + LEFTOVER_GRACE_S - now)
        watched = [_wakeup_fd] if eof else [read_fd, _wakeup_fd]
        ready, _, _ = select.select(watched, [], [], max(wait, 0))
        if read_fd in ready:
            data = os.read(read_fd, READ_CHUNK)
            if data:
                output.add(data)
            else:
                eof = True
        if _wakeup_fd in ready:
            drain_wakeup()
    if not kill_session(pid):
        output.add(b"\n[warning: some processes of this command could not be killed]\n")
    # Drain what the killed processes had already written.
    while select.select([read_fd], [], [], 0)[0]:
        data = os.read(read_fd, READ_CHUNK)
        if not data:
            break
        output.add(data)
    os.close(read_fd)
    while pid not in _exit_status:
        try:
            _, status = os.waitpid(pid, 0)
            _exit_status[pid] = status
        except ChildProcessError:
            break
    status = _exit_status.pop(pid, None)
    exit_code = None
    if not timed_out and status is not None:
        exit_code = (
            os.waitstatus_to_exitcode(status)
            if hasattr(os, "waitstatus_to_exitcode")
            else (status >> 8)
        )
    reap()
    _exit_status.clear()
    return {"exit_code": exit_code, "output": output.text(), "timed_out": timed_out}


def write_file(request):
    path = request["path"]
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "wb") as f:
        f.write(base64.b64decode(request["data"]))
    return {}


def read_file(request):
    with open(request["path"], "rb") as f:
        return {"data": base64.b64encode(f.read()).decode("ascii")}


def handle(request, tools):
    op = request.get("op")
    try:
        if op == "ping":
            return {"python": sys.version.split()[0], "tools": sorted(tools)}
        if op in ("run", "tool"):
            return execute(request, tools)
        if op == "write":
            return write_file(request)
        if op == "read":
            return read_file(request)
        return {"error": "ValueError", "message": f"unknown op {op!r}"}
    except OSError as e:
        return {"error": type(e).__name__, "errno": e.errno, "message": str(e)}
    except Exception as e:
        return {"error": type(e).__name__, "message": traceback.format_exc(limit=5) or str(e)}


def main():
    # PID 1 gets only the signals it handles; keep it that way (no KeyboardInterrupt handler).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_child_wakeup()
    tools = load_tools()
    warm_up()
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            # The host went away for good (stdin closed); keep reaping until the container is removed.
            while True:
                reap()
                time.sleep(1.0)
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as e:
            response = {"id": None, "error": "ValueError", "message": f"bad request: {e}"}
        else:
            response = handle(request, tools)
            response["id"] = request.get("id")
        stdout.write(json.dumps(response, ensure_ascii=True).encode("ascii") + b"\n")
        stdout.flush()
        reap()


if __name__ == "__main__":
    main()
