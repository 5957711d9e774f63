"""Backend options in Pyomo's vocabulary (``pyomo.contrib.solver`` config).

A light module of its own so that the command line and the method list can carry solver
options without importing Pyomo; :mod:`dnnplace.formulations.driver` consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SolverOptions"]


@dataclass(frozen=True)
class SolverOptions:
    """``solver`` (``highs`` default, ``gurobi``, or any Pyomo MIP solver name),
    ``time_limit`` (s), ``rel_gap``, ``threads``, ``seed``, ``tee`` and raw
    ``solver_options`` handed to the backend."""

    solver: str = "highs"
    time_limit: float | None = None
    rel_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    tee: bool = False
    solver_options: dict[str, Any] = field(default_factory=dict)
