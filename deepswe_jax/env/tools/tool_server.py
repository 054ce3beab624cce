#!/usr/bin/env python3
"""Tool server: PID 1 of every environment container (pure stdlib, Python >= 3.8).

The host attaches to this process's stdin/stdout. Its first line on stdin is a secret (random
per container, held only in this process's memory); after that every request and every answer
is a frame, `DEEPSWE <secret> <length>\n` then <length> bytes of JSON (ASCII only, so Docker's
detach keys can never appear in the stream). Bytes outside frames are skipped, so nothing an
agent writes to /proc/1/fd/1 or /proc/1/fd/0 can desynchronize the channel. Requests:

  {"id": n, "op": "ping"}
  {"id": n, "op": "run", "argv": [...], "cwd": "/testbed", "timeout": 90.0, "max_output": 2000000}
  {"id": n, "op": "tool", "name": "file_editor", "args": [...], "cwd": ..., "timeout": ..., "max_output": ...}
  {"id": n, "op": "write", "path": "/abs/path", "data": "<base64>"}
  {"id": n, "op": "read", "path": "/abs/path", "max_bytes": 4194304}

"run" executes argv; "tool" runs the preloaded tool's main() in a fork (no interpreter
start-up per call). Either way the work runs in a fresh session with stdin from
/dev/null and stdout+stderr merged into one pipe. At the deadline, or when the
command exits but left processes behind, every process of that session is killed
with SIGKILL, and then every other process descended from this server (a daemon that
left the session with setsid and a double fork): nothing a command starts outlives it.
Processes entered from outside (`docker exec`, parent pid 0) are left alone. Output
beyond `max_output` bytes keeps its head and tail halves.

`--disk-limit BYTES` (when the storage driver cannot limit the container's writable layer):
commands run with RLIMIT_FSIZE = BYTES (no file grows past it: the write fails with "File too
large") and without fallocate(2) (seccomp, x86-64: space is taken only by writing it), and a command is killed once the container's processes have written more than BYTES
to disk in all (the kernel's per-process write_bytes, which this server, as PID 1, inherits
from every process it reaps); its output then says so.

The server makes itself not dumpable (PR_SET_DUMPABLE 0): without CAP_SYS_PTRACE, which
Docker does not grant, no process in the container can open /proc/1/mem or /proc/1/fd/*, so
the secret cannot be read and the channel cannot be read or written behind the host's back.
Commands run with oom_score_adj 1000, so a command that exhausts the container's memory is
killed before the server is.

Being PID 1 makes the server immune to SIGKILL from inside the container (an agent's
`kill -9 -1` or `pkill python` cannot take it down) and makes it the reaper of orphans,
so killed process trees never pile up as zombies against the pids limit.
"""

import argparse
import base64
import errno
import gc
import importlib.machinery
import importlib.util
import io
import json
import os
import resource
import select
import signal
import stat
import sys
import time
import traceback

TOOLS_DIR = "/usr/local/bin"
TOOL_NAMES = ("file_editor", "execute_bash", "search", "finish", "submit")
READ_CHUNK = 65536
# After the command exits, processes it left holding the output pipe get this long.
LEFTOVER_GRACE_S = 0.5
FRAME_TAG = b"DEEPSWE "
# The largest frame payload accepted (a write request of a big file is base64 in JSON).
MAX_FRAME_BYTES = 1 << 31
# How often a running command's disk writes are checked against --disk-limit: a command
# writing at 1 GB/s overshoots the limit by about 20 MB before it is killed.
DISK_POLL_S = 0.02

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


def live_processes():
    """{pid: (parent pid, session id)} of the live (non-zombie) processes."""
    processes = {}
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
        if fields[0] != b"Z":
            processes[int(entry)] = (int(fields[1]), int(fields[3]))
    return processes


def session_members(sid):
    """Pids of live processes whose session id is `sid`."""
    return [pid for pid, (_, session) in live_processes().items() if session == sid]


def descendants():
    """Pids of live processes descended from this server (itself excluded)."""
    processes = live_processes()
    me = os.getpid()
    found = []
    for pid in processes:
        ancestor, hops = pid, 0
        while ancestor in processes and ancestor != me and hops < len(processes):
            ancestor, hops = processes[ancestor][0], hops + 1
        if ancestor == me and pid != me:
            found.append(pid)
    return found


