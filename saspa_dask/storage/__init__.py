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

from .._lazy import lazy_getattr

# The names load on first use (PEP 562): a Dask worker that runs a scoring or ingest
# task imports the storage modules it needs, not the estimators and scikit-learn
# (about 2.6 s of imports in every worker process).
_PUBLIC = {"StoreError": "..files.errors", "describe_model": "..models.model_summary",
           "ingest": ".ingestion", "load_model": "..models.loading",
           "load_model_and_attrs": "..models.loading", "open_data_store": ".data_store",
           "save_model": "..models.model_store"}

__all__ = sorted(_PUBLIC)


__getattr__ = lazy_getattr(__name__, _PUBLIC)
