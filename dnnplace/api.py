"""The Python API: what the ``dnnplace`` subcommands do, as functions (docs/guide.md,
"The Python API").

``from dnnplace import load_graph, solve, ...`` reaches these functions (the package
imports this module on first use, so ``import dnnplace`` stays cheap). Each takes what
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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dnnplace.graphs.errors import InputError
from dnnplace.runtime.termination import Termination

if TYPE_CHECKING:
    from dnnplace.evaluation.evaluate import Evaluation
    from dnnplace.evaluation.sim_result import SimResult
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.instance import Instance
    from dnnplace.methods.base import Method
    from dnnplace.pytorch.execution.launch import Measured
    from dnnplace.results import Result

__all__ = ["load_graph", "load_cluster", "capture", "solve", "evaluate", "simulate", "execute", "list_methods"]


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


# ---------------------------------------------------------------------------- capture
def capture(model: Any, *, inputs: Sequence[Any] = (), loss: Any = None, batch: int | None = None,
            seq: int | None = None, params: Mapping[str, Any] | None = None, cost: str = "roofline:v100",
            inference: bool = False, optimizer: str = "adam", cluster: Any = None,
            name: str | None = None) -> Instance:
    """Capture a PyTorch model's training (or inference) step as a graph with costs, as
    ``dnnplace capture`` does (needs the ``torch`` extra).

    Parameters
    ----------
    model : str or torch.nn.Module
        A zoo name (``"resnet-50"``; ``dnnplace capture --help`` lists them),
        ``"FILE.py:FACTORY"``, ``"package.module:FACTORY"``, or a module.
    inputs : sequence
        For a name: ``SHAPE[:DTYPE[:HIGH]]`` strings (``"16x3x32x32"``), one per input of
        ``forward``; for a module: its example tensors (required).
    loss : str or callable, optional
        ``"sum"``, ``"mse"``, ``"cross_entropy"``, or (for a module) ``loss(out, *inputs)``.
    batch, seq : int, optional
        Zoo models' batch size and sequence length.
    params : mapping, optional
        Zoo overrides (``layers``, ...) or the factory's keyword arguments.
    cost : str
        ``"roofline:v100|a100|h100"``, ``"measured[:cpu|cuda]"``, ``"calibrated:<gpu>"``
        (docs/guide.md, "Graphs from PyTorch and your own model").
    inference : bool
        The forward graph only.
    optimizer : str
        ``"adam"``, ``"momentum"`` or ``"sgd"``: the update step captured with the gradients.
    cluster : str, path or Cluster, optional
        Attached to the instance (:func:`load_cluster`).
    name : str, optional
        The graph's name (default: as ``dnnplace capture`` names it).

    Returns
    -------
    Instance
        The captured graph (``graph.meta["capture"]`` records the inputs and loss,
        checked again by :func:`execute`) and the cluster.

    Raises
    ------
    InputError
        An unknown zoo name, a model file that fails to import, bad input shapes or
        options, a bad cluster (before the capture); torch missing.

    Examples
    --------
    >>> inst = capture("lenet-5", batch=4, cluster="single-host-2-nvlink")  # doctest: +SKIP
    >>> inst.graph.n, inst.graph.kinds, inst.cluster.names  # doctest: +SKIP
    (55, ('gpu',), ('gpu0', 'gpu1', 'cpu0'))

    ``cost="measured:cpu"`` times each operator on this host's CPU (compute kind ``cpu``,
    for ``cluster="local-cpu-2"``).
    """
    from dnnplace.capture_commands import capture_one
    from dnnplace.graphs.instance import Instance
    from dnnplace.pytorch.capture.ops import require_torch

    if cluster is not None:
        load_cluster(cluster)  # a bad preset or file: refused before the capture
    require_torch()
    if isinstance(model, str):
        import argparse

        from dnnplace.pytorch.capture import zoo
        from dnnplace.pytorch.capture.models import is_user_spec

        if not is_user_spec(model):
            zoo.entry(model)  # an unknown name lists the zoo
        elif batch is not None or seq is not None:
            raise InputError(f"{model}: batch= and seq= apply to zoo models only; give your model's input shapes "
                             "with inputs=[\"SHAPE[:dtype]\", ...]")
        for what, value in (("batch", batch), ("seq", seq)):
            if value is not None and value < 1:
                raise InputError(f"{what}={value}: must be a positive integer")
        args = argparse.Namespace(model=model, input=[inputs] if isinstance(inputs, str) else list(inputs),
                                  loss=loss, seq=seq, tiled=False, inference=inference, cost=cost,
                                  optimizer=optimizer)
        from dnnplace.pytorch.capture.costs import cost_models

        inst, _ = capture_one(args, batch, dict(params or {}), cost_models(cost))  # as `dnnplace capture` does
        if not is_user_spec(model):
            inst.graph.meta["batch"] = batch if batch is not None else zoo.entry(model).defaults.get("batch")
        if name:
            inst = Instance(inst.graph.with_(name=name), None, f"capture:{name}")
    else:
        from dnnplace.pytorch.capture import capture as capture_module
        from dnnplace.pytorch.capture.named_losses import loss_by_name

        if not inputs:
            raise InputError("inputs: a module needs its example tensors (inputs=(x,))")
        loss_fn = loss_by_name(loss or "sum") if loss is None or isinstance(loss, str) else loss
        inst = capture_module(model, tuple(inputs), loss_fn, training=not inference, cost=cost,
                              name=name or type(model).__name__, optimizer=optimizer)
    if cluster is not None:
        inst = Instance(inst.graph, load_cluster(cluster, inst.graph), inst.source)
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


# ---------------------------------------------------------------------------- execute
def execute(model: str, plan: Any, *, graph: Any = None, cluster: Any = None, inputs: Sequence[str] = (),
            loss: str | None = None, batch: int | None = None, seq: int | None = None,
            params: Mapping[str, Any] | None = None, optimizer: str = "adam", lr: float = 1e-3, steps: int = 5,
            warmup: int = 2, timeout: float = 300.0, cuda: bool = False) -> Measured:
    """Run a plan's training step with one process per device and measure it, as
    ``dnnplace execute`` does (needs the ``torch`` extra; docs/execution.md).

    Call it from a script under ``if __name__ == "__main__":``: the workers are spawned
    processes, which run the main script again (:func:`dnnplace.main_guard.check_main_guard` says so before
    anything starts).

    Parameters
    ----------
    model : str
        A zoo name, ``"FILE.py:FACTORY"`` or ``"package.module:FACTORY"`` (as for
        :func:`capture`; the step is rebuilt in every process from this).
    plan : Result, path or dict
        A result (placement and start times: each device runs its operators in that
        order) or a ``{node id: device}`` map (then in the simulated FIFO order).
    graph : str, path, Instance or OpGraph, optional
        The graph with costs the plan was made on (default: the result's ``instance``
        file); gives the simulated order of a plan without start times and checks that
        the plan is of this model's step (inputs, loss).
    cluster : str, path or Cluster, optional
        The devices' names (default: the cluster the result was solved on).
    inputs, loss, batch, seq, params, optimizer, lr
        The model's step, as :func:`capture` takes them (``lr``: the optimizer's
        learning rate).
    steps, warmup : int
        Measured steps (their median is reported) after the warm-up steps.
    timeout : float
        Seconds before a stuck step is stopped (every worker killed).
    cuda : bool
        Run the cluster's GPU devices on this host's GPUs (``cuda:0``, ...).

    Returns
    -------
    Measured
        ``step_ms`` (each step; ``to_dict()["measured_step_ms"]`` the median),
        ``matches_reference`` (every loss and step 0's gradients equal an eager
        single-process step's), ``ops`` (each operator's measured interval), transfers.
        :func:`simulate` of the same plan gives the prediction.

    Raises
    ------
    InputError
        A call outside the main guard, a bad plan, graph or cluster, a plan of another
        step (inputs or loss), counts out of range.
    dnnplace.pytorch.execution.launch.ExecutionError
        A worker failed or the step did not finish within ``timeout``.

    Examples
    --------
    In a script, under the guard (docs/guide.md, "The Python API", runs this)::

        if __name__ == "__main__":
            inst = capture("tests/exec_models.py:mlp", inputs=["32x64"], cost="measured:cpu", cluster="local-cpu-2")
            run = execute("tests/exec_models.py:mlp", solve(inst, "heft"), graph=inst, inputs=["32x64"])
            print(run.matches_reference)   # True
    """
    from dnnplace.main_guard import check_main_guard

    check_main_guard()
    import math

    for what, value, low in (("steps", steps, 1), ("warmup", warmup, 0), ("batch", batch, 1), ("seq", seq, 1)):
        if value is not None and value < low:
            raise InputError(f"{what}={value}: must be an integer >= {low}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InputError(f"timeout={timeout:g}: must be a number of seconds > 0")
    if not (math.isfinite(lr) and lr >= 0):
        raise InputError(f"lr={lr:g}: must be a finite learning rate >= 0")
    doc, source = _placement_doc(plan)
    placement = doc["placement"] if isinstance(doc.get("placement"), dict) else doc
    start = doc.get("start") if isinstance(doc.get("start"), dict) else None
    if not placement or not all(isinstance(v, str) for v in placement.values()):
        raise InputError(f"{source}: 'placement' must map node ids to device names")
    if graph is None and isinstance(doc.get("instance"), str) and os.path.isfile(doc["instance"]):
        graph = doc["instance"]
    if graph is None:
        raise InputError(f"{source}: no graph with costs (give graph=, the graph the plan was made on)")
    p, _, _ = _placed(graph, doc, cluster)  # a plan of another graph: refused here
    from dnnplace.execute_command import gpu_map, predict
    from dnnplace.graphs.instance import Instance
    from dnnplace.pytorch.execution.launch import Plan
    from dnnplace.pytorch.execution.launch import execute as run_plan
    from dnnplace.pytorch.execution.worker import ModelSpec

    names, kinds = list(p.cluster.names), list(p.cluster.kinds)
    sim = predict(Instance(p.graph, p.cluster), placement, start)
    order = start or dict(zip(p.graph.ids, sim.schedule.start.tolist()))
    spec = ModelSpec(spec=model, inputs=(inputs,) if isinstance(inputs, str) else tuple(inputs), loss=loss,
                     batch=batch, seq=seq, params=dict(params or {}), optimizer=optimizer, lr=lr)
    return run_plan(spec, [Plan(placement, order)], names, steps=steps, warmup=warmup, timeout_s=timeout,
                    torch_devices=gpu_map(names, kinds) if cuda else {},
                    captured=p.graph.meta.get("capture"))[0]
