"""The slowest tests of a pytest log (`--durations=N` output, as every run prints) as the
Markdown table of BENCHMARKS.md's "CI time" section.

    PYTHONPATH=. python bench/ci_durations.py --log=/tmp/ci_base.log --top=30
"""

from __future__ import annotations

import re
from pathlib import Path

from absl import app, flags

_LOG = flags.DEFINE_string("log", None, "A pytest log with its slowest-durations list.")
_TOP = flags.DEFINE_integer("top", 30, "How many tests to list.")

DURATION = re.compile(r"\s*([\d.]+)s (call|setup|teardown)\s+(\S+)")


def slowest(log: str) -> list[tuple[float, str, str]]:
    """(seconds, phase, test id) of the durations list in `log`, slowest first."""
    rows = []
    for line in log[log.find("slowest") :].splitlines()[1:]:
        match = DURATION.match(line)
        if match:
            rows.append((float(match.group(1)), match.group(2), match.group(3)))
        elif rows:
            break
    return rows


def main(argv: list[str]) -> None:
    del argv
    print("| # | test (phase) | seconds |\n|---|---|---|")
    for rank, (seconds, phase, test) in enumerate(
        slowest(Path(_LOG.value).read_text())[: _TOP.value], 1
    ):
        print(f"| {rank} | `{test}` ({phase}) | {seconds:.0f} |")


if __name__ == "__main__":
    flags.mark_flag_as_required("log")
    app.run(main)
