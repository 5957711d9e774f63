"""Why a solve or a method stopped: :class:`Termination`, the one vocabulary of the
``termination`` of a :class:`~dnnplace.formulations.solvers.outcome.SolveOutcome`, a method's
output and a result record (``dnnplace.results.Result``). It lives in the runtime layer so
that every layer (the DP's heuristics included) sets a termination from the same set."""

from __future__ import annotations

import enum

__all__ = ["Termination"]


class Termination(enum.StrEnum):
    """Why a solve or a method stopped: the project's one vocabulary (``str``-valued, as
    Pyomo's ``TerminationCondition``), written as its value into results.

    A solver's own words (``pyomo.contrib.solver``'s ``TerminationCondition`` names) and the
    words older records hold are read with :meth:`of`, the one place they are mapped.

    >>> Termination.of("maxTimeLimit") is Termination.TIME_LIMIT, Termination.TIME_LIMIT == "time_limit"
    (True, True)
    >>> str(Termination.of("convergenceCriteriaSatisfied")), Termination.of(None)
    ('optimal', None)
    """

    OPTIMAL = "optimal"  # the solver proved its answer optimal (to the requested gap)
    COMPLETED = "completed"  # a method's own search ran to its end
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    OBJECTIVE_LIMIT = "objective_limit"
    IDEAL_LIMIT = "ideal_limit"  # more ideals than the DP was allowed
    MEMORY_LIMIT = "memory_limit"  # the DP's lattice outgrew the memory budget
    INTERRUPTED = "interrupted"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    LICENCE = "licence"  # a model over the solver's licence
    CANCELLED = "cancelled"  # a sweep's run that hung and was stopped
    ERROR = "error"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: str | Termination | None) -> Termination | None:
        """``value`` (a solver's ``TerminationCondition`` name, an older record's word, or
        this vocabulary's) as a :class:`Termination`; ``None`` stays ``None``."""
        if value is None or isinstance(value, cls):
            return value
        name = getattr(value, "name", value)  # a Pyomo TerminationCondition
        try:
            return cls(name)
        except ValueError:
            return _SOLVER_WORDS.get(str(name), cls.UNKNOWN)


_SOLVER_WORDS = {"maxTimeLimit": Termination.TIME_LIMIT, "convergenceCriteriaSatisfied": Termination.OPTIMAL,
                 "iterationLimit": Termination.ITERATION_LIMIT, "maxIterations": Termination.ITERATION_LIMIT,
                 "objectiveLimit": Termination.OBJECTIVE_LIMIT, "provenInfeasible": Termination.INFEASIBLE,
                 "locallyInfeasible": Termination.INFEASIBLE, "infeasibleOrUnbounded": Termination.INFEASIBLE,
                 "licensingProblems": Termination.LICENCE, "minStepLength": Termination.ERROR,
                 "emptyModel": Termination.ERROR}
"""The words of ``pyomo.contrib.solver``'s ``TerminationCondition`` (and of records written
with them) that differ from :class:`Termination`'s."""
