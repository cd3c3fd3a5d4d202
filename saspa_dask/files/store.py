"""zarr stores on disk read safely: regular files only, bounded reads.

zarr's :class:`~zarr.storage.LocalStore` opens whatever file a key names.  A chunk
file that is a FIFO blocks its reader in ``open()`` until some process writes to it
(a worker thread of a shared cluster stays blocked after the job is gone), and one
linked to ``/dev/zero`` is read without end.  :class:`SafeLocalStore` opens every file
without blocking, refuses anything that is not a regular file (after following a link,
whose target must be regular too) with an error naming the file, and reads at most
the size the file had when opened, never more than :data:`MAX_FILE_BYTES`.  Every
store the package opens goes through :func:`local_store`.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer.core import default_buffer_prototype
from zarr.storage import LocalStore

from .errors import StoreError

__all__ = ["MAX_FILE_BYTES", "SafeLocalStore", "local_store", "open_regular", "read_regular",
           "special_kind"]

# a chunk file is at most its array's chunk (codecs.chunk_limit: 2 GiB for text)
# plus the codecs' headers; metadata files are far smaller
MAX_FILE_BYTES = (1 << 31) + (1 << 20)
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def special_kind(mode):
    """What a file of ``mode`` that is not a regular file or folder is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _open_checked(path, what):
    """A descriptor of the regular file at ``path`` and its ``fstat``, opened without
    blocking (a FIFO or device is refused before anything is read from it)."""
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path}: {special_kind(info.st_mode)}, not a regular file; "
                             f"refusing to read it as {what}")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def open_regular(path, what="a data file"):
    """``path`` opened for reading in binary (a file object), when it is a regular file
    (or a link to one); a FIFO, socket or device is a :class:`StoreError` naming it,
    and nothing blocks."""
    fd, _ = _open_checked(path, what)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path, byte_range=None, limit=MAX_FILE_BYTES, what="a store file"):
    """The bytes of the regular file at ``path`` (a ``byte_range`` of them, as zarr
    asks), opened without blocking; anything else is a :class:`StoreError` naming it.
    ``FileNotFoundError`` (and the other errors zarr reads as "no such key") pass."""
    fd, info = _open_checked(path, what)
    try:
        size = info.st_size
        if size > limit:
            raise StoreError(f"{path}: {size} bytes, more than {what} can hold "
                             f"({limit}); refusing to read it")
        start, stop = _span(byte_range, size)
        return _read_span(fd, start, stop)
    finally:
        os.close(fd)


def _span(byte_range, size):
    if byte_range is None:
        return 0, size
    if isinstance(byte_range, RangeByteRequest):
        return min(byte_range.start, size), min(byte_range.end, size)
    if isinstance(byte_range, OffsetByteRequest):
        return min(byte_range.offset, size), size
    if isinstance(byte_range, SuffixByteRequest):
        return max(0, size - byte_range.suffix), size
    raise TypeError(f"Unexpected byte_range, got {byte_range}.")


def _read_span(fd, start, stop):
    """Bytes start..stop of ``fd``: never more, whatever the file does meanwhile."""
    parts, at = [], start
    while at < stop:
        part = os.pread(fd, min(stop - at, 1 << 26), at)
        if not part:
            break
        parts.append(part)
        at += len(part)
    return b"".join(parts)


class SafeLocalStore(LocalStore):
    """A :class:`~zarr.storage.LocalStore` that reads only regular files, bounded
    (:func:`read_regular`)."""

    def _read(self, key, prototype, byte_range):
        prototype = prototype or default_buffer_prototype()
        try:
            data = read_regular(self.root / key, byte_range)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return prototype.buffer.from_bytes(data)

    def get_sync(self, key, *, prototype=None, byte_range=None):
        self._ensure_open_sync()
        return self._read(key, prototype, byte_range)

    async def get(self, key, prototype=None, byte_range=None):
        if not self._is_open:
            await self._open()
        return await asyncio.to_thread(self._read, key, prototype, byte_range)

    async def get_partial_values(self, prototype, key_ranges):
        if not self._is_open:
            await self._open()
        return await asyncio.gather(*(asyncio.to_thread(self._read, key, prototype, rng)
                                      for key, rng in key_ranges))


def local_store(path, mode="r"):
    """The :class:`SafeLocalStore` of the folder ``path`` (read-only for ``mode``
    "r"), to give ``zarr.open_group``."""
    return SafeLocalStore(Path(path), read_only=mode == "r")
