"""Untrusted files and stores cannot exhaust memory, and changed models are refused:
a CSV line of gigabytes, zstd chunks that decompress to gigabytes (in a model store and
in a data store), array metadata claiming gigabytes of fill values, codecs whose output
is not bounded, truncated or foreign chunk files, and model stores edited after saving
(the hostile pass's cases, each measured against the process's own peak memory)."""

import gzip
import json
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numcodecs.zstd
import numpy as np
import pytest
import zarr

from saspa_dask import SASPAClassifier, jobs, load_model
from saspa_dask.files.errors import StoreError

BIN = Path(sys.executable).parent
MiB = 1 << 20


def _peak_rss_of(args):
    """Run a command; returns (completed process, its peak resident memory in MiB),
    sampled every 5 ms."""
    import psutil

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watched, peak = psutil.Process(proc.pid), [0]

    def sample():
        while proc.poll() is None:
            try:
                peak[0] = max(peak[0], watched.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = proc.communicate(timeout=300)
    sampler.join()
    return subprocess.CompletedProcess(args, proc.returncode, out, err), peak[0] / MiB


def test_a_gigabyte_line_is_refused_before_it_is_read_whole(tmp_path):
    """The hostile pass's case: a 13 MB gzip with one 3 GB line cost 6.3 GB.  Here a
    1 GiB line (a 1 MB file): refused at the line limit, the process staying far
    below the line's size."""
    path = tmp_path / "long.csv.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b"a,b,label\n")
        block = b"7" * (64 * MiB)
        for _ in range(16):
            out.write(block)
        out.write(b",1,0\n")
    assert path.stat().st_size < 8 * MiB
    res, peak = _peak_rss_of([str(BIN / "saspa"), "ingest", str(path), "--out",
                              str(tmp_path / "d.zarr")])
    assert res.returncode == 1, res.stderr
    assert f"{path}:2: a line longer than 16 MiB" in res.stderr
    assert peak < 512, peak  # the line is 1,024 MiB


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    X = np.random.default_rng(3).normal(size=(60, 2))
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=5, random_state=0)
    model.fit(X, X[:, 0] > 0).save(d / "m.zarr")
    return d / "m.zarr"


def _copy(saved, tmp_path):
    copy = tmp_path / "m.zarr"
    shutil.copytree(saved, copy)
    return copy


def _grown_by(call):
    """Run ``call``; the growth of this process's peak resident memory (MiB)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    call()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def _bomb(nbytes):
    """A zstd frame that declares (and holds) ``nbytes`` of zeros: a few kB."""
    return numcodecs.zstd.compress(np.zeros(nbytes, dtype=np.uint8), 1)


def test_a_zstd_bomb_in_a_model_store_is_refused_before_decoding(saved, tmp_path):
    """The hostile pass's case: a 258 KB zstd chunk in a model store cost 8.6 GB."""
    copy = _copy(saved, tmp_path)
    bomb = _bomb(768 * MiB)
    (copy / "whitening" / "c" / "0" / "0").write_bytes(bomb)
    assert len(bomb) < 64 * 1024

    def load():
        with pytest.raises(StoreError, match=r"'whitening' is missing or unreadable "
                           r"\(ValueError: a zstd chunk that decompresses to 805306368 "
                           r"bytes, where its array's chunk holds at most 1224"):
            load_model(copy)
    assert _grown_by(load) < 256


def test_a_zstd_bomb_in_a_data_chunk_is_named_not_decoded(tmp_path, threads_client):
    """The hostile pass's case: a 66 KB data chunk cost 2.3 GB.  Scoring refuses it
    naming the chunk and its rows, without decoding it."""
    from saspa_dask.storage import ingest

    X = np.random.default_rng(4).normal(size=(3_000, 3))
    np.save(tmp_path / "d.npy", np.column_stack([X, X[:, 0] > 0]))
    ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=1_000)
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=4).fit(X, X[:, 0] > 0)
    model.save(tmp_path / "m.zarr")
    (tmp_path / "d.zarr" / "X" / "c" / "1" / "0").write_bytes(_bomb(512 * MiB))

    def score():
        with pytest.raises(jobs.JobError, match=r"chunk 1 of 'X' \(rows 1000 to 1999\) "
                           r"cannot be read as stored \(ValueError: a zstd chunk that "
                           r"decompresses to 536870912 bytes"):
            jobs.score(tmp_path / "m.zarr", tmp_path / "d.zarr", tmp_path / "s.zarr",
                       client=threads_client)
    assert _grown_by(score) < 256


