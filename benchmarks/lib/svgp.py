"""GPyTorch's SVGP, the peer every comparison runs: one model, one training driver.

The model: ARD RBF kernel with a scale, constant mean, inducing inputs started at
given centres (K-means) and learnt, Cholesky variational distribution; a Bernoulli
(probit) likelihood for 0/1 labels or a Gaussian one.  Training: minibatch Adam on the
variational ELBO (GPyTorch's SVGP example), in float32, scored at budgets of wall time
(seconds of optimiser steps), CPU time, or epochs, the scoring outside the clock.
"""

from __future__ import annotations

import time

import numpy as np

from .metrics import error_and_nlp, regression_scores

CLOCKS = ("wall", "cpu", "epochs")


def svgp_model(centres, d, regression=False):
    """The SVGP model and its likelihood (module docstring)."""
    import gpytorch
    import torch

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, inducing):
            dist = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing, dist, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=d))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    torch.manual_seed(0)
    model = SVGP(torch.tensor(centres, dtype=torch.float32))
    if regression:
        return model, gpytorch.likelihoods.GaussianLikelihood()
    return model, gpytorch.likelihoods.BernoulliLikelihood()


def predict(model, likelihood, X, rows=10_000, fast=False):
    """Predictive mean and variance (float64) of rows of X; for the Bernoulli
    likelihood the mean is P(y = 1).  ``fast``: GPyTorch's fast predictive variances
    (what the classification comparisons used)."""
    import gpytorch
    import torch

    model.eval()
    likelihood.eval()
    means, variances = [], []
    with torch.no_grad(), gpytorch.settings.fast_pred_var(fast):
        for a in range(0, len(X), rows):
            pred = likelihood(model(torch.tensor(X[a:a + rows], dtype=torch.float32)))
            means.append(pred.mean.double().numpy())
            variances.append(pred.variance.double().numpy())
    model.train()
    likelihood.train()
    return np.concatenate(means), np.concatenate(variances)


def scores(model, likelihood, X, y, regression=True, y_mean=0.0, y_sd=1.0):
    """RMSE and NLPD (targets in their units: predictions times ``y_sd`` plus
    ``y_mean``), or test error and NLP of 0/1 labels."""
    mean, var = predict(model, likelihood, X, fast=not regression)
    if not regression:
        error, nlp = error_and_nlp(mean, y)
        return {"error": error, "nlp": nlp}
    return regression_scores(mean * y_sd + y_mean, var * y_sd**2, y)


def train(X, y, centres, budgets, *, regression=True, batch=256, lr=0.01, clock="wall",
          threads=2, score=None, report=None):
    """Minibatch Adam on the ELBO until the last of ``budgets`` (in ``clock`` units:
    seconds of optimiser steps, CPU seconds, or epochs).

    At each budget ``score(model, likelihood)`` (outside the clock) gives a dict of
    scores for the row; ``report(row)`` is told each row as it is made.

    Returns
    -------
    rows : list of dict
        ``budget``, ``seconds``, ``cpu_seconds``, ``steps``, ``epochs`` (fractional),
        and the scores.
    model, likelihood
    """
    import gpytorch
    import torch

    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    torch.set_num_threads(threads)
    Xt, yt = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    model, likelihood = svgp_model(centres, X.shape[1], regression=regression)
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=lr)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(yt))
    generator = torch.Generator().manual_seed(0)
    n, budgets, rows = len(yt), sorted(budgets), []
    spent = {"seconds": 0.0, "cpu_seconds": 0.0, "steps": 0, "epochs": 0.0}

    def reached():
        used = {"wall": spent["seconds"], "cpu": spent["cpu_seconds"],
                "epochs": spent["epochs"]}[clock]
        while budgets and used >= budgets[0] - 1e-12:
            row = {"budget": budgets.pop(0), **spent,
                   **(score(model, likelihood) if score else {})}
            rows.append(row)
            if report:
                report(row)

    while budgets:
        order = torch.randperm(n, generator=generator)
        for i in range(0, n, batch):
            start, cpu = time.perf_counter(), time.process_time()
            idx = order[i:i + batch]
            optimizer.zero_grad()
            loss = -mll(model(Xt[idx]), yt[idx])
            loss.backward()
            optimizer.step()
            spent["seconds"] += time.perf_counter() - start
            spent["cpu_seconds"] += time.process_time() - cpu
            spent["steps"] += 1
            spent["epochs"] = spent["epochs"] // 1 + min(i + batch, n) / n
            if clock != "epochs":
                reached()
            if not budgets:
                break
        else:  # a whole epoch
            spent["epochs"] = round(spent["epochs"])
            if clock == "epochs":
                reached()
    return rows, model, likelihood


def run_budgets(Xtr, ytr, Xte, yte, centres, budgets, batch=256, lr=0.01, by_cpu=False,
                regression=True):
    """SVGP trained on (Xtr, ytr) and scored on (Xte, yte) at each budget of wall
    seconds (or CPU seconds with ``by_cpu``, for a machine that runs other work too);
    the rows of :func:`train`."""
    rows, _, _ = train(Xtr, ytr, centres, budgets, regression=regression, batch=batch,
                       lr=lr, clock="cpu" if by_cpu else "wall",
                       score=lambda m, lik: scores(m, lik, Xte, yte, regression))
    return rows
