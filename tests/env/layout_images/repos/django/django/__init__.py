"""A Django-shaped repository: tests run through tests/runtests.py, as Django's do."""

import asgiref  # noqa: F401  (Django's dependency; only the conda testbed environment has it)

VERSION = (3, 0, 0, "alpha", 0)
