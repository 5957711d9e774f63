"""The solver layer, apart from the models: one way to solve any Pyomo model.

:mod:`~dnnplace.formulations.solvers.options` (:class:`SolverOptions`: engine, limits, gap,
threads, seed), :mod:`~dnnplace.formulations.solvers.driver` (``solve_model``: warm start,
limits, trace, the size-limited Gurobi licence), :mod:`~dnnplace.formulations.solvers.backends`
(HiGHS, Gurobi, SCIP behind one interface), :mod:`~dnnplace.formulations.solvers.outcome`
(status, incumbent, bound, gap, times) and :mod:`~dnnplace.formulations.solvers.interrupts`
(Ctrl-C and deadlines reaching a running engine). Solver facts: docs/backends.md.
"""
