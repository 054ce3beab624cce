#!/usr/bin/env bash
# The README's two commands on a fresh machine:
#
#   ./run.sh         set up what is missing, then the main job: expert data -> SFT warm start ->
#                    GRPO++ on tasks/oneline (the training reward rises) -> held-out evaluation
#   ./run.sh test    set up what is missing, then lint and the tests (what .ci/run runs)
#
# Set-up installs only what is missing: a Docker engine from Debian packages and its daemon when
# none answers, debootstrap and iproute2 (images, multi-host tests), the virtualenv .venv and the
# pip packages (again only when setup.py changed). Both commands are idempotent: run again, they
# reuse all of that, and the main job resumes its stages in $DEEPSWE_RUN (default runs/learn_tiny).
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
VENV=.venv
RUN_DIR=${DEEPSWE_RUN:-runs/learn_tiny}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    echo "run.sh: '$*' needs root; run it as root or install the packages yourself" >&2
    exit 1
  fi
}

apt_install() {
  echo "installing $* (apt-get)"
  as_root apt-get update -qq
  as_root apt-get install -y -qq "$@" >/dev/null
}

# ---- set-up: Docker engine ------------------------------------------------------------------
echo "== docker engine"
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  echo "starting dockerd (log: /tmp/deepswe-dockerd.log)"
  as_root nohup dockerd >/tmp/deepswe-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -n 50 /tmp/deepswe-dockerd.log; exit 1; }
fi
# debootstrap builds the base image; ip (iproute2) gives the multi-host tests their own bridge.
missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

# ---- set-up: Python environment -------------------------------------------------------------
echo "== python environment"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
stamp="$VENV/.deepswe-installed"
wanted="$(sha256sum setup.py | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  "$VENV/bin/pip" install -q -U pip
  # The CPU build of torch first, so the [dev] extra does not pull a CUDA build.
  "$VENV/bin/pip" install -q torch==2.13.0
  "$VENV/bin/pip" install -q -e ".[dev]"
  echo "$wanted" >"$stamp"
fi
# ---- end of set-up --------------------------------------------------------------------------

# shellcheck disable=SC1091
source "$VENV/bin/activate"
case "${1:-main}" in
  main)
    echo "== main job in $RUN_DIR (tensorboard --logdir=$RUN_DIR)"
    python launch/learn.py --workdir="$RUN_DIR"
    ;;
  test)
    echo "== lint"
    ruff check .
    echo "== tests"
    python -m pytest -q
    ;;
  *)
    echo "usage: ./run.sh [main|test]" >&2
    exit 2
    ;;
esac
