"""Test-wide setup: 8 fake CPU devices so sharding is tested on this machine."""

import os

# Must happen before JAX initializes its backends (any test module may import jax).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
