"""A ``SASPARegressor`` fitted as the learning benchmarks fit it: one BLAS thread, the
fit's process CPU seconds, and its held-out scores and learning's record."""

from __future__ import annotations

import time
import warnings

from threadpoolctl import threadpool_limits

from .metrics import regression_scores


def regressor_fit(Xtr, ytr, Xte, yte, keep_model=False, **params):
    """``SASPARegressor(**params)`` on (Xtr, ytr), scored on (Xte, yte): CPU seconds
    of the fit, test RMSE and NLPD, learning's iterations, stop reason and stages, the
    energy per training row and the learnt noise variance (and the model itself under
    ``"model"`` with ``keep_model``)."""
    from saspa_dask import SASPARegressor

    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # cap warnings: the stop reason is recorded
        began = time.process_time()
        model = SASPARegressor(**params).fit(Xtr, ytr)
        cpu = time.process_time() - began
        mean, var = model.predict_latent(Xte)
    info = model.hyperparameter_info_
    return {"cpu_seconds": cpu,
            **regression_scores(mean, var + model.noise_variance_, yte),
            "iterations": info.get("n_iterations"), "stop_reason": info.get("stop_reason"),
            "stages": [(s["rows"], s["n_iterations"]) for s in info.get("stages", [])],
            "energy_per_row": model.log_evidence_ / len(ytr),
            "noise_variance": float(model.noise_variance_),
            **({"start": info["start"]} if "learning_start" in info.get("start", {})
               else {}),
            **({"model": model} if keep_model else {})}
