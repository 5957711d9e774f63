"""The Python API: what the ``dnnplace`` subcommands do, as functions (docs/guide.md,
"The Python API").

``from dnnplace import load_graph, solve, ...`` reaches these functions (the package
imports this module on first use, so ``import dnnplace`` stays cheap): loading and solving
here, scoring a placement in :mod:`dnnplace.api_scoring` (``evaluate``, ``simulate``), the
PyTorch side in :mod:`dnnplace.api_torch` (``capture``, ``execute``). Each takes what
the command line takes, in the forms a script has at hand:

- a **graph**: a path, a bundled workload's name (``"captured/resnet-50"``,
  ``"bert24_training"``; :func:`dnnplace.data.resolve_graph`), an
  :class:`~dnnplace.graphs.instance.Instance` or an :class:`~dnnplace.graphs.graph.OpGraph`;
- a **cluster**: a preset name (``"local-cpu-2"``, ``"single-host-4-nvlink"``;
  :data:`dnnplace.graphs.presets.CLUSTER_PRESETS`), a cluster file (``dnnplace
  profile-links --out``, or a graph file's ``cluster`` section) or a
  :class:`~dnnplace.graphs.cluster.Cluster`;
- a **placement** or plan: a :class:`~dnnplace.results.Result`, a result JSON file or its
  dict, a Tarnawski split, a ``{node id: device name}`` map, or a
  :class:`~dnnplace.graphs.placement.Placement`.

Options are keyword-only and spelled as the command's flags (``time_limit``, ``rel_gap``,
``threads``, ``solver``, ``params``). The functions call what the commands call
(:func:`dnnplace.registry.run_method`, :func:`dnnplace.evaluation.evaluate.evaluate`,
:func:`dnnplace.evaluation.simulate.simulate`,
:func:`dnnplace.pytorch.execution.launch.execute`) and return those functions' records; bad input
raises :class:`~dnnplace.graphs.errors.InputError` naming the argument, file, node or
field at fault, before any work (docs/bad-input.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dnnplace.graphs.errors import InputError
from dnnplace.runtime.termination import Termination

if TYPE_CHECKING:
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.instance import Instance
    from dnnplace.methods.base import Method
    from dnnplace.results import Result

__all__ = ["load_graph", "load_cluster", "solve", "list_methods"]


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


# ---------------------------------------------------------------------------- graphs and clusters
def load_cluster(cluster: Any, graph: Any = None) -> Cluster:
    """A cluster from a preset name, a cluster file or a :class:`Cluster` (returned as is).

    Parameters
    ----------
    cluster : str, path or Cluster
        A preset (``"local-cpu-2"``, ``"single-host-4-nvlink3-32GB"``,
        ``"tarnawski-4-1-16GB"``; ``dnnplace --help`` lists the patterns), a JSON file
        holding a cluster (``dnnplace profile-links --out``, or a graph file with a
        ``cluster`` section), or a ``Cluster``.
    graph : OpGraph, optional
        Adapts a preset to the graph (its time unit; a Tarnawski preset's accelerator kind),
        as ``--cluster`` does.

    Returns
    -------
    Cluster
        A preset's cluster records its name (``meta["preset"]``), so a result records the
        name rather than the whole cluster.

    Raises
    ------
    InputError
        An unknown preset (the message lists the patterns), a missing file, a file that
        holds no cluster, or another type.

    Examples
    --------
    >>> load_cluster("single-host-2-nvlink").names
    ('gpu0', 'gpu1', 'cpu0')
    >>> load_cluster("local-cpu-3").size
    3
    >>> load_cluster("no-such-cluster")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: unknown cluster preset 'no-such-cluster'; use one of ...
    """
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.io import read_cluster  # the one reader of --cluster: preset name or cluster file

    if isinstance(cluster, Cluster):
        return cluster
    if not _is_path(cluster):
        raise InputError(f"cluster: expected a preset name, a cluster file or a Cluster, got {type(cluster).__name__}")
    return read_cluster(os.fspath(cluster), getattr(graph, "graph", graph))


def load_graph(graph: Any, cluster: Any = None, *, check: bool = False) -> Instance:
    """A graph and its cluster as an :class:`Instance`.

    Parameters
    ----------
    graph : str, path, Instance or OpGraph
        A native or Tarnawski graph file, a bundled workload by name
        (``"captured/resnet-50"``, ``"bert24_training"``,
        ``"tarnawski/throughput-inputs/LayerGraphs/bert24_inference.json"``), or an object.
    cluster : str, path or Cluster, optional
        Replaces (or supplies) the graph's own cluster; see :func:`load_cluster`.
    check : bool
        Also run the feasibility checks a solve runs first (a cluster exists, every node
        has a device that can host it, memory can fit).

    Returns
    -------
    Instance
        ``.graph`` (an :class:`~dnnplace.graphs.graph.OpGraph`), ``.cluster`` (``None``
        when neither the file nor ``cluster`` gives one) and ``.source``.

    Raises
    ------
    InputError
        A missing or malformed file (naming it and the field at fault), an ambiguous
        bundled name, a bad cluster, or, with ``check``, an infeasible instance.

    Examples
    --------
    >>> inst = load_graph("captured/transformer-base", "single-host-2-nvlink")
    >>> inst.graph.n > 100, inst.cluster.names
    (True, ('gpu0', 'gpu1', 'cpu0'))
    >>> load_graph("no-such-graph.json")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: no-such-graph.json: no such file
    """
    from dnnplace.graphs.graph import OpGraph
    from dnnplace.graphs.instance import Instance

    if isinstance(graph, Instance):
        inst = graph
    elif isinstance(graph, OpGraph):
        inst = Instance(graph, None, graph.name)
    elif _is_path(graph):
        from dnnplace.data import resolve_graph
        from dnnplace.graphs.io import load_instance

        inst = load_instance(resolve_graph(os.fspath(graph)))
    else:
        raise InputError(f"graph: expected a graph file, a bundled workload's name, an Instance or an OpGraph, "
                         f"got {type(graph).__name__}")
    if cluster is not None:
        inst = Instance(inst.graph, load_cluster(cluster, inst.graph), inst.source)
    if check:
        from dnnplace.graphs.checks import check_instance

        check_instance(inst.graph, inst.require_cluster())
    return inst


# ---------------------------------------------------------------------------- methods and solve
def list_methods(problem: str | None = None) -> list[Method]:
    """The methods, as ``dnnplace methods`` lists them.

    Parameters
    ----------
    problem : {"maxload", "latency", "makespan"}, optional
        Only the methods that solve it.

    Returns
    -------
    list of Method
        Each with ``name``, ``problems``, ``kind``, ``summary`` and ``options`` (a
        dataclass of the method's ``params``; ``dnnplace methods NAME`` describes them).

    Raises
    ------
    InputError
        An unknown problem.

    Examples
    --------
    >>> "heft" in [m.name for m in list_methods("makespan")]
    True
    >>> next(m for m in list_methods() if m.name == "dp").problems
    ('maxload', 'latency')
    """
    from dnnplace.evaluation.evaluate import PROBLEMS
    from dnnplace.registry import all_methods, methods_for

    if problem is None:
        return list(all_methods().values())
    if problem not in PROBLEMS:
        raise InputError(f"problem={problem!r}: unknown; use one of {PROBLEMS}")
    return methods_for(problem)


def solve(graph: Any, method: str, *, cluster: Any = None, problem: str | None = None,
          objective: str | None = None, contiguity: str | None = None, time_limit: float | None = None,
          rel_gap: float | None = None, threads: int | None = None, solver: str | None = None,
          solver_options: Mapping[str, Any] | None = None, seed: int | None = None,
          params: Mapping[str, Any] | None = None, warm_start: str | None = None, policy: str | None = None,
          congestion: bool | None = None, transfer_mode: str | None = None) -> Result:
    """Solve a graph with a method and re-score the answer independently, as ``dnnplace
    solve`` does (:func:`dnnplace.registry.run_method`).

    Parameters
    ----------
    graph : str, path, Instance or OpGraph
        See :func:`load_graph`.
    method : str
        A method's name (:func:`list_methods`).
    cluster : str, path or Cluster, optional
        Replaces the graph's own (:func:`load_cluster`); one of the two is needed.
    problem : {"maxload", "latency", "makespan"}, optional
        Default: the method's problem when it solves one (``heft``: makespan), else maxload.
    objective : {"pipedream", "gpipe", "overlap"}, optional
        The max-load variant (default ``pipedream``).
    contiguity : str, optional
        Default: the method's.
    time_limit, rel_gap, threads, solver, solver_options, seed
        The solver settings (``--time-limit`` ...); ``time_limit`` holds for the whole
        method, counted from this call.
    params : mapping, optional
        The method's own options (``--param KEY=VALUE``; ``dnnplace methods NAME``).
    warm_start : str, optional
        A method's name or a placement file to start from.
    policy, congestion, transfer_mode
        How a makespan is simulated (defaults ``"fifo"``, ``True``, ``"per_destination"``).

    Returns
    -------
    Result
        Status, objective (as the independent evaluator scores it), bounds, placement,
        start times and timings; ``Result.to_dict()`` is what ``solve --out`` writes.

    Raises
    ------
    InputError
        An unknown method, problem or option, a setting out of range (``time_limit =
        -5: ...``), an option of another problem, a bad graph or cluster, an infeasible
        instance, a warm start of another graph, a model over the solver's licence.

    Examples
    --------
    >>> res = solve("bert24_training", "dp", cluster="tarnawski-6-1-16GB")
    >>> res.status, res.problem, round(res.objective, 2) == round(res.evaluation["objective"], 2)
    ('optimal', 'maxload', True)
    """
    from dnnplace.formulations.solvers.options import SettingNote, check_backend, check_values
    from dnnplace.registry import SolveRequest, SolverOptions, get_method, infer_problem, method_options, run_method
    from dnnplace.textout import warn

    m = get_method(method)
    if problem is None:  # as `dnnplace solve` infers it
        problem = infer_problem(m) if len(m.problems) == 1 else "maxload"
    if objective is not None and problem != "maxload":
        raise InputError(f"objective={objective!r} applies to problem 'maxload' only, not {problem!r}")
    given = [f"{k}={v!r}" for k, v in (("policy", policy), ("congestion", congestion),
                                       ("transfer_mode", transfer_mode)) if v is not None]
    if given and problem != "makespan":
        raise InputError(f"{given[0]} applies to problem 'makespan' only, not {problem!r}")
    fields = {k: v for k, v in (("solver", solver), ("time_limit", time_limit), ("rel_gap", rel_gap),
                                ("threads", threads), ("seed", seed)) if v is not None}  # else SolverOptions'
    fields["solver_options"] = dict(solver_options or {})
    check_values(fields)  # SettingError (an InputError): "time_limit = -5: must be ..."
    mode = "per_destination" if transfer_mode is None else str(transfer_mode).replace("-", "_")
    req = SolveRequest(problem=problem, objective=objective or "pipedream", contiguity=contiguity,
                       solver=SolverOptions(**fields), warm_start=warm_start, seed=seed or 0,
                       congestion=True if congestion is None else congestion, policy=policy or "fifo",
                       transfer_mode=mode, params=dict(params or {}))
    method_options(m, req)  # unknown problem, policy or option: one line, before loading
    for note in check_backend(req.solver):
        warn(f"{note.key} {note.text}" if isinstance(note, SettingNote) else note)
    inst = load_graph(graph, cluster, check=True)
    if congestion is None and req.congestion != inst.cluster.default_congestion:   # a calibrated cluster's links
        req = dataclasses.replace(req, congestion=inst.cluster.default_congestion)
    if warm_start and os.path.isfile(warm_start):  # a start of another graph: refused before any work
        from dnnplace.graphs.io import load_placement

        load_placement(warm_start, inst)
    if problem == "makespan":
        from dnnplace.command_args import warn_uneven_outputs

        warn_uneven_outputs(inst.graph, mode)
    res, _ = run_method(inst, m, req)
    if res.status == "error" and res.termination is Termination.LICENCE:
        from dnnplace.formulations.solvers.options import SolverLicenceError, licence_message

        raise SolverLicenceError(licence_message(res.message, req.solver.solver))
    return res
