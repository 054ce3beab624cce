"""A sympy-shaped repository: tests run through bin/test, as sympy's do."""

import mpmath  # noqa: F401  (sympy's dependency; only the conda testbed environment has it)

from sympy.ntheory.primes import isprime, nextprime

__all__ = ["isprime", "nextprime"]
