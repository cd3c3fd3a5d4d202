import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

BIN = Path(sys.executable).parent


def _wait_for_file(path, timeout=60):
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.1)


def start_cluster(directory, n_workers=2):
    """Start ``dask scheduler`` and ``n_workers`` ``dask worker`` processes (each under
    a nanny, one thread) on 127.0.0.1.  Returns (address, processes)."""
    from distributed import Client

    sched_file = Path(directory) / "scheduler.json"
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    procs = [subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(sched_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        _wait_for_file(sched_file)
        for _ in range(n_workers):
            procs.append(subprocess.Popen(
                [str(BIN / "dask"), "worker", "--scheduler-file", str(sched_file),
                 "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                 "--memory-limit", "4GB", "--host", "127.0.0.1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        address = json.loads(sched_file.read_text())["address"]
        with Client(address, timeout=30) as client:
            client.wait_for_workers(n_workers, timeout=60)
    except BaseException:
        stop_cluster(procs)
        raise
    return address, procs


def stop_cluster(procs):
    for p in procs[::-1]:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
