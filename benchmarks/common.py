"""Shared pieces of the benchmark scripts: datasets, splits, metrics, machine facts."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parents[1] / "shared" / "datasets"
FIGURES = HERE / "figures"
RESULTS = HERE / "results"


def load_csv(name):
    """(X, y_raw) of ``../shared/datasets/NAME.csv``: numeric inputs, last column target."""
    path = DATASETS / f"{name}.csv"
    if not path.exists():
        raise SystemExit(f"dataset {path} is missing (see ../shared/datasets/README.md)")
    raw = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=str)
    return raw[:, :-1].astype(float), raw[:, -1]


def spambase():
    """Spambase with log1p on the heavy-tailed counts (standardised per split)."""
    X, y = load_csv("spambase")
    return np.log1p(X), (y.astype(float) > 0).astype(int)


def ionosphere():
    X, y = load_csv("ionosphere")
    return X, (y == "g").astype(int)


def split(X, y, n_train, seed, n_test=None):
    """Random split; inputs standardised with the training rows' mean and std."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    train = order[:n_train]
    test = order[n_train:] if n_test is None else order[n_train:n_train + n_test]
    mean, std = X[train].mean(0), X[train].std(0)
    std[std == 0] = 1.0
    return (X[train] - mean) / std, y[train], (X[test] - mean) / std, y[test]


def error_and_nlp(p1, y):
    """Test error and mean negative log probability of the true labels, from
    P(y = 1); probabilities are clipped at 1e-12 so that one confident mistake shows
    as a large but finite NLP."""
    p = np.clip(np.where(y == 1, p1, 1 - p1), 1e-12, 1.0)
    return float(np.mean((p1 > 0.5) != (y == 1))), float(-np.mean(np.log(p)))


def versions(*names):
    out = {"python": platform.python_version()}
    for name in ("saspa-dask", "numpy", "scipy", "dask", "scikit-learn", *names):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine():
    import psutil

    return (f"{platform.machine()}, {os.cpu_count()} cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.system()}")


def regression_scores(mean, var, y):
    """Test RMSE and NLPD of y under N(mean, var) per row."""
    from scipy.stats import norm

    return {"rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
            "nlpd": float(-norm.logpdf(y, mean, np.sqrt(var)).mean())}


def mean_se(values):
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0


def add_outdir_option(parser):
    parser.add_argument("--outdir", help="write results/ and figures/ here "
                                         "(default: benchmarks/)")


def use_outdir(args):
    """Point FIGURES and RESULTS at ``args.outdir`` if given (the tests' quick runs)."""
    global FIGURES, RESULTS
    if args.outdir:
        FIGURES, RESULTS = Path(args.outdir) / "figures", Path(args.outdir) / "results"


def start_report(args, matmul_rate, *packages, **fields):
    """A benchmark's report: the machine, the versions of the package and of
    ``packages``, the float64 matmul rate measured now (``matmul_rate()``, FLOP/s, said
    on stdout) and the arguments, plus ``fields``."""
    report = {"machine": machine(), "versions": versions(*packages),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args), **fields}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    return report


def parse(parser):
    """The arguments, with ``--outdir`` added and applied (:func:`use_outdir`)."""
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    return args
