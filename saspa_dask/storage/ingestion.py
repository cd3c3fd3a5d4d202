"""Ingest: stream a CSV, Parquet or ``.npy`` file into a chunked zarr data store.

Data store: a group with ``X`` (N x d float64, row chunks), ``y`` (N; absent when a
``like`` ingest finds no target column), ``row`` (each row's number in the source file,
0 for its first data row) and, with an id column, ``id`` (text); attributes ``format =
"saspa-data"``, ``format_version``, ``columns``, ``target``, ``target_classes``,
``preprocessing`` (the encoding record, imputation values, each source column's range
and missing count), ``fingerprint``, ``complete`` and, for a ``like`` ingest, ``drift``.
The file is never held in memory: a CSV or Parquet file is read in two passes (survey,
then encode), a ``.npy`` file memory-mapped.  ``like=STORE`` encodes a new file exactly
as STORE was (:mod:`~saspa_dask.storage.encoding`) and counts what is new in it.
"""

from __future__ import annotations

import mmap
import shutil
from pathlib import Path

import numpy as np

from ..files.atomic import aside_directory, check_destination, move_into_place
from ..files.outputs import DATA
from ..files.errors import StoreError
from ..files.groups import zarr_group
from ..files.seals import seal
from ..files.store import open_regular
from .chunk_writer import ChunkWriter
from .column_plan import (MISSING_POLICIES, encode_row, feature_names, named_columns,
                          plan_columns, target_index)
from .csv_reader import choose_delimiter, read_rows
from .data_store import DATA_FORMAT, FORMAT_VERSION, data_group
from .encoding import UNKNOWN_POLICIES, like_encoding, plan_like, recorded_ranges
from .survey import SAMPLE_SIZE, MissingTokens, TableSurvey, drift_report

__all__ = ["MAX_CHUNK_BYTES", "ingest"]

MAX_CHUNK_BYTES = 1 << 30  # one chunk of X: what a task holds in memory at once


def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False, like=None, unknown="error", id_column=None, exclude=(),
           delimiter=None, encoding=None, max_categories=None, na_values=None):
    """Stream a CSV, Parquet or ``.npy`` file into a zarr data store.

    Parameters
    ----------
    source : str or Path
        ``.csv`` with a header row (gzip-compressed or not), ``.parquet`` (needs
        ``pyarrow``), or ``.npy`` holding a 2-D real array.
    out : str or Path
        Destination directory (a zarr v3 group).
    target : str or int, optional
        Target column: a CSV column name, or a column index (``.npy`` and CSV).
        Default: the last column.
    chunk_rows : int
        Rows per zarr chunk (at most the file's rows, and at most 1 GiB of ``X``).
    missing : {"error", "drop-rows", "impute"}
        Missing values (``na_values``) raise an error naming the columns and counts,
        or the rows holding them are dropped (and counted), or they are imputed: a
        number column's median, a text column's ``"(missing)"`` category; the values
        are recorded and reapplied by ``like``.  A row missing its target is dropped
        under both ``drop-rows`` and ``impute``.
    text : {"error", "onehot", "drop"}
        Non-numeric input columns raise an error naming them, are one-hot encoded
        (one 0/1 column per value, recorded in the attributes) or are dropped.
        A text *target* is always encoded as 0, 1, ... with its labels recorded.
    overwrite : bool
        Replace an existing store at ``out``.
    like : str or Path, optional
        A data store written by ingest (the training data): encode ``source`` exactly
        as it was encoded (same columns in the same order, same categories, same
        target labels and codes, same id column, same missing-value rule and
        imputation values).  ``target``, ``missing``, ``text``, ``id_column`` and
        ``exclude`` are then taken from it; a source without the target column gives
        a store without ``y`` (data to score).  Drift against it (unseen categories,
        values outside the training range, missing rates, per column) is recorded in
        the ``drift`` attribute.
    unknown : {"error", "ignore"}
        With ``like``: a category the like store never saw is an error naming it, or
        (``"ignore"``) encoded as all zeros and counted in ``drift``.
    id_column : str, optional
        A column of row identifiers (CSV and Parquet): kept out of the inputs and
        stored as text in the ``id`` array, carried by split, score and export.
    exclude : sequence of str
        Columns left out entirely (CSV and Parquet).
    delimiter : str, optional
        The CSV's field delimiter; default: the most frequent of ``,;\\t|`` in the
        header line.
    encoding : dict, optional
        An encoding record (:func:`~saspa_dask.storage.encoding.like_encoding`: what a
        model store keeps of its training store) to follow instead of a ``like``
        store.
    max_categories : int, optional
        One-hot: keep each text column's commonest categories and group the rest.
    na_values : sequence of str, optional
        The tokens read as missing in every column (stripped, any case); default:
        empty, NA, NaN, null, ? everywhere and None in columns of numbers.  Reapplied
        by ``like``; those met are counted per column (``missing_tokens``).

    Returns
    -------
    dict
        The store's attributes; ``notes`` lists anything the caller should be told
        (a target name that is also another column's index).
    """
    source = Path(source)
    _check_options(source, missing, text, chunk_rows, unknown)
    check_destination(out, overwrite, DATA, {"source file": source, "--like store": like})
    if like is not None:
        encoding = like_encoding(data_group(like)[1], like)
    if na_values is not None and encoding is not None:
        raise StoreError("na_values comes from the --like store's encoding; do not give it "
                         "too")
    options = {"target": target, "missing": missing, "text": text, "id_column": id_column,
               "exclude": list(exclude), "delimiter": delimiter, "unknown": unknown,
               "chunk_rows": int(chunk_rows), "max_categories": max_categories,
               "missing_rule": MissingTokens.given(
                   na_values if encoding is None else encoding.get("na_values"))}
    return _write_store(source, out, options, encoding, like, overwrite)


