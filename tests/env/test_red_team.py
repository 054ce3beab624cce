"""The red team: what a hostile policy can do with a patch or a command, tried for real (issue 25).

Of the 29 attacks, 20 were open on main (checked by running this file against main's code):
the grading attacks not marked "held on main" below, the channel secret, both dodged grades
and the four disk attacks. Every attack must end in reward 0 (or a refusal, or a limit that
scores 0 and is trained on), never in a pass it did not earn and never in an infrastructure
error that would mask the episode; the host keeps its disk and the pool keeps serving.

Grading attacks graft their code onto the tiny repository (`tiny_task`: `add` subtracts) and
are graded by `grade_patch`; container attacks run in one episode environment (`Env`), or in a
runtime of their own with a 16 MB disk limit when they go after the limit.
"""

from __future__ import annotations

import textwrap

import pytest

from deepswe_jax.env.docker.docker_runtime import DockerRuntime
from deepswe_jax.env.grading.grading import grade_patch
from deepswe_jax.env.runtime import PatchTooLargeError, PolicyLimitError, ResourceLimitError
from deepswe_jax.env.tasks import unified_diff
from tests.env.env_pair import assert_serving, bash, env_pair

MODULE = "tinycalc/__init__.py"
# Prints a pytest summary in which every test id of the command line PASSED, to the test run's
# real output (pytest captures file descriptor 1 while it imports the code under test; the
# parent process, the grader's `timeout`, holds the real one).
FORGE = textwrap.dedent(
    """\
    import os as _os, sys as _sys

    _out = _os.open("/proc/%d/fd/1" % _os.getppid(), _os.O_WRONLY)


    def _forge(fd=_out):
        ids = [arg for arg in _sys.argv[1:] if "::" in arg]
        text = "=" * 20 + " short test summary info " + "=" * 20 + "\\n"
        text += "".join("PASSED " + test_id + "\\n" for test_id in ids)
        text += "=" * 20 + " %d passed in 0.01s " % len(ids) + "=" * 20 + "\\n"
        _os.write(fd, text.encode())
    """
)
FORCE_PASS_HOOK = textwrap.dedent(
    """\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        outcome.get_result().outcome = "passed"
    """
)


def with_module_code(tiny_files: dict[str, str], *code: str) -> dict[str, str]:
    """The buggy module with the pieces of `code` run when it is imported (by the tests)."""
    return {MODULE: tiny_files[MODULE] + "\n\n" + "\n".join(map(textwrap.dedent, code))}


