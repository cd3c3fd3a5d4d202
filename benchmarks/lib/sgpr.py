"""GPyTorch's SGPR: Titsias' collapsed variational bound, the peer of full-batch
regression with inducing points (``gpytorch.kernels.InducingPointKernel``).

The model: ARD RBF kernel with a scale, constant mean, Gaussian noise, inducing inputs
started at given centres (K-means) and learnt; unit lengthscales and signal variance and
a tenth of the targets' variance as noise to start.  Training: SciPy's L-BFGS-B on the
bound and its torch gradient, in float64, scored at budgets of CPU seconds (of its
iterations; the scoring outside the clock).  torch's own L-BFGS was tried first: its
strong-Wolfe line search failed on Pole Telecomm after 7-9 iterations and left it there.
"""

from __future__ import annotations

import time

import numpy as np

from .metrics import regression_scores


def sgpr_model(X, y, centres):
    """The SGPR model and its Gaussian likelihood on float64 tensors of (X, y)."""
    import gpytorch
    import torch

    class SGPR(gpytorch.models.ExactGP):
        def __init__(self, train_x, train_y, likelihood):
            super().__init__(train_x, train_y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            base = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=train_x.shape[1]))
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                base, inducing_points=torch.tensor(centres, dtype=torch.float64),
                likelihood=likelihood)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = SGPR(torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64),
                 likelihood).double()
    # GPflow's start for standardised data (GPyTorch's softplus(0) = 0.69 lengthscales
    # sent the bound to its noise-only optimum on Kin-40k): unit lengthscales and signal,
    # noise a tenth of the targets' variance
    model.covar_module.base_kernel.base_kernel.lengthscale = 1.0
    model.covar_module.base_kernel.outputscale = 1.0
    likelihood.noise = 0.1 * float(np.var(y))
    return model, likelihood


def learnt_values(model, likelihood):
    """What the model has learnt, as plain arrays and floats: its inducing inputs,
    ARD lengthscales, signal and noise variances."""
    kernel = model.covar_module
    return {"inputs": kernel.inducing_points.detach().numpy().copy(),
            "lengthscale": kernel.base_kernel.base_kernel.lengthscale.detach().numpy().ravel(),
            "signal_variance": float(kernel.base_kernel.outputscale.detach()),
            "noise_variance": float(likelihood.noise.detach())}


def scores(model, likelihood, X, y):
    """Test RMSE and NLPD (targets in the units they were trained in)."""
    import gpytorch
    import torch

    model.eval()
    likelihood.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
        pred = likelihood(model(torch.tensor(X, dtype=torch.float64)))
        mean, var = pred.mean.numpy(), pred.variance.numpy()
    model.train()
    likelihood.train()
    return regression_scores(mean, var, y)


def train(X, y, centres, cpu_budgets, *, score, threads=1, max_iterations=5000):
    """SciPy's L-BFGS-B on the negative bound (torch's gradient of every parameter,
    flattened) until the last of ``cpu_budgets`` (CPU seconds of its iterations) or
    until it stops; ``score(model, likelihood)`` when a budget is reached, and at the
    end for the budgets it stopped short of.  Returns the rows: ``budget``,
    ``cpu_seconds``, ``iterations``, ``stopped`` (SciPy's message where it stopped
    first) and the scores."""
    import gpytorch
    import torch
    from scipy.optimize import minimize
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    torch.set_num_threads(threads)
    model, likelihood = sgpr_model(X, y, centres)
    model.train()
    likelihood.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    params = list(model.parameters())

    def loss_and_grad(x):
        vector_to_parameters(torch.as_tensor(x), params)
        for p in params:
            p.grad = None
        loss = -mll(model(*model.train_inputs), model.train_targets)
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        return float(loss.detach()), grad.detach().numpy().astype(np.float64)

    budgets, rows = sorted(cpu_budgets), []
    clock = {"spent": 0.0, "since": time.process_time(), "iterations": 0}

    def scored(stopped):
        return {"cpu_seconds": clock["spent"], "iterations": clock["iterations"],
                "stopped": stopped, **score(model, likelihood)}

    def each_iteration(intermediate_result):
        clock["spent"] += time.process_time() - clock["since"]
        clock["iterations"] += 1
        vector_to_parameters(torch.as_tensor(intermediate_result.x), params)
        while budgets and clock["spent"] >= budgets[0]:
            rows.append({"budget": budgets.pop(0), **scored(False)})
        if not budgets:
            raise StopIteration
        clock["since"] = time.process_time()  # the scoring outside the clock

    x0 = parameters_to_vector(params).detach().numpy().astype(np.float64)
    result = minimize(loss_and_grad, x0, jac=True, method="L-BFGS-B",
                      callback=each_iteration, options={"maxiter": max_iterations})
    if budgets:
        clock["spent"] += time.process_time() - clock["since"]
        vector_to_parameters(torch.as_tensor(result.x), params)
        final = scored(str(result.message))
        rows += [{"budget": b, **final} for b in budgets]
    return rows