def _write_store(source, out, options, encoding, like, overwrite):
    """The store, written aside and moved into place when complete."""
    tmp = aside_directory(out)
    try:
        group = zarr_group(tmp, "w")
        if source.suffix.lower() == ".npy":
            if options["id_column"] or options["exclude"]:
                raise StoreError(f"{source}: --id-column and --exclude name columns of a "
                                 "CSV or Parquet file; a .npy array has none")
            if options["missing_rule"].record() is not None:
                raise StoreError(f"{source}: --na-values names tokens of a CSV or Parquet "
                                 "file; a .npy array's missing values are NaN")
            attrs = _ingest_npy(source, group, options["target"], options["chunk_rows"],
                                options["missing"], encoding)
        else:
            options["delimiter"] = choose_delimiter(source, options["delimiter"])
            attrs = _ingest_table(source, group, options, encoding)
        stat = source.stat()
        attrs.update(format=DATA_FORMAT, format_version=FORMAT_VERSION,
                     source=str(source), source_size=stat.st_size,
                     source_mtime_ns=stat.st_mtime_ns, complete=True)
        if encoding is not None:
            attrs["like"] = encoding["like"] if like is None else str(Path(like).resolve())
        seal(group, attrs)
        move_into_place(tmp, out, overwrite, DATA)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return attrs


def _check_options(source, missing, text, chunk_rows, unknown):
    if not source.exists():
        raise StoreError(f"{source}: no such file")
    open_regular(source, "a table to read").close()  # a FIFO or device: refused now
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    if text not in ("error", "onehot", "drop"):
        raise ValueError(f"text must be 'error', 'onehot' or 'drop', got {text!r}")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")


def chunk_size(requested, n_rows, n_features, path):
    """The rows per chunk: ``requested``, but no more than the file's rows; refused
    when one chunk of X would pass :data:`MAX_CHUNK_BYTES`."""
    rows = max(1, min(int(requested), int(n_rows)))
    if rows * max(n_features, 1) * 8 > MAX_CHUNK_BYTES:
        raise StoreError(f"{path}: --chunk-rows {requested} with {n_features} inputs makes "
                         f"chunks of {rows * n_features * 8 / 2**30:.1f} GiB; at most "
                         f"{MAX_CHUNK_BYTES // (8 * max(n_features, 1))} rows a chunk")
    return rows


def _header(path, delimiter):
    rows = read_rows(path, delimiter)
    try:
        return next(rows)[1]
    finally:
        rows.close()


def _survey(path, options, target, skip=(), ranges=None):
    """The first pass over the table's rows (:class:`TableSurvey`)."""
    rows = read_rows(path, options["delimiter"])
    _, header = next(rows)
    survey = TableSurvey(header, target, skip, ranges=ranges, missing=options["missing_rule"])
    for _, row in rows:
        survey.add(row)
    if survey.n_rows == 0:
        raise StoreError(f"{path}: no data rows after the header")
    return survey.finish()


def _fresh_plan(path, options, notes):
    """Survey, plan, id column and target labels of a table encoded from scratch."""
    header = _header(path, options["delimiter"])
    t = target_index(header, options["target"], path, notes)
    ids = (named_columns(header, [options["id_column"]], path, "--id-column")
           if options["id_column"] else [])
    excluded = named_columns(header, options["exclude"], path, "--exclude")
    if t in ids or t in excluded:
        raise StoreError(f"{path}: the target column {header[t]!r} cannot be the id "
                         "column or excluded")
    survey = _survey(path, options, t, {*ids, *excluded})
    plan = plan_columns(survey, t, options["missing"], options["text"], path,
                        options["max_categories"], notes)
    return survey, plan, (ids[0] if ids else None), survey.labels()


