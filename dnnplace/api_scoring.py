"""The Python API's scoring of a placement: :func:`evaluate` and :func:`simulate`, as
``dnnplace evaluate`` and ``dnnplace simulate`` (docs/guide.md, "The Python API"; the
arguments' forms are :mod:`dnnplace.api`'s).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dnnplace.api import _is_path, load_graph
from dnnplace.graphs.errors import InputError

if TYPE_CHECKING:
    from dnnplace.evaluation.evaluate import Evaluation
    from dnnplace.evaluation.sim_result import SimResult

__all__ = ["evaluate", "simulate"]


# ---------------------------------------------------------------------------- placements
def _placement_doc(placement: Any) -> tuple[Any, str]:
    """A placement argument as ``(document, source)``: a Result as its dict, a file read."""
    from dnnplace.results import Result

    if isinstance(placement, Result):
        return placement.to_dict(), f"result of {placement.method}"
    if _is_path(placement):
        from dnnplace.data import resolve_graph
        from dnnplace.graphs.io import read_json

        path = resolve_graph(os.fspath(placement))  # bundled expert splits by name
        return read_json(path), path
    if isinstance(placement, Mapping):
        return dict(placement), "placement"
    raise InputError(f"placement: expected a Result, a result or split file, its dict or a {{node: device}} map, "
                     f"got {type(placement).__name__}")


def _placed(graph: Any, placement: Any, cluster: Any) -> tuple[Any, Any, str]:
    """``(Placement, document or None, source)``: the instance with ``cluster``, else the
    cluster the result was solved on, else the graph's own (as ``dnnplace evaluate``)."""
    from dnnplace.graphs.placement import Placement

    if isinstance(placement, Placement):
        if graph is not None or cluster is not None:
            raise InputError("placement: a Placement carries its graph and cluster; leave out graph and cluster")
        return placement, None, "placement"
    doc, source = _placement_doc(placement)
    inst = load_graph(graph, cluster)
    if cluster is None:
        from dnnplace.graphs.instance import Instance
        from dnnplace.graphs.io import result_cluster

        cl = result_cluster(doc, inst.graph, source)
        inst = inst if cl is None else Instance(inst.graph, cl, inst.source)
    from dnnplace.graphs.io import placement_from_doc

    return placement_from_doc(doc, inst, source=source), doc, source


def _ns(**kw: Any) -> Any:
    """The flags a command's helper reads, from keyword arguments."""
    import argparse

    return argparse.Namespace(**kw)


def evaluate(graph: Any, placement: Any = None, *, cluster: Any = None, problem: str | None = None,
             objective: str | None = None, contiguity: str | None = None, policy: str | None = None,
             congestion: bool | None = None, transfer_mode: str | None = None) -> Evaluation:
    """Score a placement with the independent evaluator, as ``dnnplace evaluate`` does.

    Parameters
    ----------
    graph : str, path, Instance or OpGraph
        The graph the placement is of (:func:`load_graph`); ``None`` with a ``Placement``.
    placement : Result, path, dict or Placement
        A result (its problem, cluster, transfer mode and order are used unless given), a
        Tarnawski split, a ``{node id: device}`` map, or a ``Placement``.
    cluster : str, path or Cluster, optional
        Default: the cluster the result was solved on, else the graph's.
    problem : {"maxload", "latency", "makespan"}, optional
        Default: the result's problem, else maxload.
    objective, contiguity
        Max-load options.
    policy, congestion, transfer_mode
        Makespan options (a result with start times is replayed in its order).

    Returns
    -------
    Evaluation
        ``objective``, ``feasible``, ``violations`` and ``details``; ``to_dict()`` is what
        ``evaluate --out`` writes.

    Raises
    ------
    InputError
        A bad graph, cluster or placement file (naming it and the node or field at
        fault), a result of another graph, an option of another problem.

    Examples
    --------
    >>> from dnnplace import solve
    >>> res = solve("bert24_training", "dp", cluster="tarnawski-6-1-16GB")
    >>> ev = evaluate("bert24_training", res)
    >>> ev.feasible, abs(ev.objective - res.objective) < 1e-9
    (True, True)
    """
    if placement is None:
        graph, placement = None, graph
    from dnnplace.commands import eval_options, replay_options
    from dnnplace.evaluation.evaluate import PROBLEMS
    from dnnplace.evaluation.evaluate import evaluate as score

    p, doc, source = _placed(graph, placement, cluster)
    if problem is None:  # a result says what it solved
        recorded = doc.get("problem") if isinstance(doc, dict) and "placement" in doc else None
        problem = recorded if recorded in PROBLEMS else "maxload"
    if problem not in PROBLEMS:
        raise InputError(f"problem={problem!r}: unknown; use one of {PROBLEMS}")
    flags = _ns(objective=objective, contiguity=contiguity, policy=policy, congestion=congestion,
                transfer_mode=transfer_mode, placement=source)
    opts = eval_options(flags, problem)
    if problem == "makespan":  # re-scored as the result was scored: its transfer mode and its own order
        opts.update(replay_options(flags, doc, p.graph))
    return score(p, problem, **opts)


def simulate(graph: Any, placement: Any = None, *, cluster: Any = None, policy: str | None = None,
             congestion: bool | None = None, transfer_mode: str | None = None) -> SimResult:
    """Run a placement through the discrete-event simulator, as ``dnnplace simulate`` does.

    Parameters
    ----------
    graph : str, path, Instance or OpGraph
        See :func:`evaluate`.
    placement : Result, path, dict or Placement
        See :func:`evaluate`.
    cluster : str, path or Cluster, optional
        Default: the cluster the result was solved on, else the graph's.
    policy : {"fifo", "critical_path", "priority", "order"}, optional
        How a device picks its next operator (``order``/``priority``: the result's
        start times or priorities). Default: a result with start times is replayed in its
        order (``order``, on the links it was scored on), anything else ``fifo``.
    congestion : bool, optional
        One transfer at a time per link (default, unless the replayed result says otherwise).
    transfer_mode : {"per_destination", "per_edge"}, optional
        Default: the result's, else ``per_destination``.

    Returns
    -------
    SimResult
        ``makespan``, per-node start and finish, transfers, per-device busy time and
        memory; ``to_dict()`` summarises it, :func:`dnnplace.evaluation.gantt.plot_gantt`
        draws it.

    Raises
    ------
    InputError
        As :func:`evaluate`; ``policy="order"`` for a placement without start times.

    Examples
    --------
    >>> from dnnplace import solve
    >>> res = solve("bert24_training", "dp", cluster="tarnawski-6-1-16GB")
    >>> simulate("bert24_training", res).makespan > 0
    True
    """
    if placement is None:
        graph, placement = None, graph
    from dnnplace.commands import replay_options
    from dnnplace.evaluation.simulate import simulate as run_simulation

    p, doc, source = _placed(graph, placement, cluster)
    flags = _ns(policy=policy, congestion=congestion, transfer_mode=transfer_mode, placement=source)
    return run_simulation(p, **{"policy": "fifo", "congestion": p.cluster.default_congestion,
                                **replay_options(flags, doc, p.graph)})
