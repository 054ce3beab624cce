"""Stand-in for asgiref: installed only in the conda testbed environment."""

__version__ = "3.2.10"
