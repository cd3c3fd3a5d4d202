"""The datasets of ``../shared/datasets`` (its README) and their splits."""

from __future__ import annotations

import csv

import numpy as np

from .output import HERE

DATASETS = HERE.parents[1] / "shared" / "datasets"
# regression tables with random splits (bench_learnt_bases and its followers)
SETS = ("ailerons", "house_16h", "cpu_act", "california_housing")
# the SPGP and IDGP papers' own splits
PAPER_SETS = ("kin40k", "pumadyn32nm", "pol")


def _path(name):
    path = DATASETS / f"{name}.csv"
    if not path.exists():
        raise SystemExit(f"dataset {path} is missing (see ../shared/datasets/README.md)")
    return path


def load_csv(name):
    """(X, y_raw) of ``../shared/datasets/NAME.csv``: numeric inputs, last column target."""
    raw = np.genfromtxt(_path(name), delimiter=",", skip_header=1, dtype=str)
    return raw[:, :-1].astype(float), raw[:, -1]


def spambase():
    """Spambase with log1p on the heavy-tailed counts (standardised per split)."""
    X, y = load_csv("spambase")
    return np.log1p(X), (y.astype(float) > 0).astype(int)


def ionosphere():
    X, y = load_csv("ionosphere")
    return X, (y == "g").astype(int)


def random_split(X, y, n_train, seed, n_test=None):
    """A seeded random split; inputs standardised with the training rows' mean and
    std (targets as they are)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    train = order[:n_train]
    test = order[n_train:] if n_test is None else order[n_train:n_train + n_test]
    mean, std = X[train].mean(0), X[train].std(0)
    std[std == 0] = 1.0
    return (X[train] - mean) / std, y[train], (X[test] - mean) / std, y[test]


def load_regression(name):
    """A regression table of :data:`SETS`: rows with a missing input dropped, the
    text column of california_housing dropped, house_16h's prices as log1p."""
    with open(_path(name)) as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    keep = [k for k, h in enumerate(header[:-1]) if h != "ocean_proximity"]
    X = np.array([[float(r[k]) if r[k] != "" else np.nan for k in keep] for r in body])
    y = np.array([float(r[-1]) for r in body])
    ok = np.all(np.isfinite(X), axis=1)
    X, y = X[ok], y[ok]
    if name == "house_16h":
        y = np.log1p(y)
    return X, y


def held_out_split(X, y, seed, train_rows):
    """A fifth of the rows held out (seeded), at most ``train_rows`` of the rest for
    training; inputs and targets standardised on the training rows."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = len(y) // 5
    test, train = order[:n_test], order[n_test:][:train_rows]
    mx, sx = X[train].mean(0), X[train].std(0)
    sx[sx == 0] = 1.0
    my, sy = y[train].mean(), y[train].std()
    return ((X[train] - mx) / sx, (y[train] - my) / sy, (X[test] - mx) / sx,
            (y[test] - my) / sy)


def add_paper_set_options(parser, sets=("pol", "kin40k", "pumadyn32nm"), seeds=(0, 1, 2),
                          bases=64, resplit=False):
    """``--sets``, ``--seeds``, ``--bases`` and ``--rows`` of a benchmark on the papers'
    splits (:func:`paper_split`), with these defaults; with ``resplit``, ``--resplit``
    and ``--resplit-seed`` too."""
    parser.add_argument("--sets", nargs="+", default=list(sets))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds))
    parser.add_argument("--bases", type=int, default=bases,
                        help=None if bases else "default: the estimator's")
    parser.add_argument("--rows", type=int, default=None, help="first training rows only")
    if not resplit:
        return
    parser.add_argument("--resplit", type=int, default=None, metavar="TRAIN_ROWS",
                        help="pool the split's rows and deal TRAIN_ROWS of them, seeded "
                             "by --resplit-seed, to training, the rest to test")
    parser.add_argument("--resplit-seed", type=int, default=0)


def paper_split(name, rows=None, resplit=None, resplit_seed=0):
    """(Xtr, ytr, Xte, yte, y sd) of a papers' split (:data:`PAPER_SETS`), inputs and
    targets standardised on its training rows (then only the first ``rows`` of them
    kept, if given).  ``resplit``: the split's training and test rows pooled, and
    ``resplit`` of them (a permutation seeded by ``resplit_seed``) the training rows."""
    out = []
    for part in ("train", "test"):
        data = np.loadtxt(_path(f"{name}_{part}"), delimiter=",", skiprows=1)
        out += [data[:, :-1], data[:, -1]]
    Xtr, ytr, Xte, yte = out
    if resplit is not None:
        X, y = np.vstack([Xtr, Xte]), np.concatenate([ytr, yte])
        order = np.random.default_rng(resplit_seed).permutation(len(y))
        Xtr, ytr = X[order[:resplit]], y[order[:resplit]]
        Xte, yte = X[order[resplit:]], y[order[resplit:]]
    mean, std = Xtr.mean(0), Xtr.std(0)
    std[std == 0] = 1.0
    y_mean, y_std = ytr.mean(), ytr.std()
    return ((Xtr[:rows] - mean) / std, (ytr[:rows] - y_mean) / y_std, (Xte - mean) / std,
            (yte - y_mean) / y_std, float(y_std))


def two_gaussians(rng, n):
    """The SASPA paper's two-class problem: each class a 2-D Gaussian with its own
    random mean and full covariance, labels equally likely."""
    means = rng.normal(scale=1.2, size=(2, 2))
    covs = []
    for _ in range(2):
        rot = np.linalg.qr(rng.normal(size=(2, 2)))[0]
        covs.append(rot @ np.diag(rng.uniform(0.1, 1.5, 2)) @ rot.T)
    y = rng.integers(0, 2, n)
    X = np.stack([rng.multivariate_normal(means[k], covs[k]) for k in y])
    return X, y


def multiscale_rows(seed, n=25_000):
    """multiscale_regression rows and the noise variance that generated them: a
    signal with structure at several length scales that 64 bases do not resolve."""
    from saspa_dask.datasets import multiscale_regression

    X, y, f = multiscale_regression(n, 8, seed=100 + seed)
    return X, y, float((0.1 * f.std()) ** 2)


def smooth_rows(seed, n=25_000):
    """A smooth 3-input signal, sin(2 x0) + x1 x2 / 2, that 64 bases resolve, with
    Gaussian noise of variance 0.01: what is left after the signal is noise."""
    rng = np.random.default_rng(200 + seed)
    X = rng.normal(size=(n, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y, 0.01
