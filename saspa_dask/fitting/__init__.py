"""Layer 4, fitting: a fit's plan and its result, hyperparameters, the evidence
gradient, the optimiser, the trainer.

- :mod:`~saspa_dask.fitting.plan`: :class:`FitPlan`, what a SASPA fit does, in order;
- :mod:`~saspa_dask.fitting.posterior`: :class:`FittedPosterior`, what predictions use;
- :mod:`~saspa_dask.fitting.basis_start`: where the bases start (given, K-means,
  frequency features);
- :mod:`~saspa_dask.fitting.phases`: the phases a plan lists (learning, then the model);
- :mod:`~saspa_dask.fitting.stages`: the subsample stages of full-batch learning;
- :mod:`~saspa_dask.fitting.stochastic`: stochastic learning on minibatches of every
  row (:mod:`~saspa_dask.fitting.anchors`: its global sums and anchors;
  :mod:`~saspa_dask.fitting.learning_records`; :mod:`~saspa_dask.fitting.minibatches`;
  :mod:`~saspa_dask.fitting.adam`);
- :mod:`~saspa_dask.fitting.settings`: the EP schedule, execution and stochastic settings;
- :mod:`~saspa_dask.fitting.policy`: every tuned number of the fit's policies, with why;
- :mod:`~saspa_dask.fitting.new_rows`: ADF and update passes over unseen rows;
- :mod:`~saspa_dask.fitting.progress`: what a fit prints while it runs;
- :mod:`~saspa_dask.fitting.hyperparameters`: values, which are learnt, bounds, logs;
- :mod:`~saspa_dask.fitting.input_groups`: starting lengthscales, input groups, additive
  terms;
- :mod:`~saspa_dask.fitting.learning_advice`: the warnings learning gives, and advice;
- :mod:`~saspa_dask.fitting.gradient`: d log Z_EP / d theta as per-chunk sums;
- :mod:`~saspa_dask.fitting.optimizer`: L-BFGS-B over the log hyperparameters;
- :mod:`~saspa_dask.fitting.trainer`: EP on shared blocks for one or more problems,
  at fixed hyperparameters or maximising the evidence (with restarts).
"""
