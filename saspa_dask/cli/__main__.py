"""``python -m saspa_dask.cli``: the ``saspa`` command."""

from . import run

run()
