"""A store's description sealed by a checksum of its attributes.

A data or score store's attributes say how its arrays are read: the columns' names
(which decide how a model's inputs are matched), the target's classes, the outputs
and their labels.  The content fingerprint covers the arrays only, so an edited
attribute (two column names swapped) would pass it and be believed.  The writer seals
the attributes when the store is complete: ``checksum`` is the sha256 of every other
attribute as canonical JSON, and a reader refuses a store whose attributes no longer
give it, or that lacks it where its format always has one.
"""

from __future__ import annotations

import hashlib
import json

from .errors import StoreError

__all__ = ["attributes_checksum", "check_seal", "seal"]

_KEY = "checksum"


def attributes_checksum(attrs):
    """sha256 over every attribute but the checksum itself, as canonical JSON."""
    meta = {k: v for k, v in attrs.items() if k != _KEY}
    text = json.dumps(meta, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(group, attrs):
    """Write ``attrs`` to the zarr ``group`` with their checksum, in one update (the
    JSON as zarr stores it, read back, is what is summed)."""
    group.attrs.update(attrs)
    stored = dict(group.attrs)
    group.attrs[_KEY] = attributes_checksum(stored)


def check_seal(path, attrs, what, required):
    """Refuse a store whose attributes differ from their checksum; one without a
    checksum is refused where ``required`` (its format always has one)."""
    recorded = attrs.get(_KEY)
    if recorded is None:
        if required:
            raise StoreError(f"{path}: the {what}'s checksum is missing (removed since it "
                             "was written); refusing to read it: write it again")
        return
    if attributes_checksum(attrs) != recorded:
        raise StoreError(f"{path}: the {what}'s attributes differ from the checksum "
                         "recorded when it was written (edited since); refusing to read "
                         "it: write it again")
