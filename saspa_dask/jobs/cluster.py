"""Getting a Dask client: connect to a scheduler, or start an embedded LocalCluster.

Every job takes ``client`` (an existing ``distributed.Client``, used as it is),
or ``scheduler`` (an address to connect to, within ``timeout`` seconds), or neither:
then an embedded ``LocalCluster`` of ``workers`` single-threaded processes (default
2), closed afterwards, except that a small job (one that holds at most
:data:`IN_PROCESS_VALUES` float64 values in memory: :func:`input_values`) given no
``workers`` runs in this process (:func:`runs_in_process`): on one in-process worker
thread, whose BLAS keeps its threads, and training fits in memory, with no task per EP
sweep.  A cluster's start (worker processes importing the numerical stack, a TLS
certificate) and a task round per sweep cost seconds that a small job does not repay,
and on one machine the cluster's processes share its memory: the bound is one of
memory (``benchmarks/RESULTS.md``, "Small jobs in this process" and "The newcomer's
tables within 60 CPU-s").  ``security`` (TLS) comes from :func:`tls_security`.
The in-process worker talks over distributed's in-memory transport, which no other
process can reach.  A training job begins its embedded cluster in a thread
(:func:`start_embedded`) and imports its estimators while the workers start.

The embedded cluster is private to the job: it listens on 127.0.0.1 only, over TLS
with a throw-away certificate made for this job and held in memory
(``Security.temporary()``), and requires it of every peer; another local user, who can
reach the loopback port, has no certificate and cannot connect, so cannot run code in
the workers.  Its HTTP servers (Dask's dashboard, the scheduler's and workers' JSON,
Prometheus and call-stack pages) would be readable by any local user, so they serve
nothing unless ``dashboard=True`` (``--dashboard``) asks for the dashboard.

No wait on a cluster is unbounded.  Connecting to ``scheduler`` is given up after
``timeout`` seconds; while a job runs on it, a watchdog asks the scheduler who it is
every ``timeout`` seconds, and a scheduler that does not answer within three times
that (stopped, hung, or unreachable with its connection still open) is declared lost:
the client's work is cancelled and the job ends with a :class:`JobError` saying so,
having marked nothing complete (jobs resume where they stopped when run again).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import threading

from .errors import JobError
from .watchdog import Watchdog, quiet_distributed

__all__ = ["IN_PROCESS_VALUES", "StartingCluster", "WORKER_MALLOC", "dask_client",
           "dashboard_link", "input_values", "n_workers", "runs_in_process",
           "start_embedded", "tls_security", "worker_malloc"]

#: A job that holds at most this many float64 values in memory (256 MiB:
#: :func:`input_values`), given neither a scheduler nor ``workers``, runs in this
#: process (module docstring).
IN_PROCESS_VALUES = 2**25


def tls_security(ca_file=None, cert=None, key=None):
    """``distributed.security.Security`` for a ``tls://`` scheduler, or None.

    All three files are needed together (a CA to check the scheduler, and the client's
    certificate and key to be checked by it).
    """
    if not (ca_file or cert or key):
        return None
    if not (ca_file and cert and key):
        raise JobError("TLS needs all of --tls-ca-file, --tls-cert and --tls-key")
    from distributed.security import Security

    return Security(tls_ca_file=str(ca_file), tls_client_cert=str(cert),
                    tls_client_key=str(key), require_encryption=True)


@contextlib.contextmanager
def dask_client(client=None, *, scheduler=None, workers=None, timeout=10, security=None,
                echo=None, dashboard=False, values=None, started=None):
    """A distributed Client for a job (see the module docstring); ``echo`` is told
    where the work runs; ``dashboard`` serves the embedded cluster's dashboard (on
    127.0.0.1, readable by every local user); ``values`` is the job's size (rows x
    inputs), which decides whether it runs in this process; ``started``: the
    embedded cluster :func:`start_embedded` began for the same options."""
    if client is not None:
        yield client
        return
    cluster = watchdog = None
    if scheduler:
        from distributed import Client

        client = _connect(Client, scheduler, timeout, security)
        watchdog = Watchdog(client, timeout)
        where = scheduler
    elif runs_in_process(workers=workers, values=values):
        cluster, client = _in_process(dashboard)
        where = (f"in this process ({values:,} values in memory; up to "
                 f"{IN_PROCESS_VALUES:,} run without a cluster: --workers N starts one)")
    else:
        workers = 2 if workers is None else workers
        cluster, client = (_embedded(workers, dashboard) if started is None
                           else started.result())
        where = (f"embedded LocalCluster at {cluster.scheduler_address} "
                 f"(TLS, this job's certificate only), {workers} workers")
    try:
        if where.startswith("embedded"):
            _wait_for_workers(client, workers)
        if echo is not None:
            # a cluster of this job's own serves a dashboard only when asked for one
            shown = dashboard or scheduler
            echo(f"dask: {where}" + (f"; dashboard: {dashboard_link(client)}" if shown else ""))
        yield client
    except BaseException as err:  # an error, Ctrl-C or SIGTERM (jobs.errors.Interrupted)
        # the job is over: workers stopped first cannot log a lost scheduler
        if cluster is not None:
            _stop_workers_now(cluster)
        lost = watchdog.lost if watchdog is not None else None
        if lost is None and isinstance(err, Exception) and _scheduler_lost(err, client):
            lost = "its connection closed"
        if lost is not None:
            quiet_distributed()
            where = scheduler or "the embedded cluster's scheduler"
            if watchdog is not None and watchdog.no_workers:
                raise JobError(f"the Dask cluster ({where}) cannot run the job: {lost}; "
                               "nothing was marked complete: run the job again when it "
                               "has workers (it resumes where it stopped)") from None
            raise JobError(f"lost the Dask scheduler ({where}) while the job ran "
                           f"({lost}); nothing was marked complete: run the job again "
                           "when the scheduler is back (it resumes where it stopped)") from None
        raise
    finally:
        if watchdog is not None:
            watchdog.stop()
        _close(client, timeout)
        if cluster is not None:
            cluster.close()


def _wait_for_workers(client, n, timeout=60):
    """Wait until an embedded cluster's ``n`` workers have registered: LocalCluster
    returns once its nannies started, and a job that counts its workers at once (to
    spread its rows over them) saw one of two now and then on a busy machine.  After
    ``timeout`` seconds the job goes on with those there are (it says how many)."""
    try:
        client.wait_for_workers(n, timeout=timeout)
    except TimeoutError:
        pass


def _embedded(workers, dashboard):
    """A private LocalCluster (see the module docstring) and its client."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    _check_worker_count(workers)
    private = Security.temporary()
    settings = _cluster_settings(dashboard)
    from distributed.deploy.spec import SpecCluster

    before = set(SpecCluster._instances)
    try:
        with dask.config.set(settings), _workers_start_undisturbed(), worker_malloc():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                   processes=True, host="127.0.0.1", protocol="tls://",
                                   security=private, dashboard_address="127.0.0.1:0",
                                   scheduler_kwargs={"dashboard": bool(dashboard)},
                                   worker_dashboard_address="127.0.0.1:0")
    except BaseException:  # Ctrl-C or SIGTERM while it started
        _abandon(set(SpecCluster._instances) - before)
        raise
    return cluster, Client(cluster, security=private)


