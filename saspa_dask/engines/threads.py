"""One BLAS thread pool at a time: SciPy's own OpenBLAS limited to one thread.

NumPy and SciPy wheels each ship an OpenBLAS with its own thread pool.  The fitting
loop alternates NumPy's GEMMs with SciPy's small LAPACK calls (Cholesky factors,
triangular solves); with both pools at full size their threads spin against each
other, and a small Cholesky right after a GEMM can take many times its own
cost.  Limiting SciPy's pool to one thread while a fit runs shortened evidence
maximisation markedly (measured in ``benchmarks/RESULTS.md``, "Learnt bases").
Where NumPy and SciPy share one BLAS (a system or conda build), nothing is changed.
"""

from __future__ import annotations

from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

__all__ = ["scipy_blas_single_threaded"]


def _scipy_only_pools(controller):
    """The BLAS libraries loaded by SciPy alone (not NumPy's)."""
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    numpy_paths = {lib.filepath for lib in blas if "numpy" in lib.filepath}
    return [lib for lib in blas
            if "scipy" in lib.filepath and "numpy" not in lib.filepath
            and numpy_paths and lib.filepath not in numpy_paths]


@contextmanager
def scipy_blas_single_threaded():
    """Run the block with SciPy's separate BLAS pool (if any) at one thread."""
    pools = _scipy_only_pools(ThreadpoolController())
    before = [lib.num_threads for lib in pools]
    for lib in pools:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, n in zip(pools, before):
            lib.set_num_threads(n)
