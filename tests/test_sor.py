"""Subset of regressors (``approximation="sor"``) against its closed form.

SoR replaces the prior by the degenerate Q = K(., B) K(B, B)^{-1} K(B, .) in training
and prediction alike (Smola & Bartlett; Quinonero-Candela & Rasmussen, eq. 16):

    mean(x*) = k*^T Sigma K(B, X) y / noise,   var(x*) = k*^T Sigma k*,
    Sigma = (K(B, B) + K(B, X) K(X, B) / noise)^{-1},

so its predictive variance falls to zero away from the data and the bases, where
DTC's and FITC's return to the signal variance.
"""

import numpy as np
import pytest

from saspa_dask import Basis, SASPAClassifier, SASPARegressor, load_model

from reference import se


def _problem(seed=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(120, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=120)
    Z = X[rng.choice(120, 10, replace=False)]
    # on the data, at the edge, 3, 6 and 12 lengthscales beyond it
    Xs = np.array([[0.3, -0.4], [2.0, 2.0], [5.0, 0.0], [8.0, 0.0], [14.0, 0.0]])
    return X, y, Z, Xs


def _fit(X, y, Z, approximation):
    return SASPARegressor(bases=Basis(Z), blur="delta", approximation=approximation,
                          lengthscale=[0.9, 1.2], signal_variance=1.4, noise_variance=0.05,
                          jitter=1e-8, optimize_hyperparameters=False,
                          ep={"tol": 1e-12}).fit(X, y)


def test_sor_prediction_equals_its_closed_form():
    X, y, Z, Xs = _problem()
    model = _fit(X, y, Z, "sor")
    ls, s2, noise = np.array([0.9, 1.2]), 1.4, 0.05
    Kuu = se(Z, Z, ls, s2) + 1e-8 * s2 * np.eye(len(Z))
    Kuf, Kus = se(Z, X, ls, s2), se(Z, Xs, ls, s2)
    precision = Kuu + Kuf @ Kuf.T / noise
    yc = y - y.mean()
    mean = Kus.T @ np.linalg.solve(precision, Kuf @ yc) / noise + y.mean()
    var = np.einsum("ij,ij->j", Kus, np.linalg.solve(precision, Kus))
    got_mean, got_std = model.predict(Xs, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_std ** 2, var + noise, rtol=1e-7, atol=1e-12)
    latent_sd = np.sqrt(var)
    # the closed form's variance falls to (numerically) zero away from the bases ...
    assert latent_sd[-1] < 1e-12 < latent_sd[0]
    assert np.all(np.diff(latent_sd[2:]) < 0)
    # ... where DTC (same training) keeps the prior's: equal means, larger variances
    dtc_mean, dtc_std = _fit(X, y, Z, "dtc").predict(Xs, return_std=True)
    np.testing.assert_allclose(dtc_mean, got_mean, rtol=1e-10, atol=1e-12)
    assert dtc_std[-1] ** 2 == pytest.approx(s2 + noise, rel=1e-9)


def test_sor_survives_saving_and_classifies(tmp_path):
    X, y, Z, Xs = _problem()
    model = _fit(X, y, Z, "sor")
    model.save(tmp_path / "sor.zarr")
    loaded = load_model(tmp_path / "sor.zarr")
    np.testing.assert_array_equal(loaded.predict(Xs, return_std=True),
                                  model.predict(Xs, return_std=True))
    labels = (y > y.mean()).astype(int)
    latent = {}
    for approximation in ("sor", "dtc"):
        clf = SASPAClassifier(bases=Basis(Z), blur="delta", approximation=approximation,
                              lengthscale=[0.9, 1.2], signal_variance=1.4,
                              optimize_hyperparameters=False).fit(X, labels)
        latent[approximation] = clf.fitted_posterior_.latent(Xs)
    # the same EP fit; SoR's variance lacks exactly the prior's residual s2 - Q(x*, x*)
    ls, s2 = np.array([0.9, 1.2]), 1.4
    Kuu = se(Z, Z, ls, s2) + 1e-8 * s2 * np.eye(len(Z))
    Kus = se(Z, Xs, ls, s2)
    residual = s2 - np.einsum("ij,ij->j", Kus, np.linalg.solve(Kuu, Kus))
    np.testing.assert_allclose(latent["sor"][0], latent["dtc"][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(latent["sor"][1][:, 0], latent["dtc"][1][:, 0] - residual,
                               rtol=1e-7, atol=1e-9)


def test_every_approximation_survives_a_store_and_old_stores_read_as_they_predicted(tmp_path):
    """A model store records its approximation by name; a store written before that
    (only ``projected_prediction``) reads as what it predicted: SoR when set, else
    FITC, whose predictions DTC shares.  A wrong name is refused, naming the
    attribute."""
    import zarr

    from saspa_dask.files.errors import StoreError
    from saspa_dask.parameters import APPROXIMATIONS

    X, y, Z, Xs = _problem()
    for approximation in APPROXIMATIONS:
        model = _fit(X, y, Z, approximation)
        path = tmp_path / f"{approximation}.zarr"
        model.save(path)
        loaded = load_model(path)
        assert loaded.fitted_posterior_.approximation.name == approximation
        np.testing.assert_array_equal(loaded.predict(Xs, return_std=True),
                                      model.predict(Xs, return_std=True))
        group = zarr.open_group(str(path), mode="r+")
        # as an older version wrote it (one from before checksums: an edited store with
        # a checksum is refused, tests/test_bombs.py)
        for key in ("approximation", "checksum"):
            del group.attrs[key]
        group.attrs["format_version"] = 4  # stores of 5 and later always have a checksum
        old = load_model(path)
        assert old.fitted_posterior_.approximation.name == (
            "sor" if approximation == "sor" else "fitc")
        np.testing.assert_array_equal(old.predict(Xs, return_std=True),
                                      model.predict(Xs, return_std=True))
        assert old.fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()
    group.attrs["approximation"] = "nystrom"
    with pytest.raises(StoreError, match="attribute 'approximation' must be one of "
                                         "fitc, dtc, sor, not 'nystrom'"):
        load_model(path)
