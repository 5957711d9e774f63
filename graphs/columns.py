"""Numeric columns from user data: where only ``None`` marks a missing value.

The graph readers (:mod:`dnnplace.graphs.io`) pass every user number through
:func:`user_column`, which turns ``None`` into the internal ``NaN`` and rejects an explicit
``NaN``; :class:`~dnnplace.graphs.graph.OpGraph` checks the length of its own columns with
:func:`float_array`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError

__all__ = ["user_column", "float_array"]


def user_column(values: Any, *, field: str, owner: Any = None, nullable: bool = False,
                n: int | None = None, null_means: str = "absent") -> np.ndarray:
    """A float column from user data, where only ``None`` may mark a missing value.

    ``None`` becomes ``NaN`` (the internal "absent": unsupported kind, no explicit edge
    cost) when ``nullable``, and is an error otherwise; an explicit ``NaN`` (JSON
    ``NaN``, ``float("nan")``, the string ``"nan"``) is always an :class:`InputError`
    naming the entry (``owner(i)``, e.g. ``"node 'b'"``) and the field. Infinities and
    negative values are left to :class:`OpGraph`'s own checks, which name them too.

    Parameters
    ----------
    values : sequence of numbers or None
    field : str
        Field name used in messages (``"memory"``, ``"compute.gpu"``, ``"cost"``).
    owner : callable, optional
        ``owner(i)`` names entry ``i``; default ``"field[i]"``.
    nullable : bool
        Whether ``None`` is allowed (and read as ``NaN``).
    n : int, optional
        Expected length.
    null_means : str
        What ``None`` stands for, quoted in the NaN message (``"unsupported on this kind"``).

    Examples
    --------
    >>> user_column([1.0, None], field="compute.gpu", nullable=True).tolist()
    [1.0, nan]
    >>> user_column([1.0, float("nan")], field="compute.gpu", nullable=True,
    ...             owner=lambda i: f"node {i}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: node 1: field 'compute.gpu' is NaN; ... null ...
    """
    def who(i: int) -> str:
        return f"{owner(i)}: field {field!r}" if owner is not None else f"field {field!r}[{i}]"

    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)) or (n is not None and len(values) != n):
        got = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise InputError(f"field {field!r}: expected a list of {n if n is not None else 'numeric'} values, got {got}")
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    except OverflowError:  # an integer past the float range (10**400): absurd, never inf
        big = next(i for i, v in enumerate(values) if isinstance(v, int) and abs(v) > 1e308)
        raise InputError(f"{who(big)} is a {len(str(abs(values[big])))}-digit number, too large for a 64-bit "
                         "float") from None
    if arr is None or arr.ndim != 1:
        bad = next(i for i, v in enumerate(values)
                   if isinstance(v, bool) or not isinstance(v, (int, float, np.number, type(None))))
        raise InputError(f"{who(bad)} is not a number: {values[bad]!r}") from None
    holes = np.flatnonzero(np.isnan(arr))
    for i in holes.tolist():  # only the NaN slots are looked at: cheap for clean columns
        v = values[i]
        if v is not None:
            if nullable:
                raise InputError(f"{who(i)} is NaN; only null (or leaving the value out) marks it {null_means}")
            raise InputError(f"{who(i)} is missing or NaN: got NaN, which is never a valid value")
        if not nullable:
            raise InputError(f"{who(i)} is missing (null)")
    return arr


def float_array(values: Any, n: int, what: str, default: float | None = None) -> np.ndarray:
    """``values`` as ``n`` floats (``default`` everywhere when None; without a default, None is
    an error naming ``what``)."""
    if values is None:
        if default is None:
            raise InputError(f"{what}: missing")
        return np.full(n, default, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] != n:
        raise InputError(f"{what}: expected {n} values, got {arr.shape[0]}")
    return arr
