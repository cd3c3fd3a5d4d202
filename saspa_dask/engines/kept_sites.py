"""A Dask fit's per-row sites kept where the workers wrote them, not on the driver.

EP on Dask rows keeps its sites in a scratch store that the next sweep overwrites.
What a fit returns (``sites_tau_``, warm starts between its runs) is a copy the
workers write chunk by chunk into a store of its own beside the scratch one, read
back lazily: the driver never holds the 2 x N values (1.6 GB at 10^8 rows).  The
store is removed when nothing refers to its arrays any more (or when the process
exits); a saved model copies them into its own store a slab at a time.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import dask.array as da
import numpy as np

from ..files.folder_arrays import folder_array
from ..files.groups import zarr_group

__all__ = ["kept_copy"]


class _Owner:
    """The kept store's directory, removed when the last array reading it is gone.
    A copy (``copy.deepcopy`` of a model) shares it; a pickled one (a Dask task's
    argument, a model sent to another process) only reads it."""

    def __init__(self, path, owns=True):
        self.path = str(path)
        if owns:
            weakref.finalize(self, shutil.rmtree, self.path, True)

    def __reduce__(self):
        return _Owner, (self.path, False)

    def __deepcopy__(self, memo):
        return self


def kept_copy(arrays, parent):
    """Copies of lazy 1-d arrays of equal chunks, written by the workers into a new
    store in ``parent`` (a directory every worker sees), as lazy arrays reading it."""
    path = Path(tempfile.mkdtemp(prefix="saspa-kept-sites-", dir=parent))
    owner = _Owner(path)
    group = zarr_group(path, "w")
    rows = max(arrays[0].chunks[0])
    stored = [group.create_array(f"a{k}", shape=value.shape, chunks=(rows,), dtype="f8",
                                 fill_value=np.nan, compressors=None)
              for k, value in enumerate(arrays)]
    # chunks of one size but the last: each task writes whole chunks, so no lock
    da.store([value.rechunk((rows,)) for value in arrays], stored, lock=False)
    return [folder_array(array, owner.path, "the fit's per-row sites were kept here and "
                         "the folder is gone (its work_dir removed?)", (rows,), keep=owner)
            for array in stored]
