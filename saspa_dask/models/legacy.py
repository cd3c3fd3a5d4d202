"""The old flat names of the grouped settings (``ep_mode``, ``damping``, ..., ``dtc``),
accepted and readable for one release with a FutureWarning: in ``__init__``,
``set_params`` and as attributes."""

from __future__ import annotations

import inspect
import warnings

from .settings import LEGACY_NAMES, legacy_parameters, settings_of

__all__ = ["LegacyNames"]


class LegacyNames:
    """Mixin of the SASPA estimators: ``__init__(**legacy)`` folds the old names in
    (:meth:`_fold_legacy`), ``set_params`` takes them, and reading one warns."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # ``**legacy`` (the old flat names, for one release) is not a parameter: hidden
        # from the signature scikit-learn introspects (get_params, clone, its checks)
        init = cls.__dict__.get("__init__")
        if init is not None:
            signature = inspect.signature(init)
            init.__signature__ = signature.replace(parameters=[
                p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD])

    def _folded(self, legacy, given, stacklevel):
        """``ep``, ``execution`` and ``approximation`` (``given`` ones first, else the
        current ones) with the old flat names in ``legacy`` folded in, with a
        FutureWarning."""
        current = {name: given.get(name, getattr(self, name))
                   for name in ("ep", "execution", "approximation")}
        return legacy_parameters(current, legacy, owner=type(self).__name__,
                                 stacklevel=stacklevel)

    def _fold_legacy(self, legacy):
        """``__init__``'s old keyword arguments (see :meth:`_folded`)."""
        if legacy:
            for name, value in self._folded(legacy, {}, stacklevel=5).items():
                setattr(self, name, value)

    def set_params(self, **params):
        """Set parameters (scikit-learn's ``set_params``); the old flat names of the
        grouped settings are accepted for one release, with a FutureWarning."""
        legacy = {k: params.pop(k) for k in list(params) if k in LEGACY_NAMES}
        if legacy:
            params.update(self._folded(legacy, params, stacklevel=4))
        return super().set_params(**params)


def _legacy_attribute(name):
    group, field = LEGACY_NAMES[name]

    def read(self):
        warnings.warn(f"{type(self).__name__}.{name} is read from "
                      + ("approximation" if group == "approximation" else f"{group}.{field}")
                      + " now; the old name will be removed in the next release",
                      FutureWarning, stacklevel=2)
        if group == "approximation":
            return self.approximation == "dtc"
        return getattr(settings_of(group, getattr(self, group)), field)

    return property(read, doc=f"Deprecated: ``{group}`` ({field}).")


for _name in LEGACY_NAMES:
    setattr(LegacyNames, _name, _legacy_attribute(_name))
del _name
