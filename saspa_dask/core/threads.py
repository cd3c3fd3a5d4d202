"""One BLAS thread policy for the whole package: SciPy's own OpenBLAS at one thread.

NumPy and SciPy wheels each ship an OpenBLAS with its own thread pool.  Every fit and
prediction here alternates NumPy's GEMMs with SciPy's small LAPACK calls (Cholesky
factors, triangular solves); with both pools at full size their threads spin against
each other, and a small Cholesky right after a GEMM can take many times its own cost.
So importing the mathematics layer (:mod:`saspa_dask.core`, which every estimator,
job and Dask task of the package imports) sets SciPy's separate pool to one thread,
once, for the process: NumPy's pool, where the large products run, keeps its threads.
Measured in ``benchmarks/RESULTS.md`` ("One thread policy"): the online GP's fit on a
busy 2-core machine took 7.3 CPU-s with both pools at full size and 1.1 with SciPy's
at one thread.  Where NumPy and SciPy share one BLAS (a system or conda build),
nothing is changed.  ``threadpoolctl.threadpool_limits`` raises it again for code that
wants SciPy's pool back.
"""

from __future__ import annotations

from threadpoolctl import ThreadpoolController

__all__ = ["scipy_blas_pools", "use_one_scipy_blas_thread"]


def scipy_blas_pools(controller=None):
    """The BLAS libraries loaded by SciPy alone (not NumPy's)."""
    controller = ThreadpoolController() if controller is None else controller
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    numpy_paths = {lib.filepath for lib in blas if "numpy" in lib.filepath}
    return [lib for lib in blas
            if "scipy" in lib.filepath and "numpy" not in lib.filepath
            and numpy_paths and lib.filepath not in numpy_paths]


def use_one_scipy_blas_thread():
    """Set SciPy's separate BLAS pool (if any) to one thread; returns the pools set."""
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, so that it can be found)

    pools = scipy_blas_pools()
    for lib in pools:
        lib.set_num_threads(1)
    return pools
