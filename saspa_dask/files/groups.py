"""Opening zarr groups with errors that name the store."""

from __future__ import annotations

from pathlib import Path

import zarr

from .atomic import tidy
from .errors import StoreError

__all__ = ["open_group"]


def open_group(path, what, mode="r"):
    """Open a zarr group, or raise a StoreError naming ``what`` is missing or wrong."""
    path = Path(path)
    tidy(path)
    if not path.exists():
        raise StoreError(f"{path}: no such {what}")
    try:
        return zarr.open_group(str(path), mode=mode)
    except Exception as err:  # zarr raises several types for non-groups
        raise StoreError(f"{path}: not a zarr group ({type(err).__name__}: {err})") from None
