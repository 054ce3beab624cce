"""Stand-in for tomlkit: installed only in the repository's /testbed/.venv."""

__version__ = "0.12.1"