def _check_worker_count(workers):
    limit = max_workers()
    if not 1 <= int(workers) <= limit:
        raise JobError(f"--workers {workers}: an embedded cluster runs on this machine; "
                       f"use 1 to {limit} (4 per core), or --scheduler for a cluster")


def start_embedded(*, client=None, scheduler=None, workers=None, values=None,
                   dashboard=False, **_):
    """Begin starting the embedded cluster :func:`dask_client` would start for these
    options, in a thread, so that its worker processes start while this process goes
    on (a training job imports its estimators meanwhile: ``benchmarks/RESULTS.md``,
    "A first model by 10 s"); None when the job is given a client or a scheduler, or
    runs in this process.  Hand it to :func:`dask_client` as ``started``;
    :meth:`StartingCluster.close` gives up one that was not handed on."""
    if client is not None or scheduler or runs_in_process(workers=workers, values=values):
        return None
    return StartingCluster(2 if workers is None else workers, dashboard)


class StartingCluster:
    """An embedded cluster (:func:`_embedded`) starting in a thread.  Until it is
    taken (:meth:`result`) or given up (:meth:`close`), signals are held as while a
    cluster starts in the foreground (:class:`_HeldSignals`)."""

    def __init__(self, workers, dashboard):
        # imported in this thread: in the starting thread its import would compete
        # for the interpreter with this thread's own (the estimators')
        importlib.import_module("distributed")

        _check_worker_count(workers)
        self._box = {}
        self._signals = _HeldSignals()
        self._thread = threading.Thread(target=self._start, args=(workers, dashboard),
                                        daemon=True, name="saspa-cluster-start")
        self._thread.start()

    def _start(self, workers, dashboard):
        try:
            self._box["started"] = _embedded(workers, dashboard)
        except BaseException as err:  # raised where the cluster is taken
            self._box["error"] = err

    def _ended(self):
        """The start's (cluster, client) or None, its error or None, with the signals
        released (a SIGTERM held meanwhile acts now: the cluster is then given up)."""
        self._thread.join()
        started, error = self._box.pop("started", None), self._box.pop("error", None)
        try:
            self._signals.release()
        except BaseException:
            if started is not None:
                _give_up(*started)
            raise
        return started, error

    def result(self):
        """``(cluster, client)`` once started; the start's error is raised here."""
        started, error = self._ended()
        if error is not None:
            raise error
        return started

    def close(self):
        """Give up the cluster if it was not taken (nothing once it was)."""
        started, _ = self._ended()
        if started is not None:
            _give_up(*started)


