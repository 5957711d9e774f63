"""Pesto's multilevel pipeline: coarsen the graph, solve the coarse ILP, project and refine
(Pesto Sec. 4.3), and its V-cycle variant. The pipeline is not a model: it calls the model of
:mod:`dnnplace.formulations.pesto_ip` (or CP-SAT's, :mod:`dnnplace.formulations.pesto_cpsat`)
through the solver layer and the coarsenings of :mod:`dnnplace.heuristics.coarsening`.

Its modules, each importing only those listed before it: ``options`` (what a run takes and
gives), ``exact`` (horizon, model-size check, coarse message counts, the exact solve), ``never_worse`` (the
comparisons with obvious answers and the last-stage refinement), ``stages`` (the stages of
one run), ``subclusters`` (the runs on sub-clusters with fewer devices, whose answers the
run's never loses to), ``pesto`` (the entry, :func:`~dnnplace.formulations.multilevel.pesto.pesto`) and
``vcycle``.
"""
