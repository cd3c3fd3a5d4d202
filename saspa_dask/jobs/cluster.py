"""Getting a Dask client: connect to a scheduler, or start an embedded LocalCluster.

Every job takes ``client`` (an existing ``distributed.Client``, used as it is),
or ``scheduler`` (an address to connect to, within ``timeout`` seconds), or neither
(an embedded ``LocalCluster`` of ``workers`` single-threaded processes, closed
afterwards).  ``security`` (TLS) comes from :func:`tls_security`.

The embedded cluster is private to the job: it listens on 127.0.0.1 only, over TLS
with a throw-away certificate made for this job and held in memory
(``Security.temporary()``), and requires it of every peer; another local user, who can
reach the loopback port, has no certificate and cannot connect, so cannot run code in
the workers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from .errors import JobError

__all__ = ["dask_client", "dashboard_link", "n_workers", "tls_security"]


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
def dask_client(client=None, *, scheduler=None, workers=2, timeout=10, security=None,
                echo=None):
    """A distributed Client for a job (see the module docstring); ``echo`` is told
    where the work runs."""
    if client is not None:
        yield client
        return
    import dask
    from distributed import Client, LocalCluster

    cluster = None
    if scheduler:
        client = _connect(Client, scheduler, timeout, security)
    else:
        limit = max_workers()
        if not 1 <= int(workers) <= limit:
            raise JobError(f"--workers {workers}: an embedded cluster runs on this machine; "
                           f"use 1 to {limit} (4 per core), or --scheduler for a cluster")
        # Work stealing would move a chunk's cached whitened block to an idle worker,
        # costing more than it saves; the blocks are spread evenly instead.
        from distributed.security import Security

        private = Security.temporary()
        with dask.config.set({"distributed.scheduler.work-stealing": False}), \
                _workers_ignore_ctrl_c():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", protocol="tls://", security=private,
                                   dashboard_address="127.0.0.1:0")
        client = Client(cluster, security=private)
    try:
        if echo is not None:
            where = scheduler or (f"embedded LocalCluster at {cluster.scheduler_address} "
                                  f"(TLS, this job's certificate only), {workers} workers")
            echo(f"dask: {where}; dashboard: {dashboard_link(client)}")
        yield client
    except BaseException as err:  # an error, Ctrl-C or SIGTERM (jobs.errors.Interrupted)
        # the job is over: workers stopped first cannot log a lost scheduler
        if cluster is not None:
            _stop_workers_now(cluster)
        if isinstance(err, Exception) and _scheduler_lost(err, client):
            where = scheduler or "the embedded cluster's scheduler"
            raise JobError(f"lost the Dask scheduler ({where}) while the job ran "
                           f"({type(err).__name__}: {err}); nothing was marked complete: "
                           "run the job again when the scheduler is back") from None
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
    so the connection is made in a thread that is given up after the deadline."""
    box = {}

    def connect():
        try:
            box["client"] = client_class(scheduler, timeout=timeout, security=security)
        except Exception as err:  # refused, TLS handshake or configuration, time-out
            box["error"] = err

    thread = threading.Thread(target=connect, daemon=True, name="saspa-connect")
    thread.start()
    thread.join(timeout + 2)
    if "client" in box:
        return box["client"]
    err = box.get("error")
    reason = (f"{type(err).__name__}: {err}" if err is not None
              else "no answer: the address accepts connections but does not speak Dask")
    raise JobError(f"cannot reach the Dask scheduler at {scheduler} within {timeout}s "
                   f"({reason})")


@contextlib.contextmanager
def _workers_ignore_ctrl_c():
    """Start worker processes with SIGINT ignored (inherited through exec; Python then
    installs no KeyboardInterrupt handler): Ctrl-C reaches the whole process group, and
    the workers would print their tracebacks before the client shuts them down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
