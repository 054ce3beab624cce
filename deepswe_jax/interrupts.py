"""Stopping on Ctrl-C (SIGINT) or SIGTERM at any moment, without losing work.

    interrupts.install()          # a launch/ script's first import, before the heavy ones
    cli.run(main)                 # main runs with stop_gracefully(); see deepswe_jax.cli
    with deferred_interrupts():   # a train step or a checkpoint save: finished first
        state, metrics = trainer.step(state, micro_batches)

Before `main` starts (imports, flag parsing) there is nothing to clean up: a signal prints the
one line and ends the process at once. Inside `main` the first signal raises KeyboardInterrupt
in the main thread, so the `with` blocks on its way out run (containers removed, the checkpoint
being written finished); the second and third are counted and ignored, so nothing that cleans up
is cut short. While an asyncio loop runs in the main thread (rollouts, evaluation), the signal
ends the loop's run after its round of callbacks in progress, and the KeyboardInterrupt is
raised where the run returns (`_LoopStop`), never at whatever bytecode the loop's thread was
on: raised inside the loop's own machinery it lost a task's wakeup (the task then waited
forever, and so did the cancellation of the rollouts), and raised between a lock's acquire and
its `with` it kept the lock (JaxSampler's queue, the env pool's executor), which then deadlocked
the cleanups: the CI soak of stop 33 hung after a Ctrl-C during rollouts. A
KeyboardInterrupt that was swallowed (raised inside a garbage-collection callback or a
`__del__`, e.g. JAX's `_xla_gc_callback` during compilation, or caught by a library's bare
`except:`) is raised again soon after (`Stop`); before, the run went on to the end and exited 0.

Inside `deferred_interrupts()` the signal is held until the block ends: a train step stopped
between micro-batches whose buffers were donated raced XLA's threads on the way out (issue 17:
segmentation faults), and a save stopped between writing and committing left a temporary folder.

`exit_process(code)` ends the process without the interpreter's teardown once the cleanups have
run (non-daemon threads joined, atexit functions run, streams flushed): tearing down JAX, XLA
and Orbax modules while their threads still ran ended interrupted runs in a segmentation fault
or `Fatal Python error: Aborted`, and printed their threads' errors. A thread that does not end
within `JOIN_TIMEOUT_S` is named on stderr and left behind: an interrupted run never hangs after
its line (the interpreter would wait for it forever).

`kill -USR1 <pid>` prints every thread's Python stack on stderr (faulthandler): what a run that
seems stuck is doing, without stopping it.

Only the main thread receives signals. Without `install()` (the library used from Python),
`deferred_interrupts` holds SIGINT when Python's default handler is in place, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

# The signals that stop a run: Ctrl-C, and what schedulers (SLURM, Kubernetes) send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_STATUS = 130
# The signal that prints every thread's stack (faulthandler), and how long exit_process waits
# for the process's threads.
STACKS_SIGNAL = signal.SIGUSR1
JOIN_TIMEOUT_S = 120.0
# How long a stop waits for the main thread's asyncio loop to end its run (`_LoopStop`).
LOOP_STOP_WAIT_S = 10.0


class _State:
    installed = False
    graceful = False  # main runs: raise KeyboardInterrupt instead of exiting at once
    received: str | None = None  # the name of the first stop signal
    deferring = 0  # depth of deferred_interrupts blocks
    held = False  # a signal arrived in a deferred block
    held_anywhere = False  # ... as the watcher's escalation: raised where the block ends
    raise_again = False  # a KeyboardInterrupt was swallowed: raise it once more
    alive = 0  # `Stop` interrupts not yet garbage: one is on its way out
    pending = None  # a `_LoopStop`: a Stop waiting for its asyncio loop's run to end
    overdue = None  # the pending stop whose loop did not end in time: raise it where it is
    ignored_unraisable: list = []  # predicates: unraisable errors not printed (ignore_unraisable)


def interrupted_line(name: str | None = None) -> str:
    """The one line an interrupted run prints."""
    name = name or _State.received or "SIGINT"
    return f"interrupted ({name}): stopped cleanly, nothing half-written; exit status {EXIT_STATUS}"


def stop_requested() -> bool:
    """Whether a stop signal arrived since `install()`."""
    return _State.received is not None


class Stop(KeyboardInterrupt):
    """The KeyboardInterrupt a stop signal raises. While one is alive it is on its way out:
    unwinding through cleanups, held by an asyncio task or by a coroutine awaiting its cleanup
    in an `except BaseException:` block, chained as another error's context. Once the last one
    is garbage while the graceful block still runs, something swallowed it (a library's bare
    `except:`, such as jax's `core.is_constant_dim` or pxla's right after an XLA compilation:
    the compile-SIGINT flake of stop 32, which exited 0; a gc callback; a `__del__`), and it is
    raised again."""

    def __init__(self, *args: object):
        super().__init__(*args)
        _State.alive += 1

    def __del__(self) -> None:
        _State.alive -= 1
        if not _State.alive and _State.graceful:
            _State.raise_again = True
            _raise_again_soon()


def _handler(signum: int, frame: object) -> None:
    late = _State.overdue
    if late is not None:
        _State.overdue = None
        if _State.pending is late:  # its loop kept its thread too long, or stopped unseen
            late.forget()
            if _State.graceful:
                _stop(frame, anywhere=True)
            return
    if _State.raise_again:
        if _inside_the_unraisable_hook(frame):
            _raise_again_soon()  # raised anywhere inside the hook, it would be lost again
            return
        _State.raise_again = False
        if _State.alive or _State.pending is not None:
            return  # one is still on its way out (never cut its cleanups short)
        _stop(frame)
        return
    if _State.received is not None:
        return  # the second and third Ctrl-C: already stopping
    _State.received = signal.Signals(signum).name
    if not _State.graceful:
        sys.stderr.write(interrupted_line() + "\n")
        sys.stderr.flush()
        os._exit(EXIT_STATUS)
    _stop(frame)


def _stop(frame: object = None, anywhere: bool = False) -> None:
    """Raises Stop in the main thread (a signal handler's, at `frame`): held to the end of a
    deferred block; where the asyncio loop running in this thread, if one runs, ends its run
    (`_LoopStop`; the module docstring says why), unless `anywhere`; else here."""
    if _State.deferring:
        _State.held = True
        _State.held_anywhere |= anywhere
        return
    asyncio = sys.modules.get("asyncio")
    loop = asyncio.events._get_running_loop() if asyncio is not None else None
    if loop is not None and not anywhere:
        _LoopStop(loop, asyncio)
        return
    if asyncio is not None and loop is None:
        _detach_run_until_complete(frame, asyncio)
    raise Stop


def _detach_run_until_complete(frame, asyncio) -> None:
    """A Stop raised in `run_until_complete` outside its loop's run (before its `try`, a few
    bytecodes) skips the `finally` that takes its done-callback off the task; a later run of
    the loop (asyncio.run's cleanup, RolloutScheduler.close) would then be stopped after one
    round when that task ends, its tasks' cleanups cut short (the third red-team of stop 34)."""
    code = asyncio.base_events.BaseEventLoop.run_until_complete.__code__
    while frame is not None:
        if frame.f_code is code:
            future = frame.f_locals.get("future")
            if asyncio.isfuture(future):
                future.remove_done_callback(asyncio.base_events._run_until_complete_cb)
        frame = frame.f_back


class _LoopStop:
    """A Stop that ends the run of `loop`, the asyncio loop running in the main thread.

    `loop.stop()` (it only sets a flag: safe at any bytecode) lets the loop finish the round of
    callbacks in progress and return from `run_forever`, with its state put back; the Stop is
    raised right there, at that return (a profile function of the main thread sees it), so
    `run_until_complete`, `asyncio.run` or `Runner.run` raise it with the run's tasks intact:
    asyncio.run then cancels them and awaits their cleanups in a run of their own. A task that
    finished in that last round leaves run_until_complete's done-callback queued; it would stop
    the loop's next run after one round (asyncio.run's cleanup run: "Event loop stopped before
    Future completed"), so it is cancelled. A thread watches: a loop still running after
    LOOP_STOP_WAIT_S (a blocking call in a coroutine), or one that returned unseen (another
    profiler was set), gets the Stop where the main thread is (`_State.overdue`)."""

    def __init__(self, loop, asyncio):
        _State.pending = self
        self.loop = loop
        self.started = time.monotonic()
        self._run_forever = asyncio.base_events.BaseEventLoop.run_forever.__code__
        self._done_callback = asyncio.base_events._run_until_complete_cb
        loop.stop()
        loop.call_soon_threadsafe(lambda: None)  # wakes its select()
        if sys.getprofile() is None:  # a profiler's own function is left alone
            sys.setprofile(self._at_return)
        self._watch()

    def forget(self) -> None:
        """Ends the wait (main thread), however the Stop is raised."""
        if _State.pending is self:
            _State.pending = None
        if sys.getprofile() == self._at_return:
            sys.setprofile(None)
        # a copy: threads append to the queue (call_soon_threadsafe) while this runs
        for handle in list(getattr(self.loop, "_ready", ())):  # left by a task ended last round
            if getattr(handle, "_callback", None) is self._done_callback:
                handle.cancel()

    def _at_return(self, frame, event: str, arg: object) -> None:
        if event != "return" or frame.f_code is not self._run_forever:
            return
        if frame.f_locals.get("self") is not self.loop:
            return
        self.forget()
        if not _State.graceful:
            return  # main has returned: cli.run exits 130 (stop_requested)
        if _State.deferring:
            _State.held = True  # raised at the deferred block's end
            return
        raise Stop

    def _watch(self) -> None:
        signum = signal.Signals[_State.received or "SIGINT"]

        def watch() -> None:
            stopped_before = False  # run_forever's `finally` runs a moment before the hook
            while _State.pending is self:
                time.sleep(0.05)
                stopped = not self.loop.is_running()
                overdue = (stopped and stopped_before) or (
                    not stopped and time.monotonic() - self.started >= LOOP_STOP_WAIT_S
                )
                stopped_before = stopped
                if _State.pending is self and overdue and _State.graceful:
                    _State.overdue = self
                    signal.pthread_kill(threading.main_thread().ident, signum)
                    return

        threading.Thread(target=watch, name="interrupts-loop-stop", daemon=True).start()


def _inside_the_unraisable_hook(frame: object) -> bool:
    """Whether `frame` or a frame below it runs `_unraisable`: a KeyboardInterrupt raised there
    ends in "Exception ignored in sys.unraisablehook" (the compile-SIGINT flake of stop 27: the
    second Ctrl-C arrived while the hook started its thread, in `Thread.start`'s frames)."""
    while frame is not None:
        if getattr(frame, "f_code", None) is _unraisable.__code__:
            return True
        frame = getattr(frame, "f_back", None)
    return False


def _raise_again_soon() -> None:
    """Runs `_handler` in the main thread soon (once it has left the unraisable hook), by
    sending it the stop signal received: a real signal ends a blocking call (a sleep, a join)
    where `_thread.interrupt_main` waits for it to return, and SIGTERM still arrives in a run
    started with SIGINT ignored (a background job)."""
    signum = signal.Signals[_State.received or "SIGINT"]

    def deliver() -> None:
        time.sleep(0.05)
        if _State.raise_again and _State.graceful:
            signal.pthread_kill(threading.main_thread().ident, signum)

    threading.Thread(target=deliver, name="interrupts-raise-again", daemon=True).start()


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _State.raise_again = True
        _raise_again_soon()
        return
    if _State.received is None and not any(
        ignored(unraisable) for ignored in _State.ignored_unraisable
    ):
        sys.__unraisablehook__(unraisable)


def ignore_unraisable(predicate) -> None:
    """Unraisable errors for which `predicate(unraisable)` holds are not printed. A filter goes
    here rather than around `sys.unraisablehook`: a wrapper's frames would be hook frames
    `_handler` cannot see, and a KeyboardInterrupt raised in them would be lost."""
    if predicate not in _State.ignored_unraisable:
        _State.ignored_unraisable.append(predicate)


def install() -> None:
    """Handles SIGINT and SIGTERM as the module docstring says (main thread only). A shell
    without job control starts background commands with SIGINT ignored; that stays so."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _handler)
    sys.unraisablehook = _unraisable
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    _State.installed = True


@contextlib.contextmanager
def stop_gracefully() -> Iterator[None]:
    """The block (a launch script's main) stops on a signal by KeyboardInterrupt, with its
    cleanups, instead of at once."""
    _State.graceful = True
    try:
        yield
    finally:
        _State.graceful = False


def quiet_exit_noise() -> None:
    """Background threads' errors and unraisable exceptions after this are not printed: the
    run already reported why it ends (`--verbose` keeps them)."""
    threading.excepthook = lambda args: None
    sys.unraisablehook = lambda unraisable: None
    logging.disable(logging.CRITICAL)


def exit_process(code: int) -> None:
    """Ends the process with `code` after joining its non-daemon threads (for `JOIN_TIMEOUT_S`
    seconds in all; the ones still running then are named on stderr and left) and running the
    atexit functions (as the interpreter would: env.ownership removes containers still alive
    there), without the module teardown (see the module docstring)."""
    join_timeout = JOIN_TIMEOUT_S
    deadline = time.monotonic() + join_timeout
    left = []
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                left.append(thread.name)
    if left:
        sys.stderr.write(
            f"exiting without {len(left)} thread(s) still running after {join_timeout:.0f} s: "
            f"{', '.join(left)}\n"
        )
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Runs the block with stop signals held; raises KeyboardInterrupt after it if one came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _State.installed and signal.getsignal(signal.SIGINT) is _handler:
        _State.deferring += 1
        try:
            yield
        finally:
            _State.deferring -= 1
        if not _State.deferring and _State.held:
            anywhere, _State.held, _State.held_anywhere = _State.held_anywhere, False, False
            # inside a coroutine: ends its loop's run, raised where the run returns
            _stop(anywhere=anywhere)
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if received:
        raise KeyboardInterrupt
