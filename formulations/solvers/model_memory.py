"""What a MIP model will take of the process's memory, estimated before it is built, so a
method refuses a model past the run's memory limit (:func:`dnnplace.runtime.memory.headroom`)
instead of being killed while it builds or solves it: the method then returns its cheap
answer with termination ``memory_limit`` (docs/guide.md, "Time and memory limits").

The constant is measured on built and solved max-load IPs (results/memory-limits.md): the
Pyomo model is a small part of it, the solver's copy and its search the rest.

>>> model_bytes(10_000)
60000000.0
>>> over_budget(60e6, 1e9) is None, over_budget(6e9, 1e9)  # doctest: +ELLIPSIS
(True, 'the model would take about 6.00 GB, more than the 1.00 GB left under the memory limit')
"""

from __future__ import annotations

__all__ = ["BYTES_PER_ROW_OR_COLUMN", "model_bytes", "over_budget"]

BYTES_PER_ROW_OR_COLUMN = 6000.0
"""Bytes of the process's memory per variable or constraint of a built and solved model (the
Pyomo model, the solver's copy and its search; measured, see the module docstring)."""


def model_bytes(rows_and_columns: float) -> float:
    """The estimated memory of a model with ``rows_and_columns`` variables and constraints."""
    return BYTES_PER_ROW_OR_COLUMN * float(rows_and_columns)


def over_budget(need: float, room: float | None) -> str | None:
    """Why a model estimated at ``need`` bytes must not be built with ``room`` bytes left under the
    memory limit (``None``: it may; ``room`` ``None``: no limit)."""
    if room is None or need <= room:
        return None
    return (f"the model would take about {need / 1e9:.2f} GB, more than the {room / 1e9:.2f} GB left under the "
            "memory limit")
