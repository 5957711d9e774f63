"""What a method is: its request, its typed options, its output (no algorithm here).

A method is ``run(instance, request, options) -> MethodOutput``; ``options`` is an
instance of the method's own :class:`Options` dataclass, parsed and checked by
:func:`parse_options` from the raw ``request.params`` (``--param KEY=VALUE``, a TOML
``[params]`` table) before anything runs, so that a typo or an ill-typed value is a
one-line :class:`~dnnplace.graphs.errors.InputError`, never a silent default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.runtime.deadline import Deadline

__all__ = ["Options", "NoOptions", "option", "parse_options", "describe_options", "SolveRequest", "MethodOutput",
           "Method", "SolverOptions", "POLICIES", "WarmStart"]

POLICIES = ("fifo", "critical_path", "priority", "order")


def option(default: Any, doc: str) -> Any:
    """A documented option field: ``restarts: int = option(10, "seeded random starts")``."""
    if isinstance(default, (dict, list, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Options:
    """Base of every method's options (a frozen dataclass of :func:`option` fields)."""


@dataclass(frozen=True)
class NoOptions(Options):
    """A method without options."""


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the annotated type; strings from the command line are parsed."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _coerce(value, a, where)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0])
    if origin is Literal:
        if value in args:
            return value
        raise InputError(f"{where}: {value!r} is not one of {list(args)}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise InputError(f"{where}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise InputError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out = float(value)
        elif isinstance(value, str):
            try:
                out = float(value)
            except ValueError:
                raise InputError(f"{where}: expected a number, got {value!r}") from None
        else:
            raise InputError(f"{where}: expected a number, got {value!r}")
        if out != out:
            raise InputError(f"{where}: NaN is not a value")
        return out
    if hint is str:
        if isinstance(value, str):
            return value
        raise InputError(f"{where}: expected a string, got {value!r}")
    return value


def parse_options(cls: type[Options], params: Mapping[str, Any], *, method: str) -> Options:
    """``cls(**params)`` with every key known and every value of its declared type.

    >>> from dnnplace.methods.tarnawski import LocalSearchOptions
    >>> parse_options(LocalSearchOptions, {"restarts": "3"}, method="local-search").restarts
    3
    >>> parse_options(LocalSearchOptions, {"restart": 3}, method="local-search")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: method 'local-search' has no option 'restart'; its options: ['restarts']
    """
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    for key in params:
        if key not in names:
            raise InputError(f"method {method!r} has no option {key!r}; its options: {names or 'none'}")
    kw = {k: _coerce(v, hints[k], f"method {method!r} option {k!r}") for k, v in params.items()}
    try:
        return cls(**kw)
    except ValueError as exc:  # a __post_init__ range check
        raise InputError(f"method {method!r}: {exc}") from None


def describe_options(cls: type[Options]) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, doc)`` per option, for ``dnnplace methods NAME``."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        tname = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
        rows.append((f.name, tname or str(hint).replace("typing.", ""), repr(f.default), f.metadata.get("doc", "")))
    return rows


@dataclass(frozen=True)
class WarmStart:
    """A resolved warm start: the placement and where it came from (``method dp``,
    ``file split.json``)."""

    placement: Placement
    source: str


@dataclass(frozen=True)
class SolveRequest:
    """What to solve and how.

    ``objective`` is the max-load variant (``pipedream``/``gpipe``/``overlap``);
    ``contiguity`` is ``None`` for the method's default or a mode of
    :data:`dnnplace.evaluation.evaluate.CONTIGUITY_MODES`; ``warm_start`` is a method name
    or a placement file; ``congestion``, ``policy`` and ``transfer_mode`` say how a
    makespan is simulated (link congestion on/off, the dispatch policy when the method
    gives no order, and what is sent: ``"per_destination"``, a tensor once to each
    consuming device, the default, or ``"per_edge"``, Pesto's one transfer per edge;
    docs/semantics.md 2.1; :func:`dnnplace.registry.solve` runs the method and its evaluation under
    that mode);
    ``params`` are the method's own options (checked against its :class:`Options`).
    ``warm`` is filled in by :func:`dnnplace.registry.solve` for methods that take warm
    starts (the placement named by ``warm_start``, already computed and re-scored).
    ``deadline`` (:class:`~dnnplace.runtime.deadline.Deadline`): when the whole method must
    end; :func:`dnnplace.registry.solve` sets it from ``solver.time_limit`` at the
    method's start unless the caller did (``dnnplace solve`` counts from the process's
    start); every stage of a method checks it (the limit holds for the whole process:
    docs/bad-input.md, "Time limits").
    """

    problem: str
    objective: str = "pipedream"
    contiguity: str | None = None
    solver: SolverOptions = field(default_factory=SolverOptions)
    warm_start: str | None = None
    seed: int = 0
    congestion: bool = True
    policy: str = "fifo"
    params: dict[str, Any] = field(default_factory=dict)
    transfer_mode: str = "per_destination"
    warm: WarmStart | None = None
    deadline: Deadline | None = field(default=None, compare=False, repr=False)


