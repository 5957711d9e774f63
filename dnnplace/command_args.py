"""What the ``dnnplace`` subcommands share: loading a graph (or a bundled one by name) and
its cluster, ``--param KEY=VALUE``, the check that no output overwrites an input, and how the
solver settings are worded as flags (:data:`SOLVER_FLAGS`; the layers below name settings by
their field)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["load", "graph_path", "placement_instance", "parse_param", "check_out", "SOLVER_FLAGS",
           "solver_flag_error", "positive_seconds", "memory_bytes",
           "cluster_file", "param_files", "transfer_mode", "warn_uneven_outputs"]


def load(graph: str, cluster: str | None = None):
    """Instance from a file (or a bundled workload by name), with ``--cluster`` replacing
    (or supplying) its cluster."""
    from dnnplace.graphs.io import load_instance

    return load_instance(graph_path(graph), cluster)


def graph_path(arg: str) -> str:
    """A graph argument as a path (a bundled workload by name: :func:`dnnplace.data.resolve_graph`)."""
    from dnnplace.data import resolve_graph

    return resolve_graph(arg)


def placement_instance(args: argparse.Namespace):
    """``(instance, placement document)`` for ``evaluate``/``simulate``: the graph with
    ``--cluster``, else the cluster the result JSON was solved on, else the file's."""
    from dnnplace.graphs.io import instance_for_placement, read_json

    doc = read_json(args.placement)
    return instance_for_placement(args.graph, args.cluster, doc, source=args.placement), doc


def parse_param(text: str, flag: str = "--param") -> tuple[str, Any]:
    if "=" not in text:
        raise InputError(f"{flag} {text!r}: expected KEY=VALUE")
    key, val = text.split("=", 1)
    key = key.strip()
    if not key:
        raise InputError(f"{flag} {text!r}: empty key")
    try:
        return key, json.loads(val)
    except json.JSONDecodeError:
        return key, val


def positive_seconds(flag: str, value: float | None, absent: str) -> None:
    """A flag of seconds (``--bound-time-limit``): left out, or a finite number > 0; ``0``
    and negatives are one line naming the flag (``absent``: what leaving it out means).

    >>> positive_seconds("--bound-time-limit", 0.0, "no relaxation bound")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: --bound-time-limit 0: must be a positive number of seconds (leave it ...
    """
    import math

    if value is not None and not (math.isfinite(value) and value > 0):
        raise InputError(f"{flag} {value:g}: must be a positive number of seconds (leave it out for {absent})")


def memory_bytes(text: str | None) -> float | None:
    """``--memory-limit SIZE`` in bytes (``4GB``, ``512MB``, ``2GiB``; :func:`dnnplace.graphs.presets.parse_bytes`);
    left out: ``None`` (the default share, :func:`dnnplace.runtime.memory.default_limit`). A size that
    is not a positive finite byte count is one line naming the flag.

    >>> memory_bytes("4GB"), memory_bytes(None)
    (4000000000.0, None)
    >>> memory_bytes("0MB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: --memory-limit 0MB: must be a positive size such as 4GB or 512MB ...
    """
    import math

    from dnnplace.graphs.presets import parse_bytes

    if text is None:
        return None
    try:
        value = parse_bytes(text)
    except InputError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"--memory-limit {text}: must be a positive size such as 4GB or 512MB (leave it out for "
                         "the default share of this machine's memory)")
    return value


def check_out(outputs: list[tuple[str, str | None]], inputs: list[tuple[str, str | None]] = (),
              folders: bool = False, contents: tuple[str, ...] = ()) -> None:
    """Fail before any work if an output path is an input or cannot be written
    (:func:`dnnplace.outpaths.check_outputs`, the one home of the rule)."""
    from dnnplace.outpaths import check_outputs

    check_outputs(outputs, inputs, folders=folders, contents=contents)


def param_files(params: list[str], flag: str = "--param") -> list[tuple[str, str]]:
    """The ``KEY=VALUE`` parameters whose value names an existing file (``--param
    split=expert.json``), as inputs for :func:`check_out`."""
    from pathlib import Path

    out = []
    for text in params:
        key, _, val = text.partition("=")
        if val and Path(val).is_file():
            out.append((f"{flag} {key.strip()}", val))
    return out


def cluster_file(arg: str | None) -> str | None:
    """``--cluster`` as an input file to protect from the outputs (``None`` for a preset name)."""
    from pathlib import Path

    return arg if arg and Path(arg).is_file() else None


def transfer_mode(args: argparse.Namespace, recorded: str | None = None) -> str:
    """The transfer mode a command simulates with (docs/semantics.md 2.1): ``--transfer-mode``
    (``per-destination``/``per-edge``, spelled with ``-`` or ``_``), else the mode a result
    was solved under (``recorded``), else ``per_destination``."""
    given = getattr(args, "transfer_mode", None)
    mode = given if given is not None else recorded
    return "per_destination" if mode is None else str(mode).replace("-", "_")


def warn_uneven_outputs(graph, mode: str) -> None:
    """Under ``per_destination``, one ``dnnplace: warning:`` line (once per command and
    graph) when some output's edges carry different bytes
    (:func:`~dnnplace.evaluation.sim_costs.uneven_outputs`): each is sent once per
    device at its largest edge's size, which a graph written for one transfer per edge
    does not mean."""
    if mode != "per_destination":
        return
    from dnnplace.evaluation.sim_costs import uneven_outputs
    from dnnplace.textout import warn

    count, examples = uneven_outputs(graph)
    if count:
        more = f" and {count - len(examples)} more" if count > len(examples) else ""
        warn(f"graph {graph.name!r}: {count} output(s) whose edges carry different bytes ({'; '.join(examples)}"
             f"{more}) are sent once per device at the largest size (--transfer-mode per-destination); give the "
             "edges different 'output' numbers, or use --transfer-mode per-edge for one transfer per edge")


SOLVER_FLAGS = {"solver": "--solver", "time_limit": "--time-limit", "rel_gap": "--rel-gap", "threads": "--threads",
                "seed": "--seed", "tee": "--tee", "solver_options": "--solver-option", "memory_limit": "--memory-limit"}
"""The ``dnnplace solve`` flag of each :class:`~dnnplace.registry.SolverOptions` field
(the layers below name the fields; this layer names its flags)."""


def solver_flag_error(exc, spelled: dict[str, str] | None = None) -> InputError:
    """A :class:`~dnnplace.formulations.solvers.options.SettingError` (``time_limit =
    -5: ...``) as the flag that set it (``--time-limit -5: ...``; ``spelled``: the
    spelling typed, e.g. ``--mip-gap``)."""
    from dnnplace.formulations.solvers.options import show_value

    shown = exc.value if isinstance(exc.value, str) else show_value(exc.value)
    if exc.key.startswith("solver_options."):
        return InputError(f"{SOLVER_FLAGS['solver_options']} {exc.key.split('.', 1)[1]}={shown}: {exc.reason}")
    flag = (spelled or {}).get(exc.key) or SOLVER_FLAGS.get(exc.key, exc.key)
    return InputError(f"{flag} {shown}: {exc.reason}")
