"""A stop while an asyncio loop runs in the main thread (rollouts, evaluation), and the ways out
of a run that cannot stop (deepswe_jax/interrupts.py): the CI soak of stop 33 hung for 30
minutes after a Ctrl-C during rollouts, with nothing to show where. Each case is a script in a
process of its own whose first Ctrl-C lands at one exact point; four red-team rounds of stop 34
found most of them. The signal-by-phase tests of whole runs are in test_interrupts.py."""

from __future__ import annotations

import pytest

from tests.cli.test_interrupts import run_script

# The rollouts' shape (rl/loop.py's Runner and RolloutScheduler, agent/rollout.py's
# _gather_or_cancel, a sampler thread resolving the episodes' futures) with the first Ctrl-C
# landing at one exact bytecode of the main thread, then two more, as a terminal sends them.
# argv[1]: "popped_wakeup", right after the loop took a task's wakeup off its ready queue;
# "sampler_lock", right after JaxSampler.generate acquired its queue's lock, before its `with`
# block began. The CI soak of stop 33 hung there for 30 minutes: the task whose wakeup was lost
# waited forever and so did the rollouts' cancellation; the kept lock blocked the sampler's
# thread, and JaxSampler.close joined it forever.
LANDS_INSIDE_THE_LOOP = """
import asyncio, collections, contextlib, os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground run's
from deepswe_jax import cli, interrupts

interrupts.install()
case = sys.argv[1]
armed = False


def land_here():
    global armed
    armed = False
    signal.raise_signal(signal.SIGINT)  # the handler runs before this call returns

    def impatient():
        for _ in range(2):
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=impatient, daemon=True).start()


class Ready(collections.deque):
    def popleft(self):
        handle = super().popleft()
        if armed and "wakeup" in repr(handle._callback):
            land_here()
        return handle


class Condition(threading.Condition):
    def __enter__(self):
        acquired = super().__enter__()
        if armed and threading.current_thread() is threading.main_thread():
            land_here()
        return acquired


def make_sampler():
    from flax import nnx

    from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
    from deepswe_jax.sampling import JaxSampler

    config = Qwen3Config(
        vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    )
    original, threading.Condition = threading.Condition, Condition
    try:
        return JaxSampler(Qwen3ForCausalLM(config, rngs=nnx.Rngs(0)), max_batch=2,
                          max_cache_len=32, min_prefill_len=16)
    finally:
        threading.Condition = original


def main(argv):
    global armed
    from deepswe_jax.agent.rollout import _gather_or_cancel
    from deepswe_jax.rl.overlap import RolloutScheduler
    from deepswe_jax.sampling import GenerateRequest, SamplingParams

    resolved = []

    def engine():  # the sampler thread: resolves waiting futures on their loop
        while True:
            time.sleep(0.01)
            while resolved:
                loop, future = resolved.pop()
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lambda f=future: f.done() or f.set_result(1))

    threading.Thread(target=engine, daemon=True).start()
    sampler = make_sampler() if case == "sampler_lock" else None
    request = GenerateRequest((1, 2, 3), SamplingParams(temperature=0.0, max_new_tokens=0))

    async def episode(index):
        global armed
        loop = asyncio.get_running_loop()
        for turn in range(10_000):
            if sampler is not None:
                await sampler.generate([request])
            future = loop.create_future()
            resolved.append((loop, future))
            await future
            if turn == 5 and index == 0:
                armed = True

    async def collect(iteration, version):
        return await _gather_or_cancel([episode(i) for i in range(4)], None)

    with contextlib.ExitStack() as stack:
        if sampler is not None:
            stack.callback(sampler.close)
        runner = stack.enter_context(asyncio.Runner())
        runner.get_loop()._ready = Ready(runner.get_loop()._ready)
        scheduler = stack.enter_context(
            RolloutScheduler(runner, collect, lambda params: None, max_staleness=0, start=0,
                             stop=1)
        )
        scheduler.publish(0, {})
        scheduler.next_batch(0)


cli.run(main)
"""


@pytest.mark.parametrize("case", ["popped_wakeup", "sampler_lock"])
def test_a_stop_during_rollouts_never_lands_inside_the_loop_or_a_lock(case):
    result = run_script(LANDS_INSIDE_THE_LOOP, case, timeout=90)
    assert result.returncode == 130, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].startswith("interrupted (SIGINT)"), result.stderr


# The first Ctrl-C in the last round of a loop's run: after run_until_complete asked the loop to
# stop (a done-callback of the run's task sends it; the task succeeded, "ends_the_run", or
# failed, "fails_the_run"), or in the task's last step ("in_its_last_step"). The red-team of
# stop 34 found a stop raised from a loop callback left queued there: it ran in asyncio.run's
# cancellation of the tasks left (the episode's cleanup never ran), or was sent again into the
# next cleanup's loop (the env pool's close cancelled half-way); and a stop raised before
# run_until_complete's done-callback ran left that callback queued, to stop asyncio.run's
# cleanup run after one round; the third found that callback left queued by the fallback for a
# loop blocked in a coroutine ("blocked_in_its_last_step") and by a deferred block inside a
# coroutine ("saved_in_its_last_step").
LAST_ROUND = """
import asyncio, contextlib, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from deepswe_jax import cli, interrupts

interrupts.install()


async def episode():
    try:
        await asyncio.sleep(60)
    finally:  # an awaited cleanup: the container's removal
        await asyncio.sleep(0.05)
        print("episode cleaned up", flush=True)


async def right_after(ready):  # a task woken in the same round, after the run's task
    await ready
    if sys.argv[1] == "blocked_in_its_last_step":
        time.sleep(2)  # a blocking call in a coroutine (LOOP_STOP_WAIT_S: 0.5)
    else:  # a deferred block in a coroutine, which the signal arrives in
        with interrupts.deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            print("saved", flush=True)


async def rollouts():
    asyncio.create_task(episode())
    await asyncio.sleep(0.1)
    if sys.argv[1] in ("blocked_in_its_last_step", "saved_in_its_last_step"):
        interrupts.LOOP_STOP_WAIT_S = 0.5
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        asyncio.create_task(right_after(ready))
        loop.call_later(0.05, ready.set_result, None)
        await ready  # woken first in the round, then right_after
        if sys.argv[1] == "saved_in_its_last_step":
            return
    if sys.argv[1] in ("in_its_last_step", "blocked_in_its_last_step"):
        signal.raise_signal(signal.SIGINT)  # the task ends in the round the signal came in
        return
    asyncio.current_task().add_done_callback(lambda task: signal.raise_signal(signal.SIGINT))
    if sys.argv[1] == "fails_the_run":
        raise RuntimeError("an episode failed")


async def close_pool():
    for _ in range(4):
        await asyncio.sleep(0.05)
    print("pool closed", flush=True)


def main(argv):
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: asyncio.run(close_pool()))
        asyncio.run(rollouts())
        print("ran on", flush=True)


cli.run(main)
"""


