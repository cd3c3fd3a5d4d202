"""Batch scoring to zarr and evaluation, chunk by chunk on Dask.

Score store layout: a zarr group with arrays ``mean`` and ``variance`` (latent) and,
for classification, ``proba`` (P(y = classes_[1])), all chunk-aligned with the input's
row chunks, plus ``done`` (one flag per chunk).  A one-vs-rest multi-class model writes
(N, n_classes) arrays (one column per class; ``proba`` normalised over the classes); a
Poisson model also writes ``rate``, the expected count exp(mean + variance / 2).  A chunk task writes its rows, then its
flag; the group's ``complete`` attribute is set only after every flag is.  zarr 3 does
not store chunks equal to the fill value (``write_empty_chunks=False``), so "the chunk
exists" would prove nothing: the flags are the record of what was written.

A rerun on an incomplete store checks that it belongs to the same model and input (by
fingerprint and chunking) and computes only the chunks whose flag is not set.
"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from dask import delayed

from .distributed import chunk_bounds
from .ep import make_block, predict_latent
from .store import StoreError, check_data_complete, chunk_digest, combine_digests, open_group

__all__ = ["score", "evaluate", "check_scoring_input"]

SCORES_FORMAT = "saspa-scores"
_SCORE_ROWS = 16384  # rows scored at a time inside a chunk task


def _input_arrays(path):
    """X (and y if present) of a data store, as row-chunked dask arrays."""
    group = open_group(path, "data store")
    check_data_complete(path, dict(group.attrs))
    if "X" not in set(group.array_keys()):
        raise StoreError(f"{path}: no array 'X' to score")
    Xz = group["X"]
    if Xz.ndim != 2:
        raise StoreError(f"{path}: X must be 2-D, got shape {Xz.shape}")
    rows = Xz.chunks[0]
    X = da.from_zarr(str(path), component="X").rechunk({0: rows, 1: -1})
    y = None
    if "y" in set(group.array_keys()) and group["y"].shape == (Xz.shape[0],):
        y = da.from_zarr(str(path), component="y").rechunk({0: rows})
    return X, y


def _chunk_check(Xb):
    finite = np.isfinite(Xb).all(axis=1)
    return int((~finite).sum()), chunk_digest(Xb, np.zeros(0))


def check_scoring_input(model, X):
    """Feature count, dtype and NaN rows of X, in one pass; returns X's fingerprint.

    Raises
    ------
    ValueError
        Wrong feature count, non-numeric dtype, or rows with NaN / inf (counted).
    """
    if X.shape[1] != model.n_features_in_:
        raise ValueError(f"input has {X.shape[1]} features, the model expects "
                         f"{model.n_features_in_}")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"input X has dtype {X.dtype}, not a number type")
    results = dask.compute(*[delayed(_chunk_check)(b) for b in X.to_delayed().ravel()])
    bad = sum(r[0] for r in results)
    if bad:
        raise ValueError(f"input X has {bad} rows with NaN or infinity; nothing was written")
    return combine_digests([r[1] for r in results], X.shape[0], X.shape[1], X.chunks[0][0])


def _outputs(model):
    names = ["mean", "variance"]
    if hasattr(model, "classes_"):
        names.append("proba")
    elif model.likelihood == "poisson":
        names.append("rate")
    return names


def _predictor(model):
    """What a chunk task needs to predict (arrays and small objects, not the estimator,
    whose per-row sites would travel with it)."""
    return (model.bases_.means, model.bases_.covs, model.lengthscale_,
            model.signal_variance_, model.whitening_, list(model.posteriors_),
            getattr(model, "y_mean_", 0.0), model._fitted_likelihood())


def _latent(Xb, predictor):
    """Latent mean (offset not added) and variance, one column per EP problem."""
    means, covs, lengthscale, s2, L, posteriors, _, _ = predictor
    n = Xb.shape[0]
    mean, var = np.empty((n, len(posteriors))), np.empty((n, len(posteriors)))
    # row sub-blocks: the n x M whitened block of a whole chunk is never formed
    for a in range(0, n, _SCORE_ROWS):
        rows = slice(a, min(a + _SCORE_ROWS, n))
        block = make_block(Xb[rows], np.zeros(rows.stop - a), means, covs, lengthscale, s2, L)
        for k, post in enumerate(posteriors):
            mean[rows, k], var[rows, k] = predict_latent(block.phi, post, s2)
    return mean, var


def _predictions(Xb, predictor, names):
    return _from_latent(*_latent(np.asarray(Xb, dtype=np.float64), predictor), predictor,
                        names)


def _from_latent(mean, var, predictor, names):
    y_mean, likelihood = predictor[6], predictor[7]
    values = {"mean": mean + y_mean, "variance": var}
    if "proba" in names:
        p = np.clip(likelihood.proba(mean, var), 0.0, 1.0)
        if p.shape[1] > 1:
            total = p.sum(axis=1, keepdims=True)
            p = p / np.where(total > 0, total, 1.0)
        values["proba"] = p
    if "rate" in names:
        values["rate"] = np.exp(mean + y_mean + 0.5 * var)
    if mean.shape[1] == 1:
        values = {k: v[:, 0] for k, v in values.items()}
    return values


def _score_chunk(Xb, path, index, start, stop, predictor, names):
    """Score one chunk, write its rows, then its done flag (in that order)."""
    values = _predictions(Xb, predictor, names)
    group = zarr.open_group(str(path), mode="r+")
    for name in names:
        group[name][start:stop] = values[name]
    group["done"][index] = 1
    return stop - start


def _read_done(group):
    """Done flags; a flag whose file was cut short by a kill counts as not done."""
    flags = group["done"]
    try:
        return flags[...].astype(bool)
    except Exception:
        out = np.zeros(flags.shape[0], dtype=bool)
        for i in range(flags.shape[0]):
            try:
                out[i] = bool(flags[i])
            except Exception:
                out[i] = False
        return out


def _open_existing(path, expected, overwrite):
    """An incomplete score store of the same model and input, or None to start anew."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        group = zarr.open_group(str(path), mode="r+")
        attrs = dict(group.attrs)
    except Exception as err:
        if overwrite:
            return None
        raise StoreError(f"{path}: exists and is not a score store ({err}); "
                         "use --overwrite") from None
    if overwrite:
        return None
    if attrs.get("format") != SCORES_FORMAT:
        raise StoreError(f"{path}: exists and is not a score store; use --overwrite")
    if attrs.get("complete"):
        raise StoreError(f"{path}: scores are complete; use --overwrite to score again")
    for key, value in expected.items():
        if attrs.get(key) != value:
            raise StoreError(f"{path}: an incomplete score store for a different {key} "
                             f"({attrs.get(key)!r}, now {value!r}); use --overwrite")
    return group


