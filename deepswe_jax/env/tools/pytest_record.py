"""The grader's pytest entry, run by `harness.PYTEST_ENTRY` (`python3 -c <entry> <pytest args>`)
in the repository; installed at /opt/deepswe/pytest_record.py in every container. Pure stdlib
plus pytest, Python >= 3.6.

Before it runs, the entry has moved the repository (the working directory) from the front of
sys.path to its end (the effect of PYTHONSAFEPATH, on any Python), so no file of the
repository can stand in for a module of the environment: the standard library and the
installed packages come first.

When the environment variable DEEPSWE_RECORD names a path (the grader's, random per grade,
outside /testbed), it is taken out of the environment before any code under test runs, and a
plugin writes a JSON result record there when the session ends:

  {"outcomes": {node id: PASSED | FAILED | ERROR | XFAIL | XPASS | SKIPPED},
   "exitstatus": n, "replaced": [names of pytest functions or hooks swapped during the run]}

The outcomes are what pytest's own reports said, not what was printed (an XFAIL only for a test
marked xfail); a run whose code under
test exits early, prints a summary of its own or leaves a process that prints later writes no
record, or one that disagrees with the log. Leaves with os._exit (bound before the tests run),
so nothing printed after pytest's summary (atexit handlers, threads) reaches the log.
"""

import json
import os
import sys

RECORD_PATH = os.environ.pop("DEEPSWE_RECORD", "")

import _pytest.main  # noqa: E402  (after taking the record path out of the environment)
import _pytest.python  # noqa: E402
import _pytest.reports  # noqa: E402
import _pytest.runner  # noqa: E402
import _pytest.skipping  # noqa: E402
import pytest  # noqa: E402

_exit = os._exit
_write = os.write
_close = os.close
_dumps = json.dumps
# Where pytest turns a test's execution into the report the record and the summary come from.
WATCHED = (
    (_pytest.runner, "call_and_report"),
    (_pytest.runner, "runtestprotocol"),
    (_pytest.runner, "call_runtest_hook"),
    (_pytest.runner, "pytest_runtest_makereport"),
    (_pytest.runner.CallInfo, "from_call"),
    (_pytest.reports.TestReport, "from_item_and_call"),
    (_pytest.reports.TestReport, "__init__"),
    (_pytest.python.Function, "runtest"),
    (_pytest.python, "pytest_pyfunc_call"),
    (_pytest.skipping, "pytest_runtest_makereport"),
    (_pytest.skipping, "evaluate_xfail_marks"),
    (_pytest.skipping, "evaluate_skip_marks"),
    (_pytest.main, "pytest_runtestloop"),
)
REPORT_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_report_teststatus")


def _snapshot():
    found = {}
    for owner, name in WATCHED:
        value = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        function = getattr(value, "__func__", value)
        found[f"{getattr(owner, '__name__', owner)}.{name}"] = (
            function,
            getattr(function, "__code__", None),
        )
    return found


def _status(report):
    """The -rA summary word of one report (None for a passing setup or teardown). An expected
    failure counts only where the test carries an xfail mark: code under test calling
    pytest.xfail() is a failure here."""
    xfail = hasattr(report, "wasxfail")
    if xfail and "xfail" not in report.keywords:
        return "FAILED"
    if report.when == "call":
        if report.passed:
            return "XPASS" if xfail else "PASSED"
        if report.skipped:
            return "XFAIL" if xfail else "SKIPPED"
        return "FAILED"
    if report.failed:
        return "ERROR"
    if report.skipped:
        return "XFAIL" if xfail else "SKIPPED"
    return None


class Recorder:
    """Collects each test's outcome from pytest's reports; writes the record at the end."""

    def __init__(self, fd):
        self.fd = fd
        self.outcomes = {}
        self.watched = _snapshot()
        self.hook_plugins = None

    def pytest_sessionstart(self, session):
        self.hook_plugins = self._report_hook_plugins(session.config)

    def pytest_runtest_logreport(self, report):
        status = _status(report)
        if status is not None and self.outcomes.get(report.nodeid) not in ("FAILED", "ERROR"):
            self.outcomes[report.nodeid] = status

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        replaced = [name for name, value in _snapshot().items() if value != self.watched[name]]
        added = self._report_hook_plugins(session.config) - (self.hook_plugins or set())
        replaced += sorted(f"plugin {name}" for name in added)
        record = {"outcomes": self.outcomes, "exitstatus": int(exitstatus), "replaced": replaced}
        _write(self.fd, _dumps(record).encode())
        _close(self.fd)

    @staticmethod
    def _report_hook_plugins(config):
        """Names of plugins implementing a report hook, conftest files left out (the grader
        restores those to the base commit)."""
        names = set()
        for hook in REPORT_HOOKS:
            for impl in getattr(config.hook, hook).get_hookimpls():
                module_file = getattr(impl.plugin, "__file__", "") or ""
                if os.path.basename(module_file) != "conftest.py":
                    names.add(impl.plugin_name)
        return names


def main():
    plugins = []
    if RECORD_PATH:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        plugins.append(Recorder(os.open(RECORD_PATH, flags, 0o600)))
    code = pytest.main(sys.argv[1:], plugins=plugins)
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(int(code))


main()