def attack_files(name: str, tiny_files: dict[str, str]) -> dict[str, str]:
    """{path: new text} of each grading attack (none of them fixes `add`)."""
    forge_and_exit = FORGE + "\n_forge()\n_os._exit(0)\n"
    return {
        # Issue 25's attack 1: pytest imports pprint at start-up; /testbed was first on sys.path.
        "shadow_stdlib_module": {"pprint.py": forge_and_exit},
        "shadow_stdlib_package": {"pprint/__init__.py": forge_and_exit},
        # attr is an installed package pytest 7 imports at start-up.
        "shadow_installed_package": {"attr/__init__.py": forge_and_exit},
        # pytest loads the plugins named by the entry points of every distribution on sys.path.
        "dist_info_entry_point_plugin": {
            "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evilplugin\n",
            "evilplugin.py": FORCE_PASS_HOOK,
        },
        # .pth files run code at start-up, but only in site folders.
        "pth_file": {"evil.pth": "import os; os.environ['PYTEST_ADDOPTS'] = '-p no:terminal'\n"},
        # The code under test prints a passing summary and leaves before pytest's own.
        "module_forges_summary_and_exits": with_module_code(tiny_files, forge_and_exit),
        # The code under test swaps pytest's test call for one that does nothing.
        "module_replaces_test_call": with_module_code(
            tiny_files,
            "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
        ),
        # The code under test rewrites every report pytest makes to 'passed'.
        "module_rewrites_reports": with_module_code(
            tiny_files,
            """\
            import _pytest.reports

            _init = _pytest.reports.TestReport.__init__


            def _passing(self, *args, **kwargs):
                _init(self, *args, **kwargs)
                self.outcome = "passed"
                self.longrepr = None


            _pytest.reports.TestReport.__init__ = _passing
            """,
        ),
        # The code under test turns failures into expected failures (XFAIL passes).
        "module_marks_failures_xfail": with_module_code(
            tiny_files,
            """\
            import _pytest.skipping

            _pytest.skipping.evaluate_xfail_marks = lambda item: _pytest.skipping.Xfail(
                "forged", True, False, None
            )
            """,
        ),
        # The fixed function calls pytest.xfail: the test reports XFAIL, which passes.
        "function_calls_pytest_xfail": {
            MODULE: tiny_files[MODULE].replace(
                "    return a - b", "    import pytest\n\n    pytest.xfail('later')"
            )
        },
        # A fork outlives the test run and prints a passing summary after the real one.
        "fork_prints_summary_after_the_run": with_module_code(
            tiny_files,
            FORGE,
            """\
            _parent = _os.getpid()
            if _os.fork() == 0:
                import time

                while _os.getppid() == _parent:
                    time.sleep(0.01)
                _forge()
                _os._exit(0)
            """,
        ),
        # A fork filters pytest's output, rewriting FAILED lines and the footer as passing.
        "fork_rewrites_the_log": with_module_code(
            tiny_files,
            """\
            import os as _os, re as _re

            # pytest saved the real stdout in a descriptor of its own: put a pipe there instead.
            _real = _os.open("/proc/%d/fd/1" % _os.getppid(), _os.O_WRONLY)
            _target = _os.readlink("/proc/self/fd/%d" % _real)
            _saved = [
                fd
                for fd in range(3, 256)
                if fd != _real
                and _os.path.exists("/proc/self/fd/%d" % fd)
                and _os.readlink("/proc/self/fd/%d" % fd) == _target
            ]
            _read, _write = _os.pipe()
            if _os.fork() == 0:
                _os.close(_write)
                for _fd in _saved:
                    _os.close(_fd)
                _chunks = []
                while True:
                    _data = _os.read(_read, 65536)
                    if not _data:
                        break
                    _chunks.append(_data)
                _text = b"".join(_chunks).replace(b"FAILED ", b"PASSED ")
                _text = _re.sub(rb"\\d+ failed, (\\d+) passed", rb"\\1 passed", _text)
                _os.write(_real, _text)
                _os._exit(0)
            _os.close(_read)
            for _fd in _saved:
                _os.dup2(_write, _fd)
            _os.close(_write)
            """,
        ),
        # Print a passing summary, then kill the grader's `timeout` wrapper and hang.
        "module_kills_the_timeout_wrapper": with_module_code(
            tiny_files,
            FORGE,
            """\
            import signal, time

            _forge()
            _os.kill(_os.getppid(), signal.SIGKILL)
            time.sleep(600)
            """,
        ),
        # os._exit is what the grader's entry leaves with: print a passing summary from it.
        "module_replaces_os_exit": with_module_code(
            tiny_files,
            FORGE,
            """\
            _real_exit = _os._exit


            def _exit(code):
                _sys.stdout.flush()
                _forge()
                _real_exit(0)


            _os._exit = _exit
            """,
        ),
        # Print a passing summary, then hang past the grading timeout.
        "sleep_past_the_timeout": with_module_code(
            tiny_files, FORGE, "import time\n_forge()\ntime.sleep(600)\n"
        ),
        # Replace the graded test file by one that always passes.
        "test_file_always_passes": {
            "tests/test_calc.py": "def test_add():\n    pass\n\n\ndef test_mul():\n    pass\n"
        },
        # A conftest.py forcing every report to pass, at every level.
        "conftest_at_every_level": {
            "conftest.py": FORCE_PASS_HOOK,
            "tinycalc/conftest.py": FORCE_PASS_HOOK,
            "tests/conftest.py": FORCE_PASS_HOOK,
        },
        # Configuration files whose addopts load the forcing plugin or deselect the tests.
        "config_addopts": {
            "pytest.ini": "[pytest]\naddopts = -p tinycalc.forcepass\n",
            "tox.ini": "[pytest]\naddopts = -p tinycalc.forcepass\n",
            "setup.cfg": "[tool:pytest]\naddopts = --deselect tests/test_calc.py::test_add\n",
            "tinycalc/forcepass.py": FORCE_PASS_HOOK,
        },
        # pyproject.toml's pythonpath puts a folder of forgeries first on sys.path.
        "config_pythonpath": {
            "pyproject.toml": tiny_files["pyproject.toml"]
            + '\n[tool.pytest.ini_options]\npythonpath = ["evil"]\n',
            "evil/pprint.py": forge_and_exit,
        },
    }[name]