def _give_up(cluster, client):
    """Close an embedded cluster that ran nothing, gracefully: killing its workers
    first, as a failed job's cluster is, had their nannies start them again."""
    _close(client, 5)
    cluster.close()


# glibc's malloc in the embedded workers (their nannies pass these on; other C
# libraries ignore them): an allocation from 4 MiB (a chunk's block, from 4,096 rows at
# M = 128) is mapped and given back when freed, but a chunk task's temporaries (its
# sub-block buffers, its sites: a few MB) come from the heap and stay there for the
# next task, up to 32 MiB free at the top of each of malloc's arenas.  Dask's own
# setting gives them back at once, and each task took them back page by page: page
# faults and kernel time in every task, with both cores busy (``benchmarks/RESULTS.md``,
# "A sweep on all rows against the matmul limit").
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 4 << 20, "MALLOC_TRIM_THRESHOLD_": 32 << 20}


@contextlib.contextmanager
def worker_malloc():
    """Workers whose nannies start inside this block get :data:`WORKER_MALLOC`.

    Set in Dask's nanny settings and, till the block ends, in this process's
    environment: a nanny takes a variable already in the environment over its setting,
    and every nanny started in this process before (another cluster's) left Dask's
    ``MALLOC_TRIM_THRESHOLD_`` there.  Workers forked from a running forkserver keep
    the environment it started with.
    """
    import dask

    previous = {name: os.environ.get(name) for name in WORKER_MALLOC}
    os.environ.update({name: str(value) for name, value in WORKER_MALLOC.items()})
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ"), **WORKER_MALLOC}
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
            yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cluster_settings(dashboard):
    """Dask settings of the clusters a job starts itself."""
    # Work stealing would move a chunk's cached whitened block to an idle worker,
    # costing more than it saves; the blocks are spread evenly instead.
    settings = {"distributed.scheduler.work-stealing": False}
    if not dashboard:  # the HTTP servers still listen (on 127.0.0.1), serving nothing
        settings.update({"distributed.scheduler.http.routes": [],
                         "distributed.worker.http.routes": []})
    return settings


def input_values(X, n_bases=0):
    """A job's size for :func:`dask_client` and :func:`runs_in_process`: the float64
    values it holds in memory, rows x (inputs + bases) of its X (a fit in memory keeps
    each row's inputs and its whitened block; scoring streams its rows, ``n_bases``
    0)."""
    return int(X.shape[0]) * (int(X.shape[1]) + int(n_bases))


def runs_in_process(*, client=None, scheduler=None, workers=None, values=None, **_):
    """Whether a job of ``values`` values in memory (:func:`input_values`) with these
    cluster options runs in this process (module docstring)."""
    return (client is None and not scheduler and workers is None and values is not None
            and values <= IN_PROCESS_VALUES)


