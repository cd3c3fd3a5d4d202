"""A model store's checksum: the digest of what a reader reads back, computed with
each stored chunk decoded once.

Saving a classifier of 64 full-blur bases on 450 one-hot inputs took 8 minutes after
its 36 s fit: the checksum read the (64, 450, 450) blur stack, stored as one chunk, a
row at a time, and so decoded that 100 MB chunk 28,800 times (found with a newcomer's
table, issue 55)."""

import hashlib
import json

import numpy as np
import zarr

from saspa_dask.models.model_store import content_checksum


class _CountingReads:
    """A stored array that counts the reads made through it."""

    def __init__(self, array):
        self.array, self.reads = array, 0
        self.shape, self.dtype, self.chunks = array.shape, array.dtype, array.chunks

    def __getitem__(self, key):
        self.reads += 1
        return self.array[key]


def _reference_digest(attrs, arrays):
    """sha256 of the attributes' JSON, then per array (by name) its name, type and shape
    and its C-order bytes: the checksum's definition, written out here."""
    h = hashlib.sha256()
    h.update(json.dumps({k: v for k, v in attrs.items() if k != "checksum"},
                        sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        value = np.asarray(arrays[name])
        h.update(f"\0{name}\0{value.dtype.str}\0{tuple(value.shape)}\0".encode())
        h.update(value.tobytes(order="C"))
    return h.hexdigest()


def test_every_chunk_is_decoded_once_and_the_digest_is_the_bytes_in_c_order(tmp_path):
    rng = np.random.default_rng(0)
    values = {"stack": rng.normal(size=(8, 30, 30)),      # one chunk (a blur stack)
              "sites": rng.normal(size=(3, 2500)),         # chunks of 1,000 along rows
              "wide": rng.normal(size=(40, 7)),            # chunks of 16 leading rows
              "scalar_row": np.arange(5.0)}
    chunks = {"stack": (8, 30, 30), "sites": (3, 1000), "wide": (16, 7),
              "scalar_row": (5,)}
    group = zarr.open_group(tmp_path / "m.zarr", mode="w")
    for name, value in values.items():
        group.create_array(name, shape=value.shape, chunks=chunks[name],
                           dtype=value.dtype)[...] = value
    attrs = {"format": "test", "params": {"n_bases": 8}, "checksum": "ignored"}
    stored = {name: _CountingReads(group[name]) for name in values}

    assert content_checksum(attrs, stored) == _reference_digest(attrs, values)
    # the stack's one chunk once (a row at a time was 8 x 30 = 240 reads), the wide
    # array's three chunks of leading rows once each; the row-chunked sites a chunk per
    # class row (3 x 3)
    assert {name: array.reads for name, array in stored.items()} == {
        "stack": 1, "sites": 9, "wide": 3, "scalar_row": 1}
    # an edited byte anywhere changes the digest
    group["stack"][7, 29, 29] = values["stack"][7, 29, 29] + 1e-12
    assert content_checksum(attrs, {n: group[n] for n in values}) != \
        _reference_digest(attrs, values)
