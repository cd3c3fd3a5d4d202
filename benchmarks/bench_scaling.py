"""A measured scaling model of a parallel EP sweep on Dask (issue 59).

The README's generator (8 inputs) at ``--rows`` rows, written once to a zarr array in
chunks of ``--chunk-rows``; the bases, kernel and whitening of ``SASPAClassifier(
n_bases=M)`` with fixed hyperparameters on 20,000 other rows; the engine of EP on all
rows (``saspa_dask.engines.dask_engine.DaskEngine``, blocks cached in worker memory).
For each count of ``--workers`` a local cluster of that many worker processes of one
thread each (on 127.0.0.1) measures:

* ``build``: the blocks' build (read X, Kt, the whitening solve) until every block is
  in worker memory;
* ``sweep``: one parallel EP pass over every chunk at the sample's posterior, its
  per-chunk summaries (M^2 + M floats each) merged as a pairwise tree, three levels a
  task (median of ``--sweeps``);
* ``empty``: the same graph shape (a task per cached block, the same tree of merges of
  M x M summaries) with no work in the chunk task: the scheduler's and the transfers'
  cost of a sweep (median of ``--sweeps``), on every chunk and on half of them;
* ``graph``: the driver's time to build one sweep's task graph;
* the workers' CPU seconds over the sweeps (their cores may be oversubscribed);
* ``time_share``: outside Dask, W plain processes (W above the cores) each running
  chunk passes on a block of its own, against as many processes as cores: how much
  a chunk's compute slows when processes take turns on a core (their caches lost at
  each turn).

The model, fitted on one worker's run alone and then asked for the others:

    sweep(W) = ceil(C / W) * t_chunk * max(1, min(W, C) / P) * h(W) + empty(W)
    empty(W) = s_round + C * s_task + (1 - 1 / W) * (C - 1) * s_move

with C chunks, t_chunk a chunk task's compute (one worker's sweep less its empty graph,
over C), s_round and s_task the empty graph's fixed and per-chunk time on one worker
(from its two sizes), P the chunk compute's effective parallelism on this machine and
s_move the cost of moving one summary between workers, both from the run with as many
workers as the machine has cores (its sweep's compute against one worker's, and its
empty graph against one worker's), and h(W) the time share (1 up to a worker per
core).  Those two runs and the time share fit the model; the Dask runs with more
workers than cores test it.  Printed per W: measured and predicted sweep and the error;
then the projection for 10^8 and 10^9 rows on 16 to 256 workers of one core each (P =
W: a core per worker) at the chunk rows it recommends (the smallest with the same chunk
count on every worker whose scheduling and moving stay under a tenth of a worker's
compute; t_chunk scaled by rows).  Writes ``results/scaling.json``.

    python benchmarks/bench_scaling.py                       # 10^6 rows, M = 128, 1-8 workers
    python benchmarks/bench_scaling.py --quick               # smoke: 20,000 rows, M = 8
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from dask import delayed
from distributed import Client, LocalCluster, wait
from lib.chunk import fitted_block, task_pass
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, save
from threadpoolctl import threadpool_limits

from saspa_dask import SASPAClassifier
from saspa_dask.core.likelihoods import Probit
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.engines.chunks import tree_reduce
from saspa_dask.engines.dask_engine import DaskEngine, _merge_two
from saspa_dask.jobs.cluster import worker_malloc


def _empty_summary(block, n_bases):
    """A chunk task with no work: a summary of the sweep's size."""
    return _Summary(np.zeros((n_bases, n_bases)), np.zeros(n_bases))


class _Summary:
    def __init__(self, A, b):
        self.A, self.b = A, b

    def merge(self, other):
        return _Summary(self.A + other.A, self.b + other.b)


def _cpu_seconds():
    times = os.times()
    return times.user + times.system


def _timed(func):
    began = time.perf_counter()
    func()
    return time.perf_counter() - began


