"""The package's one BLAS thread policy (``saspa_dask/core/threads.py``)."""

import json
import subprocess
import sys

PROBE = """
import json, numpy, scipy.linalg
from threadpoolctl import threadpool_info
before = {i["filepath"]: i["num_threads"] for i in threadpool_info()
          if i["user_api"] == "blas"}
import saspa_dask.core
after = {i["filepath"]: i["num_threads"] for i in threadpool_info()
         if i["user_api"] == "blas"}
print(json.dumps([before, after]))
"""


def test_importing_the_mathematics_sets_scipys_own_blas_pool_to_one_thread():
    """In a fresh process with two BLAS threads allowed: after ``import
    saspa_dask.core``, SciPy's separate OpenBLAS (when it has one) runs one thread
    and NumPy's keeps what it had; with one shared BLAS nothing changes."""
    env = {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "PATH": ""}
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    before, after = json.loads(res.stdout)
    assert before.keys() == after.keys()
    numpy_paths = {p for p in before if "numpy" in p}
    scipy_own = [p for p in before if "scipy" in p and "numpy" not in p and numpy_paths]
    for path in before:
        expected = 1 if path in scipy_own else before[path]
        assert after[path] == expected, (path, before, after)
    for path in numpy_paths:
        assert after[path] == before[path] == 2
