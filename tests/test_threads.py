"""The package's one BLAS thread policy (``saspa_dask/core/threads.py``): SciPy's own
OpenBLAS at one thread while the package works, the caller's setting untouched before
and after (issue 56: it was set for the whole process on import)."""

import json
import subprocess
import sys

PROBE = """
import json, numpy as np, scipy.linalg
from threadpoolctl import threadpool_info

def pools():
    return {i["filepath"]: i["num_threads"] for i in threadpool_info()
            if i["user_api"] == "blas"}

before = pools()
import saspa_dask
from saspa_dask import SASPAClassifier
after_import = pools()
during = []
X = np.random.default_rng(0).normal(size=(400, 2))
SASPAClassifier(n_bases=8, optimize_hyperparameters=False).fit(
    X, X[:, 0] > 0, progress=lambda record: during.append(pools()))
print(json.dumps([before, after_import, during[0], pools()]))
"""


def test_scipys_own_blas_pool_is_one_thread_inside_a_fit_and_as_it_was_outside():
    """In a fresh process with two BLAS threads allowed: importing the package changes
    no pool; inside a fit SciPy's separate OpenBLAS (when it has one) runs one thread
    and NumPy's keeps its two; after the fit every pool is as it was.  With one shared
    BLAS nothing changes at all."""
    env = {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "PATH": ""}
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    before, after_import, during, after = json.loads(res.stdout)
    assert after_import == before and after == before
    numpy_paths = {p for p in before if "numpy" in p}
    scipy_own = [p for p in before if "scipy" in p and "numpy" not in p and numpy_paths]
    for path in before:
        assert during[path] == (1 if path in scipy_own else before[path]), (path, during)
    for path in numpy_paths:
        assert during[path] == before[path] == 2


NESTED = """
import json, threading
from threadpoolctl import threadpool_limits
from saspa_dask.core.threads import one_scipy_blas_thread, scipy_blas_pools

pools = scipy_blas_pools()
with threadpool_limits(2):
    outside = [lib.num_threads for lib in pools]
    seen = []

    def work():
        with one_scipy_blas_thread():
            seen.append([lib.num_threads for lib in pools])

    with one_scipy_blas_thread():
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        inside = [lib.num_threads for lib in pools]
    after = [lib.num_threads for lib in pools]
print(json.dumps([outside, seen, inside, after]))
"""


def test_nested_and_concurrent_blocks_put_back_what_was_there():
    """The first of nested or concurrent blocks sets the pool, the last restores it (in
    a fresh process: no other thread of the test run holds a block meanwhile)."""
    env = {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "PATH": ""}
    res = subprocess.run([sys.executable, "-c", NESTED], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    outside, seen, inside, after = json.loads(res.stdout)
    assert outside == after and all(n == 2 for n in outside)
    assert all(n == 1 for n in inside) and len(seen) == 4
    assert all(n == 1 for threads in seen for n in threads)


CLI_PROBE = """
import os, sys
import saspa_dask.cli as cli
loaded_first = "numpy" in sys.modules  # OpenBLAS reads its settings when NumPy loads it
sys.argv = ["saspa", "make-data", sys.argv[1], "--rows", "50"]
try:
    cli.run()
except SystemExit:
    pass
print(loaded_first, "numpy" in sys.modules, os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
"""


def test_the_saspa_program_sets_openblas_idle_threads_to_sleep_before_numpy_loads(tmp_path):
    """The ``saspa`` program sets OPENBLAS_THREAD_TIMEOUT before NumPy (and so
    OpenBLAS) is loaded, and keeps a value the environment gives."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    for given, expected in ((None, "4"), ("9", "9")):
        if given is not None:
            env["OPENBLAS_THREAD_TIMEOUT"] = given
        res = subprocess.run([sys.executable, "-c", CLI_PROBE, str(tmp_path / f"{expected}.npy")],
                             capture_output=True, text=True, timeout=120, env=env)
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[-1].split() == ["False", "True", expected], res.stdout
