"""Opening zarr groups with errors that name the store."""

from __future__ import annotations

from pathlib import Path

import zarr

from .atomic import tidy
from .codecs import check_codecs
from .errors import StoreError
from .store import local_store

__all__ = ["chunk_counts", "open_group", "store_format", "zarr_array", "zarr_group"]


def open_group(path, what, mode="r"):
    """Open a zarr group, or raise a StoreError naming ``what`` is missing or wrong (or
    an array in it uses a codec whose output is not bounded)."""
    path = Path(path)
    tidy(path)
    if not path.exists():
        raise StoreError(f"{path}: no such {what}")
    try:
        group = zarr_group(path, mode)
        arrays = list(group.arrays())
    except Exception as err:  # zarr raises several types for non-groups
        raise StoreError(f"{path}: not a zarr group ({type(err).__name__}: {err})") from None
    for name, array in arrays:  # codecs whose output is bounded only (files.codecs)
        check_codecs(array, path, name)
    return group


def chunk_counts(array):
    """``(stored, declared)`` chunks of an array, without listing every chunk its
    metadata declares (zarr's own count does, which a store claiming 10^9 chunks
    turns into a memory bomb): the declared count is arithmetic, the stored one a
    walk of the array's folder (for stores on disk; else zarr's count)."""
    import math
    import os

    grid = getattr(array.metadata, "chunk_grid", None)
    chunks = getattr(grid, "chunk_shape", None) or array.chunks
    declared = math.prod(-(-int(n) // max(int(c), 1)) for n, c in zip(array.shape, chunks))
    root = getattr(array.store, "root", None)
    if root is None:
        return array.nchunks_initialized, declared
    folder = Path(root) / array.path
    stored = 0
    for _, dirs, files in os.walk(folder):
        stored += sum(1 for f in files if f != "zarr.json")
        if stored > declared:
            break
    return stored, declared


def store_format(path):
    """The ``format`` attribute of the zarr group at ``path`` (``saspa-data``,
    ``saspa-model``), or None where there is no such group."""
    if not (Path(path) / "zarr.json").is_file():
        return None
    try:
        return zarr_group(path).attrs.get("format")
    except Exception:  # zarr raises several types for what is not a group
        return None


def zarr_group(path, mode="r"):
    """The zarr group at ``path`` opened through a :class:`~saspa_dask.files.store.
    SafeLocalStore` (regular files only, bounded reads): how the package opens every
    store folder."""
    return zarr.open_group(local_store(path, mode), mode=mode)


def zarr_array(path, name):
    """The array ``name`` of the group at ``path``, read-only (:func:`zarr_group`), to
    give ``dask.array.from_zarr``."""
    return zarr_group(path)[name]
