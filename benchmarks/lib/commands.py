"""Running ``saspa`` commands from a benchmark: timed, with the peak memory of the
command and its workers, and the generated data stores the large runs share."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent


class PeakRSS(threading.Thread):
    """Samples the RSS of a process and of all its descendants."""

    def __init__(self, pid, interval=0.2):
        import psutil

        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peaks = {}
        self.names = {}
        self.stopped = threading.Event()

    def run(self):
        import psutil

        while not self.stopped.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    # named again each sample: a child caught between fork and exec
                    # still shows its parent's command line.  Workers are the job's
                    # own children: a worker's child (a fork for `uname -p` when Dask
                    # collects versions) shows the worker's command line meanwhile
                    direct = p.pid == self.root.pid or p.ppid() == self.root.pid
                    self.names[p.pid] = (_role(p.cmdline()) if direct
                                         else "descendant")
                except psutil.Error:
                    continue
                self.peaks[p.pid] = max(self.peaks.get(p.pid, 0), rss)
            time.sleep(self.interval)


def _role(cmdline):
    text = " ".join(cmdline)
    if "spawn_main" in text:
        return "worker"  # LocalCluster worker processes are multiprocessing spawns
    if "resource_tracker" in text:
        return "resource-tracker"
    return "driver" if "saspa" in text else text[:40]


def run_monitored(cmd, ok_codes=(0,)):
    """Run a command while sampling the peak RSS of it and its children.

    Returns (stdout, seconds, monitor, process); exits if the command failed.
    """
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    monitor = PeakRSS(proc.pid)
    monitor.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    monitor.stopped.set()
    if proc.returncode not in ok_codes:
        raise SystemExit(f"{cmd[1]} failed:\n{out}\n{err}")
    return out, seconds, monitor, proc


def run(cmd, ok_codes=(0,), **kw):
    """Run a command; exits with its output if it failed (an exit code not in
    ``ok_codes``)."""
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if res.returncode not in ok_codes:
        raise SystemExit(f"{cmd[0]} failed:\n{res.stdout}\n{res.stderr}")
    return res


def timed(cmd, ok_codes=(0,)):
    start = time.perf_counter()
    res = run(cmd, ok_codes)
    return res, time.perf_counter() - start


def cpu_timed(cmd, ok_codes=(0,)):
    """:func:`timed`, and the CPU seconds of the command and every process it waited
    for (its workers, when they end with it): (result, wall seconds, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res, wall = timed(cmd, ok_codes)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return res, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def evaluate(model, test):
    """``saspa evaluate MODEL TEST --json``."""
    return json.loads(run([BIN / "saspa", "evaluate", model, test, "--json"]).stdout)


def info(model):
    """``saspa info MODEL --json``."""
    return json.loads(run([BIN / "saspa", "info", model, "--json"]).stdout)


def add_data_options(parser, cluster=True):
    """The generated data's options and, with ``cluster``, the cluster's
    (bench_race; bench_anytime without a cluster)."""
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--bases", type=int, default=256)
    if cluster:
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--chunk-rows", type=int, default=65536)


def make_data(work, args):
    """train.zarr (``args.rows``, seed 0) and test.zarr (``args.test_rows``, seed 1) of
    generated multiscale regression rows in ``work``; returns the test noise sd."""
    for name, rows, seed in (("train", args.rows, 0), ("test", args.test_rows, 1)):
        run([BIN / "saspa", "make-data", work / f"{name}.npy", "--rows", rows,
             "--features", args.features, "--seed", seed, "--kind", "multiscale-regression"])
        run([BIN / "saspa", "ingest", work / f"{name}.npy", "--out", work / f"{name}.zarr",
             "--chunk-rows", args.chunk_rows])
    return _noise_sd(work / "test.npy", seed=1)


def _noise_sd(test_npy, seed):
    """The noise standard deviation of the generated test rows: the RMSE floor."""
    from saspa_dask.datasets import multiscale_regression

    data = np.load(test_npy)
    _, y, f = multiscale_regression(len(data), data.shape[1] - 1, seed)
    assert np.array_equal(y, data[:, -1])
    return float(np.std(y - f))
