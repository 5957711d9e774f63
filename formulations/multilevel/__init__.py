"""Pesto's multilevel pipeline: coarsen the graph, solve the coarse ILP, project and refine
(Pesto Sec. 4.3), and its V-cycle variant. The pipeline is not a model: it calls the model of
:mod:`dnnplace.formulations.pesto_ip` (or CP-SAT's, :mod:`dnnplace.formulations.pesto_cpsat`)
through the solver layer and the coarsenings of :mod:`dnnplace.heuristics.coarsening`.
"""
