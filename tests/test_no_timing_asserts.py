"""No test's verdict depends on how fast the machine is: no assert compares elapsed time.

Scans every test module for asserts that order (<, <=, >, >=) a value derived from a clock
read (time.perf_counter / monotonic / time, datetime.now), a timing record (a `time/..._s`
metrics key, a `_s` attribute) or a function that returns one. Allowed only when listed in
ALLOWED with the reason load cannot decide it: a test's own deadline that only stops a hang, or
the order of two clock readings that the code takes in causal order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Calls that read a clock, by the attribute or name called.
CLOCK_CALLS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}
CLOCK_MODULE_CALLS = {("time", "time"), ("time", "time_ns"), ("datetime", "now")}
# Record fields and metrics keys that hold seconds measured by the code under test.
TIMING_NAME = re.compile(r"(^|/)time/|_s$|_seconds$|^elapsed")
ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

# (file under tests/, the assert on one line, why load cannot change its verdict)
ALLOWED = {
    *(
        (
            "rl/test_overlap.py",
            text,
            "orders two readings of the monotonic clock that the schedule takes in causal order",
        )
        for text in (
            "assert spans[iteration][0] >= batch.finished",
            "assert batch.started >= spans[iteration - 1][1]",
            "assert ( batch.started < spans[batch.iteration - 1][1] )",
        )
    ),
    (
        "verify/test_evaluation_run.py",
        'assert time.monotonic() < deadline, "no 5 graded tasks within 300 s"',
        "polls up to 300 s for 5 gradings that take seconds; fails only on a hang",
    ),
}


def _called_name(call: ast.Call) -> tuple[str | None, str | None]:
    """(receiver's last name, called name) of `call`: ("time", "perf_counter"), (None, "f")."""
    func = call.func
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute):
        receiver = func.value
        if isinstance(receiver, ast.Attribute):
            return receiver.attr, func.attr
        if isinstance(receiver, ast.Name):
            return receiver.id, func.attr
        return None, func.attr
    return None, None


def _reads_clock(node: ast.AST, tainted_names: set[str], tainted_functions: set[str]) -> bool:
    """Whether `node` holds a clock read, a timing record or a value derived from one."""
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            receiver, name = _called_name(child)
            if name in CLOCK_CALLS or (receiver, name) in CLOCK_MODULE_CALLS:
                return True
            if receiver is None and name in tainted_functions:
                return True
        elif isinstance(child, ast.Name) and child.id in tainted_names:
            return True
        elif isinstance(child, ast.Attribute) and TIMING_NAME.search(child.attr):
            return True
        elif (
            isinstance(child, ast.Subscript)
            and isinstance(child.slice, ast.Constant)
            and isinstance(child.slice.value, str)
            and TIMING_NAME.search(child.slice.value)
        ):
            return True
    return False


def _is_positivity_check(compare: ast.Compare) -> bool:
    """`x > 0`, `x >= 0` or `0 < x`: a measured time or rate is positive however loaded."""
    if len(compare.ops) != 1:
        return False
    left, op, right = compare.left, compare.ops[0], compare.comparators[0]

    def is_zero(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value == 0

    return (isinstance(op, (ast.Gt, ast.GtE)) and is_zero(right)) or (
        isinstance(op, (ast.Lt, ast.LtE)) and is_zero(left)
    )


def _target_names(target: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}


def _taint(scope: ast.AST, names: set[str], functions: set[str]) -> None:
    """Adds to `names` the names `scope` assigns from clock-derived values and to `functions`
    the functions in it that return one, until nothing changes."""
    while True:
        before = len(names) + len(functions)
        for node in ast.walk(scope):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
                if _reads_clock(node.value, names, functions):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        names |= _target_names(target)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                # xs.append(clock value) makes xs clock-derived
                if node.func.attr in {"append", "extend", "add"} and any(
                    _reads_clock(argument, names, functions) for argument in node.args
                ):
                    names |= _target_names(node.func.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns = [n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
                if any(_reads_clock(r.value, names, functions) for r in returns):
                    functions.add(node.name)
        if len(names) + len(functions) == before:
            return


def timing_asserts(source: str) -> list[tuple[int, str]]:
    """(line, text on one line) of each assert in `source` that orders a clock-derived value."""
    tree = ast.parse(source)
    module_names: set[str] = set()
    functions: set[str] = set()
    _taint(tree, module_names, functions)  # functions module-wide; names again per function
    found = []
    for scope in tree.body:
        names = set(module_names)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = {name for name in names if name.isupper()}  # module constants only
            _taint(scope, names, functions)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assert) and any(
                isinstance(compare, ast.Compare)
                and any(isinstance(op, ORDERINGS) for op in compare.ops)
                and not _is_positivity_check(compare)
                and _reads_clock(compare, names, functions)
                for compare in ast.walk(node.test)
            ):
                found.append((node.lineno, " ".join(ast.get_source_segment(source, node).split())))
    return sorted(found)


# The wall-clock ratio that failed on a loaded machine (issue 33), as it was written.
RATIO_TEST = """
import time

def test_parse_time_grows_linearly(make_reply):
    def best_seconds(reply):
        times = []
        for _ in range(5):
            started = time.perf_counter()
            parse_function_call(reply)
            times.append(time.perf_counter() - started)
        return min(times)

    ratio = best_seconds(make_reply(1_000_000)) / best_seconds(make_reply(100_000))
    assert ratio < 30, f"parsing 1 MB took {ratio:.0f}x as long as 100 KB"
"""


def test_the_scan_catches_a_wall_clock_ratio():
    assert [text for _, text in timing_asserts(RATIO_TEST)] == [
        'assert ratio < 30, f"parsing 1 MB took {ratio:.0f}x as long as 100 KB"'
    ]


def test_the_scan_catches_direct_and_recorded_durations():
    source = (
        "def test_x(metrics, result, started):\n"
        "    assert time.perf_counter() - started < 5\n"
        '    assert metrics["time/rollout_wait_s"] < metrics["time/rollout_s"]\n'
        "    assert result.duration_s <= 1.0\n"
        '    assert "time/rollout_s" in metrics and result.exit_code == 0\n'
    )
    assert [line for line, _ in timing_asserts(source)] == [2, 3, 4]


def test_no_test_asserts_on_elapsed_time():
    found = set()
    for path in sorted(TESTS.rglob("test_*.py")):
        for _, text in timing_asserts(path.read_text()):
            found.add((path.relative_to(TESTS).as_posix(), text))
    allowed = {(path, text) for path, text, _ in ALLOWED}
    assert found - allowed == set(), "asserts on elapsed time: check a count or an order instead"
    assert allowed - found == set(), "ALLOWED lists asserts that are gone: drop them"
