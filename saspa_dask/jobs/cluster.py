"""Getting a Dask client: connect to a scheduler, or start an embedded LocalCluster.

Every job takes ``client`` (an existing ``distributed.Client``, used as it is),
or ``scheduler`` (an address to connect to, within ``timeout`` seconds), or neither
(an embedded ``LocalCluster`` of ``workers`` single-threaded processes, closed
afterwards).  ``security`` (TLS) comes from :func:`tls_security`.
"""

from __future__ import annotations

import contextlib

from .errors import JobError

__all__ = ["dask_client", "dashboard_link", "tls_security"]


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
        try:
            client = Client(scheduler, timeout=timeout, security=security)
        except Exception as err:  # refused, TLS handshake or configuration, time-out
            raise JobError(f"cannot reach the Dask scheduler at {scheduler} within "
                           f"{timeout}s ({type(err).__name__}: {err})") from None
    else:
        # Work stealing would move a chunk's cached whitened block to an idle worker,
        # costing more than it saves; the blocks are spread evenly instead.
        with dask.config.set({"distributed.scheduler.work-stealing": False}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        client = Client(cluster)
    try:
        if echo is not None:
            where = scheduler or f"embedded LocalCluster, {workers} workers"
            echo(f"dask: {where}; dashboard: {dashboard_link(client)}")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def dashboard_link(client):
    try:
        import bokeh  # noqa: F401  (the dashboard needs it)
    except ImportError:
        return "unavailable (pip install 'saspa-dask[dashboard]')"
    return client.dashboard_link
