"""What a fitted posterior says about observations y, from latent moments: class
probabilities and labels, a regressor's point prediction, standard deviation and
intervals (log-normal for a ``log_target`` model), the log predictive density, and the
score outputs.  :class:`ObservationViews` is part of
:class:`~saspa_dask.fitting.posterior.FittedPosterior` (kept apart: these need only the
latent moments, the likelihood, the offset and the classes, not the bases or the
factors that give the moments).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

__all__ = ["ObservationViews", "check_interval_level", "label_text"]


def check_interval_level(level, name="interval_level"):
    """Raise a ValueError naming ``name`` unless ``level`` is a probability strictly
    between 0 and 1 (a central interval's)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) \
            or not 0.0 < level < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {level!r}")


class ObservationViews:
    """Observation-level views of a fitted posterior (module docstring); mixed into
    :class:`~saspa_dask.fitting.posterior.FittedPosterior`, whose ``offset``,
    ``classes``, ``likelihood_object``, ``log_target``, ``n_problems`` and
    :meth:`latent` they use."""

    def class_probabilities(self, mean, var):
        """Class probabilities (n, n_classes) from latent moments (offset not added):
        [1 - p, p] for two classes, the one-vs-rest p normalised to sum to one."""
        p = np.clip(self.likelihood_object.proba(mean + self.offset, var), 0.0, 1.0)
        if p.shape[1] == 1:
            return np.column_stack([1.0 - p[:, 0], p[:, 0]])
        total = p.sum(axis=1, keepdims=True)
        return p / np.where(total > 0, total, 1.0)

    def point_prediction(self, mean, var):
        """The regressor's prediction of y from latent moments (offset not added): the
        mean plus the offset, or for Poisson the expected count exp(mean + var / 2)
        with the offset in the mean."""
        if self.log_target:  # the log-normal mean: y = exp(f + noise)
            return np.exp(mean + self.offset + 0.5 * self._fitted_scale_variance(var)[:, None])
        return self.likelihood_object.point_prediction(mean + self.offset, var)

    def predictive_std(self, mean, var):
        """The standard deviation of a new observation y* of a regressor from latent
        moments (n, 1) (offset not added): the latent variance plus the noise's
        (``noise_variance`` for gaussian, scale^2 dof / (dof - 2) for student_t,
        infinite for dof <= 2), and for poisson the count's, E[rate] + Var[rate]."""
        if self.log_target:  # the log-normal's: sqrt(exp(s^2) - 1) E[y]
            spread = self._fitted_scale_variance(var)
            return np.sqrt(np.expm1(spread)) * self.point_prediction(mean, var)[:, 0]
        return self.likelihood_object.observation_std((mean + self.offset)[:, 0], var[:, 0])

    @property
    def has_intervals(self):
        """Whether :meth:`predictive_interval` is exact for this model: a regressor with
        the gaussian likelihood (its new observations are Gaussian, or log-normal with
        ``log_target``)."""
        return not self.is_classifier and self.likelihood_object.gaussian_observations

    def interval_quantile(self, level, name="interval_level"):
        """The standard normal quantile of a central interval at ``level``; a
        ValueError for a model without exact intervals (:attr:`has_intervals`) or a
        level outside (0, 1), naming ``name``."""
        if not self.has_intervals:
            raise ValueError("predictive intervals need the gaussian likelihood (they are "
                             f"exact for it only); this model's is {self.likelihood}")
        check_interval_level(level, name)
        return float(ndtri(0.5 + 0.5 * float(level)))

    def predictive_interval(self, mean, var, level):
        """The central interval holding a new observation y* with probability
        ``level``, from latent moments (n, 1) (offset not added): the mean plus or minus
        the normal quantile times the standard deviation with the noise, and for a
        ``log_target`` model the exponential of those bounds (the log-normal's own
        quantiles).  Returns ``(lower, upper)``, each of shape (n,)."""
        centre = (mean + self.offset)[:, 0]
        half = self.interval_quantile(level) * np.sqrt(self._fitted_scale_variance(var))
        lower, upper = centre - half, centre + half
        if self.log_target:
            return np.exp(lower), np.exp(upper)
        return lower, upper

    def _fitted_scale_variance(self, var):
        """The variance of a new observation on the fitted scale (log y for a
        ``log_target`` model): the latent variance plus the noise's."""
        return self.likelihood_object.observation_variance(var[:, 0])

    def outputs(self, X, names, interval_level=0.95):
        """The named outputs at rows X: ``mean`` (offset added) and ``variance`` of
        the latent function, ``proba`` (classification; P(classes_[1]) for two
        classes, one normalised column per class otherwise), ``label`` (the most
        probable class, :meth:`predicted_labels`), ``rate`` (Poisson:
        exp(mean + variance / 2)), ``value`` (a ``log_target`` regressor's prediction
        of y itself), ``std`` (a regressor's: the standard deviation of a new
        observation, :meth:`predictive_std`), ``lower`` and ``upper`` (a gaussian
        regressor's central interval of a new observation at ``interval_level``,
        :meth:`predictive_interval`).  One column per problem, squeezed for one."""
        return self.outputs_at(*self.latent(X), names, interval_level)

    def outputs_at(self, mean, var, names, interval_level=0.95):
        """:meth:`outputs` from latent moments (offset not added) already computed."""
        values = {}
        if "mean" in names:
            values["mean"] = mean + self.offset
        if "variance" in names:
            values["variance"] = var
        # the class probabilities once, for proba and label alike
        p = self.class_probabilities(mean, var) if {"proba", "label"} & set(names) else None
        if "proba" in names:
            values["proba"] = p[:, 1:] if p.shape[1] == 2 and self.n_problems == 1 else p
        if "rate" in names or "value" in names:  # poisson's rate, a log target's value
            values["rate" if "rate" in names else "value"] = self.point_prediction(mean, var)
        if "std" in names:
            values["std"] = self.predictive_std(mean, var)[:, None]
        if "lower" in names or "upper" in names:
            lower, upper = self.predictive_interval(mean, var, interval_level)
            values["lower"], values["upper"] = lower[:, None], upper[:, None]
        if self.n_problems == 1:
            values = {k: v[:, 0] for k, v in values.items()}
        if "label" in names:  # one column whatever the number of problems
            values["label"] = self.predicted_labels(p)
        return values

    def predicted_labels(self, proba):
        """The most probable class of each row (``proba``: :meth:`class_probabilities`),
        as a float: the class label itself when the classes are numbers (a data store's
        ``y`` encoding), else its index into ``classes``."""
        best = proba.argmax(axis=1)
        if np.issubdtype(self.classes.dtype, np.number):
            return self.classes[best].astype(np.float64)
        return best.astype(np.float64)

    def log_predictive(self, X, y):
        """log p(y_i | x_i) of each row: the true label's probability for a classifier
        (labels from ``classes``), the predictive density of y with the noise for a
        regressor."""
        return self.log_predictive_at(*self.latent(X), y)

    def log_predictive_at(self, mean, var, y):
        """:meth:`log_predictive` from latent moments (offset not added)."""
        if self.is_classifier:
            codes = self.class_codes(y)
            if self.n_problems == 1:
                sign = np.where(codes == 1, 1.0, -1.0)
                return self.likelihood_object.log_predictive(
                    sign, (mean + self.offset)[:, 0], var[:, 0])
            p = self.class_probabilities(mean, var)
            return np.log(np.maximum(p[np.arange(len(codes)), codes], 1e-300))
        y = np.asarray(y, dtype=np.float64)
        if self.likelihood_object.offset_in_link:  # the offset is inside the likelihood
            return self.likelihood_object.log_predictive(y, mean[:, 0], var[:, 0])
        if self.log_target:  # the density of y: of log y, over y (the change of variable)
            with np.errstate(divide="ignore", invalid="ignore"):
                log_y = np.log(y)
            fitted = self.likelihood_object.log_predictive(log_y - self.offset, mean[:, 0],
                                                           var[:, 0])
            return np.where(y > 0, fitted - log_y, -np.inf)
        return self.likelihood_object.log_predictive(y - self.offset, mean[:, 0], var[:, 0])

    def class_codes(self, y):
        """Index into ``classes`` of each label; labels not among them are an error."""
        y = np.asarray(y)
        codes = np.searchsorted(self.classes, y)
        codes = np.minimum(codes, len(self.classes) - 1)
        unknown = self.classes[codes] != y
        if unknown.any():
            raise ValueError(f"labels {_few(np.unique(y[unknown]))} are not among the "
                             f"model's classes {_few(self.classes)}")
        return codes


def _few(values, shown=8):
    """Values for a message: the first ``shown`` (each cut to 40 characters) and how
    many more there are, so a message stays one readable line."""
    values = [str(v)[:40] for v in np.asarray(values).tolist()]
    more = len(values) - shown
    return "[" + ", ".join(values[:shown]) + (f" and {more} more" if more > 0 else "") + "]"


def label_text(value):
    """A class as the user wrote it: a whole number without the ``.0`` a float64 target
    gives it (``1``, not ``1.0``), anything else as ``str`` does."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)
