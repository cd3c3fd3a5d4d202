"""The rows' side of an expanded quadratic form: the features [z_k^2 (or z_k z_l), z, 1]
of z = x - centre, so that the SE exponent of every basis is one column of one matrix
product (:mod:`saspa_dask.core.kernels`), and :class:`PreparedRows`, rows prepared once
for the many such products a fit makes.

A one-hot table's inputs are indicator columns: each takes two values, and centred on
its commoner one a column is zero on most rows and its square is a multiple of itself
(z^2 = delta z where z is 0 or delta).  Prepared rows keep those columns as one sparse
matrix whose product costs its nonzeros, and fold their squares' coefficients into
their linear ones, so that a table of a few numbers and hundreds of indicators costs
what its numbers and its nonzeros cost, not 2 d + 1 columns a row.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["PreparedRows", "as_rows", "feature_blocks", "feature_scales", "quadratic_product",
           "raw_rows", "row_blocks", "row_centre", "row_features", "weighted_features"]

# Rows handled per matrix product when building Kt: at most _ROW_BLOCK, and fewer
# when the row features (d (d + 1) / 2 + d + 1 floats a row, 2 d + 1 for diagonal
# blurs) would pass _FEATURE_FLOATS: a block that size is reused from the heap, where
# one of a wide table's chunk is a fresh mapping whose page faults cost as much as
# the product (measured at 676 inputs).
_ROW_BLOCK = 8192
_FEATURE_FLOATS = 2**20


def feature_blocks(n_rows, d, diagonal):
    """Row slices for :func:`row_features` blocks (see ``_FEATURE_FLOATS``)."""
    width = 2 * d + 1 if diagonal else d * (d + 1) // 2 + d + 1
    size = max(64, min(_ROW_BLOCK, _FEATURE_FLOATS // width))
    return [slice(start, min(start + size, n_rows)) for start in range(0, n_rows, size)]


def feature_scales(lengthscale, diagonal):
    """What each of :func:`row_features`' columns is multiplied by to be the feature
    of the scaled rows (x - centre) / l: 1 / (l_k l_l), 1 / l_k and 1."""
    inv_l = 1.0 / lengthscale
    if diagonal:
        quad = inv_l * inv_l
    else:
        iu, ju = np.triu_indices(inv_l.size)
        quad = inv_l[iu] * inv_l[ju]
    return np.concatenate([quad, inv_l, [1.0]])


def row_features(X, centre, diagonal):
    """[z_k^2 (or z_k z_l, k <= l), z, 1] of the rows z = x - centre, written into one
    array (no scaled copy of the rows: on wide tables these passes over n x d arrays,
    not the product, were the cost); the lengthscales are in the coefficients."""
    n, d = X.shape
    width = d if diagonal else d * (d + 1) // 2
    out = np.empty((n, width + d + 1))
    z = np.subtract(X, centre, out=out[:, width:width + d])
    if diagonal:
        np.multiply(z, z, out=out[:, :width])
    else:  # z_k z_l for l >= k, row k of the upper triangle at a time: contiguous
        # slices, where gathering z[:, iu] and z[:, ju] took 5-8 times as long
        start = 0
        for k in range(d):
            np.multiply(z[:, k:k + 1], z[:, k:], out=out[:, start:start + d - k])
            start += d - k
    out[:, -1] = 1.0
    return out


class PreparedRows:
    """Rows X (n, d) prepared once for many diagonal quadratic forms in them.

    The columns that take at most two values are centred on their commoner value and
    held as one sparse matrix (their squares are ``step`` times themselves); the other
    columns are centred on their mean and kept dense (``indicators`` is None where no
    column takes two values).  Built by :meth:`of`; sliced by
    rows like an array (a slice reads the features its source keeps); ``X`` is the
    rows themselves.  Their features (:func:`row_features` about ``centre``: of the
    numbers for diagonal forms, of every column for full ones) are built once and
    kept where a row's take at most ``keep_width`` floats (rows that many products
    read: learning's, whose M basis features a row are kept too).
    """

    def __init__(self, X, centre, two_valued, step, indicators, numbers, keep_width=0,
                 source=None):
        self.X, self.centre = X, centre
        self.two_valued, self.step = two_valued, step
        self.indicators, self.numbers = indicators, numbers
        # (prepared rows, row slice) this is a slice of, whose kept features it reads
        self.keep_width, self._source, self._kept = keep_width, source, {}
        # where the numbers' and the indicators' entries sit in row_features' diagonal
        # layout [z^2 (d), z (d), 1]
        d = X.shape[1]
        self._numbers_at = np.flatnonzero(~two_valued)
        self._indicators_at = np.flatnonzero(two_valued)
        self._numbers_layout = np.concatenate([self._numbers_at, d + self._numbers_at,
                                               [2 * d]])

    @classmethod
    def of(cls, X, keep_width=0):
        """Prepared rows of X (n, d), keeping features of at most ``keep_width``
        floats a row."""
        X = np.asarray(X, dtype=np.float64)
        n = X.shape[0]
        if n == 0:
            return cls(X, np.zeros(X.shape[1]), np.zeros(X.shape[1], bool), np.zeros(0),
                       None, X)
        low, high = X.min(axis=0), X.max(axis=0)
        at_high = X == high
        two_valued = np.all(at_high | (X == low), axis=0)
        common = np.where(2 * at_high.sum(axis=0) > n, high, low)
        centre = np.where(two_valued, common, X.mean(axis=0))
        step = np.where(common == high, low - high, high - low)[two_valued]
        if not two_valued.any():
            return cls(X, centre, two_valued, step, None, X, keep_width)
        # a row's nonzeros are its two-valued columns off their commoner value, each at
        # its step; np.nonzero lists them row by row, which is CSR's order (found over
        # all columns: gathering the two-valued ones first cost more than the rest)
        rows, cols = np.nonzero((X != common) & two_valued)
        cols = (np.cumsum(two_valued) - 1)[cols]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
        indicators = sparse.csr_matrix((step[cols], cols, indptr),
                                       shape=(n, int(two_valued.sum())))
        numbers = np.ascontiguousarray(X[:, ~two_valued])
        return cls(X, centre, two_valued, step, indicators, numbers, keep_width)

    @property
    def shape(self):
        return self.X.shape

    def __len__(self):
        return self.X.shape[0]

    def __getitem__(self, rows):
        if not isinstance(rows, slice):
            raise TypeError("prepared rows are sliced by a slice of rows")
        return PreparedRows(self.X[rows], self.centre, self.two_valued, self.step,
                            None if self.indicators is None else self.indicators[rows],
                            self.numbers[rows], self.keep_width, source=(self, rows))

    def features(self, diagonal):
        """:func:`row_features` of these rows about their centre: of their numbers
        for ``diagonal`` forms (the indicators' are folded in by :meth:`product`), of
        every column otherwise; built once and kept when narrow enough (a slice's
        are its source's, kept there)."""
        narrow = self._width(diagonal) <= self.keep_width
        if narrow and self._source is not None:
            source, rows = self._source
            return source.features(diagonal)[rows]
        if diagonal in self._kept:
            return self._kept[diagonal]
        features = (row_features(self.numbers, self.centre[self._numbers_at], True)
                    if diagonal else row_features(self.X, self.centre, False))
        if narrow:
            self._kept[diagonal] = features
        return features

    def _width(self, diagonal):
        """Floats a row of :meth:`features` takes."""
        if diagonal:
            return 2 * self._numbers_at.size + 1
        d = self.X.shape[1]
        return d * (d + 1) // 2 + d + 1

    def product(self, coef, out=None):
        """``row_features(X, centre, True) @ coef`` for coefficients (2 d + 1, M)."""
        out = np.matmul(self.features(True), coef[self._numbers_layout], out=out)
        if self.indicators is not None:  # squares folded into the linear terms
            d, at = self.X.shape[1], self._indicators_at
            out += self.indicators @ (coef[d + at] + self.step[:, None] * coef[at])
        return out

    def sums(self, weights):
        """``weights.T @ row_features(X, centre, True)``, (M, 2 d + 1), for weights
        (n, M)."""
        d = self.X.shape[1]
        out = np.empty((weights.shape[1], 2 * d + 1))
        out[:, self._numbers_layout] = weights.T @ self.features(True)
        if self.indicators is not None:
            linear = (self.indicators.T @ weights).T
            out[:, d + self._indicators_at] = linear
            out[:, self._indicators_at] = linear * self.step
        return out


def row_blocks(X, diagonal):
    """:func:`feature_blocks` for rows X: prepared rows' diagonal products build the
    features of their numbers only, so their blocks are as wide as those."""
    prepared = isinstance(X, PreparedRows) and diagonal
    width = X.numbers.shape[1] if prepared else X.shape[1]
    return feature_blocks(X.shape[0], width, diagonal)


def as_rows(X):
    """Prepared rows as they are, any other rows as a float64 array."""
    return X if isinstance(X, PreparedRows) else np.asarray(X, dtype=np.float64)


def raw_rows(X):
    """The rows themselves, prepared or not."""
    return X.X if isinstance(X, PreparedRows) else X


def row_centre(X, means):
    """The centre the rows' features are taken about: prepared rows' own, otherwise
    the bases' centroid (the expansion's round-off is then relative to the data's
    spread, not to its offset)."""
    return X.centre if isinstance(X, PreparedRows) else means.mean(axis=0)


def quadratic_product(X, centre, diagonal, coef, out=None):
    """``row_features(X, centre, diagonal) @ coef``, prepared rows' way where they
    have one (``centre`` must then be theirs)."""
    if isinstance(X, PreparedRows):
        return (X.product(coef, out=out) if diagonal
                else np.matmul(X.features(False), coef, out=out))
    return np.matmul(row_features(np.asarray(raw_rows(X), dtype=np.float64), centre,
                                  diagonal), coef, out=out)


def weighted_features(X, centre, diagonal, weights):
    """``weights.T @ row_features(X, centre, diagonal)``, as :func:`quadratic_product`."""
    if isinstance(X, PreparedRows):
        return X.sums(weights) if diagonal else weights.T @ X.features(False)
    return weights.T @ row_features(np.asarray(raw_rows(X), dtype=np.float64), centre,
                                    diagonal)
