"""The ``saspa`` command (:mod:`saspa_dask.cli.commands`): a thin click layer over
:mod:`saspa_dask.jobs`, with its shared options (:mod:`saspa_dask.cli.options`) and
``saspa info``'s text (:mod:`saspa_dask.cli.info`)."""

from .commands import main

__all__ = ["main"]
