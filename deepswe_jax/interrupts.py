"""Ctrl-C at safe points: a SIGINT that arrives while a train step or a checkpoint save runs is
held until that block ends, then raised there as KeyboardInterrupt.

    with deferred_interrupts():
        state, metrics = trainer.step(state, micro_batches)

Python raises KeyboardInterrupt wherever the main thread happens to be. In the middle of a train
step that is between micro-batches whose buffers were donated, while XLA still computes on its
own threads; unwinding and interpreter exit then raced that computation (issue 17: one of two
SIGINTs in a train step ended in a segmentation fault). In a checkpoint save it could stop
Orbax between writing and committing. Holding the signal costs at most one step's time.

Only the main thread receives signals; elsewhere, or when SIGINT is not Python's default
handler (ignored in a background job, or another handler installed), the block runs as is.
Further SIGINTs in the block are held too (the first one already stops the run).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Runs the block with SIGINT held; raises KeyboardInterrupt after it if one came."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
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
