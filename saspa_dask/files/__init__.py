"""Layer 0, files: what every store shares, below the models that save themselves.

- :mod:`~saspa_dask.files.errors`: :class:`StoreError`;
- :mod:`~saspa_dask.files.atomic`: write aside, rename into place, ``latest`` pointers;
- :mod:`~saspa_dask.files.groups`: opening zarr groups with errors naming the store.

Nothing here knows a model or a data set: these are the file-system rules (no
half-written store at its destination, recoverable swaps) that the model store
(:mod:`saspa_dask.models.model_store`) and the data and score stores
(:mod:`saspa_dask.storage`) follow alike.
"""
