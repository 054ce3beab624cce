#!/usr/bin/env python3
"""finish submit [--result R], behaving as R2E-Gym's (agentica-project/R2E-Gym@353348a,
src/r2egym/agenthub/tools/finish.py). The host ends the episode on a `finish` call without
running it; installed, it is what the agent gets when it calls `finish` from the shell."""

import argparse
import sys


def main():
    parser = argparse.ArgumentParser(description="Finish the task: `finish submit`.")
    parser.add_argument("command", help="Only `submit`.")
    parser.add_argument("--result", help="Optional final message.", default="")
    args = parser.parse_args()
    if args.command != "submit":
        print(f"Unknown command '{args.command}'. Only `submit` is supported.")
        sys.exit(1)
    print("<<<Finished>>>")


if __name__ == "__main__":
    main()
