"""Switching the constraint families of a model on and off.

Every builder adds each constraint family with its own ``_add_<family>(model, data)``;
:func:`add_families` adds, in order, those whose switch (an option of the model) is on.

>>> added = []
>>> add_families("m", "data", [(True, lambda m, d: added.append("always")),
...                            (False, lambda m, d: added.append("off")),
...                            (True, lambda m, d: added.append("on"))])
>>> added
['always', 'on']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["add_families"]


def add_families(m: Any, data: Any, families: Iterable[tuple[Any, Callable[[Any, Any], None]]]) -> None:
    """Call ``add(m, data)`` for every ``(switch, add)`` pair whose switch is on, in order
    (a family every model has is passed with the switch ``True``)."""
    for on, add in families:
        if on:
            add(m, data)
