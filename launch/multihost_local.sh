#!/usr/bin/env bash
# Starts N processes of one multi-process JAX job on this machine (CPU devices, gloo collectives),
# for testing the multi-host paths without a cluster.
#
#   launch/multihost_local.sh NUM_PROCESSES DEVICES_PER_PROCESS COMMAND [ARGS...]
#   launch/multihost_local.sh 2 2 python launch/train.py --config=configs/tiny.py --workdir=/tmp/mh
#
# Each process gets JAX_COORDINATOR_ADDRESS (localhost, a free port unless MULTIHOST_PORT is set),
# JAX_NUM_PROCESSES, JAX_PROCESS_ID, JAX_PLATFORMS=cpu and DEVICES_PER_PROCESS fake CPU devices.
# Process i's output goes to stdout prefixed with [i]; the script exits with the first non-zero
# status (and stops the other processes), else 0.
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 NUM_PROCESSES DEVICES_PER_PROCESS COMMAND [ARGS...]" >&2
  exit 2
fi
num_processes=$1
devices_per_process=$2
shift 2

port=${MULTIHOST_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
pids=()
for ((id = 0; id < num_processes; id++)); do
  (
    export JAX_COORDINATOR_ADDRESS="127.0.0.1:${port}"
    export JAX_NUM_PROCESSES="${num_processes}"
    export JAX_PROCESS_ID="${id}"
    export JAX_PLATFORMS=cpu
    # The device count is this script's; other XLA flags of the caller's are kept.
    other_flags=$(sed -E 's/--xla_force_host_platform_device_count=[0-9]+//g' <<<"${XLA_FLAGS:-}")
    export XLA_FLAGS="--xla_force_host_platform_device_count=${devices_per_process} ${other_flags}"
    exec "$@" > >(sed -u "s/^/[${id}] /") 2>&1
  ) &
  pids+=($!)
done

status=0
for ((i = 0; i < num_processes; i++)); do
  if ! wait -n; then
    if [[ ${status} -eq 0 ]]; then
      kill "${pids[@]}" 2>/dev/null || true  # the others would wait for it in a collective
    fi
    status=1
  fi
done
exit "${status}"
