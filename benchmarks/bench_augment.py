"""Augmented prediction against plain FITC and DTC prediction, near and away from the bases.

Gaussian regression, the same K-means bases and hyperparameters for every method
(learnt by the FITC evidence, bases kept where K-means put them): FITC and DTC
prediction, the same two augmented (each test row joins the bases,
``predict(..., augment=(X, y))``), and the exact GP with the same hyperparameters.
Test rows are split by their distance to the nearest basis (in lengthscale units) at
its median: "near" (the closer half) and "away" (the farther half).  Reported: test NLPD of y (with the noise), RMSE and
the mean predictive sd per group.  Data: a 1-D toy (600 rows on [-4, 4], 6 bases) and
california_housing (2,000 training rows, 16 bases).  Writes results/augment.json and
figures/augment.png (the 1-D toy's predictive bands).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from exact_gp import ExactGP
from lib import machine, metrics, output
from lib.data import held_out_split, load_regression


def _toy():
    rng = np.random.default_rng(0)
    f = lambda x: np.sin(2 * x) + 0.3 * x  # noqa: E731
    X = rng.uniform(-4, 4, (600, 1))
    Xt = np.linspace(-4, 4, 801)[:, None]
    return X, f(X[:, 0]) + 0.15 * rng.normal(size=600), Xt, f(Xt[:, 0]) + 0.15 * rng.normal(size=801)


def _california():
    X, y = load_regression("california_housing")
    Xtr, ytr, Xte, yte = held_out_split(X, y, 0, 2000)
    return Xtr, ytr, Xte[:1000], yte[:1000]


def _groups(model, Xt):
    scaled = (Xt[:, None, :] - model.bases_.means[None]) / model.lengthscale_
    nearest = np.sqrt((scaled ** 2).sum(-1)).min(1)
    cut = np.median(nearest)
    return {"near": nearest < cut, "away": nearest >= cut}


def run(name, X, y, Xt, yt, M):
    from saspa_dask import SASPARegressor

    # no learnt constant mean: every prediction below (and the exact GP's) has the
    # targets' mean as its prior mean, so that they differ only in how they predict
    fitc = SASPARegressor(M, blur="delta", learn_bases=False, learn_offset=False,
                          random_state=0).fit(X, y)
    hyper = dict(bases=fitc.bases_, blur="delta", lengthscale=fitc.lengthscale_,
                 signal_variance=fitc.signal_variance_, noise_variance=fitc.noise_variance_,
                 optimize_hyperparameters=False)
    dtc = SASPARegressor(**hyper, approximation="dtc").fit(X, y)
    # the exact GP at the same hyperparameters (no fitting): the reference posterior
    exact = ExactGP().condition(X, y - y.mean(), fitc.lengthscale_, fitc.signal_variance_,
                                fitc.noise_variance_)
    predictions = {"FITC": fitc.predict(Xt, return_std=True),
                   "DTC": dtc.predict(Xt, return_std=True),
                   "FITC, augmented": fitc.predict(Xt, return_std=True, augment=(X, y)),
                   "DTC, augmented": dtc.predict(Xt, return_std=True, augment=(X, y))}
    mean, var = exact.predict_latent(Xt)
    predictions["exact GP"] = (mean + y.mean(), np.sqrt(var + fitc.noise_variance_))
    groups = _groups(fitc, Xt)
    rows = []
    for method, (mu, sd) in predictions.items():
        for group, mask in groups.items():
            rows.append({"set": name, "method": method, "group": group,
                         "n": int(mask.sum()),
                         **metrics.regression_scores(mu[mask], sd[mask] ** 2, yt[mask]),
                         "mean_sd": float(sd[mask].mean())})
    return rows, predictions, fitc


def plot(X, y, Xt, predictions, fitc, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["DTC", "DTC, augmented", "FITC", "FITC, augmented", "exact GP"]
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3), sharey=True)
    for ax, name in zip(axes, names):
        mu, sd = predictions[name]
        ax.plot(X[:, 0], y, ".", ms=1.5, color="0.6")
        ax.plot(Xt[:, 0], mu, "b")
        ax.fill_between(Xt[:, 0], mu - 2 * sd, mu + 2 * sd, color="b", alpha=0.15)
        ax.plot(fitc.bases_.means[:, 0], np.full(fitc.bases_.n_bases, y.min() - 0.5), "r+")
        ax.set_title(name, fontsize=9)
    fig.tight_layout()
    output.FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    output.add_outdir_option(parser)
    output.use_outdir(parser.parse_args())
    rows = []
    X, y, Xt, yt = _toy()
    part, predictions, fitc = run("1-D toy", X, y, Xt, yt, 6)
    rows += part
    plot(X, y, Xt, predictions, fitc, output.FIGURES / "augment.png")
    rows += run("california_housing", *_california(), 16)[0]
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    (output.RESULTS / "augment.json").write_text(json.dumps(
        {"machine": machine.machine(), "rows": rows}, indent=1))
    print("| set | method | group (rows) | test NLPD | RMSE | mean sd |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['set']} | {r['method']} | {r['group']} ({r['n']}) | {r['nlpd']:.3f} | "
              f"{r['rmse']:.4f} | {r['mean_sd']:.3f} |")


if __name__ == "__main__":
    main()
