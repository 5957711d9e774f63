"""The Python API's PyTorch side: :func:`capture` a model's step as a graph and
:func:`execute` a plan of it, as ``dnnplace capture`` and ``dnnplace execute``
(docs/guide.md, "The Python API"; the arguments' forms are :mod:`dnnplace.api`'s).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dnnplace.api import load_cluster
from dnnplace.api_scoring import _placed, _placement_doc
from dnnplace.graphs.errors import InputError

if TYPE_CHECKING:
    from dnnplace.graphs.instance import Instance
    from dnnplace.pytorch.execution.launch import Measured

__all__ = ["capture", "execute"]


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
        A result (placement, and its priorities or start times: each device runs its
        operators in that order) or a ``{node id: device}`` map (then in the simulated
        FIFO order).
    graph : str, path, Instance or OpGraph, optional
        The graph with costs the plan was made on (default: the result's ``instance``
        file); gives the simulated order of a plan without an order and checks that
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
    from dnnplace.graphs.io import result_order
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
    given = result_order(doc)   # its priorities, else its start times
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
    sim = predict(Instance(p.graph, p.cluster), placement, given)
    order = given or dict(zip(p.graph.ids, sim.schedule.priorities().tolist()))
    spec = ModelSpec(spec=model, inputs=(inputs,) if isinstance(inputs, str) else tuple(inputs), loss=loss,
                     batch=batch, seq=seq, params=dict(params or {}), optimizer=optimizer, lr=lr)
    return run_plan(spec, [Plan(placement, order)], names, steps=steps, warmup=warmup, timeout_s=timeout,
                    torch_devices=gpu_map(names, kinds) if cuda else {},
                    captured=p.graph.meta.get("capture"))[0]
