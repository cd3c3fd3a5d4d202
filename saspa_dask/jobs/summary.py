"""``describe``: a model store's summary (``saspa info``)."""

from __future__ import annotations

from ..files.atomic import resolve_model_path
from ..models.model_summary import describe_model
from .errors import reported

__all__ = ["describe"]


def describe(model):
    """A JSON-able summary of a model store (or ``latest`` pointer): estimator, task,
    rows, bases, kernel, likelihood, EP and optimiser diagnostics."""
    with reported():
        return describe_model(resolve_model_path(model))
