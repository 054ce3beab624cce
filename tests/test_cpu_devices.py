"""The suite's fake CPU devices' collective timeouts (tests/cpu_devices.py says why): a device
thread that reaches an all-reduce past the terminate timeout ends the whole process (SIGABRT),
and a late one within the suite's timeout finishes."""

import os
import subprocess
import sys

from tests.cpu_devices import xla_flags

# 4 fake devices; device 0 reaches the all-reduce `sys.argv[1]` seconds after the others.
LATE_DEVICE = """
import sys, time
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("d",))

def late(x):
    if int(x[0]) == 0:
        time.sleep(float(sys.argv[1]))
    return x

def body(x):
    x = jax.pure_callback(late, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return jax.lax.psum(x, "d")

run = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
print("sum", float(run(jax.device_put(jnp.arange(4.0), NamedSharding(mesh, P("d"))))[0]))
"""


def run_late_device(flags: str, late_s: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-c", LATE_DEVICE, str(late_s)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # hang guard only
    )


def test_a_late_device_aborts_the_process_under_a_short_rendezvous_timeout():
    # XLA's default is 40 s; 2 s shows the same failure in seconds.
    short = "--xla_force_host_platform_device_count=4 " + " ".join(
        (
            "--xla_cpu_collective_call_warn_stuck_timeout_seconds=1",
            "--xla_cpu_collective_call_terminate_timeout_seconds=2",
        )
    )
    result = run_late_device(short, late_s=4)
    assert result.returncode == -6  # SIGABRT, not a Python error
    assert "Termination timeout" in result.stderr


def test_the_suites_flags_let_a_late_device_finish():
    # XLA accepts them (an unknown flag in XLA_FLAGS ends the process at start), and the same
    # late device finishes its all-reduce.
    flags = xla_flags(4)
    assert "--xla_cpu_collective_call_terminate_timeout_seconds=300" in flags
    result = run_late_device(flags, late_s=4)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sum 6.0" in result.stdout
