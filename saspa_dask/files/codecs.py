"""Decoding stores that may not be trusted: no chunk decompresses past what it can hold.

A store someone else wrote (or changed) can carry a decompression bomb: a chunk file of
a few hundred kilobytes whose zstd frame declares gigabytes.  zarr decodes a chunk
whole before it compares the result with the chunk's shape, so a 258 KB chunk cost
8.6 GB of memory.  Here the compressors zarr uses by default (zstd, gzip, blosc) are
replaced, on import, by versions that compare what a chunk will decompress to with
what the array's chunk can hold (its shape times the item size, for fixed-size types;
:data:`VARIABLE_CHUNK_BYTES` for text) *before* decoding, and refuse a larger chunk with
a ``ValueError``; a chunk that is not a frame of its codec at all (truncated, or
another file) is a ``ValueError`` too, which the readers turn into a message naming
the chunk.  The format is unchanged: stores these decoders accept are exactly those
zarr's own accept, smaller than the bounds.

:func:`check_codecs` refuses arrays that use any other codec (``numcodecs.lzma``,
``numcodecs.bz2`` ...), whose sizes are not checked here; the package never writes
them.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import zarr
from numcodecs.zstd import decompress as zstd_decompress
from zarr.codecs.blosc import BloscCodec
from zarr.codecs.gzip import GzipCodec
from zarr.codecs.zstd import ZstdCodec
from zarr.core.buffer.cpu import as_numpy_array_wrapper
from zarr.registry import register_codec

from .errors import StoreError

__all__ = ["BoundedBlosc", "BoundedGzip", "BoundedZstd", "VARIABLE_CHUNK_BYTES",
           "check_codecs", "chunk_limit"]

VARIABLE_CHUNK_BYTES = 1 << 31  # a chunk of text (ids): at most 2 GiB decoded
_SLACK = 1024  # inner codecs' own headers (a crc32c checksum, blosc's header)
_ZSTD_MAGIC = 0xFD2FB528


def chunk_limit(chunk_spec):
    """The most bytes a chunk of this spec can decode to."""
    native = chunk_spec.dtype.to_native_dtype()
    if native.kind in "biufcmMSV" and native.itemsize:
        return int(np.prod(chunk_spec.shape, dtype=np.int64)) * native.itemsize + _SLACK
    return VARIABLE_CHUNK_BYTES


def _too_large(size, limit, codec):
    return ValueError(f"a {codec} chunk that decompresses to {size} bytes, where its "
                      f"array's chunk holds at most {limit} (a changed or hostile store)")


def zstd_content_size(frame):
    """The decompressed size a zstd frame's header declares, or None (not declared);
    ``ValueError`` when ``frame`` is not a zstd frame."""
    frame = bytes(frame[:18])
    if len(frame) < 5 or struct.unpack("<I", frame[:4])[0] != _ZSTD_MAGIC:
        raise ValueError("not a zstd frame (a truncated or foreign chunk file)")
    descriptor = frame[4]
    fcs_flag, single = descriptor >> 6, (descriptor >> 5) & 1
    dict_bytes = (0, 1, 2, 4)[descriptor & 3]
    at = 5 + (0 if single else 1) + dict_bytes
    size_bytes = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size_bytes == 0:
        return None
    if len(frame) < at + size_bytes:
        raise ValueError("a truncated zstd frame header")
    raw = frame[at:at + size_bytes]
    value = int.from_bytes(raw, "little")
    return value + 256 if size_bytes == 2 else value


def _bounded_zstd(data, limit):
    size = zstd_content_size(data)
    if size is not None and size > limit:
        raise _too_large(size, limit, "zstd")
    if size is None and limit >= VARIABLE_CHUNK_BYTES:
        raise ValueError("a zstd frame that does not declare its size, in an array of "
                         "text: refused (the package's writers always declare it)")
    out = np.empty(limit - _SLACK if size is None else size, dtype=np.uint8)
    try:
        return zstd_decompress(data, out)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"a zstd chunk that cannot be decoded ({err}): truncated, or "
                         "not this array's") from None


def _bounded_gzip(data, limit):
    inflate = zlib.decompressobj(47)  # gzip or zlib header, found from the data
    try:
        out = inflate.decompress(bytes(data), limit + 1)
    except zlib.error as err:
        raise ValueError(f"a gzip chunk that cannot be decoded ({err}): truncated, or "
                         "not this array's") from None
    if len(out) > limit:
        raise _too_large(f"more than {limit}", limit, "gzip")
    return np.frombuffer(out, dtype=np.uint8)


def _blosc_size(data):
    header = bytes(data[:16])
    if len(header) < 16:
        raise ValueError("a truncated blosc chunk")
    return struct.unpack("<I", header[4:8])[0]


class BoundedZstd(ZstdCodec):
    """zarr's zstd codec, refusing a chunk larger than its array's chunk."""

    def _decode_sync(self, chunk_bytes, chunk_spec):
        limit = chunk_limit(chunk_spec)
        return as_numpy_array_wrapper(lambda data: _bounded_zstd(data, limit), chunk_bytes,
                                      chunk_spec.prototype)


class BoundedGzip(GzipCodec):
    """zarr's gzip codec, refusing a chunk larger than its array's chunk."""

    def _decode_sync(self, chunk_bytes, chunk_spec):
        limit = chunk_limit(chunk_spec)
        return as_numpy_array_wrapper(lambda data: _bounded_gzip(data, limit), chunk_bytes,
                                      chunk_spec.prototype)


class BoundedBlosc(BloscCodec):
    """zarr's blosc codec, refusing a chunk whose header declares more than its
    array's chunk holds."""

    def _decode_sync(self, chunk_bytes, chunk_spec):
        limit = chunk_limit(chunk_spec)
        size = _blosc_size(chunk_bytes.as_numpy_array())
        if size > limit:
            raise _too_large(size, limit, "blosc")
        try:
            return super()._decode_sync(chunk_bytes, chunk_spec)
        except RuntimeError as err:
            raise ValueError(f"a blosc chunk that cannot be decoded ({err})") from None


