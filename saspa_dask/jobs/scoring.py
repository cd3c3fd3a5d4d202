"""Scoring jobs: ``score`` a data store into a zarr score store, ``evaluate`` metrics."""

from __future__ import annotations

from ..storage import scores
from ..storage.model_store import load_model
from .cluster import dask_client
from .errors import reported

__all__ = ["evaluate", "score"]


def score(model, data, out, *, overwrite=False, client=None, scheduler=None, workers=2,
          timeout=10, security=None, echo=None):
    """Score a data store's X with a model into a zarr score store, resumably.

    Writes ``mean`` and ``variance`` of the latent function, ``proba`` for a
    classifier and ``rate`` for a Poisson model, chunk-aligned with the input; a rerun
    after an interruption writes only the missing chunks.

    Parameters
    ----------
    model : str or Path
        Model store (or ``latest`` pointer).
    data : str or Path
        Data store with ``X``.
    out : str or Path
        Score store.
    overwrite : bool
        Replace a complete or foreign store at ``out``.
    client, scheduler, workers, timeout, security, echo
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).

    Returns
    -------
    dict
        ``chunks_total``, ``chunks_written`` (this run), ``rows``.
    """
    with reported():
        fitted = load_model(model)
    with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, echo=echo), reported():
        return scores.score(fitted, data, out, overwrite=overwrite)


def evaluate(model, data, *, client=None, scheduler=None, workers=2, timeout=10,
             security=None, echo=None):
    """Test metrics of a model on a data store with X and y, chunk by chunk.

    Returns
    -------
    dict
        Classification: ``error``, ``nlp`` (mean negative log probability of the true
        label); regression: ``rmse``, ``mae``, ``nlpd``; always ``rows``.
    """
    with reported():
        fitted = load_model(model)
    with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, echo=echo), reported():
        return scores.evaluate(fitted, data)