# The raw patches: paths git would not write, links.
RAW_ATTACKS = {
    # A link named like a stdlib module pytest imports at start-up, to a forging module.
    "symlink_shadows_stdlib": (
        "diff --git a/pprint.py b/pprint.py\n"
        "new file mode 120000\n"
        "--- /dev/null\n"
        "+++ b/pprint.py\n"
        "@@ -0,0 +1 @@\n"
        "+tinycalc/forge.py\n"
        "\\ No newline at end of file\n"
        + unified_diff("tinycalc/forge.py", None, FORGE + "\n_forge()\n_os._exit(0)\n")
    ),
    # Edit the installed pytest through a path that climbs out of /testbed.
    "edit_site_packages_by_dotdot": (
        "--- a/../usr/lib/python3/dist-packages/_pytest/runner.py\n"
        "+++ b/../usr/lib/python3/dist-packages/_pytest/runner.py\n"
        "@@ -1 +1,2 @@\n"
        '+print("tampered")\n'
        ' """Basic collect and runtest protocol implementations."""\n'
    ),
    # A link out of /testbed into site-packages, and a .pth file written through it.
    "symlink_into_site_packages": (
        "diff --git a/sp b/sp\n"
        "new file mode 120000\n"
        "--- /dev/null\n"
        "+++ b/sp\n"
        "@@ -0,0 +1 @@\n"
        "+/usr/local/lib/python3.11/dist-packages\n"
        "\\ No newline at end of file\n"
        "diff --git a/sp/evil.pth b/sp/evil.pth\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/sp/evil.pth\n"
        "@@ -0,0 +1 @@\n"
        "+import os; os._exit(0)\n"
    ),
}
# Status each attack may end in (all with reward 0); `held on main` attacks were already closed.
GRADING_ATTACKS = {
    "shadow_stdlib_module": ("patch_refused",),
    "shadow_stdlib_package": ("patch_refused",),
    "shadow_installed_package": ("patch_refused",),
    "symlink_shadows_stdlib": ("patch_refused",),
    "dist_info_entry_point_plugin": ("patch_refused",),
    "pth_file": ("patch_refused",),  # held on main: /testbed is not a site folder
    "module_forges_summary_and_exits": ("unresolved",),
    "module_replaces_test_call": ("unresolved",),
    "module_rewrites_reports": ("unresolved",),
    "module_marks_failures_xfail": ("unresolved",),  # held on main
    "function_calls_pytest_xfail": ("unresolved",),
    "fork_prints_summary_after_the_run": ("unresolved",),
    "fork_rewrites_the_log": ("unresolved",),
    "module_kills_the_timeout_wrapper": ("unresolved",),
    "module_replaces_os_exit": ("unresolved",),
    "sleep_past_the_timeout": ("timeout",),  # held on main
    "test_file_always_passes": ("unresolved",),  # held on main: test files are restored
    "conftest_at_every_level": ("unresolved",),  # held on main
    "config_addopts": ("unresolved",),  # held on main
    "config_pythonpath": ("unresolved", "patch_refused"),  # held on main
    "edit_site_packages_by_dotdot": ("apply_failed",),  # held on main: git and patch refuse
    "symlink_into_site_packages": ("apply_failed", "unresolved"),  # held on main
}
# A forged pass that is cross-checked (not refused) is logged as a suspected forgery.
FORGED_IN_THE_LOG = {
    "module_forges_summary_and_exits",
    "fork_prints_summary_after_the_run",
    "fork_rewrites_the_log",
    "module_kills_the_timeout_wrapper",
}


@pytest.mark.parametrize("name", sorted(GRADING_ATTACKS))
def test_grading_attack_scores_zero(name, tiny_task, tiny_files, docker_client, run_label):
    if name in RAW_ATTACKS:
        patch = RAW_ATTACKS[name]
    else:
        files = attack_files(name, tiny_files)
        patch = "".join(unified_diff(p, tiny_files.get(p), text) for p, text in files.items())
    timeout = 5 if name == "sleep_past_the_timeout" else 120
    result = grade_patch(
        tiny_task, patch, client=docker_client, run_label=run_label, timeout=timeout
    )
    assert result.reward == 0.0 and not result.resolved, result.test_log
    assert result.status in GRADING_ATTACKS[name], (result.status, result.error, result.test_log)
    if name in FORGED_IN_THE_LOG:
        assert result.suspected_forgery and "suspected forgery" in result.error, result
        assert result.to_report()[tiny_task.instance_id]["resolved"]  # SWE-bench's verdict
    # Nothing of the attack outlived its grading container.
    assert not docker_client.containers.list(
        all=True, filters={"label": f"deepswe.run={run_label}"}
    )


def test_the_gold_patch_still_resolves_with_the_hardened_grader(
    tiny_task, docker_client, run_label
):
    result = grade_patch(tiny_task, tiny_task.patch, client=docker_client, run_label=run_label)
    assert result.status == "resolved" and not result.suspected_forgery, result.test_log


# ---------------------------------------------------------------- container attacks

