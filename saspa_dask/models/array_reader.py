"""A model store's arrays read with their sizes bounded, and its content checked
against the checksum recorded at saving (:mod:`saspa_dask.models.model_reader` reads
the store with it)."""

from __future__ import annotations

import warnings

import numpy as np

from ..files.codecs import check_codecs
from ..files.errors import StoreError
from ..files.groups import chunk_counts
from .model_store import CHECKSUM_SINCE, content_checksum

__all__ = ["ArrayReader"]


# a model's largest arrays are its sites (8 bytes per training row and problem): 16 GiB
# is 2 * 10^9 rows; a claim beyond it is a changed store, refused before any read
_MAX_ARRAY_BYTES = 1 << 34
# an array of an older store (which did not record its training rows) claiming more
# than this must have every chunk stored: a claim its files do not back is refused
_UNBACKED_BYTES = 1 << 26


class ArrayReader:
    """Reads a model store's arrays, each checked from its metadata before anything is
    allocated: its codecs (:func:`~saspa_dask.files.codecs.check_codecs`), its shape
    against what the model's own dimensions allow, and (for older stores) that a large
    claim is backed by stored chunks.  Keeps what it read, for the checksum."""

    def __init__(self, group, attrs, path):
        self.group, self.path, self.read_arrays = group, path, {}
        M, d = int(attrs["n_bases"]), int(attrs["n_features_in"])
        K = int(attrs.get("n_problems", 1))
        rows = attrs.get("n_training_rows")
        self.rows_known = isinstance(rows, int) and not isinstance(rows, bool) and rows > 0
        # the largest any array of this model can be: the basis covariances, the
        # posterior factors, and per-row arrays (each problem's sites)
        self.max_elements = max(M * d * d, K * M * M, M * d + M) + \
            (K * rows if self.rows_known else 0)

    def __call__(self, name, dtype=np.float64, shape=None):
        """The array ``name`` (``dtype=None``: as stored), or a StoreError naming it."""
        return self.values(name, self.metadata(name, shape=shape), dtype)

    def values(self, name, array, dtype=np.float64):
        """The stored ``array`` named ``name``, already checked by :meth:`metadata`,
        read (``dtype=None``: as stored)."""
        try:
            value = array[...]
        except Exception as err:
            raise StoreError(f"{self.path}: array {name!r} is missing or unreadable "
                             f"({type(err).__name__}: {err})") from None
        self.read_arrays[name] = value
        return np.asarray(value, dtype=dtype)

    def metadata(self, name, dtype=None, shape=None):
        """The stored array ``name``, checked as :meth:`__call__` checks it, unread (the
        checksum hashes it a stored chunk at a time)."""
        try:
            array = self.group[name]
            self._check(array, name, shape)
        except StoreError:
            raise
        except Exception as err:
            raise StoreError(f"{self.path}: array {name!r} is missing or unreadable "
                             f"({type(err).__name__}: {err})") from None
        self.read_arrays.setdefault(name, array)
        return array

    def _check(self, array, name, shape):
        path = self.path
        check_codecs(array, path, name)
        # shape: one tuple, or a list of the shapes the array may have
        allowed = [tuple(s) for s in shape] if isinstance(shape, list) else [shape]
        if shape is not None and tuple(array.shape) not in allowed:
            raise StoreError(f"{path}: array {name!r} has shape {array.shape}, expected "
                             f"{' or '.join(str(s) for s in allowed)}")
        elements = int(np.prod(array.shape, dtype=object))
        claimed = elements * array.dtype.itemsize
        if claimed > _MAX_ARRAY_BYTES or (self.rows_known and elements > self.max_elements):
            raise StoreError(f"{path}: array {name!r} claims shape {array.shape} "
                             f"({claimed / 2**30:.3g} GiB): more than this model holds; "
                             "the store's metadata was changed")
        fill = np.asarray(array.fill_value)
        unbacked = (fill.dtype.kind == "f" and np.isnan(fill)) or (
            not self.rows_known and claimed > _UNBACKED_BYTES)
        if unbacked:
            stored, declared = chunk_counts(array)
            if stored < declared:
                raise StoreError(f"{path}: array {name!r} claims shape {array.shape} but "
                                 f"only {stored} of its {declared} chunks are stored")

    def verify_checksum(self, attrs):
        """The store's content against the checksum recorded when it was saved.  A
        store without one is refused, unless its format is older than checksums (then
        a warning says its content cannot be checked)."""
        recorded = attrs.get("checksum")
        if recorded is None:
            if attrs.get("format_version", 0) >= CHECKSUM_SINCE:
                raise StoreError(f"{self.path}: its checksum is missing (removed since it "
                                 "was saved; every store of format version "
                                 f"{CHECKSUM_SINCE} has one); refusing to load it: save "
                                 "or train the model again")
            warnings.warn(f"{self.path}: saved by an older saspa (model format version "
                          f"{attrs.get('format_version')}) without a checksum: its content "
                          "cannot be checked; save it again to add one", UserWarning,
                          stacklevel=2)
            return
        for name in self.group.array_keys():
            if name not in self.read_arrays:  # not needed here: checked, hashed unread
                self.metadata(name)
        if content_checksum(attrs, self.read_arrays) != recorded:
            raise StoreError(f"{self.path}: its content differs from the checksum recorded "
                             "when it was saved (an attribute or array was changed "
                             "since); refusing to load it: save or train the model again")