@dataclass
class MethodOutput:
    """What a method returns; :func:`dnnplace.registry.solve` turns it into a Result.

    ``placement`` must be of the request's graph (a method that transforms the graph
    maps its answer back, or reports the graph it scored in ``graph``, see below);
    ``objective`` is the method's own value for it (``None`` if it has none);
    ``priorities`` (makespan methods) is the order the simulator replays;
    ``link_priorities`` (makespan methods that also order the transfers on each link,
    e.g. Pesto's ILP with congestion; only together with ``priorities``) is one value per
    edge, each directed link serving its transfers in increasing value (see
    :mod:`dnnplace.evaluation.link_orders`); without it the evaluator's links are first come
    first served; ``pieces``
    (latency methods with several subgraphs per device) is the method's own cut of each
    accelerator's nodes, which the evaluator then scores instead of its fewest-pieces rule.
    ``graph``: set only by a method whose answer is for a transformed graph it cannot
    map back (e.g. operators split into parts): the evaluation then scores that graph and
    the record says so; otherwise the placement's graph must be the request's.
    ``memory_model``: the memory the method keeps within capacity, ``"static"`` (docs/semantics.md 1:
    the sum of ``memory`` per device) or ``"dynamic"`` (the peak of live tensors, PARDNN
    Eq. 2); a makespan evaluation judges feasibility under it and reports both.
    ``answer_from``: where ``placement`` came from when it is not the method's own answer,
    one of ``"warm start: <source>"`` (the start, unchanged), ``"never-worse: <rival>"``
    (a never-worse step swapped in a rival's answer) or ``"fallback: <split>"`` (the method
    stopped without an answer of its own, e.g. a time-limited IP build, and returned a
    cheap split); ``None`` means the method's own answer, and
    :func:`dnnplace.registry.solve` records the method's name (``Result.answer_from``).
    """

    placement: Placement | None
    status: str = "feasible"
    objective: float | None = None
    bound: float | None = None
    termination: str | None = None
    message: str | None = None
    solver: str | None = None
    solver_version: str | None = None
    build_seconds: float = 0.0
    solve_seconds: float | None = None
    start: np.ndarray | None = None
    priorities: np.ndarray | None = None
    link_priorities: np.ndarray | None = None
    pieces: np.ndarray | None = None
    contiguity: str | None = None
    graph: OpGraph | None = None
    trace: list = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    memory_model: str = "static"
    answer_from: str | None = None


@dataclass(frozen=True)
class Method:
    """An entry of the method list.

    ``run(instance, request, options)``; ``options`` the method's :class:`Options` class;
    ``warm_start``: the method takes a start placement, which :func:`dnnplace.registry.solve`
    resolves from ``request.warm_start`` (a method name or a file) into ``request.warm``.
    ``objective_exact``: the method's own objective must equal the evaluator's (DP,
    heuristics); otherwise it must be an upper bound on it (an IP whose communication
    variables need not be tight for a time-limited incumbent).
    ``default_limits``: the :class:`SolverOptions` settings a run of a method that must
    stop by itself gets when its request sets no ``time_limit`` (``{"time_limit": 60.0}``),
    each where the request leaves it out; the one place of such a default:
    :func:`dnnplace.registry.run_method` applies it (and the run's deadline follows), the
    method reads ``request.solver`` as it comes and the record keeps the request as asked.
    """

    name: str
    problems: tuple[str, ...]
    run: Callable[..., MethodOutput]
    summary: str
    options: type[Options] = NoOptions
    kind: str = "heuristic"  # baseline | heuristic | exact | ip
    objective_exact: bool = True
    default_contiguity: str = "none"
    warm_start: bool = False
    default_limits: Mapping[str, Any] = field(default_factory=dict, hash=False)