def _create(path, model, X, attrs):
    group = zarr.open_group(str(path), mode="w")
    rows = X.chunks[0][0]
    K = len(model.posteriors_)
    shape, chunks = ((X.shape[0],), (rows,)) if K == 1 else ((X.shape[0], K), (rows, K))
    for name in _outputs(model):
        group.create_array(name, shape=shape, chunks=chunks, dtype="f8", fill_value=np.nan)
    # one zarr chunk per flag: tasks never write into the same chunk file
    group.create_array("done", shape=(len(X.chunks[0]),), chunks=(1,), dtype="u1",
                       fill_value=0)
    group.attrs.update({**attrs, "complete": False})
    return group


def score(model, data, out, *, overwrite=False, progress=None):
    """Score a data store's X into a zarr score store, resumably.

    Parameters
    ----------
    model : fitted SASPAClassifier or SASPARegressor
    data : str or Path
        Data store with an array ``X`` (``y`` is not needed).
    out : str or Path
        Score store; an incomplete one for the same model and input is resumed.
    overwrite : bool
        Replace an existing (complete or foreign) store.
    progress : callable, optional
        Called with the number of chunks written so far after each wave.

    Returns
    -------
    dict
        ``chunks_total``, ``chunks_written`` (this run), ``rows``.
    """
    X, _ = _input_arrays(data)
    input_fingerprint = check_scoring_input(model, X)
    expected = {"format": SCORES_FORMAT, "model_fingerprint": model.model_fingerprint(),
                "input_fingerprint": input_fingerprint, "chunk_rows": int(X.chunks[0][0]),
                "n_rows": int(X.shape[0])}
    group = _open_existing(out, expected, overwrite)
    if group is None:
        group = _create(out, model, X, {**expected, "input": str(Path(data).resolve()),
                                        "outputs": _outputs(model)})
    done = _read_done(group)
    predictor = delayed(_predictor(model))
    blocks = X.to_delayed().ravel()
    todo = [i for i in range(len(blocks)) if not done[i]]
    bounds = chunk_bounds(X)
    tasks = [delayed(_score_chunk)(blocks[i], str(out), i, *bounds[i], predictor,
                                   _outputs(model))
             for i in todo]
    dask.compute(*tasks)
    written = _read_done(group)
    if not written.all():
        raise RuntimeError(f"{out}: {int((written == 0).sum())} chunks were not written")
    group.attrs["complete"] = True
    return {"chunks_total": len(blocks), "chunks_written": len(todo), "rows": int(X.shape[0])}


