"""The hyperparameters: their values, which of them are learnt, bounds, log transform."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..core.kernel_sums import AdditiveKernel
from ..core.likelihoods import Shifted
from .basis_parameters import LearntBases, LearntFeatures

__all__ = ["Hyperparameters", "LIKELIHOOD_BOUNDS", "OFFSET_SPAN", "OFFSET_UNIT"]

# natural ranges of likelihood parameters (label noise below one half)
LIKELIHOOD_BOUNDS = {"label_noise": (1e-6, 0.45), "dof": (0.5, 1e3)}
# the log-space box spans this many decades either side of the start
_DECADES = 3.0
# a learnt mean offset stays within this many target standard deviations of the
# targets' centre (a constant prior mean further out explains nothing)
OFFSET_SPAN = 10.0
# the mean offset is learnt in tenths of the targets' standard deviation: in target
# units, a weakly identified offset (FITC's energy is nearly flat in it where the
# per-row residual variances absorb the level) took L-BFGS-B's early steps and led
# Kin-40k and Pumadyn-32nm to lower optima; in tenths it moves where the energy asks
# for it (benchmarks/RESULTS.md, "A learnt constant mean")
OFFSET_UNIT = 0.1


@dataclass
class Hyperparameters:
    """Kernel and likelihood hyperparameters (all positive; optimised in log space).

    The ARD lengthscales and the signal variance are always learnt; the likelihood's
    entries are those in ``likelihood`` (empty: none learnt); the blur scale (one
    multiplier of the K-means blur covariances) only with ``learn_blur_scale``; the
    basis means (and per-basis blur) when ``bases`` is set; a constant prior mean of
    the latent, ``mean_offset`` (added to the targets' centre; the only signed value,
    learnt in units of :data:`OFFSET_UNIT` times ``offset_scale``, the targets'
    standard deviation), unless it is None; an additive kernel's term weights
    (``additive``, ``term_weights``) as logits relative to the first term's.  The
    vector of :meth:`to_log` is: log lengthscales, log s2, [log blur scale], [term
    logits], [the bases'
    :meth:`~saspa_dask.fitting.basis_parameters.LearntBases.vector`], [mean offset in
    its unit], log likelihood parameters.

    Examples
    --------
    >>> import numpy as np
    >>> h = Hyperparameters(np.array([1.0, 2.0]), 0.5, {"noise_variance": 0.1})
    >>> h.names()
    ['lengthscale[0]', 'lengthscale[1]', 'signal_variance', 'likelihood.noise_variance']
    >>> bool(np.allclose(h.from_log(h.to_log()).lengthscale, [1.0, 2.0]))
    True
    """

    lengthscale: np.ndarray
    signal_variance: float
    likelihood: dict = field(default_factory=dict)
    blur_scale: float = 1.0
    learn_blur_scale: bool = False
    bases: LearntBases | LearntFeatures | None = None
    mean_offset: float | None = None
    offset_scale: float = 1.0
    # a floor the user set on the Gaussian noise variance (``min_noise_variance``):
    # the box's lower edge there, and a value on it is not reported as on a bound
    noise_floor: float | None = None
    # the data-driven values the box of :meth:`bounds` is centred on (None: this point)
    centre: "Hyperparameters | None" = None
    # the kernel's shape (:data:`saspa_dask.core.kernel_profiles.KERNELS`): fixed, not
    # learnt; the lengthscales and s2 above are its
    kernel: str = "se"
    # inputs that share one learnt lengthscale: group index per input, 0..G-1 in order
    # of first appearance (:func:`feature_groups_of`); None: one per input
    groups: np.ndarray | None = None
    # an additive kernel (:mod:`saspa_dask.core.kernel_sums`): the term of each input
    # and the terms' weights (learnt as logits of the first: :meth:`to_log`); None:
    # one kernel over every input
    additive: np.ndarray | None = None
    term_weights: np.ndarray | None = None

    @property
    def kernel_spec(self):
        """The kernel the covariances take: its shape's name, or the
        :class:`~saspa_dask.core.kernel_sums.AdditiveKernel` at these weights."""
        if self.additive is None:
            return self.kernel
        return AdditiveKernel(self.additive, self.term_weights, self.kernel)

    @property
    def _n_logits(self):
        """Learnt term logits: one per additive term after the first."""
        return 0 if self.additive is None else self.term_weights.size - 1

    @property
    def n_lengthscales(self):
        """How many lengthscales are learnt: one per input or per group."""
        return self.lengthscale.size if self.groups is None else int(self.groups.max()) + 1

    def _group_firsts(self):
        """Each group's first input (its lengthscale stands for the group's)."""
        return np.unique(self.groups, return_index=True)[1]

    def _learnt_lengthscales(self, lengthscale):
        return lengthscale if self.groups is None else lengthscale[self._group_firsts()]

    def _bases_offset(self):
        """Where the bases' entries (or, without them, the likelihood's) start in
        :meth:`to_log`."""
        return self.n_lengthscales + 1 + int(self.learn_blur_scale) + self._n_logits

    def names(self):
        """Names of the learnt values, in the order of :meth:`to_log` (a group's
        lengthscale by its first input)."""
        firsts = (range(self.lengthscale.size) if self.groups is None
                  else self._group_firsts())
        names = [f"lengthscale[{k}]" for k in firsts]
        names.append("signal_variance")
        if self.learn_blur_scale:
            names.append("blur_scale")
        names += [f"term_weight[{g}]" for g in range(1, self._n_logits + 1)]
        if self.bases is not None:
            names += self.bases.names()
        if self.mean_offset is not None:
            names.append("mean_offset")
        return names + [f"likelihood.{k}" for k in self.likelihood]

    def to_log(self):
        """The learnt values as one log-space vector."""
        values = [*self._learnt_lengthscales(self.lengthscale), self.signal_variance]
        if self.learn_blur_scale:
            values.append(self.blur_scale)
        head = np.log(np.array(values, dtype=np.float64))
        tail = np.log(np.array(list(self.likelihood.values()), dtype=np.float64))
        middle = [] if self.additive is None else [self._logits()]
        if self.bases is not None:
            middle.append(self.bases.vector())
        if self.mean_offset is not None:
            middle.append([self.mean_offset / self._offset_unit()])
        return np.concatenate([head, *middle, tail])

    def from_log(self, x):
        """A copy with the learnt values taken from a log-space vector."""
        x = np.asarray(x, dtype=np.float64)
        d = self.n_lengthscales
        lengthscale = np.exp(x[:d]) if self.groups is None else np.exp(x[:d])[self.groups]
        blur = math.exp(x[d + 1]) if self.learn_blur_scale else self.blur_scale
        pos = self._bases_offset()
        weights = self.term_weights
        if self.additive is not None:
            weights = _softmax(np.concatenate([[0.0], x[pos - self._n_logits:pos]]))
        bases = self.bases
        if bases is not None:
            n = bases.size
            bases, pos = bases.from_vector(x[pos:pos + n]), pos + n
        offset = self.mean_offset
        if offset is not None:
            offset, pos = float(x[pos]) * self._offset_unit(), pos + 1
        lik = {k: math.exp(val) for k, val in zip(self.likelihood, x[pos:])}
        return replace(self, lengthscale=lengthscale, signal_variance=math.exp(x[d]),
                       likelihood=lik, blur_scale=blur, bases=bases, mean_offset=offset,
                       term_weights=weights)

    def _logits(self):
        """The terms' weights as logits relative to the first term's."""
        logs = np.log(self.term_weights)
        return logs[1:] - logs[0]

    def gradient_vector(self, grad):
        """A gradient dict (:func:`~saspa_dask.fitting.gradient.assemble_gradient`)
        taken at this point, as a vector in the order of :meth:`to_log`.  Call it on
        the point the gradient was taken at: learnt blurs' parameters are logs and
        Cholesky factors of this point's blur covariances."""
        d_lengthscale = np.asarray(grad["lengthscale"])
        if self.groups is not None:  # a shared log-lengthscale: its inputs' sum
            d_lengthscale = np.bincount(self.groups, d_lengthscale, self.n_lengthscales)
        values = [*d_lengthscale, grad["signal_variance"]]
        if self.learn_blur_scale:
            values.append(grad["blur_scale"])
        if self.additive is not None:
            # d/d logit_g of w = softmax(0, logits): v_g - w_g sum_h v_h, v = d/dlog w
            v = np.asarray(grad["term_weights"])
            values += list((v - self.term_weights * v.sum())[1:])
        if self.bases is not None:
            values += list(self.bases.gradient(grad))
        if self.mean_offset is not None:
            values.append(grad["mean_offset"] * self._offset_unit())
        return np.array(values + [grad[k] for k in self.likelihood], dtype=np.float64)

    def _offset_unit(self):
        """The mean offset's unit in :meth:`to_log` (:data:`OFFSET_UNIT`)."""
        return OFFSET_UNIT * self.offset_scale

    def bind(self, likelihood):
        """``likelihood`` at these values: its learnt parameters set and, with a mean
        offset, seen through the shifted latent
        (:class:`~saspa_dask.core.likelihoods.Shifted`)."""
        bound = likelihood.with_hyperparameters(self.likelihood)
        return bound if self.mean_offset is None else Shifted(bound, self.mean_offset)

    def bounds(self):
        """Log-space box: three decades either side of the data-driven ``centre`` (the
        values a fit starts from when none are given: it does not move when a retrain
        starts from the last fit's values) or, without one, of this point; stretched to
        hold this point; tighter where a likelihood parameter has a natural range
        (:data:`LIKELIHOOD_BOUNDS`); the mean offset within :data:`OFFSET_SPAN`
        target standard deviations (``offset_scale``) of the targets' centre."""
        x0 = self.to_log()
        span = _DECADES * math.log(10.0)
        middle = x0 if self.centre is None else self._centred(x0)
        bounds = [(min(c - span, x), max(c + span, x)) for c, x in zip(middle, x0)]
        if self.bases is not None:
            start = self._bases_offset()
            box = self.bases.bounds()
            bounds[start:start + len(box)] = box
        offset = x0.size - len(self.likelihood)
        if self.mean_offset is not None:
            span = OFFSET_SPAN / OFFSET_UNIT
            bounds[offset - 1] = (min(-span, x0[offset - 1]), max(span, x0[offset - 1]))
        for k, name in enumerate(self.likelihood):
            lo, hi = LIKELIHOOD_BOUNDS.get(name, (None, None))
            if name == "noise_variance" and self.noise_floor is not None:
                lo = self.noise_floor
            a, b = bounds[offset + k]
            a = a if lo is None else max(a, math.log(lo))
            bounds[offset + k] = (a, max(a, b if hi is None else min(b, math.log(hi))))
        return bounds

    def on_bounds(self, bounds, tol=1e-8):
        """Names of the learnt values on a bound of ``bounds`` (log space), except the
        noise variance on the floor the user set (there by request, not by accident)."""
        floor = None if self.noise_floor is None else math.log(self.noise_floor)
        def on_floor(name, lo):
            return name == "likelihood.noise_variance" and floor is not None and \
                lo <= floor + tol

        return [name for name, v, (lo, hi) in zip(self.names(), self.to_log(), bounds)
                if (lo is not None and v <= lo + tol and not on_floor(name, lo))
                or (hi is not None and v >= hi - tol)]

    def _centred(self, x0):
        """``x0`` with the lengthscales, signal variance and likelihood entries
        replaced by the centre's."""
        centre, out = self.centre, x0.copy()
        d = self.n_lengthscales
        out[:d] = np.log(self._learnt_lengthscales(centre.lengthscale))
        out[d] = math.log(centre.signal_variance)
        offset = x0.size - len(self.likelihood)
        for k, name in enumerate(self.likelihood):
            if name in centre.likelihood:
                out[offset + k] = math.log(centre.likelihood[name])
        return out

    def as_dict(self):
        """The scalar values (the bases, M d numbers or more, are left out)."""
        return {"lengthscale": [float(x) for x in self.lengthscale],
                "signal_variance": float(self.signal_variance),
                **({} if self.additive is None else
                   {"term_weights": [float(w) for w in self.term_weights]}),
                "blur_scale": float(self.blur_scale), "likelihood": dict(self.likelihood),
                **({} if self.mean_offset is None else {"mean_offset": self.mean_offset})}


def _softmax(logits):
    e = np.exp(logits - logits.max())
    return e / e.sum()