def kill_all(members, group=None):
    """SIGKILL the processes `members()` lists (and process group `group`) until none is
    left; True on success."""
    for _ in range(2000):
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
        pids = members()
        if not pids:
            reap()
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap()
        time.sleep(0.001)
    return False


def kill_session(sid):
    """SIGKILL every process of session `sid` until none is left; True on success."""
    return kill_all(lambda: session_members(sid), group=sid)


def written_bytes():
    """Bytes the container's processes sent to disk so far (write_bytes of /proc/<pid>/io: this
    server's count includes every process it reaped, the others' their reaped children)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/" + entry + "/io", "rb") as f:
                for line in f:
                    if line.startswith(b"write_bytes:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue
    return total


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


# A seccomp filter for commands: fallocate(2) fails with EOPNOTSUPP on x86-64 (its x32 number
# too), so space is only taken by writing it, which the disk limit sees as it happens
# (glibc's posix_fallocate then falls back to writing zeros).
AUDIT_ARCH_X86_64 = 0xC000003E
FALLOCATE_NUMBERS = (285, 0x40000000 + 285)
_fallocate_filter = None


def build_fallocate_filter():
    """The seccomp program (a ctypes sock_fprog, kept alive globally) or None without ctypes."""
    global _fallocate_filter
    try:
        import ctypes
    except ImportError:
        return
    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    deny, allow = 0x00050000 | errno.EOPNOTSUPP, 0x7FFF0000
    program = [
        (ld_abs, 0, 0, 4),  # the syscall's architecture
        (jeq, 0, 4, AUDIT_ARCH_X86_64),  # another one: allow
        (ld_abs, 0, 0, 0),  # the syscall's number
        (jeq, 1, 0, FALLOCATE_NUMBERS[0]),
        (jeq, 0, 1, FALLOCATE_NUMBERS[1]),
        (ret, 0, 0, deny),
        (ret, 0, 0, allow),
    ]

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*op) for op in program])
    _fallocate_filter = (
        ctypes.CDLL(None, use_errno=True),
        SockFprog(len(program), filters),
        filters,
    )


def deny_fallocate():
    """In a command's child: no new privileges, then the fallocate filter (best effort)."""
    if _fallocate_filter is None:
        return
    import ctypes

    libc, program, _ = _fallocate_filter
    if libc.prctl(38, 1, 0, 0, 0) == 0:  # 38: PR_SET_NO_NEW_PRIVS
        libc.prctl(22, 2, ctypes.byref(program), 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def make_undumpable():
    """PR_SET_DUMPABLE 0: /proc/1/mem, /proc/1/fd/* and ptrace need CAP_SYS_PTRACE from now on."""
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # 4: PR_SET_DUMPABLE
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    except (ImportError, OSError, AttributeError) as e:
        sys.stderr.write(f"warning: the tool server stays dumpable ({e})\n")


def child_setup(read_fd, write_fd, cwd, disk_limit):
    """In the forked child: own session, stdin=/dev/null, stdout+stderr=pipe, default signals,
    first in line for the OOM killer, no file larger than `disk_limit` bytes and no fallocate
    (when a disk limit is set)."""
    signal.set_wakeup_fd(-1)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    if disk_limit:
        deny_fallocate()
    if disk_limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (disk_limit, disk_limit))
    os.setsid()
    os.close(read_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    for fd in (devnull, write_fd):
        if fd > 2:
            os.close(fd)
    for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGCHLD, signal.SIGXFSZ):
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


