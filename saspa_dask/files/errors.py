"""The one error type of the storage layer."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(ValueError):
    """A store is missing, incomplete, corrupt, foreign or incompatible."""

