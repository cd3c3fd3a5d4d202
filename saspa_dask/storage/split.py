"""Holding data out: split a data store into a training and a test store, seeded.

Each row goes to the test store with probability ``test_fraction``, decided chunk by
chunk from a generator seeded with ``(seed, chunk index)``: the same seed gives the
same split whatever the machine, and the store is read one chunk at a time.  Both
stores keep the source's columns, target, labels and encoding record (so ``ingest
--like`` and column matching work on them), keep its chunk size, and record the split
(source, fraction, seed, which part) and their own fingerprints.  Both are written
aside and moved into place only when complete.

Splitting is stable under appending: a row's draw depends only on its chunk and its
place in it, so when rows are appended to the source (its last chunk filled up, new
chunks added) and it is split again with the same seed, every old row goes to the same
part, in the same order, and the new rows come after them.  A nightly retrain on the
grown training part therefore finds the old training rows first, as ``retrain`` needs.

Folds for cross-validation (``fold=(k, K)``) use the same draws u in [0, 1): fold k's
test part is the rows with k / K <= u < (k + 1) / K, so the K test parts partition the
rows and each is a seeded uniform share of them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..files.atomic import aside_directory, check_destination, move_into_place
from ..files.outputs import DATA
from .chunk_writer import ChunkWriter
from .data_store import DATA_FORMAT, FORMAT_VERSION, data_group, row_identity
from ..files.seals import seal
from ..files.groups import zarr_group
from ..files.errors import StoreError

__all__ = ["split_store"]

# attributes of the source that describe its columns and encoding: both parts keep them
_KEPT = ("format", "format_version", "columns", "target", "target_classes", "has_target",
         "preprocessing", "source", "like")


def _test_mask(seed, index, n):
    return np.random.default_rng([int(seed), int(index)]).random(n)


def split_store(store, train_out, test_out, *, test_fraction=0.2, seed=0, overwrite=False,
                fold=None):
    """Split a data store into ``train_out`` and ``test_out``.

    Parameters
    ----------
    store : str or Path
        A data store with ``X`` and ``y``.
    train_out, test_out : str or Path
        The two stores to write.
    test_fraction : float
        Probability in (0, 1) that a row goes to the test store.
    seed : int
    overwrite : bool
        Replace existing stores at the destinations.
    fold : (int, int), optional
        ``(k, K)``: the test part is fold k of K (module docstring) instead of a
        ``test_fraction`` share.

    Returns
    -------
    dict
        ``train_rows``, ``test_rows``.

    Raises
    ------
    StoreError
        A missing or incomplete store, a destination that is the source or each other,
        a part that would be empty.
    """
    if fold is not None:
        k, folds = (int(v) for v in fold)
        if not (folds >= 2 and 0 <= k < folds):
            raise StoreError(f"fold must be (k, K) with K >= 2 and 0 <= k < K, got {fold}")
        interval = (k / folds, (k + 1) / folds)
    elif not 0.0 < float(test_fraction) < 1.0:
        raise StoreError(f"test fraction must be in (0, 1), got {test_fraction}")
    else:
        interval = (0.0, float(test_fraction))
    source = Path(store).resolve()
    outs = [Path(train_out).resolve(), Path(test_out).resolve()]
    if source in outs or outs[0] == outs[1]:
        raise StoreError("the training store, the test store and the source must be three "
                         "different paths")
    group, attrs = data_group(store)
    if not {"X", "y"} <= set(group.array_keys()):
        raise StoreError(f"{store}: a data store to split needs arrays 'X' and 'y'")
    for out in (train_out, test_out):
        check_destination(out, overwrite, DATA, {"source store": store})
    tmps = []
    try:
        tmps = [aside_directory(train_out), aside_directory(test_out)]
        counts = _write_parts(group, attrs, tmps, interval, int(seed), store, fold)
        for tmp, out in zip(tmps, (train_out, test_out)):
            move_into_place(tmp, out, overwrite, DATA)
    except BaseException:
        for tmp in tmps:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"train_rows": counts[0], "test_rows": counts[1]}


def _write_parts(group, attrs, tmps, interval, seed, store, fold=None):
    X, y = group["X"], group["y"]
    numbers, ids = row_identity(group)
    rows = int(X.chunks[0])
    parts = [zarr_group(tmp, "w") for tmp in tmps]
    writers = [ChunkWriter(part, X.shape[1], rows, with_ids=ids is not None)
               for part in parts]
    for index, start in enumerate(range(0, X.shape[0], rows)):
        stop = min(start + rows, X.shape[0])
        Xb, yb = np.asarray(X[start:stop]), np.asarray(y[start:stop])
        rb = numbers(start, stop)
        ib = None if ids is None else np.asarray(ids[start:stop])
        draws = _test_mask(seed, index, len(yb))
        test = (draws >= interval[0]) & (draws < interval[1])
        for writer, part in ((writers[0], ~test), (writers[1], test)):
            writer.add_block(Xb[part], yb[part], rb[part], None if ib is None else ib[part])
    for name, writer, part in zip(("train", "test"), writers, parts):
        writer.flush()
        if writer.n == 0:
            raise StoreError(f"{store}: the {name} part would be empty "
                             f"({X.shape[0]} rows, test fraction "
                             f"{interval[1] - interval[0]:.3g})")
        seal(part, {**{k: attrs[k] for k in _KEPT if k in attrs},
                    "format": DATA_FORMAT, "format_version": FORMAT_VERSION,
                    "n_rows": writer.n, "chunk_rows": rows,
                    "split": {"source": str(Path(store).resolve()), "part": name,
                              "test_fraction": interval[1] - interval[0], "seed": seed,
                              **({"fold": list(fold)} if fold is not None else {})},
                    "fingerprint": writer.hasher.hexdigest(writer.n), "complete": True})
    return writers[0].n, writers[1].n
