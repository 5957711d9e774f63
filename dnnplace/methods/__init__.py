"""The method list: every method the framework runs, in one explicit table.

To add a method: write the algorithm as a plain function over graphs, clusters and
arrays (``heuristics/`` or ``formulations/``; it never imports this package), write a
wrapper ``run(instance, request, options) -> MethodOutput`` and, if it has options, an
:class:`~dnnplace.methods.base.Options` dataclass beside the wrappers of its family
(``dnnplace/methods/<family>.py``), and add one :class:`Method` line below. The
framework then parses and checks its options, runs it through
:func:`dnnplace.registry.solve` (re-scored by the independent evaluator, status from
the evaluation), records it, puts it in tables and on the command line. A method that
must stop by itself declares the limit it runs under when a request sets none here, in
``default_limits`` (the only default of a time limit; its wrapper never re-defaults it).
"""

from __future__ import annotations

from dnnplace.methods import baselines, celeritas, exact_auto, fastt, makespan, pardnn, tarnawski, tarnawski_ip
from dnnplace.methods.base import Method

__all__ = ["METHODS"]

ALL = ("maxload", "latency", "makespan")

METHODS: tuple[Method, ...] = (
    # baselines for every problem
    Method("single", ALL, baselines.run_single, "everything on one accelerator (unsupported nodes on the CPU)",
           kind="baseline"),
    Method("greedy", ALL, baselines.run_greedy, "Tarnawski Sec. 7 greedy contiguous fill in topological order",
           options=baselines.GreedyOptions, kind="baseline"),
    Method("expert", ALL, baselines.run_expert, "a given split file (default: the bundled human-expert split)",
           options=baselines.ExpertOptions, kind="baseline"),
    Method("layer-split", ALL, baselines.run_layer_split,
           "Pesto Sec. 5.2 expert: the model's layers split evenly over the accelerators in order (integer layer "
           "ids, or the parameter-holding modules of a captured graph in program order)", kind="baseline"),
    # Tarnawski et al. (NeurIPS 2020)
    Method("dp", ("maxload", "latency"), tarnawski.run_dp,
           "exact max-load DP over ideals (Tarnawski Sec. 5.1, App. B); for latency: the max-load split (Sec. 7)",
           options=tarnawski.DPOptions, kind="exact", default_contiguity="both"),
    Method("dpl", ("maxload",), tarnawski.run_dpl, "DP over the ideals of a linearisation (Tarnawski Sec. 5.1.2)",
           options=tarnawski.DPLOptions, default_contiguity="both"),
    Method("ip", ("maxload", "latency"), tarnawski_ip.run_ip,
           "Tarnawski et al. integer programs (max-load Fig. 6; latency Figs. 3-4) on any Pyomo MIP backend",
           options=tarnawski_ip.IPOptions, kind="ip", objective_exact=False, default_contiguity="both",
           warm_start=True),
    Method("auto", ("maxload", "latency"), exact_auto.run_auto,
           "the exact method for the graph: the DP where its ideals are few, else (or where the DP does not prove "
           "its split) the IP; the result says which proved the answer", kind="exact", objective_exact=False,
           default_contiguity="both"),
    Method("latency-ls", ("latency",), tarnawski.run_latency_search,
           "iterated local search over contiguous splits (one subgraph per accelerator, Fig. 3 semantics), "
           "one search lane per start (greedy, dp, all-CPU)", options=tarnawski.LatencySearchOptions,
           warm_start=True, default_limits={"time_limit": 30.0}),
    Method("local-search", ("maxload",), tarnawski.run_local_search,
           "best single-unit moves from random starts, seeded restarts (Tarnawski Sec. 6 baseline)",
           options=tarnawski.LocalSearchOptions, kind="baseline"),
    Method("pipedream", ("maxload",), tarnawski.run_pipedream,
           "PipeDream's DP on the graph with branchings contracted to a path (no replication)",
           kind="baseline", default_contiguity="both"),
    Method("partitioner", ("maxload", "latency"), tarnawski.run_partitioner,
           "METIS k-way partition of colocation classes (compute-balanced, communication as edge weight), "
           "standing in for Scotch; memory violations reported", kind="baseline"),
    # makespan: list scheduling and Pesto
    Method("heft", ("makespan",), makespan.run_list_scheduler("heft"),
           "HEFT list scheduling with insertion and memory limits (Topcuoglu et al. 2002)",
           options=makespan.InsertionOptions),
    Method("etf", ("makespan",), makespan.run_list_scheduler("etf"),
           "Earliest Task First list scheduling with insertion and memory limits (Hwang et al. 1989)",
           options=makespan.InsertionOptions),
    Method("m-topo", ("makespan",), makespan.run_list_scheduler("m-topo"),
           "Baechi m-TOPO: topological fill by memory share"),
    Method("m-etf", ("makespan",), makespan.run_list_scheduler("m-etf"), "Baechi m-ETF: memory-constrained ETF"),
    Method("m-sct", ("makespan",), makespan.run_list_scheduler("m-sct"),
           "Baechi m-SCT: ETF with favourite children"),
    Method("pesto", ("makespan",), makespan.run_pesto,
           "Pesto ILP: joint placement and scheduling with link congestion and memory; optional cycle-free "
           "coarsening", options=makespan.PestoMethodOptions, kind="ip", objective_exact=False, warm_start=True,
           default_limits={"time_limit": 60.0, "threads": 1}),
    # Celeritas (Xu et al.)
    Method("celeritas", ("makespan",), celeritas.run_celeritas,
           "Celeritas: CPD-TOPO order, optimal fusion (Alg. 1), Adjusting Placement (Alg. 2); placement only",
           options=celeritas.CeleritasOptions),
    Method("order-place", ("makespan",), celeritas.run_order_place,
           "Celeritas' Order-Place baseline: fused graph filled device after device in CPD-TOPO order",
           options=celeritas.OrderPlaceOptions, kind="baseline"),
    Method("metis", ("makespan",), celeritas.run_metis,
           "METIS k-way partition, nominal transfer time as cut weight, compute and memory balanced; placement only",
           options=celeritas.MetisOptions, kind="baseline"),
    # FastT (Yi et al., Middleware'20)
    Method("dpos", ("makespan",), fastt.run_dpos,
           "FastT DPOS: max-cost upward rank, critical path on its devices, insertion-EFT (Alg. 1)",
           options=fastt.DPOSOptions),
    Method("os-dpos", ("makespan",), fastt.run_os_dpos,
           "FastT OS-DPOS: DPOS plus splitting critical-path ops while the makespan improves (Alg. 2); answers on the "
           "split graph", options=fastt.OSDPOSOptions, default_limits={"time_limit": 60.0}),
    Method("dp-baseline", ("makespan",), fastt.run_dp_baseline,
           "FastT's data-parallel baseline: the graph replicated per GPU, parameters and AddN on GPU 0 (or the "
           "CPU, as TF-slim: variables=cpu); placement only", options=fastt.DPBaselineOptions, kind="baseline"),
    Method("cpop", ("makespan",), fastt.run_cpop,
           "CPOP (Topcuoglu et al. 2002): rank_u + rank_d, the critical path on one device, insertion-EFT",
           options=fastt.CPOPOptions, kind="baseline"),
    # PARDNN (Qararyah et al., ParCo'21) and the clustering baselines of its comparison
    Method("pardnn", ("makespan",), pardnn.run_pardnn,
           "PARDNN: slicing into paths (Alg. 1), LFLAM mapping (Alg. 2, Eq. 1), dynamic-memory heuristics I/II "
           "(10 % margin); placement only", options=pardnn.PardnnOptions, default_limits={"time_limit": 300.0}),
    Method("cp-mayer", ("makespan",), pardnn.run_cp_mayer,
           "Mayer et al. 2017 CP heuristic: critical path on one GPU, other ops to the least-loaded GPU",
           kind="baseline"),
    Method("lc-glb", ("makespan",), pardnn.run_lc_glb,
           "linear clustering (Kim 1988, quadratic) + GLB mapping + EST-first order (PARDNN's LC baseline)",
           options=pardnn.LCOptions, kind="baseline"),
    Method("dsc-glb", ("makespan",), pardnn.run_dsc_glb,
           "DSC clustering (Yang & Gerasoulis 1994) + GLB mapping", kind="baseline"),
)
