"""Layer 4, fitting: hyperparameters, the evidence gradient, the optimiser, the trainer.

- :mod:`~saspa_dask.fitting.hyperparameters`: values, which are learnt, bounds, logs;
- :mod:`~saspa_dask.fitting.gradient`: d log Z_EP / d theta as per-chunk sums;
- :mod:`~saspa_dask.fitting.optimizer`: L-BFGS-B over the log hyperparameters;
- :mod:`~saspa_dask.fitting.trainer`: EP on shared blocks for one or more problems,
  at fixed hyperparameters or maximising the evidence (with restarts).
"""
