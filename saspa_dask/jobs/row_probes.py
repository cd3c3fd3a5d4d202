"""The rows a model keeps to recognise its training data, and the one pass over the
data that fingerprints it and reads them (checked against an old model's when
retraining)."""

from __future__ import annotations


import numpy as np

from ..storage.data_store import unreadable_chunk
from ..storage.fingerprint import check_recorded, fingerprint_and_rows
from .errors import JobError, reported

__all__ = ["check_data", "check_row_probes", "probe_index"]


# rows of the training data a model keeps, to check that a retraining store starts with
# them (its sites belong to those rows)
_N_PROBES = 32


def probe_index(n_rows):
    """The rows a model keeps (first, last and evenly spaced) to recognise its training
    data when it is retrained."""
    return np.unique(np.linspace(0, n_rows - 1, min(_N_PROBES, n_rows)).round().astype(int))


def check_row_probes(probes, X_rows, y_rows, data):
    """The retraining data's rows at the old probes' places are the rows the model was
    trained on: the old sites are row by row, so a store whose rows were reordered,
    filtered or split differently would warm-start every row from another row's site."""
    index = np.asarray(probes["index"], dtype=int)
    differ = ~(np.all(X_rows == np.asarray(probes["X"]), axis=1)
               & (y_rows == np.asarray(probes["y"])))
    if differ.any():
        raise JobError(f"{data}: row {int(index[differ][0])} differs from the row the model "
                       f"was trained on ({int(differ.sum())} of {len(index)} checked rows "
                       "differ); retraining expects the old rows first, unchanged, with new "
                       "rows appended")


def check_data(X, y, attrs, data, reordered, old_probes):
    """One pass over the training data, on the store's own chunks: its fingerprint
    (checked against the one recorded at ingest), the rows the new model keeps as probes
    and, when retraining, the rows at the old model's probes (checked against them)."""
    index = probe_index(X.shape[0])
    old_index = np.zeros(0, dtype=int) if not old_probes else np.asarray(old_probes["index"])
    try:
        computed, X_rows, y_rows = fingerprint_and_rows(
            X, y, np.concatenate([index, old_index]).astype(int), attrs.get("chunk_rows"))
    except ValueError as err:
        raise JobError(str(unreadable_chunk(data, err) or err)) from None
    if not reordered:  # a reordered store is not the content that was fingerprinted
        with reported():
            check_recorded(data, attrs.get("fingerprint"), computed)
    n = len(index)
    if old_probes:
        check_row_probes(old_probes, X_rows[n:], y_rows[n:], data)
    return {"fingerprint": computed, "index": index.tolist(), "X": X_rows[:n].tolist(),
            "y": y_rows[:n].tolist()}