def _evaluate_chunk(Xb, yb, predictor, classes, likelihood_name):
    """(rows, sum of errors or squared residuals, sum of -log p, sum of |residual|)."""
    yb = np.asarray(yb)
    mean, var = _latent(np.asarray(Xb, dtype=np.float64), predictor)
    values = _from_latent(mean, var, predictor,
                          ["proba"] if classes is not None else ["rate"])
    likelihood = predictor[7]
    if classes is not None and len(classes) > 2:
        codes = np.searchsorted(classes, yb)
        p = values["proba"]
        p_true = p[np.arange(len(yb)), codes]
        errors = float((p.argmax(axis=1) != codes).sum())
        return np.array([len(yb), errors, -np.log(np.maximum(p_true, 1e-300)).sum(), 0.0])
    mean, var = mean[:, 0], var[:, 0]
    if classes is not None:
        sign = np.where(yb == classes[1], 1.0, -1.0)
        log_p = likelihood.log_predictive(sign, mean, var)
        errors = float(((values["proba"] > 0.5) != (sign > 0)).sum())
        return np.array([len(yb), errors, -log_p.sum(), 0.0])
    y_mean = predictor[6]
    if likelihood_name == "poisson":
        resid = yb - values["rate"]
        log_p = likelihood.log_predictive(yb, mean, var)  # the offset is in the likelihood
    else:
        resid = yb - (mean + y_mean)
        log_p = likelihood.log_predictive(yb - y_mean, mean, var)
    return np.array([len(yb), float((resid**2).sum()), -log_p.sum(), float(np.abs(resid).sum())])


def evaluate(model, data):
    """Test metrics of a model on a data store with X and y, computed chunk by chunk.

    Returns
    -------
    dict
        Classification: ``error`` (rate), ``nlp`` (mean negative log probability of
        the true label).  Regression: ``rmse``, ``mae``, ``nlpd`` (mean negative log
        predictive density of y, noise included).  Always ``rows``.
    """
    X, y = _input_arrays(data)
    if y is None:
        raise StoreError(f"{data}: evaluation needs an array 'y' with one value per row")
    check_scoring_input(model, X)
    classes = getattr(model, "classes_", None)
    predictor = delayed(_predictor(model))
    parts = [delayed(_evaluate_chunk)(xb, yb, predictor, classes, model.likelihood)
             for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel())]
    n, a, nlp, c = np.sum(dask.compute(*parts), axis=0)
    if classes is not None:
        return {"rows": int(n), "error": a / n, "nlp": nlp / n}
    return {"rows": int(n), "rmse": float(np.sqrt(a / n)), "mae": c / n, "nlpd": nlp / n}
