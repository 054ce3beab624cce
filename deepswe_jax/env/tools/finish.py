#!/usr/bin/env python3
"""finish [submit] [--result R]: end the episode (R2E-Gym interface; installed as `finish` and `submit`).

The host ends the episode when the agent calls this function; run in the container it
only prints the marker the agent's observation shows.
"""

import argparse

FINISHED_MARKER = "<<< Finished >>>"


def main():
    parser = argparse.ArgumentParser(description="Finish the task and submit the current changes.")
    parser.add_argument("command", nargs="?", default="submit", help="Only `submit` (optional)")
    parser.add_argument("--result", default="", help="Optional final message")
    parser.parse_args()
    print(FINISHED_MARKER)


if __name__ == "__main__":
    main()
