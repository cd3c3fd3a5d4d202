"""What every likelihood is: the interface EP, learning and prediction use, and the
likelihood raised to a power alpha (power EP) as a likelihood of its own.

A likelihood gives, on vectors, ``tilted(y, m, v) = (log Z, a, c)`` against cavities
N(f | m, v) (``a = d log Z / d m``, ``c = -d^2 log Z / d m^2``; docs/design.md, section 2),
``log_z_gradient`` (d log Z / d log theta per row for its hyperparameters),
``log_predictive``, ``params`` / ``hyperparameters`` / ``with_hyperparameters``, and
``powered(alpha)``: its own power-EP form (docs/design.md, "Power EP"), itself at alpha = 1.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BEHAVIOUR", "Likelihood", "Powered", "Shifted", "check_alpha"]


def check_alpha(alpha):
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    return float(alpha)


class Likelihood:
    """The shared part of the likelihoods: no hyperparameters unless a class says so,
    and ``powered``."""

    name = "likelihood"
    is_classification = False
    alpha = 1.0  # the EP power (see Powered)
    # the names :meth:`hyperparameters` may give (known before any value is)
    learnable = ()
    #: a row's EP site does not depend on its cavity: one sweep is exact
    exact_sites = False
    #: the damping EP runs with unless one is asked for (EPSchedule.with_damping)
    default_damping = 1.0
    #: the latent's offset enters through the link (inside the likelihood), so the
    #: targets are not shifted by it
    offset_in_link = False
    #: a new observation given the latent is Gaussian: central intervals are exact
    gaussian_observations = False
    #: a regressor's score output beside the latent moments (None: y's own scale)
    point_output = None

    @classmethod
    def check_targets(cls, y_min, non_integer, mean):
        """Refuse regression targets this likelihood cannot model (a ValueError
        naming what is wrong); by their minimum, count of non-integers and mean."""

    @classmethod
    def offset_and_signal(cls, mean, spread, center):
        """The latent's offset (the targets' mean when ``center``, else 0) and the
        signal variance the data would start from (the targets' spread)."""
        return (mean if center else 0.0), spread

    def point_prediction(self, mean, var):
        """What a regressor predicts of y from the latent's moments (the offset
        included in ``mean``): the latent mean."""
        return mean

    def observation_variance(self, var):
        """The variance of a new observation around the latent's mean, given the
        latent's variance ``var``."""
        raise ValueError(f"the {self.name} likelihood has no observation variance")

    def observation_std(self, mean, var):
        """The standard deviation of a new observation (the offset included in
        ``mean``)."""
        return np.sqrt(self.observation_variance(var))

    @classmethod
    def from_params(cls, **params):
        """The likelihood from its stored ``params`` (others ignored)."""
        return cls()

    def params(self):
        return {}

    def hyperparameters(self):
        """Parameters learnable by evidence maximisation (all positive)."""
        return {}

    def with_hyperparameters(self, values):
        return self

    def log_z_gradient(self, y, m, v):
        return {}

    def powered(self, alpha):
        """This likelihood for power EP with power ``alpha`` in (0, 1]: itself at
        alpha = 1 (EP as published, to the last bit), else its powered form."""
        alpha = check_alpha(alpha)
        return self if alpha == 1.0 else self._powered(alpha)

    def _powered(self, alpha):
        raise NotImplementedError(f"{type(self).__name__} has no power-EP form")


#: what a likelihood says of itself that a wrapper (powered, shifted) keeps its base's
BEHAVIOUR = ("name", "is_classification", "learnable", "exact_sites", "default_damping",
             "offset_in_link", "gaussian_observations", "point_output")


def _take_behaviour(wrapper, base):
    for name in BEHAVIOUR:
        setattr(wrapper, name, getattr(base, name))


class Powered(Likelihood):
    """A likelihood to a power alpha in (0, 1) inside the tilted integral.

    Z = integral N(f; m, v) p(y | f)^alpha df, with ``a`` and ``c`` its first two
    log-derivatives in m.  Each family gives its own ``tilted`` and
    ``log_z_gradient``; predictions, parameters and hyperparameters are the base
    likelihood's: the power belongs to the inference, not to the model.
    """

    def __init__(self, base, alpha):
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"a powered likelihood needs 0 < alpha < 1, got {alpha!r}")
        self.base, self.alpha = base, float(alpha)
        _take_behaviour(self, base)

    def params(self):
        return self.base.params()

    def hyperparameters(self):
        return self.base.hyperparameters()

    def log_predictive(self, y, mean, var):
        return self.base.log_predictive(y, mean, var)

    def point_prediction(self, mean, var):
        return self.base.point_prediction(mean, var)

    def observation_variance(self, var):
        return self.base.observation_variance(var)

    def observation_std(self, mean, var):
        return self.base.observation_std(mean, var)

    def with_hyperparameters(self, values):
        return self.base.with_hyperparameters(values).powered(self.alpha)

    def powered(self, alpha):
        return self.base.powered(alpha)


class Shifted(Likelihood):
    """A likelihood seen through a shifted latent: p(y | f + shift).

    A constant prior mean of the latent (GPflow's ``Constant`` mean function,
    GPyTorch's ``ConstantMean``) learnt with the kernel by the EP energy: EP's sites
    stay functions of f, and since Z(m) = integral N(f; m, v) p(y | f + shift) df is
    the base's Z at m + shift, d log Z / d shift is the base's ``a`` there.  Wraps any
    likelihood, powered or not (the gradient is then that of log Z^alpha, which the
    energy divides by alpha as for every other hyperparameter).
    """

    def __init__(self, base, shift):
        self.base, self.shift = base, float(shift)
        _take_behaviour(self, base)
        self.alpha = base.alpha

    def tilted(self, y, m, v):
        return self.base.tilted(y, m + self.shift, v)

    def log_z_gradient(self, y, m, v):
        """The base's gradients at m + shift, and ``mean_offset``: d log Z / d shift."""
        grad = dict(self.base.log_z_gradient(y, m + self.shift, v))
        grad["mean_offset"] = self.base.tilted(y, m + self.shift, v)[1]
        return grad

    def log_predictive(self, y, mean, var):
        return self.base.log_predictive(y, mean + self.shift, var)

    def point_prediction(self, mean, var):
        return self.base.point_prediction(mean + self.shift, var)

    def observation_variance(self, var):
        return self.base.observation_variance(var)

    def observation_std(self, mean, var):
        return self.base.observation_std(mean + self.shift, var)

    def params(self):
        return self.base.params()

    def hyperparameters(self):
        return self.base.hyperparameters()
