"""One BLAS thread policy for the package's own work: SciPy's OpenBLAS at one thread
while the package runs, the caller's setting untouched outside it.

NumPy and SciPy wheels each ship an OpenBLAS with its own thread pool.  Every fit and
prediction here alternates NumPy's GEMMs with SciPy's small LAPACK calls (Cholesky
factors, triangular solves); with both pools at full size their threads spin against
each other, and a small Cholesky right after a GEMM can take many times its own cost
(``benchmarks/RESULTS.md``'s index: "One thread policy").  So the package's entry
points (a fit, a prediction, each Dask chunk task) run inside
:func:`one_scipy_blas_thread`, which sets SciPy's separate pool to one thread and puts
back what it was when the last of them ends: NumPy's pool, where the large products
run, keeps its threads, and importing the package changes nothing for the user's own
SciPy calls.  Where NumPy and SciPy share one BLAS (a system or conda build), nothing
is changed.
"""

from __future__ import annotations

import contextlib
import functools
import threading

from threadpoolctl import ThreadpoolController

__all__ = ["one_scipy_blas_thread", "scipy_blas_pools", "single_scipy_thread"]

_LOCK = threading.Lock()
_STATE = {"depth": 0, "saved": None, "pools": None}


def scipy_blas_pools(controller=None):
    """The BLAS libraries loaded by SciPy alone (not NumPy's)."""
    controller = ThreadpoolController() if controller is None else controller
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    numpy_paths = {lib.filepath for lib in blas if "numpy" in lib.filepath}
    return [lib for lib in blas
            if "scipy" in lib.filepath and "numpy" not in lib.filepath
            and numpy_paths and lib.filepath not in numpy_paths]


def _pools():
    """SciPy's separate pools, found once per process (after loading SciPy's LAPACK)."""
    if _STATE["pools"] is None:
        import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, so that it can be found)

        _STATE["pools"] = scipy_blas_pools()
    return _STATE["pools"]


@contextlib.contextmanager
def one_scipy_blas_thread():
    """SciPy's separate BLAS pool at one thread for the ``with`` block; the first of
    nested or concurrent blocks (threads of one process) sets it, the last puts back
    what it was."""
    with _LOCK:
        if _STATE["depth"] == 0:
            pools = _pools()
            _STATE["saved"] = [lib.num_threads for lib in pools]
            for lib in pools:
                lib.set_num_threads(1)
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                for lib, threads in zip(_pools(), _STATE["saved"]):
                    lib.set_num_threads(threads)


def single_scipy_thread(func):
    """``func`` run inside :func:`one_scipy_blas_thread` (an entry point's decorator)."""
    @functools.wraps(func)
    def run(*args, **kwargs):
        with one_scipy_blas_thread():
            return func(*args, **kwargs)
    return run
