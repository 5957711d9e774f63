"""The layers point down, the import graph has no cycle, methods are loaded lazily, their
options are typed, and :func:`dnnplace.registry.solve` never scores a different graph nor
reports a status its evaluation contradicts."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dnnplace.graphs import Cluster, OpGraph, Placement
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.methods import METHODS
from dnnplace.methods.base import Method, MethodOutput, NoOptions, describe_options
from dnnplace.registry import EvaluationMismatch, SolveRequest, method_options, solve

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"runtime": "dnnplace.runtime", "graphs": "dnnplace.graphs", "evaluation": "dnnplace.evaluation",
          "heuristics": "dnnplace.heuristics", "formulations": "dnnplace.formulations", "pytorch": "dnnplace.pytorch",
          "dnnplace": "dnnplace", "experiments": "dnnplace.experiments"}
ALGORITHMS = {"dnnplace.runtime", "dnnplace.graphs", "dnnplace.evaluation", "dnnplace.heuristics",
              "dnnplace.formulations"}
# what each layer may import (besides itself): the framework all algorithm layers, the
# reproductions (experiments/) everything; the framework reaches a reproduction only by name
# (dnnplace.reproduce imports its module when it runs)
ALLOWED = {"dnnplace.runtime": set(), "dnnplace.graphs": set(),
           "dnnplace.evaluation": {"dnnplace.graphs"},
           "dnnplace.heuristics": {"dnnplace.runtime", "dnnplace.graphs", "dnnplace.evaluation"},
           "dnnplace.formulations": {"dnnplace.runtime", "dnnplace.graphs", "dnnplace.evaluation",
                                     "dnnplace.heuristics"},
           "dnnplace.pytorch": {"dnnplace.runtime", "dnnplace.graphs", "dnnplace.evaluation"},
           "dnnplace": ALGORITHMS | {"dnnplace.pytorch"},
           "dnnplace.experiments": ALGORITHMS | {"dnnplace.pytorch", "dnnplace"}}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO)
    parts = list(rel.with_suffix("").parts)
    if parts[0] != "dnnplace":
        parts = ["dnnplace", *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (module level and inside functions)."""
    files = [p for folder in LAYERS for p in (REPO / folder).rglob("*.py") if "workloads" not in p.parts]
    names = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in names and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


GRAPH = _import_graph()


def _layer(module: str) -> str:
    for layer in ("dnnplace.runtime", "dnnplace.graphs", "dnnplace.evaluation", "dnnplace.heuristics",
                  "dnnplace.formulations", "dnnplace.pytorch", "dnnplace.experiments"):
        if module == layer or module.startswith(layer + "."):
            return layer
    return "dnnplace"


def test_every_module_is_seen():
    assert len(GRAPH) >= 60, len(GRAPH)
    for m in ("dnnplace.evaluation.evaluate", "dnnplace.heuristics.maxload_dp",
              "dnnplace.formulations.solvers.driver", "dnnplace.registry", "dnnplace.methods", "dnnplace.cli",
              "dnnplace.experiments.fastt",
              "dnnplace.experiments.tarnawski"):
        assert m in GRAPH, m


def test_layers_point_down():
    """graphs <- heuristics <- formulations <- dnnplace <- experiments: no algorithm module
    imports the method list, the registry, the runner or the command line, and the framework
    imports no reproduction."""
    checked = 0
    for module, deps in GRAPH.items():
        layer = _layer(module)
        for d in deps:
            target = _layer(d)
            assert target == layer or target in ALLOWED[layer], f"{module} imports {d} (layer {target})"
            checked += 1
    assert checked >= 100, checked