def _like_plan(path, options, encoding, notes):
    """Survey, plan, id column and target labels of a table encoded as the ``like``
    store was."""
    header = _header(path, options["delimiter"])
    name, id_name = encoding["target"], encoding["id_column"]
    id_at = header.index(id_name) if id_name in header else None
    if id_name and id_at is None:
        notes.append(f"no id column {id_name!r} here: the store has row numbers only")
    skip = {j for j, h in enumerate(header) if h == id_name or h in encoding["excluded"]}
    survey = _survey(path, options, header.index(name) if name in header else None, skip,
                     recorded_ranges(encoding, header))
    plan = plan_like(encoding, survey, path, options["unknown"])
    return survey, plan, id_at, encoding["target_classes"]


def _ingest_table(path, group, options, encoding):
    """A CSV or Parquet table: survey, plan the columns (or follow ``encoding``),
    encode."""
    notes = []
    if encoding is None:
        survey, plan, id_at, target_classes = _fresh_plan(path, options, notes)
        missing, text = options["missing"], options["text"]
    else:
        survey, plan, id_at, target_classes = _like_plan(path, options, encoding, notes)
        missing, text = encoding["missing"], "as --like"
    header, t = survey.header, survey.target
    names = feature_names(header, plan)
    chunk_rows = chunk_size(options["chunk_rows"], survey.n_rows, len(names), path)
    writer = ChunkWriter(group, len(names), chunk_rows, with_target=t is not None,
                         with_ids=id_at is not None)
    dropped = _encode_rows(path, options, plan, t, target_classes, id_at, writer)
    if writer.n == 0:
        raise StoreError(f"{path}: every row has a missing value")
    target_name = header[t] if t is not None else (encoding or {}).get("target")
    attrs = {"columns": names, "target": target_name, "target_classes": target_classes,
             "has_target": t is not None, "n_rows": writer.n, "chunk_rows": chunk_rows,
             "notes": notes, "fingerprint": writer.hasher.hexdigest(writer.n),
             "preprocessing": _preprocessing(survey, plan, encoding, options, missing,
                                             text, dropped, id_at)}
    if encoding is not None:
        attrs["drift"] = drift_report(survey, encoding, plan)
    return attrs


def _encode_rows(path, options, plan, t, target_classes, id_at, writer):
    """The second pass: every row encoded and written; returns the rows dropped."""
    # categories and labels as positions, for the per-row lookups
    positions = [(j, kind, None if cats is None else {c: i for i, c in enumerate(cats)},
                  fill) for j, kind, cats, fill in plan]
    codes = None if target_classes is None else {c: i for i, c in enumerate(target_classes)}
    dropped = 0
    rows = read_rows(path, options["delimiter"])
    next(rows)
    for number, (_, row) in enumerate(rows):
        encoded = encode_row(row, positions, t, codes, options["missing_rule"])
        if encoded is None:
            dropped += 1
            continue
        # an id exactly as written (spaces and all): it must join back to its row
        writer.add(*encoded, number, None if id_at is None else row[id_at])
    writer.flush()
    return dropped


def _preprocessing(survey, plan, encoding, options, missing, text, dropped, id_at):
    """The encoding record of a table ingest (what ``like`` reapplies)."""
    header = survey.header
    if encoding is not None:
        keep = {k: encoding[k] for k in ("onehot", "impute", "column_stats", "excluded")}
        keep["date_columns"] = encoding["dates"]
        return {**keep, "missing": missing, "rows_dropped_for_missing": dropped,
                "text": text, "dropped_text_columns": encoding["dropped"],
                "id_column": encoding["id_column"] if id_at is not None else None,
                "unknown_categories": options["unknown"],
                "na_values": options["missing_rule"].record(),
                "missing_tokens": survey.missing_token_counts()}
    used = {j for j, *_ in plan}
    return {
        "missing": missing, "rows_dropped_for_missing": dropped, "text": text,
        "onehot": {header[j]: cats for j, kind, cats, _ in plan if kind == "onehot"},
        "date_columns": [header[j] for j, kind, _, _ in plan if kind == "date"],
        "impute": ({header[j]: fill for j, kind, _, fill in plan
                    if kind in ("numeric", "date")} if missing == "impute" else {}),
        "values_imputed": ({header[j]: survey.missing[j] for j in used
                            if survey.missing[j]} if missing == "impute" else {}),
        "dropped_text_columns": [header[j] for j in survey.text_columns()
                                 if j != survey.target and j not in used
                                 and j not in survey.skip],
        "id_column": options["id_column"], "excluded": options["exclude"],
        "delimiter": options["delimiter"], "max_categories": options["max_categories"],
        "column_stats": {header[j]: survey.stats(j) for j in used},
        # the "none" words read as missing (their columns hold numbers), said per column
        "missing_words": survey.missing_words,
        # the tokens read as missing (None: the default rule), and those met per column
        "na_values": options["missing_rule"].record(),
        "missing_tokens": survey.missing_token_counts(),
    }


