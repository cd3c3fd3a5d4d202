"""Layer 3, engines: where the blocks and sites live, and chunked computations.

- :mod:`~saspa_dask.engines.chunks`: row chunks, tree reductions, balanced placement;
- :mod:`~saspa_dask.engines.memory`: the in-memory EP engine;
- :mod:`~saspa_dask.engines.dask_engine`: the Dask EP engine (sites in zarr);
- :mod:`~saspa_dask.engines.kmeans`: K-means bases, one implementation for both.

Both engines implement :class:`saspa_dask.ep.engine.EPEngine`.
"""
