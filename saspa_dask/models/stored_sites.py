"""A loaded model's per-row sites read from its store when they are large.

A model store keeps two values per training row and problem (``sites_tau``,
``sites_nu``: 1.6 GB at 10^8 rows).  Loading reads them whole up to
:data:`SITES_READ_WHOLE_ROWS` rows; above it ``sites_tau_`` and ``sites_nu_`` are Dask
arrays over the stored chunks, read where they are used (retraining's warm start is
written into its EP store by the workers), so the process that loads the model never
holds them.  Their content is checked against the store's checksum at loading, as the
rest of the store is.
"""

from __future__ import annotations

from ..files.folder_arrays import folder_array

__all__ = ["SITES_READ_WHOLE_ROWS", "stored_sites"]

# rows up to which a loaded model's sites are read into memory (128 MiB per array and
# EP problem)
SITES_READ_WHOLE_ROWS = 1 << 24


def stored_sites(array, path):
    """The stored array ``array`` of the model store ``path``, as a Dask array over
    its chunks."""
    return folder_array(array, path, "this model's per-row sites are read from its store, "
                        "which is gone (load it again from where it was moved)", array.chunks)