def _ingest_npy(path, group, target, chunk_rows, missing, encoding=None):
    data = _load_npy(path)
    header = [f"x{j}" for j in range(data.shape[1])]
    if encoding is not None:
        if encoding["columns"] != [h for h in header if h != encoding["target"]]:
            raise StoreError(f"{path}: columns {header} do not match {encoding['like']}'s "
                             f"{encoding['columns']} plus target {encoding['target']!r}")
        target, missing = encoding["target"], encoding["missing"]
    t = target_index(header, target, path)
    keep = [j for j in range(data.shape[1]) if j != t]
    chunk_rows = chunk_size(chunk_rows, data.shape[0], len(keep), path)
    if missing == "error":  # refused before anything is written: a pass of its own
        n_missing = sum(int((~np.isfinite(_rows(data, a, a + chunk_rows))).any(axis=1).sum())
                        for a in range(0, data.shape[0], chunk_rows))
        if n_missing:
            raise StoreError(f"{path}: {n_missing} rows hold NaN or inf; use missing="
                             "'drop-rows' or 'impute' (--missing drop-rows / impute)")
    fills = None
    if missing == "impute":
        fills = (np.array([encoding["impute"][header[j]] for j in keep])
                 if encoding is not None else _npy_medians(data, keep, path, header))
    writer = ChunkWriter(group, len(keep), chunk_rows)
    dropped = 0
    for start in range(0, data.shape[0], chunk_rows):
        block = _rows(data, start, start + chunk_rows)
        rows = np.arange(start, start + len(block))
        X, y = block[:, keep], block[:, t]
        if fills is not None:
            X = np.where(np.isfinite(X), X, fills)
        ok = np.isfinite(X).all(axis=1) & np.isfinite(y)
        dropped += int((~ok).sum())
        writer.add_block(X[ok], y[ok], rows[ok])
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row holds NaN or inf")
    preprocessing = {"missing": missing, "rows_dropped_for_missing": dropped}
    if fills is not None:
        preprocessing["impute"] = {header[j]: float(v) for j, v in zip(keep, fills)}
    return {"columns": [header[j] for j in keep], "target": header[t], "target_classes": None,
            "n_rows": writer.n, "chunk_rows": chunk_rows, "preprocessing": preprocessing,
            "fingerprint": writer.hasher.hexdigest(writer.n)}


def _rows(data, start, stop):
    """Rows ``start:stop`` of a memory-mapped array, as float64 in memory; the
    mapping's pages are released after the copy (read pages of a mapped file count in
    the process's resident memory until it is unmapped: 7 GB for a 10^8 x 9 float64
    file, which container memory limits count)."""
    block = np.array(data[start:stop], dtype=np.float64)
    _release(data)
    return block


def _release(data):
    mapping = getattr(data, "_mmap", None)  # numpy.memmap's own mmap.mmap
    if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


def _load_npy(path):
    try:
        open_regular(path, "a .npy array").close()  # a FIFO or device is never mapped
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise StoreError(f"{path}: not a numeric .npy array ({err})") from None
    if data.ndim != 2 or data.shape[1] < 2:
        raise StoreError(f"{path}: need a 2-D array with at least 2 columns, got {data.shape}")
    if data.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    if not np.issubdtype(data.dtype, np.number) or np.issubdtype(data.dtype,
                                                                   np.complexfloating):
        raise StoreError(f"{path}: dtype {data.dtype} is not a real number type")
    return data


def _npy_medians(data, keep, path, header):
    """Each input column's median over its finite values, from every k-th row (at most
    :data:`~saspa_dask.storage.survey.SAMPLE_SIZE` rows; all of them below that)."""
    step = max(1, -(-data.shape[0] // SAMPLE_SIZE))
    sample = np.array(data[::step], dtype=np.float64)[:, keep]
    _release(data)
    sample[~np.isfinite(sample)] = np.nan
    empty = [header[j] for j, col in zip(keep, sample.T) if np.isnan(col).all()]
    if empty:
        raise StoreError(f"{path}: columns {empty} have no finite values to impute from")
    return np.nanmedian(sample, axis=0)