def test_truncated_foreign_and_linked_chunks_are_named(tmp_path, threads_client):
    """The hostile pass's cases: a truncated or foreign zstd chunk, or a chunk file
    that is a link to another file, gave `unexpected RuntimeError: Zstd decompression
    error`.  Each is now named with its chunk."""
    from saspa_dask.storage import ingest

    X = np.random.default_rng(5).normal(size=(2_000, 2))
    np.save(tmp_path / "d.npy", np.column_stack([X, X[:, 0] > 0]))
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=4).fit(X, X[:, 0] > 0)
    model.save(tmp_path / "m.zarr")
    chunk_of = {"truncated": lambda c: c.write_bytes(c.read_bytes()[:9]),
                "foreign": lambda c: c.write_bytes(b"PK\x03\x04 not a zstd frame"),
                "linked": lambda c: (c.unlink(), c.symlink_to(tmp_path / "d.npy"))}
    for case, damage in chunk_of.items():
        store = tmp_path / f"{case}.zarr"
        ingest(tmp_path / "d.npy", store, chunk_rows=1_000)
        damage(store / "X" / "c" / "1" / "0")
        with pytest.raises(jobs.JobError, match=r"chunk 1 of 'X' \(rows 1000 to 1999\) "
                                                 r"cannot be read as stored \(ValueError"):
            jobs.score(tmp_path / "m.zarr", store, tmp_path / f"{case}-s.zarr",
                       client=threads_client)


def test_metadata_claiming_gigabytes_of_fill_values_is_refused(saved, tmp_path):
    """The hostile pass's case: a model array with fill value 0 and a declared shape
    of 1e9 cost 8.2 GB before "site arrays differ in shape".  Shapes are checked
    against the model's own dimensions first; a store from before those were recorded
    (no training-row count, no checksum) is held to the chunks it stores."""
    for old in (False, True):
        copy = tmp_path / f"old-{old}" / "m.zarr"
        shutil.copytree(saved, copy)
        meta_path = copy / "sites_tau" / "zarr.json"
        meta = json.loads(meta_path.read_text())
        meta.update(shape=[10**9], fill_value=0.0)
        meta_path.write_text(json.dumps(meta))
        if old:
            group_meta = json.loads((copy / "zarr.json").read_text())
            for key in ("checksum", "n_training_rows"):
                del group_meta["attributes"][key]
            (copy / "zarr.json").write_text(json.dumps(group_meta))
        message = (r"'sites_tau' claims shape \(1000000000,\) but only 1 of its" if old
                   else r"'sites_tau' has shape \(1000000000,\), expected \(60,\)")

        def load():
            with pytest.raises(StoreError, match=message):
                load_model(copy)
        assert _grown_by(load) < 256


def _edit_attrs(store, **changes):
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"].update(changes)
    (store / "zarr.json").write_text(json.dumps(meta))


def test_a_model_edited_after_saving_is_refused(tmp_path):
    """The hostile pass's cases: y_mean set to 1e308 gave probability 1.0 for every
    row; swapped feature names silently reordered the inputs.  Each edit (and an edited
    array, the sites included) now fails the checksum recorded at saving, naming the
    store, whether the whole estimator is loaded or only the posterior scoring reads."""
    import pandas as pd

    from saspa_dask.models.model_reader import read_fitted_posterior

    rng = np.random.default_rng(6)
    X = pd.DataFrame(rng.normal(size=(80, 2)), columns=["age", "income"])
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=4).fit(X, X["age"] > 0)
    model.save(tmp_path / "m.zarr")
    np.testing.assert_allclose(load_model(tmp_path / "m.zarr").predict_proba(X),
                               model.predict_proba(X), rtol=1e-12)
    fitted, _ = read_fitted_posterior(tmp_path / "m.zarr")
    np.testing.assert_allclose(fitted.class_probabilities(*fitted.latent(X.to_numpy())),
                               model.predict_proba(X), rtol=1e-12)
    edits = {"y_mean": {"y_mean": 1e308}, "names": {"feature_names": ["income", "age"]}}
    for name, change in edits.items():
        store = tmp_path / f"{name}.zarr"
        shutil.copytree(tmp_path / "m.zarr", store)
        _edit_attrs(store, **change)
        for read in (load_model, read_fitted_posterior):
            with pytest.raises(StoreError, match=f"{store}: its content differs from the "
                                                 "checksum recorded when it was saved"):
                read(store)
    for array in ("posterior_h", "sites_tau"):
        store = tmp_path / f"{array}.zarr"
        shutil.copytree(tmp_path / "m.zarr", store)
        group = zarr.open_group(str(store), mode="r+")
        group[array][0] = group[array][0] + 1.0
        for read in (load_model, read_fitted_posterior):
            with pytest.raises(StoreError, match="differs from the checksum"):
                read(store)


def test_codecs_without_a_bound_are_refused(tmp_path):
    """A data store whose X uses a compressor the package does not bound (lzma) is
    refused, naming the store, the array and the codec."""
    from numcodecs import LZMA
    from zarr.codecs.numcodecs import LZMA as LZMACodec

    from saspa_dask.storage.data_store import open_data_store

    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    X = group.create_array("X", shape=(10, 2), chunks=(5, 2), dtype="f8",
                           compressors=[LZMACodec()])
    X[...] = np.ones((10, 2))
    group.create_array("y", shape=(10,), chunks=(5,), dtype="f8")[...] = np.zeros(10)
    assert LZMA  # the codec exists: the refusal is the package's
    with pytest.raises(StoreError, match=r"array 'X' uses the codec 'numcodecs.lzma', "
                                         r"which saspa does not read"):
        open_data_store(tmp_path / "d.zarr")
