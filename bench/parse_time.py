"""Wall time of parse_function_call on the adversarial replies of tests/agent/test_parsing.py, at
100 KB and 1 MB, and the ratio (about 10 when linear, 100 when quadratic).

The test checks linearity by counting the characters the parser passes over (no clock, so load
cannot change its verdict); this measures the seconds. Each figure is the best of 5 batches of
parses, a batch long enough (>= 20 ms) that scheduling noise does not decide it; run it on an
idle machine.

    PYTHONPATH=. python bench/parse_time.py
"""

from __future__ import annotations

import time

from absl import app

from deepswe_jax.agent.parsing import Scanner, parse_function_call
from tests.agent.test_parsing import ADVERSARIAL_REPLIES


def best_seconds(reply: str) -> float:
    """Best of 5 batches of parses of `reply`, in seconds per parse."""
    repeats = 1
    while True:
        started = time.perf_counter()
        for _ in range(repeats):
            parse_function_call(reply)
        if time.perf_counter() - started >= 0.02:
            break
        repeats *= 2
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeats):
            parse_function_call(reply)
        times.append((time.perf_counter() - started) / repeats)
    return min(times)


def main(argv: list[str]) -> None:
    del argv
    print(f"{'reply':30} {'100 KB ms':>10} {'1 MB ms':>10} {'ratio':>6} {'passes':>7}")
    for name, make_reply in ADVERSARIAL_REPLIES.items():
        small, large = make_reply(100_000), make_reply(1_000_000)
        scanner = Scanner(large)
        parse_function_call(scanner)
        small_s, large_s = best_seconds(small), best_seconds(large)
        passes = scanner.chars_scanned / len(large)
        print(
            f"{name:30} {small_s * 1e3:10.2f} {large_s * 1e3:10.2f} "
            f"{large_s / small_s:6.1f} {passes:7.2f}"
        )


if __name__ == "__main__":
    app.run(main)
