"""Scores of predictions against test targets."""

from __future__ import annotations

import numpy as np


def error_and_nlp(p1, y):
    """Test error and mean negative log probability of the true labels, from
    P(y = 1); probabilities are clipped at 1e-12 so that one confident mistake shows
    as a large but finite NLP."""
    p = np.clip(np.where(y == 1, p1, 1 - p1), 1e-12, 1.0)
    return float(np.mean((p1 > 0.5) != (y == 1))), float(-np.mean(np.log(p)))


def regression_scores(mean, var, y):
    """Test RMSE and NLPD of y under N(mean, var) per row."""
    from scipy.stats import norm

    return {"rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
            "nlpd": float(-norm.logpdf(y, mean, np.sqrt(var)).mean())}


def nmse_mnlp(mean, var, y, y_train_mean=0.0):
    """The IDGP paper's NMSE (squared error over the test targets' squared deviation
    from the training mean) and MNLP (mean negative log predictive density)."""
    nmse = np.mean((y - mean) ** 2) / np.mean((y - y_train_mean) ** 2)
    mnlp = np.mean(0.5 * (y - mean) ** 2 / var + 0.5 * np.log(2 * np.pi * var))
    return float(nmse), float(mnlp)


def mean_se(values):
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0


def bernoulli_kl(p, q):
    """KL(Bernoulli(p) || Bernoulli(q)) per entry, probabilities clipped at 1e-12."""
    p, q = (np.clip(a, 1e-12, 1 - 1e-12) for a in (p, q))
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
