"""The Python API (dnnplace/api.py, api_scoring.py, api_torch.py; docs/guide.md, "The Python API"): the guide's and the
README's snippets run as written, every argument that asks for a cluster or a graph takes a
preset, a file or an object, ``solve`` gives what ``dnnplace solve`` gives, bad input is an
``InputError`` naming the culprit, and ``execute`` outside a script's ``__main__`` guard
says so before any worker starts."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dnnplace import InputError, evaluate, list_methods, load_cluster, load_graph, simulate, solve

REPO = Path(__file__).resolve().parents[1]
GRAPH, PRESET = "bert24_training", "tarnawski-6-1-16GB"  # bundled; the DP solves it in well under a second
SMALL = "captured/transformer-base"  # bundled captured graph for the makespan methods


def python_blocks(path: Path, heading: str | None = None) -> list[str]:
    """The ```python blocks of a markdown file (of one ``## heading`` section when given)."""
    text = path.read_text()
    if heading is not None:
        start = text.index(f"\n## {heading}\n")
        end = text.find("\n## ", start + 1)
        text = text[start:end if end > 0 else None]
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def run_snippet(code: str, tmp_path: Path, monkeypatch) -> str:
    """Execute a snippet in a fresh namespace with ``tmp_path`` as the working folder; its stdout."""
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<snippet>", "exec"), {"__name__": "snippet"})
    return out.getvalue()


def test_the_guide_snippet_runs_as_written(tmp_path, monkeypatch):
    blocks = python_blocks(REPO / "docs" / "guide.md", "The Python API")
    assert len(blocks) == 2, "the section holds the snippet and the execute script"
    out = run_snippet(blocks[0], tmp_path, monkeypatch).splitlines()
    assert out[0] == "optimal 41.7458125 ms"  # the DP's optimum, as the comment in the snippet says
    assert out[1] == "True"
    assert out[2].startswith("makespan ") and float(out[2].split()[1]) > 0
    assert "latency-ls" in out[3]
    assert list(tmp_path.iterdir()) == []  # writes nothing


def test_the_readme_snippet_runs_as_written(tmp_path, monkeypatch):
    blocks = python_blocks(REPO / "README.md")
    if not blocks:
        pytest.skip("the README's tour holds no Python snippet")
    for code in blocks:
        status, objective, makespan = run_snippet(code, tmp_path, monkeypatch).split()
        assert status == "feasible" and float(objective) == pytest.approx(float(makespan), rel=1e-9)


@pytest.mark.slow
def test_the_guide_script_runs_as_written(tmp_path):
    """The guide's capture-solve-execute script, run as a file from the checkout's root
    (its model path is relative to it): ~15-40 s (torch start-up, measured costs, workers)."""
    pytest.importorskip("torch")
    script = tmp_path / "script.py"
    script.write_text(python_blocks(REPO / "docs" / "guide.md", "The Python API")[1])
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    matches, measured, predicted = out.stdout.split()
    assert matches == "True" and float(measured) > 0 and float(predicted) > 0


def test_the_names_are_exported_lazily():
    """``import dnnplace`` imports none of the API (``dnnplace --version`` stays as fast);
    every exported name resolves, also after the ``dnnplace.methods`` package is loaded."""
    code = ("import sys, dnnplace; heavy = [m for m in ('dnnplace.api', 'dnnplace.api_scoring', 'dnnplace.api_torch', "
            "'numpy', 'dnnplace.registry') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    import dnnplace.methods  # noqa: F401  (a subpackage: no API name may shadow it)

    names = [n for n in dnnplace.__all__ if n != "__version__"]
    assert len(names) == 12
    for name in names:
        assert getattr(dnnplace, name) is not None
        assert name in dir(dnnplace)
    assert callable(dnnplace.list_methods) and dnnplace.solve is solve
    with pytest.raises(AttributeError, match="no attribute 'methodz'"):
        dnnplace.methodz  # noqa: B018


def test_a_cluster_is_a_preset_a_file_or_an_object_everywhere(tmp_path):
    """``cluster=`` takes a preset name, a cluster file (here a graph file's cluster
    section) or a Cluster, in load_graph, load_cluster, solve, evaluate and simulate,
    with the same answers."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import save_instance

    obj = load_cluster(PRESET)
    path = tmp_path / "with-cluster.json"
    save_instance(Instance(load_graph(GRAPH).graph, obj, "x"), path)
    forms = {"preset": PRESET, "file": str(path), "path": path, "object": obj}
    objectives, checked = set(), 0
    for how, cl in forms.items():
        assert load_cluster(cl).names == obj.names, how
        assert load_graph(GRAPH, cl).cluster.names == obj.names, how
        res = solve(GRAPH, "dp", cluster=cl)
        assert res.status == "optimal", how
        objectives.add(round(res.objective, 9))
        assert evaluate(GRAPH, res, cluster=cl).objective == pytest.approx(res.objective, rel=1e-9), how
        assert simulate(GRAPH, res, cluster=cl).makespan > 0, how
        checked += 1
    assert checked == 4 and objectives == {41.7458125}
    assert solve(GRAPH, "dp", cluster=PRESET).cluster == PRESET  # a preset is recorded by name


def test_a_graph_is_a_name_a_path_or_an_object(tmp_path):
    from dnnplace.data import resolve_graph

    inst = load_graph(GRAPH, PRESET)
    forms = [GRAPH, resolve_graph(GRAPH), Path(resolve_graph(GRAPH)), inst, inst.graph]
    values = {round(solve(g, "dp", cluster=PRESET).objective, 9) for g in forms}
    assert values == {41.7458125}
    placement = solve(inst, "dp")
    for g in forms:
        assert evaluate(g, placement, cluster=PRESET).feasible
    # a placement as a result file, a {node: device} map, a Placement object
    path = tmp_path / "r.json"
    path.write_text(json.dumps(placement.to_dict()))
    from dnnplace.graphs.placement import Placement

    placed = Placement.from_mapping(inst.graph, inst.cluster, placement.placement)
    for p, g in ((str(path), GRAPH), (placement.placement, inst), (placed, None)):
        assert evaluate(g, p).objective == pytest.approx(placement.objective, rel=1e-9)


def test_capture_takes_a_preset_name():
    """``capture(..., cluster="local-cpu-2")`` attaches the preset's cluster, and the
    instance solves (a string where a Cluster was expected used to fail later, in solve,
    with ``'str' object has no attribute 'size'``)."""
    torch = pytest.importorskip("torch")
    from dnnplace import capture

    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    inst = capture(net, inputs=(torch.randn(4, 8),), cost="roofline:v100", cluster="single-host-2-nvlink")
    assert inst.cluster.names == ("gpu0", "gpu1", "cpu0")
    res = solve(inst, "heft")
    assert res.problem == "makespan" and res.status == "feasible" and res.objective > 0
    with pytest.raises(InputError, match="unknown cluster preset 'local-cpu-two'"):
        capture(net, inputs=(torch.randn(4, 8),), cluster="local-cpu-two")


def test_capture_takes_a_zoo_name_and_a_model_file():
    """A zoo name and a ``FILE.py:FACTORY`` go through the command's own capture path (its
    cost models built as ``dnnplace capture`` builds them)."""
    pytest.importorskip("torch")
    from dnnplace import capture

    inst = capture("lenet-5", batch=4)
    assert inst.graph.meta["batch"] == 4 and inst.graph.n > 0
    towers = capture(f"{Path(__file__).parent / 'exec_models.py'}:two_towers", inputs=["16x512"],
                     loss="cross_entropy", cluster="local-cpu-2")
    assert towers.cluster.names == ("cpu0", "cpu1") and towers.graph.n > 0


@pytest.mark.parametrize("method, cluster, flags", [
    ("dp", PRESET, []),
    ("heft", "single-host-2-nvlink", []),
    ("greedy", "single-host-2-nvlink", ["--problem", "makespan"]),
])
def test_solve_equals_the_command_line(method, cluster, flags, tmp_path, capsys):
    """``solve(...)`` and ``dnnplace solve`` give the same status, problem and objective
    (at the evaluator's tolerance) and the same placement."""
    from dnnplace.cli import main

    graph = GRAPH if method == "dp" else SMALL
    out = tmp_path / "r.json"
    assert main(["solve", graph, "--cluster", cluster, "--method", method, *flags, "--out", str(out)]) == 0
    capsys.readouterr()
    cli = json.loads(out.read_text())
    ours = solve(graph, method, cluster=cluster, problem="makespan" if flags else None)
    assert (ours.status, ours.problem, ours.cluster) == (cli["status"], cli["problem"], cli["cluster"])
    assert ours.objective == pytest.approx(cli["objective"], rel=1e-6)
    assert ours.placement == cli["placement"]
    assert ours.graph_fingerprint == cli["graph_fingerprint"]


@pytest.mark.parametrize("call, message", [
    (lambda: solve(GRAPH, "dp", cluster="tarnawski-six"), "unknown cluster preset 'tarnawski-six'"),
    (lambda: solve(GRAPH, "dpp", cluster=PRESET), "unknown method 'dpp'"),
    (lambda: solve(SMALL, "heft"), "transformer-base.json: no cluster given"),
    (lambda: solve(GRAPH, "dp", cluster=PRESET, problem="throughput"), "unknown problem 'throughput'"),
    (lambda: solve(GRAPH, "heft", cluster=PRESET, objective="gpipe"), "objective='gpipe' applies to problem"),
    (lambda: solve(GRAPH, "dp", cluster=PRESET, policy="fifo"), "policy='fifo' applies to problem 'makespan'"),
    (lambda: solve(GRAPH, "dp", cluster=PRESET, time_limit=-5), "time_limit = -5: must be a positive"),
    (lambda: solve(GRAPH, "dp", cluster=PRESET, threads=0), "threads = 0"),
    (lambda: solve(GRAPH, "dp", cluster=PRESET, params={"max_idealz": 3}), "method 'dp' has no option 'max_idealz'"),
    (lambda: solve("no-such.json", "dp", cluster=PRESET), "no-such.json: no such file"),
    (lambda: solve(3, "dp", cluster=PRESET), "graph: expected a graph file"),
    (lambda: load_cluster(16), "cluster: expected a preset name"),
    (lambda: load_cluster("no-such-cluster.json"), "no-such-cluster.json"),
    (lambda: evaluate(GRAPH, {"embedding": "acc9"}, cluster=PRESET), "acc9"),
    (lambda: evaluate(GRAPH, {"no-such-node": "acc0"}, cluster=PRESET), "unknown node 'no-such-node'"),
    (lambda: evaluate(GRAPH, 1.5, cluster=PRESET), "placement: expected a Result"),
    (lambda: simulate(GRAPH, {str(v): "acc0" for v in load_graph(GRAPH).graph.ids}, policy="order"),
     "--policy order needs 'start' times"),
    (lambda: list_methods("throughput"), "problem='throughput': unknown"),
])
def test_bad_input_raises_input_error_naming_the_culprit(call, message):
    with pytest.raises(InputError) as exc:
        call()
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_time_limited_solve_keeps_its_limit():
    """Solver settings go through as the CLI's flags do: the record keeps them."""
    res = solve(GRAPH, "dp", cluster=PRESET, time_limit=30, rel_gap=0.01, threads=1)
    assert res.options["solver"]["time_limit"] == 30 and res.options["solver"]["rel_gap"] == 0.01
    assert res.options["solver"]["threads"] == 1 and res.status == "optimal"


SCRIPTS = {
    "top level": "from dnnplace import execute\n\nexecute('m.py:f', {'a': 'cpu0'})\n",
    "a main() called unguarded": "from dnnplace import execute\n\n\ndef main():\n    execute('m.py:f', {'a': 'cpu0'})"
                                 "\n\n\nmain()\n",
    "guarded": "from dnnplace import execute\n\nif __name__ == '__main__':\n    execute('m.py:f', {'a': 'cpu0'})\n",
}


@pytest.mark.parametrize("kind", list(SCRIPTS))
def test_execute_outside_the_main_guard_says_so_before_starting_workers(kind, tmp_path):
    """A script that calls execute() at its top level, unguarded, would be run again by
    every spawned worker (which used to end in ``ExecutionError: a worker exited: process
    0 terminated with exit code 1``, the cause buried): one line naming the script's line
    and the guard, before any worker starts. Under the guard the call goes on (here to
    the next check: the plan has no graph)."""
    script = tmp_path / "plan_script.py"
    script.write_text(SCRIPTS[kind])
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "plan(s) on" not in out.stderr and "a worker" not in out.stderr  # no worker was started
    if kind == "guarded":
        assert last == "dnnplace.graphs.errors.InputError: placement: no graph with costs (give graph=, the graph " \
                       "the plan was made on)"
    else:
        line = 3 if kind == "top level" else 8  # the unguarded line: execute(...) or main()
        assert last.startswith(f"dnnplace.graphs.errors.InputError: {script}:{line}: this line at the top level of "
                               "the script calls execute()")
        assert "if __name__ == \"__main__\":" in last
