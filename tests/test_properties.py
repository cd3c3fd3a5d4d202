"""Property-based: random job files and random CSV bytes end in a job's own error (a
message naming the file) or in success, never in an "unexpected" error."""

import string
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saspa_dask.files.errors import StoreError
from saspa_dask.jobs import JobError
from saspa_dask.pipelines import STEP_OPTIONS, load_job
from saspa_dask.storage.ingestion import ingest

KEYS = sorted({k for schema in STEP_OPTIONS.values() for k in schema} | {"kind"})
VALUES = st.sampled_from(['5', '-1', '1e20', '9223372036854775807', 'nan', 'inf', 'true',
                          '"x"', '"{date}"', '"{bad"', '""', '[1, "a"]', '["a", "b"]',
                          '{a = 1}', '[[1]]', '"train"', '"score"', '0.5', '"\\u0000"',
                          '[' * 40 + ']' * 40, '"models/{date}.zarr"'])
LINE = st.one_of(
    st.tuples(st.sampled_from(KEYS), VALUES).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.sampled_from(["[[steps]]", "[job]", "[cluster]", "[steps]", "steps = 5",
                     "name = \"n\"", "workers = 0", "timeout = 100000000000",
                     "scheduler = \"tcp://127.0.0.1:1\"", "[[steps.x]]"]),
    st.text(alphabet=string.printable + "\x00é", max_size=30))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, max_size=12), raw=st.binary(max_size=40))
def test_random_job_files_give_a_job_error_or_load(lines, raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.toml"
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + raw)
        try:
            load_job(path)
        except JobError as err:
            assert str(path) in str(err)


CELLS = st.sampled_from(["1", "2.5", "", "NA", "?", "x", "é", "1e309", "-0", '"a,b"',
                         '"multi\nline"', "\x00", "inf", " 3 ", "abc;def", "1\t2"])
ROW = st.lists(CELLS, min_size=1, max_size=4).map(lambda r: ",".join(r))


@settings(max_examples=60, deadline=None)
@given(header=st.lists(st.sampled_from(["a", "b", "y", "a", "", "é", "1", '"q,r"']),
                       min_size=1, max_size=4),
       rows=st.lists(ROW, max_size=8), tail=st.binary(max_size=24),
       options=st.fixed_dictionaries({
           "missing": st.sampled_from(["error", "drop-rows", "impute"]),
           "text": st.sampled_from(["error", "onehot", "drop"]),
           "chunk_rows": st.sampled_from([1, 3, 1 << 30])}))
def test_random_csv_bytes_give_a_store_error_or_a_store(header, rows, tail, options):
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "t.csv"
        source.write_bytes(("\n".join([",".join(header), *rows])).encode() + tail)
        try:
            attrs = ingest(source, Path(tmp) / "t.zarr", **options)
        except StoreError as err:
            assert "t.csv" in str(err) or "--chunk-rows" in str(err)
        else:
            assert attrs["n_rows"] >= 1 and attrs["complete"]
