"""Layer 6, storage: data stores, model stores, score stores, fingerprints, ingest.

- :mod:`~saspa_dask.storage.csv_reader`: the one CSV reader;
- :mod:`~saspa_dask.storage.ingestion`: CSV / ``.npy`` into a chunked zarr data store;
- :mod:`~saspa_dask.storage.data_store`: opening data stores lazily;
- :mod:`~saspa_dask.storage.fingerprint`: content fingerprints of data sets;
- :mod:`~saspa_dask.storage.model_store`: fitted models as zarr groups (no pickle);
- :mod:`~saspa_dask.storage.scores`: resumable batch scoring and evaluation;
- :mod:`~saspa_dask.storage.atomic`: write aside, rename into place, ``latest`` pointers;
- :mod:`~saspa_dask.storage.errors`: :class:`StoreError`.
"""

from .data_store import open_data_store
from .errors import StoreError
from .ingestion import ingest
from .model_store import describe_model, load_model, save_model

__all__ = ["StoreError", "describe_model", "ingest", "load_model", "open_data_store",
           "save_model"]
