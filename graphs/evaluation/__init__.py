"""Evaluation and simulation: how good a placement is, judged independently of the method
that made it.

:mod:`~dnnplace.graphs.evaluation.evaluate` validates and scores any placement for the three
problems (docs/semantics.md 3), with the per-device loads of
:mod:`~dnnplace.graphs.evaluation.loads` and the contiguity checks of :mod:`~dnnplace.graphs.evaluation.contiguity`;
:mod:`~dnnplace.graphs.evaluation.simulate` and its ``sim_*``
parts replay a placed training step event by event (compute, transfers on link ports, memory);
:mod:`~dnnplace.graphs.evaluation.schedule_checks` re-checks a schedule against the semantics;
:mod:`~dnnplace.graphs.evaluation.bounds` holds the lower bounds no placement beats;
:mod:`~dnnplace.graphs.evaluation.link_orders` the order each link carries its transfers in;
:mod:`~dnnplace.graphs.evaluation.gantt` draws a simulated schedule. Nothing here imports a
method, a solver or the framework.
"""
