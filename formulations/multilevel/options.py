"""What one run of Pesto's pipeline (:func:`~dnnplace.formulations.multilevel.pesto.pesto`) is
given and what it returns: :class:`PipelineOptions` (how it runs), :class:`Starts` (what it knows
besides the instance) and :class:`PestoRun` (everything it produced)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dnnplace.formulations.pesto_ip import PestoOptions
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.graphs.placement import Placement

__all__ = ["PestoRun", "PipelineOptions", "Starts"]


@dataclass
class PestoRun:
    """Everything one Pesto run produced (all times in ``graph.unit``)."""

    placement: Placement
    priorities: np.ndarray
    makespan: float                 # simulated on the original graph (reported objective)
    status: str
    termination: str | None
    bound: float | None             # valid lower bound for the original graph
    ilp_objective: float | None     # ILP makespan on the (coarse) graph
    ilp_bound: float | None
    ilp_gap: float | None
    warm_makespan: float            # best list schedule, simulated on the original graph
    warm_algorithm: str
    source: str                     # "ilp" or "warm_start"
    coarse_n: int
    build_seconds: float
    solve_seconds: float
    coarsen_seconds: float
    size: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    solver_version: str | None = None
    coarse_placement: Placement | None = None
    coarse_start: np.ndarray | None = None
    message: str | None = None
    link_priorities: np.ndarray | None = None  # per edge, the replayed link order (None: FCFS links)



@dataclass(frozen=True)
class PipelineOptions:
    """How :func:`pesto` runs: one object, built once by its caller (the ``pesto`` method
    builds it from its options and the request) and passed down as it is.

    Parameters
    ----------
    coarsen_to : int, optional
        Target node count of the coarsening (``None``: solve the graph as it is).
    coarsen_with : {"pesto", "celeritas-fusion"}
        The coarsener: ``"pesto"``, Pesto's batch merging (Sec. 3.3,
        :func:`~dnnplace.heuristics.coarsening.coarsen`), or ``"celeritas-fusion"``,
        Celeritas' optimal operation fusion with window ``R = ceil(n / coarsen_to)``, so at
        least ``coarsen_to`` nodes (:func:`~dnnplace.heuristics.fusion.fuse_to`; never guided).
    guided : bool
        Coarsened runs: merge only nodes that the best list schedule of the original
        graph keeps on one device, and offer that schedule as a coarse MIP start
        (module docstring, step 1; skipped when that schedule overflows a device).
    congestion : bool
        Semantics of the final simulation (and of the ILP unless ``ilp_congestion``).
    ilp_congestion : bool, optional
        Model link congestion in the ILP (Pesto's ablation, Fig. 5, turns it off while
        still simulating with congestion).
    transfer_mode : {"per_destination", "per_edge"}, optional
        What the final simulation sends (docs/semantics.md 2.1; ``None``: the current mode,
        :func:`~dnnplace.evaluation.sim_costs.current_transfer_mode`, ``"per_destination"``
        unless set). The ILP always counts one transfer per edge, and every schedule it
        is compared with on its own graph (horizon, MIP starts) is simulated so; its
        bound and its proven optimum count for the answer only under ``"per_edge"``.
    engine : {"mip", "cpsat"}
        The exact engine: the Pyomo MIP (:mod:`~dnnplace.formulations.pesto_ip`) through
        the solver named in ``solver``, or the same model in OR-Tools CP-SAT
        (:mod:`~dnnplace.formulations.pesto_cpsat`, extra ``dnnplace[cpsat]``; its
        ``threads`` are CP-SAT workers). Both hand over placement, device and link
        orders the same way.
    solver : SolverOptions
        Backend and limits, as given (its own defaults: HiGHS without a limit; the
        ``pesto`` method's default limits are declared in :mod:`dnnplace.methods`).
    model : PestoOptions
        Constraint families; its ``congestion`` is overridden by ``ilp_congestion``.
    warm_start : bool
        Pass the best list schedule to the solver as a MIP start.
    relaxed_start : float
        With congestion in the ILP: first solve the same model *without* congestion
        constraints (7) for this share of the ILP's time, replay its schedule with
        congestion (FCFS links) and, when it beats the list schedule, make it the
        horizon and MIP start of the full model (``0`` skips the phase;
        ``extra["model_size"]["relaxed_start"]`` records it). Without (7) the model has
        no transfer-pair order variables, so on coarse graphs it solves far sooner.
    fallback : bool
        Keep the better of the ILP's replay, the runtime orders (coarse runs) and the
        warm start. ``False`` reports the ILP's own placement and order only (for
        ablations that must compare ILP solutions as such).
    refine_share : float
        Coarsened runs with ``fallback``: the share of the solver's time limit kept for
        the last stage on the original graph (the ILP gets the rest; the refinement
        stops at the run's ``deadline``, leaving time for the closing simulations; 60 s
        of refinement without a limit). The answer so far
        is compared with the best list schedule *of the original graph* (so the
        pipeline is never worse than the best heuristic it knows), and the better one is refined by unit moves
        (:func:`~dnnplace.heuristics.refine.refine_placement`: coarse nodes as units,
        then single nodes, scored by the simulator under the critical-path policy and
        replayed in its order). ``0`` skips the stage.
    kicks : int
        The last stage's iterated local search: after the single-node moves converge,
        kicks (a stretch of the critical chain moved to another device, then moves
        around it) until this many in a row improve nothing (at most one per eight units,
        at least 10) or the deadline; ``0`` stops at the first local optimum.
    windows : float
        The share of the last stage kept for its window search: windows of the schedule
        around its critical chain solved again by CP-SAT with the rest held, each kept
        where the simulator replays it faster
        (:func:`~dnnplace.formulations.window_search.window_search`; ``0`` skips it, and so
        does a machine without OR-Tools, the moves then keeping the whole stage).
    subclusters : bool
        With ``fallback``, on a cluster with several interchangeable devices: also solve the
        sub-clusters with fewer of them (``k/2``, ``k/4``, ..., ``1`` of ``k``), each started
        from the best answer below it, within :data:`~dnnplace.formulations.multilevel.subclusters.SUB_SHARE`
        of the time, and return the best answer, lifted to the whole cluster and replayed
        there, so the answer is never worse than the one on any sub-cluster tried
        (:mod:`~dnnplace.formulations.multilevel.subclusters`; off by default here, on in the
        ``pesto`` method).
    """

    coarsen_to: int | None = None
    coarsen_with: str = "pesto"
    guided: bool = False
    congestion: bool = True
    ilp_congestion: bool | None = None
    transfer_mode: str | None = None
    engine: str = "mip"
    solver: SolverOptions = field(default_factory=SolverOptions)
    model: PestoOptions = field(default_factory=PestoOptions)
    warm_start: bool = True
    relaxed_start: float = 0.0
    fallback: bool = True
    refine_share: float = 0.5
    kicks: int = 200
    windows: float = 0.5
    subclusters: bool = False

    @property
    def ilp_cong(self) -> bool:
        """Link congestion in the ILP."""
        return self.congestion if self.ilp_congestion is None else bool(self.ilp_congestion)


@dataclass(frozen=True)
class Starts:
    """What a run knows besides the instance.

    Parameters
    ----------
    extra_starts : sequence of (device, priorities)
        Further schedules *of the graph the ILP sees* (the coarse graph: coarsening is
        deterministic, so a previous run's ``coarse_placement.device`` and an order of
        its ``coarse_start`` qualify); the best re-simulated one (under the ILP's
        congestion setting) replaces the list schedule as horizon and MIP start.
    guide : (name, Placement, priorities), optional
        Coarsened runs: guide the coarsening with this schedule of the original graph
        (a previous answer: :func:`~dnnplace.formulations.multilevel.vcycle.pesto_vcycle`;
        ``PipelineOptions.guided`` makes it the original graph's best list schedule).
    rivals : sequence of (name, Placement)
        Placements *of the original graph* from other heuristics (e.g. the layer-wise
        expert, :func:`~dnnplace.heuristics.baselines.layer_split`) that the last stage of
        a coarsened run also compares against, each replayed in its ``fifo`` order; the
        best memory-feasible one is refined if it beats the answer so far. Pesto's
        pipeline is then never worse than these either (without it the layer-wise expert
        won where communication dominates: results/pesto/README.md, "The method").
    """

    extra_starts: Sequence[tuple[np.ndarray, np.ndarray]] = ()
    guide: tuple[str, Placement, np.ndarray] | None = None
    rivals: Sequence[tuple[str, Placement]] = ()