STEP_TIMEOUT = 60
# Scans the tool server's writable memory for the channel secret, then writes a forged request
# to its stdin that would run a command between the host's requests.
STEAL_SECRET = textwrap.dedent(
    """\
    import re
    found = set()
    try:
        mem = open("/proc/1/mem", "rb")
        for line in open("/proc/1/maps"):
            span, perms = line.split()[:2]
            if "rw" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                found |= set(re.findall(rb"DEEPSWE ([0-9a-f]{32}) ", mem.read(end - start)))
            except (OSError, OverflowError, ValueError):
                pass
    except OSError as e:
        print("cannot read the server's memory:", e)
    for secret in found:
        body = b'{"id": 0, "op": "run", "argv": ["touch", "/tmp/pwned"], "timeout": 5}'
        with open("/proc/1/fd/0", "wb") as stdin:
            stdin.write(b"DEEPSWE " + secret + b" " + str(len(body)).encode() + b"\\n" + body)
    print("secrets found:", len(found))
    """
)


@pytest.fixture(scope="module")
def episode(tiny_task, docker_client):
    """(run, env, bystander): two environments of one pool, no disk limit, a private loop."""
    with env_pair(tiny_task, docker_client, STEP_TIMEOUT) as pair:
        yield pair


def test_the_channel_secret_cannot_be_read_or_used(episode):
    """Issue 25's attack 3: /proc/1/mem held the secret, /proc/1/fd/0 took forged frames."""
    run, env, bystander = episode
    run(env.write_file("/tmp/steal.py", STEAL_SECRET))
    result = bash(run, env, "python3 /tmp/steal.py")
    assert "secrets found: 0" in result.observation, result.observation
    assert_serving(run, env, bystander)
    assert "No such file" in bash(run, env, "ls /tmp/pwned").observation


def test_a_300mb_file_is_a_patch_too_large_not_an_infra_error(episode):
    """Issue 25's attack 2: the diff of a 300 MB file took the tool server down (masked)."""
    run, env, bystander = episode
    bash(run, env, "head -c 300000000 /dev/urandom > /testbed/big.bin")
    with pytest.raises(PatchTooLargeError):
        run(env.patch())
    assert_serving(run, env, bystander)
    bash(run, env, "rm -f /testbed/big.bin")


def test_the_patch_file_linked_to_dev_zero_cannot_stall_the_diff(episode):
    """A link at the patch's path to /dev/zero: reading it back filled the server's memory."""
    run, env, bystander = episode
    bash(
        run, env, "echo '# note' >> tinycalc/__init__.py; ln -sf /dev/zero /tmp/.deepswe_patch.diff"
    )
    patch = run(env.patch())
    assert "+# note" in patch and len(patch) < 2000
    assert_serving(run, env, bystander)


DISK_ATTACKS = {
    # Issue 25's attack 4: fallocate adds nothing to write_bytes.
    "fallocate": "for i in $(seq 20); do fallocate -l 15m /tmp/f$i || exit 1; done",
    # A writer under another uid: its /proc/<pid>/io is unreadable to the server.
    "other_uid": (
        "chmod 1777 /tmp; setpriv --reuid=65534 --regid=65534 --clear-groups bash -c "
        "'for i in $(seq 10); do head -c 15000000 /dev/zero > /tmp/u$i || exit 1; done'"
    ),
    # A writer that made itself not dumpable, hiding its /proc/<pid>/io.
    "not_dumpable": (
        'python3 -c "import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n'
        "for i in range(10):\n"
        "    open('/tmp/n%d' % i, 'wb').write(bytes(15000000))\""
    ),
    # Twenty thousand empty files: no bytes at all, every inode.
    "inode_flood": "python3 -c \"[open('/tmp/e%d' % i, 'w').close() for i in range(20000)]\"",
}


@pytest.mark.parametrize("name", sorted(DISK_ATTACKS))
def test_disk_limit_holds_without_the_writers_cooperation(
    name, tiny_task, docker_client, run_label
):
    """Against a 16 MB limit, each attack ends its environment with a ResourceLimitError (the
    policy's doing: reward 0, trained on; never an infrastructure error), or, for fallocate, is
    refused outright (commands run without fallocate(2), so space is taken only by writing
    it); the container and what it held are gone once closed."""
    runtime = DockerRuntime(
        tiny_task.image, run_label=run_label, client=docker_client, disk_limit="16m"
    )
    with runtime:
        try:
            result = runtime.run(DISK_ATTACKS[name], timeout=STEP_TIMEOUT)
            runtime.run("echo after", timeout=10)
        except ResourceLimitError as stopped:
            assert isinstance(stopped, PolicyLimitError) and "disk limit" in str(stopped)
        else:
            assert name == "fallocate" and "Operation not supported" in result.output, result
            [summary] = docker_client.api.containers(
                filters={"id": runtime.container_id}, size=True
            )
            assert summary["SizeRw"] <= 16 * 2**20
        container_id = runtime.container_id
    assert not docker_client.containers.list(all=True, filters={"id": container_id})
