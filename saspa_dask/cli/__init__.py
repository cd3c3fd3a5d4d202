"""The ``saspa`` command (:mod:`saspa_dask.cli.commands`): a thin click layer over
:mod:`saspa_dask.jobs`, with its shared options (:mod:`saspa_dask.cli.options`) and
``saspa info``'s text (:mod:`saspa_dask.cli.info`)."""

import gc
import os

from .commands import main

__all__ = ["main", "run"]

#: OpenBLAS's idle threads spin for about 2^28 cycles after each call before they
#: sleep; between a fit's many small products that spin is CPU spent for nothing.  The
#: ``saspa`` program's own process asks for 2^4 (unless the environment says
#: otherwise): the same wall time for a quarter to two fifths less CPU (``benchmarks/RESULTS.md``,
#: "The newcomer's tables within 60 CPU-s").  Read when NumPy loads OpenBLAS, which
#: importing this module does not do.
BLAS_THREAD_TIMEOUT = "4"


def run():
    """The ``saspa`` program: :func:`main`, after which the process's objects are frozen
    (``gc.freeze``) so that the interpreter's exit does not traverse them all in each of
    its last collections: 0.6 s after a training job (``benchmarks/RESULTS.md``, "A
    first model by 10 s").  Only for a process that ends with the command (tests call
    :func:`main`); its OpenBLAS threads sleep when idle (:data:`BLAS_THREAD_TIMEOUT`)."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", BLAS_THREAD_TIMEOUT)
    try:
        main()
    finally:
        gc.freeze()
