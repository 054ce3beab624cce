"""deepswe_jax: reinforcement learning of software-engineering agents in JAX."""

__version__ = "0.1.0"
