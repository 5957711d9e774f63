"""The ``pesto`` makespan method: coarsen, warm-start, solve the Pesto ILP, expand, re-simulate.

Pipeline (Pesto Sec. 3.2-3.3):

1. optionally coarsen the graph to about ``coarsen_to`` nodes with cycle-free batch
   merging (:func:`dnnplace.heuristics.coarsening.coarsen`); with ``guided`` the
   coarsening is guided by the best list schedule *of the original graph*: it merges
   only nodes that schedule puts on one device, so that placement is a placement of
   the coarse graph too (the incumbent survives coarsening, as in a multilevel
   partitioner's refinement-guided coarsening; off by default: see
   ``results/pesto/guided.md``);
2. list-schedule the (coarse) graph with every algorithm of
   :mod:`dnnplace.heuristics.list_scheduling`, re-simulate each, and, when guided, also
   the guiding placement on the coarse graph (coarse nodes ordered by their members'
   first place in the guiding schedule, and by the simulator's critical-path order);
   keep the best: its makespan is the horizon ``U`` of every big-M and its schedule the
   MIP start (``PipelineOptions.warm_start=False``, the method's ``--warm-start none``, disables the
   start, not the horizon);
   With per-message costs (docs/semantics.md 2.1) a coarse edge stands for the messages of
   its original edges (:func:`~dnnplace.formulations.multilevel.exact.coarse_messages`:
   each edge under ``"per_edge"``, exact; each tensor under the default mode), which the
   models charge (their (2')); the simulator of the coarse graph charges one, so the
   start is re-timed in its own orders with the model's costs
   (:func:`~dnnplace.formulations.multilevel.exact.model_start`) before it becomes the
   horizon and the MIP start;
3. build (:func:`dnnplace.formulations.pesto_ip.build_pesto_model`) and solve the ILP with the
   project's driver (:func:`dnnplace.formulations.solvers.driver.solve_model`), or, with
   ``engine="cpsat"``, the same model in CP-SAT
   (:func:`dnnplace.formulations.pesto_cpsat.solve_pesto_cpsat`);
4. expand: every original node takes its coarse node's device; the per-device order is
   the coarse start time, members of one coarse node in topological order; with
   congestion in the ILP, the order of the transfers on each link (constraint (7)) is
   read off the ILP's transfer starts, and a coarse edge's place in its link's order
   goes to its member edges in topological order of their sources
   (:func:`~dnnplace.formulations.pesto_solution.decode_times`,
   :func:`~dnnplace.evaluation.link_orders.orders_from_times`: device and link orders come
   from one sort of all tasks, so they never contradict each other);
5. re-simulate the *original* graph with ``policy="order"``, the ILP's link order
   (``link_priorities``) and the requested congestion: that simulated makespan is the
   reported objective. With ``fallback`` the same device order is also replayed with
   first-come-first-served links and the better is kept (``extra["model_size"]
   ["link_order"]``: ``"ilp"`` or ``"fcfs"``); with coarsening, the ILP placement is
   also replayed under the simulator's ``critical_path`` and ``fifo`` device orders
   (FCFS links) and the best order is kept (Pesto Sec. 3.3 falls back to the runtime's
   scheduler when merged nodes are large); ``extra["model_size"]["order_policy"]`` says
   which order won.

The ILP lets a link serve its transfers in any order (Pesto's constraint (7)) and
counts one transfer per edge (Pesto's DAG augmentation). The simulator replays that
order when it is given (the earliest schedule with the ILP's device and link orders, so
its makespan is at most the ILP's, in either transfer mode: sending a tensor once per
consuming device only removes transfers), and serves links first come first served
otherwise (docs/semantics.md 2.1); an FCFS schedule is one of the orders the ILP allows. Under the
per-edge transfer mode (``transfer_mode="per_edge"``), without coarsening, the ILP's
bound is therefore a valid lower bound for the simulated problem (reported as
``bound``), and an uncoarsened instance solved to optimality with the evaluation's
congestion setting is replayed at the ILP optimum and reported ``optimal``. Under the
default mode (a tensor sent once to each device that consumes it, docs/semantics.md 2.1) the ILP
over-counts transfers: its optimum is an upper bound of what its schedule replays at,
not a lower bound of the problem, so neither its bound nor its proof of optimality is
reported (``extra["ilp_bound"]`` keeps the number) and ``optimal`` needs the replay to
meet the combinatorial bound below. On a cluster whose devices share their link ports
(``cluster.ports == "shared"``, the PCIe presets) the ILP still queues transfers per
link, a relaxation of the simulation: its bound stays valid (per edge), but its
schedule may replay above its objective. With coarsening the ILP bounds only the coarse
problem and is kept in ``extra["coarse_bound"]``. The reported ``bound`` is never weaker than
:func:`~dnnplace.evaluation.bounds.makespan_lower_bound` of the original graph (critical
path, busiest device's share of the work), valid in every case, so a coarsened run still
states its gap (measured: ``results/pesto/README.md``, "The method"). When the replay of
the ILP's order is worse than the warm start's replay, the better of the two is returned
(``extra["source"]`` says which; the warm start has FCFS links).

Never worse with more devices (``PipelineOptions.subclusters``, on in the ``pesto`` method): on a
cluster with ``k`` interchangeable devices the pipeline also runs on the sub-clusters with
``k/2, k/4, ..., 1`` of them and returns the best answer lifted to the whole cluster
(:mod:`~dnnplace.formulations.multilevel.subclusters`; ``extra["source"]``:
``"sub-cluster 2 of 4 gpu"`` where one won).
"""

