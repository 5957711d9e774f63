"""Evaluation and simulation: how good a placement is, judged independently of the method
that made it.

:mod:`~dnnplace.evaluation.evaluate` validates and scores any placement for the three
problems (docs/semantics.md 3), with the per-device loads of
:mod:`~dnnplace.evaluation.loads` and the contiguity checks of :mod:`~dnnplace.evaluation.contiguity`;
:mod:`~dnnplace.evaluation.simulate` and its ``sim_*``
parts replay a placed training step event by event (compute, transfers on link ports, memory);
:mod:`~dnnplace.evaluation.schedule_checks` re-checks a schedule against the semantics;
:mod:`~dnnplace.evaluation.bounds` holds the lower bounds no placement beats;
:mod:`~dnnplace.evaluation.link_orders` the order each link carries its transfers in;
:mod:`~dnnplace.evaluation.gantt` draws a simulated schedule. Nothing here imports a
method, a solver or the framework.
"""
