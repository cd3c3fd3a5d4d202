#!/usr/bin/env bash
# Train (or run any saspa command) on a batch allocation: start a Dask scheduler on this
# node and one worker per task of the allocation, all over TLS with a certificate made
# for this job alone, run the command against them, and stop them at the end.
#
#   saspa-batch.sh train /shared/data.zarr --out /shared/models/v1.zarr
#
# Called from cluster/hpc/slurm.sbatch or cluster/hpc/pbs.pbs (their headers ask the
# batch system for the nodes); it reads the allocation from the environment:
#   SLURM: SLURM_JOB_ID, SLURM_NTASKS, SLURM_CPUS_PER_TASK; workers started with srun
#   PBS:   PBS_JOBID, PBS_NODEFILE (one worker per line), NCPUS; workers with pbsdsh
# Settings (environment): SASPA_WORKER_MEMORY (memory limit per worker, e.g. 30GB; by
# default Dask's share of the node), SASPA_HOST (the address to listen on: this node's
# hostname by default), SASPA_LAUNCH (the command that starts one worker per task, e.g.
# "mpiexec -n 8"; overrides the batch system's), SASPA_JOB_DIR (where the job's
# certificate and scheduler file go: a folder only the user can read, removed at the
# end; by default ~/.saspa-jobs/JOB_ID on the shared home).
# Every endpoint needs the job's certificate: another user on the cluster's network
# cannot connect to the scheduler or the workers (Dask has no authentication on plain
# TCP).  Dashboards are off.  Exit code: saspa's, or 1 when the cluster did not start.
set -uo pipefail

job_id="${SLURM_JOB_ID:-${PBS_JOBID:-$$}}"
job_id="${job_id%%.*}"
if [ -n "${SLURM_JOB_ID:-}" ]; then
  n_workers="${SLURM_NTASKS:-1}" threads="${SLURM_CPUS_PER_TASK:-1}"
  launch="${SASPA_LAUNCH:-srun --ntasks=$n_workers --cpus-per-task=$threads}"
elif [ -n "${PBS_JOBID:-}" ]; then
  n_workers="$(wc -l < "$PBS_NODEFILE")" threads="${NCPUS:-1}"
  launch="${SASPA_LAUNCH:-pbsdsh --}"
else
  n_workers="${SASPA_WORKERS:-1}" threads="${SASPA_THREADS:-1}"
  launch="${SASPA_LAUNCH:?not in a SLURM or PBS job: set SASPA_LAUNCH}"
fi
host="${SASPA_HOST:-$(hostname)}"
dir="${SASPA_JOB_DIR:-$HOME/.saspa-jobs/$job_id}"
command -v dask >/dev/null && command -v saspa >/dev/null || {
  echo "saspa-batch.sh: 'dask' and 'saspa' must be on PATH (activate the environment)" >&2
  exit 1; }

python="$(dirname "$(command -v dask)")/python"
# a client of this job's cluster: waits for N workers (argument 3) or shuts it down
connect='
import sys
from distributed import Client
from distributed.security import Security
address, folder, what = sys.argv[1], sys.argv[2], sys.argv[3]
pem, key = f"{folder}/job.pem", f"{folder}/job.key"
security = Security(tls_ca_file=pem, tls_client_cert=pem, tls_client_key=key,
                    require_encryption=True)
with Client(address, security=security, timeout=30) as client:
    if what == "shutdown":
        client.shutdown()
        sys.exit()
    n, wait = int(what), float(sys.argv[4])
    try:
        client.wait_for_workers(n, timeout=wait)
    except TimeoutError:
        have = len(client.scheduler_info()["workers"])
        sys.exit(f"saspa-batch.sh: {have} of {n} workers joined in {wait:g}s:")
'

umask 077
mkdir -p "$dir" && chmod 700 "$dir" || exit 1
pids=()
alive() { for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
cleanup() {
  # the scheduler closes its workers (and their nannies) on every node, then itself
  [ -n "${address:-}" ] && "$python" - "$address" "$dir" shutdown <<<"$connect" 2>/dev/null
  for _ in $(seq 100); do alive || break; sleep 0.1; done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# One self-signed certificate serves as the CA and as every party's certificate:
# whoever holds it (this user, through the 0700 folder) is in, nobody else.
openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=saspa-job-$job_id" \
  -keyout "$dir/job.key" -out "$dir/job.pem" 2>/dev/null || {
  echo "saspa-batch.sh: openssl could not make the job's certificate" >&2; exit 1; }
tls=(--tls-ca-file "$dir/job.pem" --tls-cert "$dir/job.pem" --tls-key "$dir/job.key")

export MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=33554432 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
dask scheduler --protocol tls --host "$host" --port 0 --no-dashboard \
  --scheduler-file "$dir/scheduler.json" "${tls[@]}" >"$dir/scheduler.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do [ -s "$dir/scheduler.json" ] && break; sleep 0.1; done
address="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["address"])' \
           "$dir/scheduler.json" 2>/dev/null)" || {
  echo "saspa-batch.sh: the scheduler did not start:" >&2; tail -5 "$dir/scheduler.log" >&2
  exit 1; }

memory=()
[ -n "${SASPA_WORKER_MEMORY:-}" ] && memory=(--memory-limit "$SASPA_WORKER_MEMORY")
# env passes the settings explicitly: pbsdsh starts tasks without the job's environment
# shellcheck disable=SC2086
$launch env PATH="$PATH" MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=33554432 \
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
  "$(command -v dask)" worker "$address" --nthreads "$threads" "${memory[@]}" \
  --no-dashboard --death-timeout 60 ${SASPA_HOST:+--host "$SASPA_HOST"} "${tls[@]}" \
  >"$dir/workers.log" 2>&1 &
pids+=($!)

# every worker in before the job starts, or one line after SASPA_WAIT seconds (300)
"$python" - "$address" "$dir" "$n_workers" "${SASPA_WAIT:-300}" <<<"$connect" || {
  tail -5 "$dir/workers.log" >&2; exit 1; }
echo "saspa-batch.sh: job $job_id, scheduler $address, $n_workers worker(s) of $threads thread(s)"
saspa "$@" --scheduler "$address" "${tls[@]}"
