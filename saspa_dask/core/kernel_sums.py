"""Sums of kernels over groups of inputs: an additive kernel.

    k(x, x') = s2 sum_g w_g k(x_g, x'_g),   w_g > 0,  sum_g w_g = 1,

where x_g are the inputs of term g (the terms partition the inputs), k is one kernel
shape (SE or a Matérn, :mod:`saspa_dask.core.kernel_profiles`) and every term has the
ARD lengthscales of its own inputs.  ``s2`` stays the prior variance k(x, x)
(the residual s2 - |phi_i|^2, the jitter and the signal-variance gradient are as for
one kernel); the weights share it among the terms.

A blurred basis N(a_j, C_j) meets term g through the blur's marginal over the term's
inputs, N(a_j[g], C_j[g, g]) (integrating a Gaussian over the other inputs leaves
that marginal, and term g does not depend on them), so each term's Kt and Kh are the
one-kernel formulas of :mod:`saspa_dask.core.kernels` on the term's inputs (the
shape's exact or scale-mixture form), and the sum's derivatives are the terms'
derivatives scattered back to their inputs.

Used for tables: a smooth function of the numeric inputs plus one effect per text
column (with one shared lengthscale per column, an exchangeable category kernel: a
random effect per category with partial pooling), rather than one kernel over every
input, where each category is a coordinate of the same distance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AdditiveKernel", "restrict_blur"]


@dataclass(frozen=True, eq=False)
class AdditiveKernel:
    """The additive kernel's structure and weights.

    Parameters
    ----------
    terms : ndarray of int, shape (d,)
        The term of each input, 0..G-1 (every term has at least one input).
    weights : ndarray of shape (G,)
        Positive weights summing to one.
    shape : str, default="se"
        Every term's kernel shape (:data:`saspa_dask.core.kernel_profiles.KERNELS`).
    """

    terms: np.ndarray
    weights: np.ndarray
    shape: str = "se"

    def __post_init__(self):
        terms = np.asarray(self.terms, dtype=np.int64)
        weights = np.asarray(self.weights, dtype=np.float64)
        if terms.ndim != 1 or weights.ndim != 1 or weights.size < 1 or \
                np.any(np.bincount(terms, minlength=weights.size) == 0) or \
                terms.max() >= weights.size:
            raise ValueError("an additive kernel needs one term index per input, each "
                             f"of 0..{weights.size - 1} used")
        if not (np.all(weights > 0) and abs(weights.sum() - 1.0) < 1e-9):
            raise ValueError(f"additive kernel weights must be positive and sum to one, "
                             f"got {weights}")
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "weights", weights)

    @property
    def n_terms(self):
        return self.weights.size

    def parts(self):
        """(inputs, weight) of each term: the term's input indices and its w_g."""
        return [(np.flatnonzero(self.terms == g), float(w))
                for g, w in enumerate(self.weights)]


def restrict_blur(blur, inputs):
    """The blur covariances' marginal over ``inputs``: (M, d) diagonals or (M, d, d)
    matrices, restricted alike."""
    if np.ndim(blur) == 2:
        return blur[:, inputs]
    return blur[:, inputs][:, :, inputs]
