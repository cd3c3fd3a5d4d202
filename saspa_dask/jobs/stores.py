"""Store jobs: ``ingest`` a file into a data store, ``describe`` a model store."""

from __future__ import annotations

from ..storage.ingestion import ingest as ingest_file
from ..storage.atomic import resolve_model_path
from ..storage.model_store import describe_model
from .errors import reported

__all__ = ["describe", "ingest"]


def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False):
    """Stream a CSV or ``.npy`` file into a chunked zarr data store.

    See :func:`saspa_dask.storage.ingestion.ingest` for the options; returns the store's
    attributes (columns, target, rows, preprocessing, fingerprint).
    """
    with reported():
        return ingest_file(source, out, target=target, chunk_rows=chunk_rows,
                           missing=missing, text=text, overwrite=overwrite)


def describe(model):
    """A JSON-able summary of a model store (or ``latest`` pointer): estimator, task,
    rows, bases, kernel, likelihood, EP and optimiser diagnostics."""
    with reported():
        return describe_model(resolve_model_path(model))
