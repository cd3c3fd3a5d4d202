"""Layer 1, the mathematics: SE-ARD and blurred kernels, likelihoods, blurred bases.

Nothing here knows about EP, Dask or stores; every module is plain NumPy/SciPy.
Importing it sets the package's one BLAS thread policy (:mod:`.threads`).
"""

from .threads import use_one_scipy_blas_thread

use_one_scipy_blas_thread()
