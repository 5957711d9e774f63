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
           "solver_flag_error"]


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


def check_out(outputs: list[tuple[str, str | None]], inputs: list[tuple[str, str | None]] = (),
               folders: bool = False) -> None:
    """Fail before any work if an output path is an input or cannot be written
    (:func:`dnnplace.outpaths.check_outputs`, the one home of the rule)."""
    from dnnplace.outpaths import check_outputs

    check_outputs(outputs, inputs, folders=folders)


SOLVER_FLAGS = {"solver": "--solver", "time_limit": "--time-limit", "rel_gap": "--rel-gap", "threads": "--threads",
                "seed": "--seed", "tee": "--tee", "solver_options": "--solver-option"}
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
