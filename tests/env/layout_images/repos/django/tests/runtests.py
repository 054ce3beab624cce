#!/usr/bin/env python
"""Django's tests/runtests.py, reduced: runs test modules given as labels with unittest and
Django's verbose output ("test_name (module.Class) ... ok")."""

import argparse
import os
import sys
import unittest

RUNTESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [RUNTESTS_DIR, os.path.dirname(RUNTESTS_DIR)]

import django  # noqa: E402


class DjangoTextTestResult(unittest.TextTestResult):
    def getDescription(self, test):
        cls = type(test)
        return f"{test._testMethodName} ({cls.__module__}.{cls.__qualname__})"


def main():
    parser = argparse.ArgumentParser(description="Run the Django test suite.")
    parser.add_argument("labels", nargs="*")
    parser.add_argument("--verbosity", type=int, default=1)
    parser.add_argument("--settings", default="test_sqlite")
    parser.add_argument("--parallel", type=int, default=0)
    args = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = args.settings
    django_dir = os.path.dirname(django.__file__)
    processes = max(args.parallel, 1)
    print(f"Testing against Django installed in '{django_dir}' with up to {processes} processes")
    suite = unittest.defaultTestLoader.loadTestsFromNames(args.labels)
    print("System check identified no issues (0 silenced).", flush=True)
    runner = unittest.TextTestRunner(
        verbosity=args.verbosity, resultclass=DjangoTextTestResult, stream=sys.stdout
    )
    sys.exit(not runner.run(suite).wasSuccessful())


if __name__ == "__main__":
    main()
