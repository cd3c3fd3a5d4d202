#!/usr/bin/env bash
# Start a Dask scheduler and N workers (each under a nanny) on this machine, and keep
# them running until this script is stopped (Ctrl-C or SIGTERM stops them all).
#
#   cluster/start-local.sh --workers 2 --scheduler-file /tmp/saspa-scheduler.json
#   saspa train data.zarr --out model.zarr --scheduler tcp://127.0.0.1:8786
#
# Options: --workers N (2), --threads T per worker (1), --memory-limit (auto),
#          --host (127.0.0.1), --port (8786; 0 picks a free one), --scheduler-file F,
#          --tls-ca-file F --tls-cert F --tls-key F (serve tls:// with these).
# The tests start their clusters with this script.
set -euo pipefail

workers=2 threads=1 memory=auto host=127.0.0.1 port=8786
scheduler_file="${TMPDIR:-/tmp}/saspa-scheduler-$$.json"
tls=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --memory-limit) memory="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --scheduler-file) scheduler_file="$2"; shift 2 ;;
    --tls-ca-file|--tls-cert|--tls-key) tls+=("$1" "$2"); shift 2 ;;
    *) echo "start-local.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
protocol=tcp
[ ${#tls[@]} -gt 0 ] && protocol=tls

# Unmanaged memory is returned to the OS only with this set before workers start
# (distributed #5971); one BLAS thread per worker thread avoids oversubscription.
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-65536}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
DASK="${DASK:-dask}"

rm -f "$scheduler_file"
trap 'trap - EXIT; kill 0 2>/dev/null' EXIT INT TERM
"$DASK" scheduler --host "$host" --port "$port" --protocol "$protocol" --no-dashboard \
  --scheduler-file "$scheduler_file" "${tls[@]}" &
for _ in $(seq 600); do [ -s "$scheduler_file" ] && break; sleep 0.1; done
[ -s "$scheduler_file" ] || { echo "start-local.sh: scheduler did not start" >&2; exit 1; }
for _ in $(seq "$workers"); do
  "$DASK" worker --scheduler-file "$scheduler_file" --nthreads "$threads" --nworkers 1 \
    --memory-limit "$memory" --host "$host" --no-dashboard "${tls[@]}" &
done
echo "scheduler file: $scheduler_file" >&2
wait
