"""Test-wide setup: 8 fake CPU devices so sharding is tested on this machine, and one JAX
compilation cache for the session.

Many tests run the same programs: launch/ scripts of the tiny config in subprocesses (train,
resume, interrupts, sweep, CLI errors), the same model in several test modules. JAX's
persistent cache (JAX_COMPILATION_CACHE_DIR, inherited by the subprocesses) compiles each
program once per session; a run that finds its programs there skips the compilation (the
executable is the one XLA built for the same program, so results are unchanged). The folder is
new for every session and removed at its end; a cache the user set is left as it is.
"""

import atexit
import os
import shutil
import tempfile

# Must happen before JAX initializes its backends (any test module may import jax).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="deepswe-tests-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