def execute(request, tools, disk_limit=0):
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
            child_setup(read_fd, write_fd, cwd, disk_limit)
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
    written_before = written_bytes() if disk_limit else 0
    over_disk_limit = False
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
        if disk_limit and pid not in _exit_status:
            written = written_bytes()
            if written > disk_limit and written > written_before:
                over_disk_limit = True
                break
        wait = deadline - now
        if exited_at is not None:
            wait = min(wait, exited_at + LEFTOVER_GRACE_S - now)
        if disk_limit:
            wait = min(wait, DISK_POLL_S)
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
    if not (kill_session(pid) and kill_all(descendants)):
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
    if disk_limit and exit_code == -signal.SIGXFSZ:
        output.add(
            f"\n[File size limit exceeded: no file may grow past this environment's disk limit "
            f"of {disk_limit} bytes]\n".encode()
        )
    elif over_disk_limit:
        output.add(
            f"\n[killed: this environment's processes have written more than its disk limit "
            f"of {disk_limit} bytes; commands that write to disk are stopped]\n".encode()
        )
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
    """A regular file's bytes (a link, FIFO or device is refused), at most `max_bytes` of them
    (EFBIG past it), so a read can never block or exhaust this server's memory."""
    fd = os.open(request["path"], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", request["path"])
        max_bytes = request.get("max_bytes")
        if max_bytes is not None and info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"{info.st_size} bytes, over {max_bytes}", request["path"])
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            raise OSError(errno.EFBIG, f"over {max_bytes} bytes", request["path"])
        return {"data": base64.b64encode(data).decode("ascii")}


def handle(request, tools, disk_limit=0):
    op = request.get("op")
    try:
        if op == "ping":
            return {"python": sys.version.split()[0], "tools": sorted(tools)}
        if op in ("run", "tool"):
            return execute(request, tools, disk_limit)
        if op == "write":
            return write_file(request)
        if op == "read":
            return read_file(request)
        return {"error": "ValueError", "message": f"unknown op {op!r}"}
    except OSError as e:
        return {"error": type(e).__name__, "errno": e.errno, "message": str(e)}
    except Exception as e:
        return {"error": type(e).__name__, "message": traceback.format_exc(limit=5) or str(e)}


class FrameReader:
    """Frames `<tag><secret> <length>\n<payload>` from a file descriptor; other bytes are
    skipped."""

    def __init__(self, fd, marker):
        self.fd = fd
        self.marker = marker
        self.buffer = bytearray()

    def read_line(self):
        """The first line (the secret), before any frame; b"" at end of input."""
        while b"\n" not in self.buffer:
            data = os.read(self.fd, READ_CHUNK)
            if not data:
                return b""
            self.buffer += data
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line

    def next_payload(self):
        """The next frame's payload; None at end of input."""
        while True:
            start = self.buffer.find(self.marker)
            if start < 0:
                # Garbage: keep only a tail that may be the start of a marker.
                del self.buffer[: max(0, len(self.buffer) - len(self.marker))]
            else:
                del self.buffer[:start]
                header_end = self.buffer.find(b"\n", len(self.marker))
                if header_end >= 0:
                    length_text = bytes(self.buffer[len(self.marker) : header_end])
                    if not length_text.isdigit() or int(length_text) > MAX_FRAME_BYTES:
                        del self.buffer[: len(self.marker)]  # a forged or torn header
                        continue
                    end = header_end + 1 + int(length_text)
                    if len(self.buffer) >= end:
                        payload = bytes(self.buffer[header_end + 1 : end])
                        del self.buffer[:end]
                        return payload
            data = os.read(self.fd, READ_CHUNK)
            if not data:
                return None
            self.buffer += data


def frame(marker, message):
    payload = json.dumps(message, ensure_ascii=True).encode("ascii")
    return marker + str(len(payload)).encode("ascii") + b"\n" + payload


def main():
    # PID 1 gets only the signals it handles; keep it that way (no KeyboardInterrupt handler).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a full write fails with EFBIG instead
    make_undumpable()
    build_fallocate_filter()
    parser = argparse.ArgumentParser()
    parser.add_argument("--disk-limit", type=int, default=0)
    disk_limit = parser.parse_args().disk_limit
    install_child_wakeup()
    tools = load_tools()
    warm_up()
    stdin = FrameReader(0, b"")
    secret = stdin.read_line().strip()
    stdin.marker = marker = FRAME_TAG + secret + b" "
    stdout = sys.stdout.buffer
    while True:
        payload = stdin.next_payload() if secret else None
        if payload is None:
            # The host went away for good (stdin closed); keep reaping until the container is removed.
            while True:
                reap()
                time.sleep(1.0)
        try:
            request = json.loads(payload)
        except ValueError as e:
            response = {"id": None, "error": "ValueError", "message": f"bad request: {e}"}
        else:
            response = handle(request, tools, disk_limit)
            response["id"] = request.get("id")
        stdout.write(frame(marker, response))
        stdout.flush()
        reap()


if __name__ == "__main__":
    main()
