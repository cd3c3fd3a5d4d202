"""What an output path may replace: only what this tool wrote there.

``--overwrite`` (and ``overwrite=True`` in Python and job files) replaces an existing
output only when it is one of this tool's own: a store folder of the expected kind
(a data, model or score store, by its ``format`` attribute) that holds nothing but the
store's own files, or a regular file of the requested format.  Never the working
directory or an ancestor of it, the home folder, an input (or a folder holding one, or
a folder inside one), a job file or its folder (:func:`protecting`), a device, FIFO or
socket, or a folder holding anything else.  A symbolic link at the output is replaced
as a link: its target is never followed, let alone deleted.

The refusal names the path and what it holds and suggests another path; it never
advises ``--overwrite`` for what ``--overwrite`` would not replace.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from zarr.abc.store import RangeByteRequest

from .errors import StoreError
from .names import replaced
from .store import read_regular, special_kind

__all__ = ["DATA", "MODEL", "SCORES", "CSV", "PARQUET", "HTML", "JSON", "NPY", "OutputKind",
           "check_not_protected", "check_output", "describe_path", "discard", "protecting"]


@dataclass(frozen=True)
class OutputKind:
    """What a command writes at its output: a store (``store_format``, its zarr
    group's ``format`` attribute) or a file (``suffixes`` its name may end in)."""

    name: str
    store_format: str | None = None
    suffixes: tuple = ()
    default_name: str = "out"

    @property
    def is_store(self):
        return self.store_format is not None


DATA = OutputKind("data store", "saspa-data", default_name="data.zarr")
MODEL = OutputKind("model store", "saspa-model", default_name="model.zarr")
SCORES = OutputKind("score store", "saspa-scores", default_name="scores.zarr")
CSV = OutputKind("CSV file", suffixes=(".csv",), default_name="scores.csv")
PARQUET = OutputKind("Parquet file", suffixes=(".parquet", ".pq"),
                     default_name="scores.parquet")
HTML = OutputKind("HTML page", suffixes=(".html", ".htm"), default_name="report.html")
JSON = OutputKind("JSON file", suffixes=(".json",), default_name="state.json")
NPY = OutputKind("NumPy array file", suffixes=(".npy",), default_name="data.npy")

_STORE_FORMATS = {kind.store_format: kind for kind in (DATA, MODEL, SCORES)}
# zarr's own names inside a store: metadata, chunk files (c/0/1 ...) and the copies
# zarr writes aside and renames (NAME.<32 hex>.partial), which a kill can leave
_PARTIAL = r"(\.[0-9a-f]{32}\.partial)?"
_METADATA = re.compile(rf"zarr{_PARTIAL}(\.json)?")
_CHUNK = re.compile(rf"[0-9]+{_PARTIAL}")
_SNIFF_BYTES = 1 << 16

_PROTECTED = contextvars.ContextVar("saspa_protected_paths", default=())


@contextlib.contextmanager
def protecting(*paths):
    """Within the block, no output may be any of ``paths`` or a folder holding one
    (``saspa run`` protects its job file and the job file's folder)."""
    token = _PROTECTED.set(_PROTECTED.get() + tuple(Path(p) for p in paths if p))
    try:
        yield
    finally:
        _PROTECTED.reset(token)


def _real(path):
    return Path(os.path.realpath(path))


def _within(inner, outer):
    """Whether ``inner`` is ``outer`` or lies inside it (both resolved)."""
    return inner == outer or outer in inner.parents


def _protected_reason(path, inputs):
    """Why ``path`` can never be an output, or None."""
    real = _real(path)
    cwd = _real(os.getcwd())
    if _within(cwd, real):
        return ("the working directory" if real == cwd
                else "a folder holding the working directory")
    home = Path(os.path.expanduser("~"))
    if real == _real(home) or real == Path(real.anchor):
        return "the home folder" if real != Path(real.anchor) else "the file system's root"
    for what, given in inputs.items():
        if given is None:
            continue
        other = _real(given)
        if real == other:
            return f"the {what}; refusing to overwrite an input"
        if _within(other, real):
            return f"a folder holding the {what} ({given})"
        if _within(real, other):
            return f"inside the {what} ({given})"
    for kept in _PROTECTED.get():
        other = _real(kept)
        if _within(other, real):
            return "the job file's folder" if other.is_dir() else "the job file"
    return None


def check_not_protected(path, inputs=None):
    """Refuse ``path`` as any output: the working directory, the home folder, an input
    or a folder holding one, a job file or its folder (:func:`protecting`)."""
    path = Path(os.path.abspath(os.fspath(path)))
    reason = _protected_reason(path, inputs or {})
    if reason is not None:
        raise StoreError(f"{path}: {reason}; refusing to write there: choose another path")


def describe_path(path):
    """What is at ``path`` (not following a link there), in a few words; None when
    nothing is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"something that cannot be examined ({err.strerror})"
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        found = _store_format(path)
        if found in _STORE_FORMATS:
            return f"a {_STORE_FORMATS[found].name}"
        return "a folder" if any(os.scandir(path)) else "an empty folder"
    return special_kind(mode)


def _store_format(path):
    """The ``format`` attribute in ``path/zarr.json`` (a plain file, read bounded), or
    None."""
    meta = Path(path) / "zarr.json"
    try:
        if not stat.S_ISREG(os.lstat(meta).st_mode):
            return None
        doc = json.loads(read_regular(meta, limit=1 << 24))
    except (OSError, ValueError):
        return None
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    return attrs.get("format") if isinstance(attrs, dict) else None


def _foreign_entry(root):
    """The first entry inside a store folder that is not one of zarr's own files (its
    path relative to the store), or None: metadata files at every level, array and
    group folders, chunk files (digits) under each array's ``c`` folder."""
    for top, dirs, files in os.walk(root, followlinks=False):
        rel = Path(top).relative_to(root)
        in_chunks = "c" in rel.parts
        for name in files:
            entry = Path(top) / name
            if not stat.S_ISREG(os.lstat(entry).st_mode):
                return rel / name
            if not (_METADATA.fullmatch(name) or (in_chunks and _CHUNK.fullmatch(name))):
                return rel / name
        for name in dirs:
            if os.path.islink(Path(top) / name) or (in_chunks and not name.isdigit()):
                return rel / name
    return None