def sample_model(n_bases):
    """Bases, kernel and the sample's posterior of the default SASPA-full model."""
    X, y = synthetic_two_class(20_000, 8, 1)
    with threadpool_limits(1):
        model = SASPAClassifier(n_bases=n_bases, optimize_hyperparameters=False,
                                random_state=0).fit(X, y)
    return model.fitted_posterior_


def write_rows(folder, n_rows, chunk_rows):
    """The generator's rows in a zarr group (X, y as +-1 labels), chunked by rows."""
    X, y = synthetic_two_class(n_rows, 8, 0)
    group = zarr.open_group(str(folder / "data.zarr"), mode="w")
    group.create_array("X", data=X, chunks=(chunk_rows, 8))
    group.create_array("y", data=np.where(y == 1, 1.0, -1.0), chunks=(chunk_rows,))
    return folder / "data.zarr"


def one_cluster(store, fitted, n_workers, sweeps, folder):
    """The measured build, sweep, empty graph and graph time on ``n_workers``."""
    with worker_malloc():  # the embedded cluster's workers' malloc settings
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, memory_limit=0)
    with cluster, Client(cluster) as client:
        X = da.from_zarr(str(store), component="X")
        y = da.from_zarr(str(store), component="y")
        basis, M = fitted.basis, fitted.n_bases
        began = time.perf_counter()
        engine = DaskEngine(X, y, basis, fitted.lengthscale, fitted.signal_variance,
                            fitted.whitening, folder / f"sites-{n_workers}", cache="memory")
        wait(engine.blocks)
        build = time.perf_counter() - began
        posterior, likelihood = fitted.posteriors[0], Probit()
        cpu_before = sum(client.run(_cpu_seconds).values())
        sweep_times = [_timed(lambda: engine.parallel_pass(
            posterior, likelihood, 1.0, fitted.signal_variance)) for _ in range(sweeps)]
        worker_cpu = sum(client.run(_cpu_seconds).values()) - cpu_before

        def empty():
            parts = [delayed(_empty_summary)(blk, M) for blk in engine.blocks]
            tree_reduce(parts, _merge_two).compute()

        def empty_half():
            parts = [delayed(_empty_summary)(blk, M)
                     for blk in engine.blocks[:max(len(engine.blocks) // 2, 1)]]
            tree_reduce(parts, _merge_two).compute()

        empty_times = [_timed(empty) for _ in range(sweeps)]
        half_times = [_timed(empty_half) for _ in range(sweeps)]
        graph = _timed(lambda: tree_reduce(engine._per_chunk(
            _empty_summary, M), _merge_two))
        return {"workers": n_workers, "chunks": len(engine.blocks),
                "chunk_rows": int(X.chunks[0][0]), "build_s": build,
                "sweep_s": statistics.median(sweep_times), "sweep_all_s": sweep_times,
                "empty_s": statistics.median(empty_times),
                "empty_half_s": statistics.median(half_times), "graph_s": graph,
                "worker_cpu_per_sweep_s": worker_cpu / sweeps}


def _passes_in_turn(fitted, rows, repeats, barrier, queue):
    """One process of :func:`time_share`: ``repeats`` chunk passes on a block of its
    own, timed from a start shared with the other processes."""
    from saspa_dask.core.threads import one_scipy_blas_thread

    X, y = synthetic_two_class(rows, 8, 2)
    with threadpool_limits(1), one_scipy_blas_thread():
        block = fitted_block(fitted, X, np.where(y == 1, 1.0, -1.0))
        tau, nu = np.zeros(rows), np.zeros(rows)
        task_pass(block, fitted, tau, nu)
        barrier.wait()
        began = time.time()  # one clock for every process
        for _ in range(repeats):
            task_pass(block, fitted, tau, nu)
        queue.put((began, time.time()))


def _pass_throughput(fitted, rows, processes, repeats):
    """Chunk passes a second of ``processes`` plain processes side by side."""
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(processes), context.Queue()
    started = [context.Process(target=_passes_in_turn,
                               args=(fitted, rows, repeats, barrier, queue))
               for _ in range(processes)]
    for process in started:
        process.start()
    spans = [queue.get(timeout=600) for _ in started]
    for process in started:
        process.join()
    return processes * repeats / (max(e for _, e in spans) - min(b for b, _ in spans))


def time_share(fitted, rows, workers, cores, repeats=6):
    """h(W): a chunk's compute with W processes on the cores against a process per core
    (1 where W is at most the cores)."""
    counts = sorted({w for w in workers if w > cores})
    if not counts:
        return {}
    alone = _pass_throughput(fitted, rows, cores, repeats)
    return {str(w): alone / _pass_throughput(fitted, rows, w, repeats) for w in counts}


def fit_model(runs, cores):
    """t_chunk, s_round and s_task from one worker's run; P and s_move from the run
    with a worker per core."""
    one = next(r for r in runs if r["workers"] == 1)
    C, half = one["chunks"], max(one["chunks"] // 2, 1)
    s_task = (one["empty_s"] - one["empty_half_s"]) / max(C - half, 1)
    # within [0, empty / C]: the split of the measured empty graph into a round and its
    # tasks keeps the whole (noisy half-graph timings once made s_round negative, and
    # its clamp at 0 broke the one-worker fit by 3%)
    s_task = min(max(s_task, 0.0), one["empty_s"] / C)
    model = {"cores": float(cores), "machine_cores": cores, "chunk_rows": one["chunk_rows"],
             "t_chunk_s": (one["sweep_s"] - one["empty_s"]) / C,
             "t_build_s": one["build_s"] / C,
             "s_round_s": max(one["empty_s"] - C * s_task, 0.0), "s_task_s": s_task,
             "s_move_s": 0.0}
    full = next((r for r in runs if r["workers"] == cores), None)
    if full is not None and cores > 1 and C > 1:
        alone = model["s_round_s"] + C * s_task
        model["s_move_s"] = (max(full["empty_s"] - alone, 0.0)
                             / ((1.0 - 1.0 / cores) * (C - 1)))
        busy = min(cores, C)
        compute = full["sweep_s"] - full["empty_s"]
        # ceil(C / W) t_chunk busy / P = compute
        model["cores"] = math.ceil(C / cores) * model["t_chunk_s"] * busy / compute
    model["cores"] = max(model["cores"], 1.0)
    return model


def predict(model, chunks, workers, cores=None, chunk_rows=None, rebuilt=False):
    """A sweep's seconds on ``workers`` one-thread workers over ``cores`` cores, with
    chunks of ``chunk_rows`` rows (default: the measured chunks'); ``rebuilt``: each
    chunk's block built again in the sweep (``--cache none``, or blocks that do not fit)."""
    # the measured time share on this machine; with a core per worker, none
    share = model.get("time_share", {}).get(str(workers), 1.0) if cores is None else 1.0
    cores = model["cores"] if cores is None else cores
    per_chunk = model["t_chunk_s"] + (model["t_build_s"] if rebuilt else 0.0)
    t_chunk = per_chunk * (chunk_rows or model["chunk_rows"]) / model["chunk_rows"]
    busy = min(workers, chunks)
    compute = math.ceil(chunks / workers) * t_chunk * max(1.0, busy / cores) * share
    empty = (model["s_round_s"] + chunks * model["s_task_s"]
             + (1.0 - 1.0 / workers) * (chunks - 1) * model["s_move_s"])
    return compute + empty


def recommended_chunk_rows(model, rows, workers):
    """The smallest chunk that is the same count on every worker (k chunks each) and
    keeps the per-chunk scheduling and moving under a tenth of a worker's compute:
    k W (s_task + s_move) <= 0.1 N c_row / W, k >= 1."""
    per_row = model["t_chunk_s"] / model["chunk_rows"]
    per_chunk = model["s_task_s"] + model["s_move_s"]
    k = max(int(0.1 * rows * per_row / (workers**2 * per_chunk)), 1)
    return math.ceil(rows / (k * workers))


def projection(model, n_bases):
    """Sweeps at 10^8 and 10^9 rows on 16-256 workers of a core each, at the
    recommended chunk rows."""
    out = []
    for N in (10**8, 10**9):
        for workers in (16, 64, 256):
            chunk_rows = recommended_chunk_rows(model, N, workers)
            chunks = math.ceil(N / chunk_rows)
            out.append({"rows": N, "workers": workers, "bases": n_bases,
                        "chunk_rows": chunk_rows, "chunks": chunks,
                        "blocks_gib_per_worker": N * n_bases * 8 / workers / 2**30,
                        "sweep_s": predict(model, chunks, workers, cores=workers,
                                           chunk_rows=chunk_rows),
                        "rebuilt_sweep_s": predict(model, chunks, workers, cores=workers,
                                                   chunk_rows=chunk_rows, rebuilt=True),
                        "compute_only_s": N * model["t_chunk_s"] / model["chunk_rows"]
                        / workers})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=62_500)
    parser.add_argument("--bases", type=int, default=128)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--out", default="scaling.json")
    add_quick_option(parser, rows=20_000, chunk_rows=2_500, bases=8, workers=[1, 2],
                     sweeps=2)
    args = parse(parser)
    rate = matmul_rate(threads=1)
    report = start_report(args, rate=lambda: rate, cores=os.cpu_count())
    fitted = sample_model(args.bases)
    with tempfile.TemporaryDirectory(prefix="saspa-scaling-") as tmp:
        folder = Path(tmp)
        store = write_rows(folder, args.rows, args.chunk_rows)
        runs = []
        for workers in args.workers:
            with dask.config.set({"distributed.worker.daemon": False}):
                runs.append(one_cluster(store, fitted, workers, args.sweeps, folder))
            print(json.dumps(runs[-1]), flush=True)
    cores = os.cpu_count()
    model = fit_model(runs, cores)
    model["time_share"] = time_share(fitted, args.chunk_rows, args.workers, cores)
    limit = 2 * args.chunk_rows * args.bases**2 / rate
    model["t_chunk_over_matmul_limit"] = model["t_chunk_s"] / limit
    for run in runs:
        run["predicted_sweep_s"] = predict(model, run["chunks"], run["workers"])
        run["error"] = run["predicted_sweep_s"] / run["sweep_s"] - 1.0
    report.update(runs=runs, model=model,
                  projection=projection(model, args.bases))
    save(report, args.out)
    print(json.dumps(model, indent=1))
    print("\n| workers | chunks | build s | sweep s | empty graph s | graph s | "
          "worker CPU s / sweep | predicted sweep s | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r['workers']} | {r['chunks']} | {r['build_s']:.2f} | {r['sweep_s']:.3f} | "
              f"{r['empty_s']:.3f} | {r['graph_s']:.4f} | {r['worker_cpu_per_sweep_s']:.2f} | "
              f"{r['predicted_sweep_s']:.3f} | {100 * r['error']:+.0f}% |")
    print("\n| rows | workers | recommended chunk rows | chunks | blocks GiB / worker | "
          "sweep s, cached | sweep s, rebuilt | compute alone s |")
    print("|---|---|---|---|---|---|---|---|")
    for p in report["projection"]:
        print(f"| {p['rows']:.0e} | {p['workers']} | {p['chunk_rows']} | {p['chunks']} | "
              f"{p['blocks_gib_per_worker']:.1f} | {p['sweep_s']:.1f} | "
              f"{p['rebuilt_sweep_s']:.1f} | {p['compute_only_s']:.1f} |")


if __name__ == "__main__":
    main()
