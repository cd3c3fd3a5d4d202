"""``describe``: a model store's summary (``saspa info``)."""

from __future__ import annotations

from ..files.atomic import resolve_model_path
from ..models.model_summary import describe_model
from ..storage.data_store import describe_data, is_data_store
from .errors import reported

__all__ = ["describe"]


def describe(model):
    """A JSON-able summary of a model store (or ``latest`` pointer): estimator, task,
    rows, bases, kernel, likelihood, EP and optimiser diagnostics; of a data store
    (``kind`` "data store"), what :func:`~saspa_dask.storage.data_store.describe_data`
    says."""
    with reported():
        if is_data_store(model):
            return describe_data(model)
        return describe_model(resolve_model_path(model))
