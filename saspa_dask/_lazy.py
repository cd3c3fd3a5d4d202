"""Package names that load on first use (PEP 562): light entry points (``saspa
--help``, a Dask worker running a storage task) do not import what they do not use."""

from __future__ import annotations

import importlib

__all__ = ["lazy_getattr"]


def lazy_getattr(package, public):
    """A module ``__getattr__`` for ``package`` that imports ``public[name]`` (a module
    path relative to the package) on first access and keeps the name."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        if name in public:
            value = getattr(importlib.import_module(public[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
