"""The ``saspa`` command (:mod:`saspa_dask.cli.commands`): a thin click layer over
:mod:`saspa_dask.jobs`, with its shared options (:mod:`saspa_dask.cli.options`) and
``saspa info``'s text (:mod:`saspa_dask.cli.info`)."""

import gc

from .commands import main

__all__ = ["main", "run"]


def run():
    """The ``saspa`` program: :func:`main`, after which the process's objects are frozen
    (``gc.freeze``) so that the interpreter's exit does not traverse them all in each of
    its last collections: 0.6 s after a training job (``benchmarks/RESULTS.md``, "A
    first model by 10 s").  Only for a process that ends with the command (tests call
    :func:`main`)."""
    try:
        main()
    finally:
        gc.freeze()
