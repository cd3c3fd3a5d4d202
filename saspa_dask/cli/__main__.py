"""``python -m saspa_dask.cli``: the ``saspa`` command."""

from .commands import main

main()
