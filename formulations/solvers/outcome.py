"""What a solve produced: :class:`SolveOutcome`, returned by
:func:`dnnplace.formulations.solvers.driver.solve_model` (import it from there) and built by the
backends of :mod:`dnnplace.formulations.solvers.backends`."""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnplace.runtime.termination import Termination

__all__ = ["SolveOutcome", "Termination"]


@dataclass
class SolveOutcome:
    """What a solve produced.

    ``status`` is what we have (``optimal`` / ``feasible`` / ``infeasible`` /
    ``no_solution`` / ``error``); ``termination`` why the solver stopped (a
    :class:`Termination`; a solver's own word is mapped by :meth:`Termination.of`). ``incumbent`` and ``bound`` are
    in the model's objective sense; ``gap`` is the solver's relative MIP gap where it
    reports one (HiGHS ``mip_gap``, Gurobi ``MIPGap``), else ``|inc - bound| / |inc|``.
    ``trace`` holds ``(seconds, incumbent, bound)`` triples; the variables of the model
    hold the incumbent's values when ``status`` is optimal or feasible.
    """

    status: str
    termination: Termination
    incumbent: float | None = None
    bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    handoff_seconds: float = 0.0
    solver: str = ""
    solver_version: str | None = None
    nodes: int | None = None
    n_vars: int = 0
    n_cons: int = 0
    n_binaries: int = 0
    message: str | None = None
    warm_start_given: bool = False
    trace: list[tuple[float, float | None, float | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.termination = Termination.of(self.termination)

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible")
