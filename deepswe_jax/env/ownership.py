"""Who created a runtime, and removing this process's runtimes when it exits.

Every container or pod carries two marks (labels for Docker; for Kubernetes the owner is an
annotation, since label values cannot hold ':'):
  deepswe.run=<run_label>                 which run created it
  deepswe.owner=<host>:<pid>:<start time> which process created it (see `owner_is_alive`)
so a later process can remove what a killed one left behind (`remove_stale_*` of each
backend). Runtimes still alive at interpreter exit or on SIGTERM are closed here.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

RUN_LABEL = "deepswe.run"
OWNER_LABEL = "deepswe.owner"


def _process_start_time(pid: int) -> str | None:
    """Start time of `pid` in clock ticks since boot (Linux), "" where /proc is absent, None if dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[19].decode()


def owner_label(pid: int | None = None) -> str:
    """`<hostname>:<pid>:<start time>` of this (or the given) process; pid reuse cannot fake it."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start_time(pid) or ''}"


def owner_is_alive(label: str) -> bool | None:
    """Whether the process named by an owner label is alive; None if it ran on another host."""
    host, _, rest = label.partition(":")
    pid_text, _, start_time = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    current = _process_start_time(int(pid_text))
    return current is not None and (not start_time or not current or current == start_time)


# Runtimes (any backend) that close_all_runtimes closes at exit and on SIGTERM.
LIVE_RUNTIMES: weakref.WeakSet[Any] = weakref.WeakSet()
_CLEANUP_LOCK = threading.Lock()
_atexit_installed = False
_sigterm_installed = False


def close_all_runtimes() -> None:
    """Remove every container or pod this process still holds (in parallel)."""
    runtimes = list(LIVE_RUNTIMES)
    if runtimes:
        with ThreadPoolExecutor(max_workers=min(16, len(runtimes))) as workers:
            list(workers.map(lambda r: r.close(), runtimes))


def install_exit_cleanup() -> None:
    """Remove live runtimes at interpreter exit and on SIGTERM (then terminate as before).

    The SIGTERM handler can only be set from the main thread; runtimes and EnvPool call this
    when constructed, which is normally there."""
    global _atexit_installed, _sigterm_installed
    with _CLEANUP_LOCK:
        if not _atexit_installed:
            _atexit_installed = True
            atexit.register(close_all_runtimes)
        if _sigterm_installed or threading.current_thread() is not threading.main_thread():
            return
        _sigterm_installed = True
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        close_all_runtimes()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
