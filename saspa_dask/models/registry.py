"""The estimators a model store can rebuild, by name, and the store's writer.

A model store knows no estimator class: it records the class name and, on loading,
asks :func:`estimator_class` for it.  Saving goes the other way round: the storage
layer sits above the models, so it registers its writer here
(:func:`set_model_writer`) and ``estimator.save(path)`` calls it, without the models
importing the storage layer.
"""

from __future__ import annotations

__all__ = ["estimator_class", "model_writer", "register", "set_model_writer"]

_ESTIMATORS: dict = {}
_WRITER = []


def register(cls):
    """Class decorator: make ``cls`` loadable from a model store by its name."""
    _ESTIMATORS[cls.__name__] = cls
    return cls


def estimator_class(name):
    """The registered estimator class called ``name``, or None."""
    return _ESTIMATORS.get(name)


def set_model_writer(writer):
    """Register ``writer(model, path, *, overwrite)`` (the model store's save)."""
    _WRITER[:] = [writer]


def model_writer():
    if not _WRITER:
        raise RuntimeError("no model store writer is registered: import saspa_dask.storage")
    return _WRITER[0]
