"""XLA_FLAGS for the tests' fake CPU devices.

XLA:CPU ends the whole process (LOG(FATAL), SIGABRT; no Python exception, and pytest's output
capture swallows its one log line) when the threads of one collective reach it more than
`xla_cpu_collective_call_terminate_timeout_seconds` apart, 40 s by default. 8 fake devices on 2
cores, beside the other pytest worker and its subprocesses, can starve one device's thread that
long: a CI worker died so (`Fatal Python error: Aborted` in test_gradient_alignment's gradient
all-reduce, stop 28's fresh-clone run at load 9-20). The tests raise both timeouts; pytest-timeout
(pyproject.toml) is their hang guard, not XLA's rendezvous.
"""

# Warning after 2 minutes, ending after an hour (pytest-timeout ends a test after 15 minutes).
COLLECTIVE_TIMEOUTS = (
    "--xla_cpu_collective_call_warn_stuck_timeout_seconds=120",
    "--xla_cpu_collective_call_terminate_timeout_seconds=3600",
)


def xla_flags(devices: int) -> str:
    """XLA_FLAGS for `devices` fake CPU devices whose collectives wait out a loaded machine."""
    return " ".join((f"--xla_force_host_platform_device_count={devices}", *COLLECTIVE_TIMEOUTS))
