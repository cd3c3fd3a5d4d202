"""The sparse approximation of the prior: what a row's latent value is made of.

A row sees f_i = phi_i^T v + e_i, where phi_i^T v is its projection on the bases and
e_i ~ N(0, lam_i) the residual they do not explain, lam_i = s2 - |phi_i|^2 (docs/design.md,
section 2).  The members of the family differ only in where they keep e_i:

======  ==========================  =====================
name    training (EP's likelihood)  prediction
======  ==========================  =====================
fitc    lam_i (SASPA, FITC, SPGP)   s2 - |phi|^2 added
dtc     0 (projected process)       s2 - |phi|^2 added
sor     0 (subset of regressors)    left out
======  ==========================  =====================

An :class:`Approximation` says which, once, and does what each place needs: the
residual variances a training block keeps (:meth:`training_residuals`), whether they
move with the hyperparameters (:attr:`residual_in_training`, for the gradient), and
the predictive variance (:meth:`predictive_variance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..parameters import APPROXIMATIONS

__all__ = ["Approximation", "DTC", "FITC", "SOR", "approximation_named"]


@dataclass(frozen=True)
class Approximation:
    """Where a sparse GP keeps the residual variance its bases do not explain.

    Parameters
    ----------
    name : str
        The estimators' ``approximation`` value.
    residual_in_training : bool
        Training rows see their residual variance lam_i (FITC); otherwise the
        likelihood sees the projection phi_i^T v only and lam_i is 0.
    residual_in_prediction : bool
        Predicted rows get the prior's residual s2 - |phi|^2 added to the variance;
        otherwise (subset of regressors) the variance is phi^T Sigma_v phi alone.
    """

    name: str
    residual_in_training: bool
    residual_in_prediction: bool

    def training_residuals(self, lam):
        """The residual variances a training block keeps: ``lam`` clipped at 0
        against round-off, or zeros when the rows see their projection only."""
        if not self.residual_in_training:
            return np.zeros_like(lam)
        return np.maximum(lam, 0.0)

    def predictive_variance(self, phi, projected_variance, signal_variance):
        """Latent variance at rows of whitened features ``phi`` whose projection has
        posterior variance ``projected_variance`` (phi^T Sigma_v phi)."""
        if not self.residual_in_prediction:
            return projected_variance
        residual = signal_variance - np.einsum("ij,ij->i", phi, phi)
        return np.maximum(residual, 0.0) + projected_variance


FITC = Approximation("fitc", residual_in_training=True, residual_in_prediction=True)
DTC = Approximation("dtc", residual_in_training=False, residual_in_prediction=True)
SOR = Approximation("sor", residual_in_training=False, residual_in_prediction=False)
_BY_NAME = {a.name: a for a in (FITC, DTC, SOR)}  # the parameter table's APPROXIMATIONS


def approximation_named(name):
    """The :class:`Approximation` of an ``approximation`` value (an Approximation is
    returned as it is)."""
    if isinstance(name, Approximation):
        return name
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"approximation must be one of {', '.join(APPROXIMATIONS)}; got "
                         f"{name!r}") from None
