"""Layer 6, storage: data stores, model stores, score stores, fingerprints, ingest.

- :mod:`~saspa_dask.storage.csv_reader`: the one CSV reader;
- :mod:`~saspa_dask.storage.ingestion`: CSV / ``.npy`` into a chunked zarr data store;
- :mod:`~saspa_dask.storage.data_store`: opening data stores lazily;
- :mod:`~saspa_dask.storage.fingerprint`: content fingerprints of data sets;
- :mod:`~saspa_dask.storage.scores`: resumable batch scoring and evaluation;

Fitted models are stored by the models layer (:mod:`saspa_dask.models.model_store`;
re-exported here), and the file-system rules every store follows are in
:mod:`saspa_dask.files`.
"""

from .data_store import open_data_store
from ..files.errors import StoreError
from .ingestion import ingest
from ..models.loading import load_model, load_model_and_attrs
from ..models.model_store import save_model
from ..models.model_summary import describe_model

__all__ = ["StoreError", "describe_model", "ingest", "load_model", "load_model_and_attrs",
           "open_data_store", "save_model"]
