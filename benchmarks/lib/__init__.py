"""What the benchmark scripts share.

- :mod:`lib.output`: where results and figures go (``--outdir``), saving reports;
- :mod:`lib.data`: the datasets of ``../shared/datasets`` and their splits;
- :mod:`lib.machine`: machine facts, package versions, the float64 matmul rate, a
  report's header;
- :mod:`lib.metrics`: test error, NLP, RMSE, NLPD, NMSE, MNLP, mean and standard error;
- :mod:`lib.commands`: running ``saspa`` commands timed and with their peak memory,
  the generated stores of the large runs;
- :mod:`lib.svgp`: GPyTorch's SVGP, the one peer driver (minibatch Adam on the ELBO,
  scored at budgets of wall time, CPU time or epochs).
"""