from __future__ import annotations

import dataclasses

from dnnplace.evaluation.sim_costs import check_transfer_mode, transfer_semantics
from dnnplace.formulations.multilevel.exact import safe_horizon
from dnnplace.formulations.multilevel.never_worse import memory_ok
from dnnplace.formulations.multilevel.options import PestoRun, PipelineOptions, Starts
from dnnplace.formulations.multilevel.stages import PestoPipeline
from dnnplace.formulations.multilevel.subclusters import with_subclusters
from dnnplace.formulations.solvers.progress import Progress
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline

__all__ = ["PestoRun", "PipelineOptions", "Starts", "pesto", "safe_horizon", "memory_ok"]


def pesto(graph: OpGraph, cluster: Cluster, options: PipelineOptions | None = None, starts: Starts | None = None, *,
          deadline: Deadline | None = None) -> PestoRun:
    """Run the Pesto pipeline (see the module docstring) as ``options`` say
    (:class:`PipelineOptions`; default: its defaults) from ``starts`` (:class:`Starts`).

    ``deadline`` (:class:`~dnnplace.runtime.deadline.Deadline`): when the whole run must
    end, the caller's (``dnnplace solve``'s, the Python API's: made once per run and passed
    down; default: none, the solver still holds ``options.solver.time_limit``): list schedules stop starting,
    a model too large to build in the time left is not started, the model build and the
    hand-off to the solver stop at it, the solver gets what is left, the refinement
    stops before it; a run stopped before its ILP answers returns its list-schedule
    start (termination ``time_limit``).

    On a terminal a progress line shows the stage, the time against the limit and the
    solver's incumbent and bound (:mod:`~dnnplace.formulations.solvers.progress`).

    The stages, in order (:class:`~dnnplace.formulations.multilevel.stages.PestoPipeline`):
    coarsen, the start and horizon on the graph the ILP sees, the ILP's share of the time,
    the relaxed start, solve, lift the answer to the original graph, and the comparisons that keep it never worse.
    With ``options.subclusters`` these run first on sub-clusters with fewer interchangeable
    devices, within their share of ``deadline``, and the answer is never worse than theirs
    (:func:`~dnnplace.formulations.multilevel.subclusters.with_subclusters`).
    """
    options = options or PipelineOptions()
    if options.coarsen_with not in ("pesto", "celeritas-fusion"):
        raise InputError(f"coarsen_with {options.coarsen_with!r}: expected 'pesto' or 'celeritas-fusion'")
    if options.engine not in ("mip", "cpsat"):
        raise InputError(f"pesto: unknown engine {options.engine!r}; known: 'mip', 'cpsat'")
    if options.engine == "cpsat":
        from dnnplace.formulations.pesto_cpsat import available

        if not available():
            raise InputError("pesto: engine 'cpsat' needs OR-Tools: pip install 'dnnplace[cpsat]'")
    options = dataclasses.replace(options, transfer_mode=check_transfer_mode(options.transfer_mode))
    deadline = deadline or NO_DEADLINE
    start = None if deadline.end is None else deadline.end - deadline.seconds
    total = deadline.seconds if deadline.end is not None else options.solver.time_limit
    with transfer_semantics(options.transfer_mode), Progress("pesto", total, start=start):
        return with_subclusters(graph, cluster, options, starts or Starts(), deadline,
                                lambda cl, opts, st, dl: PestoPipeline(graph, cl, opts, st, dl).run())