def test_import_graph_has_no_cycle():
    import graphlib

    ts = graphlib.TopologicalSorter({m: set(d) for m, d in GRAPH.items()})
    try:
        order = list(ts.static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")
    assert len(order) == len(GRAPH)


def test_listing_methods_and_running_the_dp_do_not_import_pyomo(tarnawski_dir):
    """Lazy loading: a method's module is imported when it runs, not when it is listed."""
    graph = tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    code = ("import sys; from dnnplace.cli import main; "
            f"assert main(['methods']) == 0; assert main(['solve', {str(graph)!r}, '--method', 'dp']) == 0; "
            "heavy = [m for m in ('pyomo', 'highspy', 'gurobipy') if m in sys.modules]; "
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "17.79" in out.stdout  # Table 1's DP value on this graph


# ---------------------------------------------------------------------------- options
def test_every_method_declares_documented_options():
    checked = 0
    for m in METHODS:
        for name, _typ, _default, doc in describe_options(m.options):
            assert doc, f"{m.name}: option {name!r} has no doc"
            checked += 1
    assert checked >= 10, checked


@pytest.mark.parametrize("params, message", [
    ({"ordr": "level"}, "method 'greedy' has no option 'ordr'; its options: ['order']"),
    ({"order": 3}, "method 'greedy' option 'order': expected a string, got 3"),
])
def test_unknown_or_ill_typed_option_is_named(params, message):
    with pytest.raises(InputError) as exc:
        method_options("greedy", SolveRequest("maxload", params=params))
    assert str(exc.value) == message


def test_option_values_are_parsed_and_range_checked():
    opts = method_options("ip", SolveRequest("latency", params={"subgraphs_per_device": "2", "horizon": 10}))
    assert opts.subgraphs_per_device == 2 and opts.horizon == 10.0
    with pytest.raises(InputError, match="subgraphs_per_device' must be >= 1"):
        method_options("ip", SolveRequest("latency", params={"subgraphs_per_device": 0}))
    with pytest.raises(InputError, match="expected true or false"):
        method_options("pesto", SolveRequest("makespan", params={"memory": "maybe"}))
    assert method_options("pesto", SolveRequest("makespan", params={"kicks": "0"})).kicks == 0
    with pytest.raises(InputError, match="kicks' must be >= 0"):
        method_options("pesto", SolveRequest("makespan", params={"kicks": -1}))
    assert method_options("pesto", SolveRequest("makespan", params={"windows": "0"})).windows == 0.0
    with pytest.raises(InputError, match="windows' must be in"):
        method_options("pesto", SolveRequest("makespan", params={"windows": 1}))


def test_cli_typo_in_param_exits_2(tarnawski_dir):
    graph = tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    out = subprocess.run([sys.executable, "-m", "dnnplace", "solve", str(graph), "--method", "greedy",
                          "--param", "ordr=level"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == "dnnplace: error: method 'greedy' has no option 'ordr'; its options: ['order']"


def test_methods_name_prints_options(capsys):
    from dnnplace.cli import main

    assert main(["methods", "local-search"]) == 0
    out = capsys.readouterr().out
    assert "restarts" in out and "int = 10" in out


# ---------------------------------------------------------------------------- solve's checks
def _chain(n: int) -> Instance:
    g = OpGraph(ids=list(range(n)), kinds=("gpu", "cpu"), compute=[[1.0, 4.0]] * n, memory=[10.0] * n,
                src=list(range(n - 1)), dst=list(range(1, n)), edge_bytes=[1.0] * (n - 1))
    return Instance(g, Cluster.single_host(2, gpu_memory=25.0), "chain")


def _fake(run) -> Method:
    return Method("fake", ("maxload", "makespan"), run, "test", options=NoOptions)


def test_a_placement_of_another_graph_is_refused():
    inst, other = _chain(4), _chain(3)

    def run(i, req, opts):
        return MethodOutput(Placement(other.graph, other.cluster, np.zeros(3, dtype=np.int64)))

    with pytest.raises(EvaluationMismatch, match="placement has 3 nodes, the graph it should place has 4"):
        solve(inst, _fake(run), SolveRequest("maxload"))


def test_priorities_of_another_length_are_refused():
    inst = _chain(4)

    def run(i, req, opts):
        return MethodOutput(Placement(i.graph, i.cluster, np.zeros(4, dtype=np.int64)), priorities=np.arange(3))

    with pytest.raises(EvaluationMismatch, match="priorities has 3 entries for a graph of 4 nodes"):
        solve(inst, _fake(run), SolveRequest("makespan"))


def test_status_comes_from_the_evaluation():
    """Everything on gpu0 needs 40 bytes of its 25: whatever the method says, the result
    is infeasible; a feasible split keeps the method's status."""
    inst = _chain(4)

    def crowded(i, req, opts):
        return MethodOutput(Placement(i.graph, i.cluster, np.zeros(4, dtype=np.int64)), status="optimal")

    res = solve(inst, _fake(crowded), SolveRequest("maxload"))
    assert res.status == "memory_infeasible" and not res.evaluation["feasible"]  # memory is all that is wrong
    assert "evaluation:" in res.message

    def unsupported(i, req, opts):  # the CPU may not run node 0 here: a violation beyond memory
        return MethodOutput(Placement(i.graph, i.cluster, np.array([2, 0, 0, 0])), status="feasible")

    g = inst.graph.with_(compute=np.array([[1.0, np.nan], [1.0, 4.0], [1.0, 4.0], [1.0, 4.0]]))
    res = solve(Instance(g, inst.cluster, "chain"), _fake(unsupported), SolveRequest("maxload"))
    assert res.status == "infeasible" and any("does not support" in v for v in res.evaluation["violations"])

    def split(i, req, opts):
        return MethodOutput(Placement(i.graph, i.cluster, np.array([0, 0, 1, 1])), status="feasible")

    res = solve(inst, _fake(split), SolveRequest("maxload"))
    assert res.status == "feasible" and res.evaluation["feasible"]


def test_an_objective_below_the_own_bound_is_an_error():
    inst = _chain(4)

    def run(i, req, opts):
        return MethodOutput(Placement(i.graph, i.cluster, np.array([0, 0, 1, 1])), bound=1e6)

    with pytest.raises(EvaluationMismatch, match="below the method's own bound"):
        solve(inst, _fake(run), SolveRequest("maxload"))


def test_every_package_folder_is_packaged():
    """pyproject lists packages explicitly (the folders map onto one namespace): a new
    subpackage missing from the list would be absent from the wheel."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {_module_name(p.parent / "__init__.py") for folder in LAYERS for p in (REPO / folder).rglob("__init__.py")
             if "workloads" not in p.parts}
    found.add("dnnplace.experiments")
    assert found == listed, (sorted(found - listed), sorted(listed - found))


# --- the signatures docs/architecture.md names -------------------------------------------
# Every backticked reference of the form `module.function(args)` (or `module.Class.method(args)`)
# is resolved to its object and its argument names compared with the code's parameters:
# a bare name is a positional parameter (in order), `name=...` a parameter by keyword, `*`
# the start of the keyword-only ones, `...` "other parameters not named here"; a default
# written (`opts=None`) must be the code's. Without `...` the list must name every parameter.

_REF = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\(([^`]*)\)`")


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _resolve(dotted: str):
    """The object a doc's dotted name means: the longest prefix naming exactly one module
    (by its full name or a dotted suffix of it), then attributes."""
    parts = dotted.split(".")
    for k in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:k])
        found = [m for m in GRAPH if m == prefix or m.endswith("." + prefix)]
        if len(found) > 1:
            raise AssertionError(f"`{dotted}`: {prefix!r} names {len(found)} modules: {sorted(found)}")
        if found:
            obj = importlib.import_module(found[0])
            for attr in parts[k:]:
                owner, obj = obj, getattr(obj, attr, None)
                if obj is None:
                    raise AssertionError(f"`{dotted}`: {found[0]} has no {attr!r}")
            return obj, isinstance(owner, type)
    raise AssertionError(f"`{dotted}`: no module of the project is named {parts[0]!r}")


def signature_mismatches(dotted: str, args: str) -> list[str]:
    """What the doc's `dotted(args)` says that the code's signature does not."""
    obj, is_method = _resolve(dotted)
    params = list(inspect.signature(obj).parameters.values())
    if is_method and params and params[0].name in ("self", "cls"):
        params = params[1:]
    by_name = {p.name: p for p in params}
    ref, errors = f"`{dotted}({' '.join(args.split())})`", []
    tokens = _split_args(" ".join(args.split()))
    partial, kw_only, named, position = "..." in tokens, False, [], 0
    skipped = bool(tokens) and tokens[0] == "..."
    for tok in tokens:
        if tok == "...":
            continue
        if tok == "*":
            kw_only = True
            continue
        name, eq, default = tok.partition("=")
        name = name.strip()
        if not name.isidentifier():
            errors.append(f"{ref}: {tok!r} is not a parameter name")
            continue
        named.append(name)
        p = by_name.get(name)
        if p is None:
            errors.append(f"{ref}: the code has no parameter {name!r} (it has {list(by_name)})")
            continue
        if not eq and not kw_only and not skipped:
            if position >= len(params) or params[position].name != name:
                errors.append(f"{ref}: positional {name!r} is not parameter {position + 1} of the code")
            position += 1
        if kw_only != (p.kind is inspect.Parameter.KEYWORD_ONLY) and (kw_only or not eq):
            errors.append(f"{ref}: {name!r} is {'not ' if kw_only else ''}keyword-only in the code")
        default = default.strip()
        if eq and default not in ("", "...") and default != repr(p.default):
            errors.append(f"{ref}: default of {name!r} is {p.default!r} in the code, not {default}")
    if not partial:
        missing = [p.name for p in params if p.name not in named
                   and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        if missing:
            errors.append(f"{ref}: the doc leaves out {missing} (write `...` if on purpose)")
    return errors


def test_signatures_named_in_architecture_doc_match_the_code():
    text = (REPO / "docs" / "architecture.md").read_text()
    refs = _REF.findall(text)
    errors = [e for dotted, args in refs for e in signature_mismatches(dotted, args)]
    assert not errors, "\n".join(errors)
    assert len(refs) >= 5, refs


@pytest.mark.parametrize("dotted, args, expected", [
    ("pesto_ip.build_pesto_model", "instance, options", "no parameter 'instance'"),
    ("pesto_ip.build_pesto_model", "graph, cluster, horizon, options=None", "'horizon' is keyword-only in the code"),
    ("maxload_ip.build_maxload_ip", "inst", "leaves out ['opts']"),
    ("maxload_ip.build_maxload_ip", "inst, opts=0", "default of 'opts'"),
    ("driver.solve_model", "model, SolverOptions, ...", "no parameter 'SolverOptions'"),
    ("deadline.Deadline.share", "seconds", "no parameter 'seconds'"),
    ("nowhere.build", "x", "no module"),
])
def test_signature_check_catches_drift(dotted, args, expected):
    try:
        errors = signature_mismatches(dotted, args)
    except AssertionError as e:
        errors = [str(e)]
    assert any(expected in e for e in errors), errors
