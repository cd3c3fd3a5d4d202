"""The watchdog of a job on a scheduler it did not start: no wait on a cluster is
unbounded.

It asks the scheduler who it is every ``timeout`` seconds; a scheduler that does not
answer within three times that (stopped, hung, or unreachable with its connection
still open) is declared lost, and so is a cluster that has had no worker for
:data:`WORKERLESS_INTERVALS` intervals (every worker lost and none back: a scheduler
that still answers would otherwise keep the job waiting for ever).  Either way the
client's connections are cut, which cancels its work: every wait on it ends, and the
job says why (:func:`saspa_dask.jobs.cluster.dask_client`).
"""

from __future__ import annotations

import threading

__all__ = ["WORKERLESS_INTERVALS", "Watchdog", "quiet_distributed"]


#: a cluster with no worker for this many ``--timeout`` intervals cannot make progress:
#: long enough for nannies to restart every worker (a few seconds), bounded all the same
WORKERLESS_INTERVALS = 6


class Watchdog:
    """Asks the scheduler who it is every ``interval`` seconds; when it gives no
    answer within ``3 * interval``, or has had no worker for
    :data:`WORKERLESS_INTERVALS` intervals (every worker lost and none back), records
    why (``lost``; ``no_workers`` for the second) and cuts the client's connections,
    which cancels the client's work: every wait on it then ends."""

    def __init__(self, client, interval):
        self.client, self.interval, self.bound = client, float(interval), 3.0 * interval
        self.lost, self.no_workers = None, False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="saspa-scheduler-watchdog")
        self._thread.start()

    def _run(self):
        import time

        workerless_since = None
        while not self._stopped.wait(self.interval):
            try:
                identity = self.client.sync(self.client.scheduler.identity,
                                            callback_timeout=self.bound)
            except Exception as err:  # a time-out, a closed comm, a closed client
                if self._stopped.is_set():
                    return
                self._give_up(f"no answer within {self.bound:g}s" if _is_timeout(err)
                              else "its connection closed")
                return
            if identity.get("workers"):
                workerless_since = None
                continue
            now = time.monotonic()
            workerless_since = workerless_since or now
            waited = now - workerless_since
            if waited >= WORKERLESS_INTERVALS * self.interval and not self._stopped.is_set():
                self.no_workers = True
                self._give_up(f"it has had no worker for {waited:.0f}s")
                return

    def _give_up(self, why):
        self.lost = why
        quiet_distributed()
        self.client.loop.add_callback(_cut, self.client)

    def stop(self):
        self._stopped.set()


def _is_timeout(err):
    import asyncio

    return isinstance(err, (TimeoutError, asyncio.TimeoutError))


async def _cut(client):
    """Abort the client's connections to a lost scheduler: its report stream (which
    cancels every future the client waits on) and its pooled RPCs."""
    comm = getattr(getattr(client, "scheduler_comm", None), "comm", None)
    if comm is not None:
        comm.abort()
    try:
        await client.rpc.close()
    except Exception:  # already closing
        pass


def quiet_distributed():
    """A lost scheduler is the job's error to report, in one line: distributed's own
    tracebacks and reconnection attempts are not shown."""
    import logging

    names = [n for n in list(logging.root.manager.loggerDict)
             if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    for name in names:  # children too: distributed.client has a level of its own
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