def _in_process(dashboard):
    """A LocalCluster of one single-threaded worker in this process (in-memory
    transport) and its client."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(_cluster_settings(dashboard)):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                               dashboard_address="127.0.0.1:0",
                               scheduler_kwargs={"dashboard": bool(dashboard)},
                               worker_dashboard_address="127.0.0.1:0")
    return cluster, Client(cluster, set_as_default=True)


def _abandon(clusters):
    """Give up clusters whose start was interrupted: their workers killed, and kept
    from distributed's exit hook, which would try to close them half-started and print
    its traceback (a worker still in its first state fails an assertion there)."""
    from distributed.deploy.spec import SpecCluster

    quiet_distributed()
    for cluster in clusters:
        _stop_workers_now(cluster)
        SpecCluster._instances.discard(cluster)


def _close(client, timeout):
    """Close the client within a bound (a lost scheduler cannot hold it)."""
    try:
        client.close(timeout=max(2 * timeout, 5))
    except Exception:  # a lost scheduler's client: it is being given up anyway
        pass


def _scheduler_lost(err, client):
    """Whether ``err`` came from losing the scheduler (its connection closed, or the
    client no longer running), rather than from the job."""
    from distributed.comm.core import CommClosedError

    if isinstance(err, CommClosedError):
        return True
    return getattr(client, "status", "running") not in ("running", "newly-created")


def max_workers():
    """The most worker processes an embedded cluster may start: 4 per core."""
    return 4 * (os.cpu_count() or 1)


def _connect(client_class, scheduler, timeout, security):
    """A client connected within ``timeout`` seconds, whatever the address does: one
    that accepts TCP and never speaks would hold distributed's handshake for minutes,
    so the connection is made in a thread that is given up after the deadline.

    distributed's Client sets dask's global ``scheduler`` setting as it starts; a
    connection that fails, or is given up, leaves it as it was (a client that connects
    after it was given up is closed)."""
    import dask

    before = dask.config.get("scheduler", None)
    box, lock = {}, threading.Lock()

    def connect():
        try:
            client = client_class(scheduler, timeout=timeout, security=security)
        except Exception as err:  # refused, TLS handshake or configuration, time-out
            error = f"{type(err).__name__}: {err}"
        else:
            _keep_or_close(client)
            return
        # the half-built client is garbage in a cycle with the exception's frames.
        # Its __del__ takes distributed's class-wide LoopRunner lock, so the collector
        # must not run it in a thread that holds that lock while starting another
        # client's loop (a deadlock seen in the suite): it runs here and now instead
        gc.collect()
        box["error"] = error

    def _keep_or_close(client):
        with lock:
            if not box.get("abandoned"):
                box["client"] = client
                return
        with contextlib.suppress(Exception):
            client.close()

    thread = threading.Thread(target=connect, daemon=True, name="saspa-connect")
    thread.start()
    thread.join(timeout + 2)
    with lock:
        if "client" in box:
            return box["client"]
        box["abandoned"] = True
    _restore_scheduler_setting(before)
    err = box.get("error")
    reason = (err if err is not None
              else "no answer: the address accepts connections but does not speak Dask")
    raise JobError(f"cannot reach the Dask scheduler at {scheduler} within {timeout}s "
                   f"({reason})")


def _restore_scheduler_setting(value):
    """dask's global ``scheduler`` setting back to ``value`` (None: unset)."""
    import dask

    if value is None:
        dask.config.config.pop("scheduler", None)
    else:
        dask.config.set(scheduler=value)


class _HeldSignals:
    """From its creation (in the main thread) until :meth:`release`: SIGINT ignored
    and SIGTERM held, then the previous handlers back and a held SIGTERM delivered.
    Worker processes started meanwhile inherit SIGINT ignored (through exec; Python
    then installs no KeyboardInterrupt handler): Ctrl-C reaches the whole process
    group, and the workers would print their tracebacks before the client shuts them
    down.  A SIGTERM acted on at once cut a worker's spawn between its fork and the
    pipe its start-up data comes through, and the half-born worker printed
    multiprocessing's EOFError traceback; held, the job unwinds after the start and
    gives the cluster up.  Outside the main thread it does nothing."""

    def __init__(self):
        self.held, self.previous = [], {}
        if threading.current_thread() is threading.main_thread():
            self.previous = {
                signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.SIGTERM: signal.signal(signal.SIGTERM,
                                              lambda signum, frame: self.held.append(signum))}

    def release(self):
        previous, self.previous = self.previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if previous and self.held:
            signal.raise_signal(self.held[0])


@contextlib.contextmanager
def _workers_start_undisturbed():
    """Start worker processes with signals held (:class:`_HeldSignals`)."""
    held = _HeldSignals()
    try:
        yield
    finally:
        held.release()


def _stop_workers_now(cluster):
    """Kill an embedded cluster's worker processes at once: a graceful close would
    have each log the tasks it cancels (or its lost heartbeat) after the job failed or
    the user asked to stop."""
    for nanny in list(getattr(cluster, "workers", {}).values()):
        process = getattr(getattr(nanny, "process", None), "process", None)
        pid = getattr(process, "pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def n_workers(client):
    """How many workers the client's cluster has now."""
    return len(client.scheduler_info().get("workers", {}))


def dashboard_link(client):
    """The scheduler's dashboard address, or why there is none (a scheduler started
    with ``--no-dashboard`` serves none: no link that returns 404)."""
    try:
        import bokeh  # noqa: F401  (the dashboard needs it)
    except ImportError:
        return "unavailable (pip install 'saspa-dask[dashboard]')"
    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # an old or unusual scheduler: say nothing rather than guess
        services = {}
    if "dashboard" not in services:
        return "none (the scheduler serves no dashboard)"
    return client.dashboard_link
