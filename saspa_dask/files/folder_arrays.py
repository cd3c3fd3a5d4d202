"""An on-disk array read lazily by Dask from a folder that may be removed while
something still refers to it (a fit's kept sites, a loaded model's stored ones).

zarr reads a chunk whose file is gone as its fill value; read through
:func:`folder_array`, a read after the folder is gone raises ``FileNotFoundError``
naming it instead of returning fill values.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import dask.array as da

__all__ = ["folder_array"]


class _FolderArray:
    """What ``da.from_array`` reads: ``array``, checked against its folder first;
    ``keep`` is held for as long as the array is (an owner that removes the folder
    when the last reader is gone)."""

    def __init__(self, array, folder, gone, keep=None):
        self.array, self.folder, self.gone, self.keep = array, str(folder), gone, keep
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key):
        if not Path(self.folder).is_dir():
            raise FileNotFoundError(f"{self.folder}: {self.gone}")
        return self.array[key]


def folder_array(array, folder, gone, chunks, keep=None):
    """The stored ``array`` of ``folder`` as a Dask array of ``chunks``; ``gone``
    says what was there when a read finds the folder removed."""
    return da.from_array(_FolderArray(array, folder, gone, keep), chunks=chunks,
                         asarray=True, name=f"saspa-folder-array-{uuid.uuid4().hex}")
