"""Solving the CP-SAT model of Pesto's ILP (:mod:`dnnplace.formulations.pesto_cpsat` builds
it): the solver's parameters, the trace of incumbents and bounds, the status (a model whose
durations were rounded is a relaxation: never ``optimal``) and the schedule read back."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.outcome import SolveOutcome, Termination
from dnnplace.formulations.solvers.progress import Trace, stage
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement

__all__ = ["CpsatTimes", "solve_cpsat_model"]


@dataclass
class CpsatTimes:
    """The solved schedule in the graph's time unit (integer solver times / ``scale``):
    placement, node start and finish, and per edge the transfer start and finish where
    it crosses devices with congestion modelled (``NaN`` elsewhere)."""

    placement: Placement
    start: np.ndarray
    finish: np.ndarray
    xfer_start: np.ndarray
    xfer_finish: np.ndarray

    def as_tuple(self):
        return self.placement, self.start, self.finish, self.xfer_start, self.xfer_finish


def solve_cpsat_model(m, cp_model, sopts: SolverOptions, scale: float, exactness: tuple[bool, bool], build: float,
                      warm: bool, g: OpGraph, cl: Cluster, x, S, C, T, TT) -> tuple[SolveOutcome, CpsatTimes | None]:
    """Solve the built model ``m`` (:func:`~dnnplace.formulations.pesto_cpsat.solve_pesto_cpsat`)
    under ``sopts`` (time limit, workers, gap, seed, CP-SAT's own parameters by name under
    ``solver_options["cpsat_parameters"]``), Ctrl-C stopping the search; trace every new
    incumbent and bound; read the schedule back in the graph's time unit (``/ scale``).
    ``exactness``: (durations exact, the model no stricter than the instance): ``optimal``
    needs both, the bound is reported only with the second."""
    import ortools

    slv = cp_model.CpSolver()
    prm = slv.parameters
    if sopts.time_limit is not None:
        prm.max_time_in_seconds = float(sopts.time_limit)
    prm.num_workers = int(sopts.threads or 1)
    if sopts.rel_gap is not None:
        prm.relative_gap_limit = float(sopts.rel_gap)
    if sopts.seed is not None:
        prm.random_seed = int(sopts.seed)
    prm.log_search_progress = bool(sopts.tee)
    for name, value in (sopts.solver_options or {}).get("cpsat_parameters", {}).items():  # CP-SAT's own names
        if isinstance(value, list | tuple):
            getattr(prm, name).extend(value)
        else:
            setattr(prm, name, value)
    # CP-SAT would catch SIGINT itself and stop as at a time limit, which reads as a
    # result: the signal stays Python's, and a Ctrl-C stops the search (stop_search)
    # and raises KeyboardInterrupt (formulations/solvers/interrupts.py)
    prm.catch_sigint_signal = False
    trace = Trace()
    stage("solve (cpsat)")
    t0 = time.perf_counter()
    exact, bound_ok = exactness  # times exact; the model no stricter than the instance (memory)

    class _Trace(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            trace.append((time.perf_counter() - t0, self.ObjectiveValue() / scale,
                          self.BestObjectiveBound() / scale if bound_ok else None))

    def _bound_moved(value: float) -> None:  # a new bound between solutions, beside the last incumbent
        if bound_ok and trace:
            trace.append((time.perf_counter() - t0, trace[-1][1], value / scale))

    slv.best_bound_callback = _bound_moved

    from dnnplace.formulations.solvers.interrupts import run_stoppable

    code = run_stoppable(lambda: slv.Solve(m, _Trace()), slv.stop_search)
    seconds = time.perf_counter() - t0
    stats = m.Proto()
    n_bool = sum(1 for v in stats.variables if list(v.domain) == [0, 1])
    base = dict(build_seconds=build, solve_seconds=seconds, solver="cpsat", solver_version=ortools.__version__,
                nodes=int(slv.NumBranches()), n_vars=len(stats.variables), n_cons=len(stats.constraints),
                n_binaries=n_bool, warm_start_given=warm, trace=trace)
    if code == cp_model.INFEASIBLE:
        return SolveOutcome("infeasible", Termination.INFEASIBLE, **base), None
    if code == cp_model.MODEL_INVALID:
        return SolveOutcome("error", Termination.ERROR, message=m.Validate(), **base), None
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveOutcome("no_solution", Termination.TIME_LIMIT, **base), None
    inc, bnd = slv.ObjectiveValue() / scale, slv.BestObjectiveBound() / scale
    trace.append((seconds, inc, bnd if bound_ok else None))
    proven = code == cp_model.OPTIMAL
    gap = abs(inc - bnd) / max(abs(inc), 1e-12)
    msg = [] if exact else [f"durations rounded down to 1/{scale:g} of the time unit: the model is a relaxation "
                            "(its bound holds, its objective is not a replayed makespan)"]
    if not bound_ok:
        msg.append("fractional memory bytes rounded up: the CP-SAT bound is not a bound of the true problem "
                   "(dropped)")
    out = SolveOutcome("optimal" if proven and exact and bound_ok else "feasible",
                       Termination.OPTIMAL if proven else Termination.TIME_LIMIT,
                       incumbent=inc, bound=bnd if bound_ok else None, gap=gap, message="; ".join(msg) or None,
                       **base)
    D = cl.size
    dev = np.array([next(d for d in range(D) if (i, d) in x and slv.BooleanValue(x[i, d])) for i in range(g.n)],
                   dtype=np.int64)
    st = np.array([slv.Value(v) for v in S], dtype=np.float64)
    fin = np.array([slv.Value(v) for v in C], dtype=np.float64)
    xs = np.full(g.m, np.nan)
    xf = np.full(g.m, np.nan)
    for e, var in T.items():
        a, b = dev[g.src[e]], dev[g.dst[e]]
        if a != b:
            xs[e] = slv.Value(var)
            xf[e] = xs[e] + TT[e, a, b]
    return out, CpsatTimes(Placement(g, cl, dev), st / scale, fin / scale, xs / scale, xf / scale)
