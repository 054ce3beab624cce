"""Stand-in for mpmath: installed only in the conda testbed environment."""

__version__ = "1.3.0"
