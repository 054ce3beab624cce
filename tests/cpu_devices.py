"""XLA_FLAGS for the tests' fake CPU devices.

XLA:CPU ends the whole process (LOG(FATAL), SIGABRT; no Python exception, and pytest's output
capture swallows its one log line) when the threads of one collective reach it more than
`xla_cpu_collective_call_terminate_timeout_seconds` apart, 40 s by default. Two CI runs lost a
pytest worker in `tests/bench/test_gradient_alignment.py` that way. The second time, with this
timeout at an hour, the process hung instead, and gdb showed why: a deadlock, not a slow
thread (7 of the 8 device threads waiting in an all-reduce, the 8th in an all-gather; the test
now runs on one device). So the timeouts stay bounded: long enough for a device thread starved
on 2 loaded cores (5 minutes), short enough that a deadlock ends the worker (reported as a
crashed test) before pytest-timeout's 15 minutes, whose failure report would itself hang reading
the stuck arrays.
"""

COLLECTIVE_TIMEOUTS = (
    "--xla_cpu_collective_call_warn_stuck_timeout_seconds=60",
    "--xla_cpu_collective_call_terminate_timeout_seconds=300",
)


def xla_flags(devices: int) -> str:
    """XLA_FLAGS for `devices` fake CPU devices whose collectives wait out a loaded machine."""
    return " ".join((f"--xla_force_host_platform_device_count={devices}", *COLLECTIVE_TIMEOUTS))
