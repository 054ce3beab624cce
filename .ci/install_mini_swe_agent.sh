#!/usr/bin/env bash
# mini-swe-agent 2.4.6 in its own virtualenv, the scaffold tests/launch/test_mini_swe_agent.py drives
# against an exported checkpoint served by `vllm serve` (README: "Evaluating an exported
# checkpoint with mini-swe-agent"):
#
#   bash .ci/install_mini_swe_agent.sh .venv-mini
#
# A separate virtualenv, not .venv: mini-swe-agent's litellm pulls botocore, which needs
# python-dateutil<3, while .venv holds python-dateutil 4.
set -euo pipefail
VENV=${1:-.venv-mini}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip
"$VENV/bin/pip" install -q mini-swe-agent==2.4.6
"$VENV/bin/python" -c "import minisweagent; print('mini-swe-agent', minisweagent.__version__)"