_BOUNDED = {"zstd": BoundedZstd, "gzip": BoundedGzip, "blosc": BoundedBlosc}
for _name, _cls in _BOUNDED.items():
    register_codec(_name, _cls)
zarr.config.set({f"codecs.{name}": f"{cls.__module__}.{cls.__qualname__}"
                 for name, cls in _BOUNDED.items()})

# the codecs a store may use: the bounded compressors and those that do not expand
_ALLOWED = {"bytes", "endian", "zstd", "gzip", "blosc", "crc32c", "transpose", "vlen-utf8",
            "vlen-bytes", "sharding_indexed"}


def check_codecs(array, path, name):
    """Refuse an array whose codecs include one the package does not bound (a
    StoreError naming the store, the array and the codec)."""
    for codec in _codecs_of(array.metadata):
        codec_name = codec.to_dict().get("name")
        if codec_name not in _ALLOWED:
            raise StoreError(f"{path}: array {name!r} uses the codec {codec_name!r}, which "
                             f"saspa does not read (it reads {', '.join(sorted(_ALLOWED))})")


def _codecs_of(metadata):
    codecs = list(getattr(metadata, "codecs", ()) or ())
    for codec in list(codecs):
        codecs.extend(getattr(codec, "codecs", ()) or ())  # sharding's inner codecs
        codecs.extend(getattr(codec, "index_codecs", ()) or ())
    if getattr(metadata, "zarr_format", 3) == 2:  # a v2 array: compressor and filters
        codecs = []
        compressor = getattr(metadata, "compressor", None)
        for codec in [*(getattr(metadata, "filters", None) or ()), compressor]:
            if codec is not None:
                codecs.append(_V2Codec(codec))
    return codecs


class _V2Codec:
    """A zarr v2 array's compressor or filter: decoded by numcodecs directly, so not
    bounded here (named so that it is refused)."""

    def __init__(self, codec):
        self.codec = codec

    def to_dict(self):
        return {"name": f"{self.codec.get_config().get('id')} (zarr format 2)"}
