"""Layer 1, the mathematics: SE-ARD and blurred kernels, likelihoods, blurred bases.

Nothing here knows about EP, Dask or stores; every module is plain NumPy/SciPy.  The
package's one BLAS thread policy, which its entry points take, is :mod:`.threads`.
"""
