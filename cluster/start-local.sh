#!/usr/bin/env bash
# Start a Dask scheduler and N workers (each under a nanny) on this machine, print the
# address to connect to, and keep them running until this script is stopped: Ctrl-C,
# SIGTERM or `kill PID` stop the scheduler and the workers it started, and nothing else
# (not the shell or script that started it).
#
#   cluster/start-local.sh --workers 2 &
#   saspa train data.zarr --out model.zarr --scheduler tcp://127.0.0.1:8786
#   kill %1
#
# Options: --workers N (2), --threads T per worker (1), --memory-limit (auto),
#          --host (127.0.0.1), --port (8786; 0 picks a free one), --scheduler-file F,
#          --dashboard (serve the scheduler's dashboard on HOST, a free port),
#          --tls-ca-file F --tls-cert F --tls-key F (serve tls:// with these).
# Every HTTP endpoint (the scheduler's and the workers') listens on --host only; Dask
# has no authentication on plain TCP: on a shared host use TLS (cluster/README.md).
# Exit codes: 0 stopped by a signal, 1 a start-up failure (said in one line), 2 usage.
# The tests start their clusters with this script.
set -uo pipefail

workers=2 threads=1 memory=auto host=127.0.0.1 port=8786 dashboard=0
scheduler_file="${TMPDIR:-/tmp}/saspa-scheduler-$$.json"
tls=()
usage() { echo "start-local.sh: $1 (see the header of this script)" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workers|--threads|--memory-limit|--host|--port|--scheduler-file|--tls-ca-file|--tls-cert|--tls-key)
      [ $# -ge 2 ] || usage "$1 needs a value" ;;&
    --workers) workers="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --memory-limit) memory="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --scheduler-file) scheduler_file="$2"; shift 2 ;;
    --dashboard) dashboard=1; shift ;;
    --tls-ca-file|--tls-cert|--tls-key) tls+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) usage "unknown option $1" ;;
  esac
done
case "$workers" in ''|*[!0-9]*|0) usage "--workers must be a positive integer" ;; esac
case "$port" in ''|*[!0-9]*) usage "--port must be a number" ;; esac
protocol=tcp
[ ${#tls[@]} -gt 0 ] && protocol=tls

# The dask command: $DASK, else on PATH, else this checkout's .venv.
here="$(cd "$(dirname "$0")" && pwd)"
DASK="${DASK:-$(command -v dask || true)}"
[ -z "$DASK" ] && [ -x "$here/../.venv/bin/dask" ] && DASK="$here/../.venv/bin/dask"
if [ -z "$DASK" ] || ! [ -x "$(command -v "$DASK")" ]; then
  echo "start-local.sh: no 'dask' command: activate the environment saspa is installed in" \
       "(e.g. source .venv/bin/activate) or set DASK=/path/to/dask" >&2
  exit 1
fi
PYTHON="$(dirname "$(command -v "$DASK")")/python"
[ -x "$PYTHON" ] || PYTHON=python3

# A taken port is said at once (not after the scheduler fails in the background).
if [ "$port" != 0 ] && ! "$PYTHON" - "$host" "$port" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind((sys.argv[1], int(sys.argv[2])))
except OSError:
    sys.exit(1)
EOF
then
  echo "start-local.sh: port $port on $host is taken; choose another --port, or --port 0" \
       "for a free one" >&2
  exit 1
fi

# glibc's malloc as the embedded cluster sets it (cluster/README.md): blocks from 4 MiB
# are given back when freed, a chunk task's smaller buffers kept for the next task; one
# BLAS thread per worker thread avoids oversubscription.
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-4194304}"
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-33554432}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# No wait on the cluster is unbounded, from Python too: a task that cannot run because
# no worker is left (every one lost, none restarted) fails after this, so a fit or a
# score whose workers are all gone raises instead of waiting for ever (nannies restart
# a lost worker in seconds).  Set it in the environment to change it.
export DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT="${DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT:-60s}"

children=()
stop() {
  # Reset every trap first: the handler must not run again (re-entering it recursed
  # until bash crashed).  Only our own children are signalled, never the process group,
  # which may hold the caller.
  trap - EXIT INT TERM
  [ ${#children[@]} -gt 0 ] && kill -TERM "${children[@]}" 2>/dev/null
  for _ in $(seq 100); do
    alive=0
    for pid in "${children[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  [ ${#children[@]} -gt 0 ] && kill -KILL "${children[@]}" 2>/dev/null
  rm -f "$scheduler_file"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

http=(--dashboard-address "$host:0")
[ "$dashboard" = 1 ] || http+=(--no-dashboard)
rm -f "$scheduler_file"
"$DASK" scheduler --host "$host" --port "$port" --protocol "$protocol" "${http[@]}" \
  --scheduler-file "$scheduler_file" "${tls[@]}" &
children+=($!)
for _ in $(seq 600); do
  [ -s "$scheduler_file" ] && break
  kill -0 "${children[0]}" 2>/dev/null || { echo "start-local.sh: the scheduler exited at" \
    "start-up (its messages are above)" >&2; exit 1; }
  sleep 0.1
done
[ -s "$scheduler_file" ] || { echo "start-local.sh: the scheduler did not start in 60 s" >&2; exit 1; }
address=""
for _ in $(seq 50); do  # the file is written before its content is complete
  address="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"])' \
             "$scheduler_file" 2>/dev/null)" && [ -n "$address" ] && break
  sleep 0.1
done
for _ in $(seq "$workers"); do
  "$DASK" worker --scheduler-file "$scheduler_file" --nthreads "$threads" --nworkers 1 \
    --memory-limit "$memory" --host "$host" --dashboard-address "$host:0" --no-dashboard \
    "${tls[@]}" &
  children+=($!)
done
echo "scheduler: $address  (scheduler file: $scheduler_file; $workers workers)"
echo "connect with: saspa train DATA --out MODEL --scheduler $address"
wait