def _file_matches(path, kind):
    """Whether the regular file at ``path`` is one this tool wrote as ``kind``: its
    name ends in one of the kind's suffixes and its first bytes are what the tool
    writes there (an export's header with its ``row`` and ``mean`` columns, a report
    page's generator mark, a job's state record, a Parquet file's magic)."""
    name = Path(path).name.lower()
    if not any(name.endswith(s) for s in kind.suffixes):
        return False
    try:
        head = read_regular(path, RangeByteRequest(0, _SNIFF_BYTES))
    except (OSError, StoreError):
        return False
    if kind is PARQUET:
        return head[:4] == b"PAR1" and _parquet_is_export(path)
    if kind is NPY:
        return head[:6] == b"\x93NUMPY"
    text = head.decode("utf-8", errors="replace")
    if "\0" in text:
        return False
    if kind is CSV:
        header = text.splitlines()[0].split(",") if text else []
        return "row" in header and "mean" in header
    if kind is HTML:
        return '<meta name="generator" content="saspa_dask">' in text
    if kind is JSON:
        return text.lstrip().startswith("{") and '"completed"' in text
    return False


def _parquet_is_export(path):
    """Whether a Parquet file's columns are an export's (``row`` and ``mean``); a file
    whose schema cannot be read (no pyarrow, or damaged) is not taken to be one."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # without pyarrow no export was written as Parquet here
        return False
    try:
        names = pq.read_schema(str(path)).names
    except Exception:  # pyarrow's own errors: not a readable file, not ours to replace
        return False
    return "row" in names and "mean" in names


def _another(path, kind):
    """A path that is free, to suggest instead of ``path``."""
    path = Path(path)
    plain = describe_path(path) in ("a folder", "an empty folder")
    if plain and not (path / kind.default_name).exists():
        return path / kind.default_name
    stem, suffix = (path.stem, path.suffix) if path.suffix else (path.name, "")
    for k in range(2, 100):
        candidate = path.with_name(f"{stem}-{k}{suffix}")
        if not os.path.lexists(candidate):
            return candidate
    return path.with_name(f"{stem}-new{suffix}")


def _refusal(path, kind, holds):
    return StoreError(f"{path}: {holds}, not a {kind.name} this tool wrote; saspa replaces "
                      f"only its own outputs: choose another path (for example "
                      f"{_another(path, kind)})")


def check_output(path, kind, *, overwrite=False, inputs=None):
    """Refuse an output ``path`` this job may not write, before any work.

    Parameters
    ----------
    path : str or Path
    kind : OutputKind
        What the job writes there.
    overwrite : bool
        Whether an existing output of this tool's, of ``kind``, may be replaced.
    inputs : dict, optional
        What each input is (for the message) to its path; None entries are skipped.

    Raises
    ------
    StoreError
        ``path`` is protected (the working directory, an input or a folder holding
        one, a job file ...), is a device, FIFO or socket, holds something this tool
        did not write, or exists and ``overwrite`` is false.
    """
    path = Path(os.path.abspath(os.fspath(path)))
    reason = _protected_reason(path, inputs or {})
    if reason is not None:
        if not reason.endswith("an input"):
            reason += f"; refusing to write a {kind.name} there"
        raise StoreError(f"{path}: {reason}: choose another path (for example "
                         f"{_another(path, kind)})")
    holds = describe_path(path)
    if holds is None:
        return
    if holds == "a symbolic link":
        if not overwrite:
            raise StoreError(f"{path} exists (a symbolic link); pass --overwrite to "
                             "replace the link (its target is left alone)")
        return
    if kind.is_store:
        replaceable = holds == f"a {kind.name}" and _foreign_entry(path) is None
        if holds == f"a {kind.name}" and not replaceable:
            holds = (f"a {kind.name} holding files that are not the store's "
                     f"({_foreign_entry(path)})")
        replaceable = replaceable or holds == "an empty folder"
    else:
        replaceable = holds == "a file" and _file_matches(path, kind)
    if not replaceable:
        raise _refusal(path, kind, holds)
    if not overwrite:
        raise StoreError(f"{path} exists; pass --overwrite to replace it ({holds})")


def discard(path, kind):
    """Remove the existing output at ``path`` that :func:`check_output` allowed to be
    replaced, checking again first: a link is unlinked (its target is left alone), a
    store moved aside and deleted, a file unlinked.  Nothing there: nothing done."""
    check_output(path, kind, overwrite=True)
    path = Path(path)
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not path.is_dir():
        os.unlink(path)
        return
    old = replaced(path)
    os.replace(path, old)
    shutil.rmtree(old, ignore_errors=True)
