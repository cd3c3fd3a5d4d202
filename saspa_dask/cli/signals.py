"""How a job's SIGINT or SIGTERM becomes an exception in its main thread.

Python runs a signal's handler in the main thread, at the next bytecode it executes.
A handler that raises there unwinds the job, unless that bytecode is inside one of the
garbage collector's callbacks (Dask's scheduler in the job's process watches
collections): the collector prints such an exception ("Exception ignored in
..._gc_callback") and drops it, and the job goes on.  A signal that lands in a callback
is therefore sent again to the main thread until a handler outside any callback has
raised it.  Once is not enough: a re-sent signal that arrives just before the main
thread enters a wait in C (after its last check for signals, before the system call)
is seen only when that wait ends, which may be long after.
"""

from __future__ import annotations

import gc
import signal
import threading
import time

__all__ = ["InterruptHandlers"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REPEAT_EVERY = 0.05  # seconds between re-sent signals: a job stops within about this
# a re-sent signal already on its way when the first one was raised arrives within
# this many seconds; it is dropped, so that it does not cut the job's cleanup short
STRAY_SECONDS = 1.0


class InterruptHandlers:
    """SIGINT and SIGTERM handlers, in place inside a ``with`` block, that call
    ``interrupt(signum)`` (which raises) in the main thread, outside the garbage
    collector's callbacks.

    A signal that arrives in a callback is re-sent every :data:`REPEAT_EVERY` seconds
    until it is raised; one still unraised when the block's body returns is raised as
    the block ends.  The previous handlers are put back as it ends.
    """

    def __init__(self, interrupt):
        self._interrupt = interrupt
        # re-entrant: a handler may run (and take it) while the main thread holds it
        self._lock = threading.RLock()
        self._pending = None  # the signal being re-sent until it is raised
        self._raised = None  # (signal, time) of the last re-sent signal raised
        self._previous = {}

    def __enter__(self):
        self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, kind, value, traceback):
        unraised = self._stop_repeating()
        try:
            if unraised is not None and kind is None:
                self._interrupt(unraised)
        finally:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
        return False

    def _handle(self, signum, frame):
        if self._is_stray(signum):
            return
        if in_gc_callback(frame):
            self._repeat(signum)
            return
        self._stop_repeating()
        self._interrupt(signum)

    def _is_stray(self, signum):
        raised = self._raised
        return (raised is not None and raised[0] == signum
                and time.monotonic() - raised[1] < STRAY_SECONDS)

    def _repeat(self, signum):
        with self._lock:
            if self._pending is not None:
                return
            self._pending = signum
            threading.Thread(target=self._send_until_raised,
                             args=(signum, threading.main_thread().ident),
                             name="saspa-signal-repeater", daemon=True).start()

    def _send_until_raised(self, signum, main_thread):
        while True:
            time.sleep(REPEAT_EVERY)
            with self._lock:  # not sent once the main thread has taken it
                if self._pending != signum:
                    return
                signal.pthread_kill(main_thread, signum)

    def _stop_repeating(self):
        """No more re-sent signals; the one that was being re-sent, if any."""
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None:
                self._raised = (pending, time.monotonic())
        return pending


def in_gc_callback(frame):
    """Whether ``frame`` runs inside one of the garbage collector's callbacks."""
    codes = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False