@pytest.mark.parametrize(
    "case",
    [
        "ends_the_run",
        "fails_the_run",
        "in_its_last_step",
        "blocked_in_its_last_step",
        "saved_in_its_last_step",
    ],
)
def test_a_stop_in_a_runs_last_round_lets_every_cleanup_finish(case):
    result = run_script(LAST_ROUND, case, timeout=60)
    assert result.returncode == 130, result.stdout + result.stderr
    saved = ["saved"] if case == "saved_in_its_last_step" else []
    assert result.stdout.splitlines() == [*saved, "episode cleaned up", "pool closed"], (
        result.stdout + result.stderr
    )
    assert result.stderr.splitlines()[-1].startswith("interrupted (SIGINT)"), result.stderr


# A coroutine blocking the loop's thread (a synchronous call that never returns) would keep the
# loop from ending its run: after LOOP_STOP_WAIT_S the stop is raised where the thread is.
BLOCKED_LOOP = """
import asyncio, os, signal, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from deepswe_jax import cli, interrupts

interrupts.install()
interrupts.LOOP_STOP_WAIT_S = 1.0


async def blocks():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)


def main(argv):
    started = time.monotonic()
    try:
        asyncio.run(blocks())
    finally:
        print(time.monotonic() - started, flush=True)


cli.run(main)
"""


def test_a_loop_blocked_in_a_coroutine_still_stops():
    result = run_script(BLOCKED_LOOP, timeout=30)
    assert result.returncode == 130, result.stdout + result.stderr
    assert 1.0 <= float(result.stdout) < 30, result.stdout + result.stderr  # LOOP_STOP_WAIT_S


# Train steps in deferred blocks, back to back, run from a coroutine that does not await (the
# fourth red-team of stop 34): each block's end asked the loop to end its run, the loop never got
# back to its callbacks, and the escalation after LOOP_STOP_WAIT_S landed in the next block and
# was held again, so every step ran.
DEFERRED_STEPS_IN_A_COROUTINE = """
import asyncio, signal, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground run's
from deepswe_jax import interrupts

interrupts.install()
interrupts.LOOP_STOP_WAIT_S = 0.3


async def train():
    for step in range(40):
        with interrupts.deferred_interrupts():
            if step == 2:
                signal.raise_signal(signal.SIGINT)
            time.sleep(0.1)
        print(step, flush=True)


with interrupts.stop_gracefully():
    try:
        asyncio.run(train())
    except KeyboardInterrupt:
        print("stopped", flush=True)
"""


def test_deferred_steps_in_a_coroutine_stop_once_the_loop_is_overdue():
    result = run_script(DEFERRED_STEPS_IN_A_COROUTINE, timeout=60)
    lines = result.stdout.splitlines()
    assert lines[-1] == "stopped", result.stdout + result.stderr
    assert "39" not in lines, lines  # stopped after a few steps, not at the end


# A run interrupted while one of its threads (not a daemon) is stuck in a call that never
# returns: the CI soak of stop 33 hung 30 minutes after an interruption during rollouts.
STUCK_THREAD = """
import atexit, signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground run's
from deepswe_jax import cli, interrupts

interrupts.install()
interrupts.JOIN_TIMEOUT_S = 2.0
atexit.register(lambda: print("atexit ran", file=sys.stderr, flush=True))


def main(argv):
    threading.Thread(target=threading.Event().wait, name="stuck-docker-call").start()
    signal.raise_signal(signal.SIGINT)


cli.run(main)
"""


def test_an_interrupted_run_does_not_wait_forever_for_a_stuck_thread():
    result = run_script(STUCK_THREAD)
    assert result.returncode == 130, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("interrupted (SIGINT)"), lines
    assert "still running after 2 s: stuck-docker-call" in lines[1], lines
    assert lines[2:] == ["atexit ran"], lines  # the containers' cleanup still runs


# What a run that seems stuck is doing: `kill -USR1 <pid>` prints every thread's stack, and the
# run goes on.
STACKS = """
import os, signal, sys, threading, time
from deepswe_jax import interrupts

interrupts.install()


def waiting_for_the_engine():
    time.sleep(0.5)


thread = threading.Thread(target=waiting_for_the_engine)
thread.start()
os.kill(os.getpid(), interrupts.STACKS_SIGNAL)
thread.join()
print("went on")
"""


def test_sigusr1_prints_every_threads_stack_and_the_run_goes_on():
    result = run_script(STACKS)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "went on\n"
    assert "in waiting_for_the_engine" in result.stderr, result.stderr
    assert "Current thread" in result.stderr, result.stderr  # the main thread too
