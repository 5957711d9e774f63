"""One route for a time limit and one termination vocabulary (docs/architecture.md, "Time limits").

A run's :class:`~dnnplace.runtime.deadline.Deadline` is made once, where the run starts, and
passed down; stages derive theirs from it (``share``, ``within``, ``less``, ``later``). Every
termination is a :class:`~dnnplace.runtime.termination.Termination`; a solver's words and
older records' words are mapped in one place (``Termination.of``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dnnplace.results import Result
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline
from dnnplace.runtime.termination import Termination

REPO = Path(__file__).resolve().parents[1]
SOURCE = ("runtime", "graphs", "evaluation", "heuristics", "formulations", "pytorch", "dnnplace", "experiments")

# where a Deadline may be made: the clock itself, and where a run starts (the command line
# from --time-limit, the Python API per call: registry.with_limits, which api.solve and the
# sweep runner's runs go through)
DEADLINE_MADE = {"runtime/deadline.py": 2, "dnnplace/solve_command.py": 1, "dnnplace/registry.py": 1}

# a termination given or compared as a bare string: `termination="x"`, `termination == "x"`,
# `stopped="x"`, `reason="x"`, `.termination = "x"`, or a SolveOutcome's second argument
BARE = [re.compile(p) for p in (
    r"termination\s*(=|==|!=)\s*[\"']",
    r"termination\s+in\s+\(\s*[\"']",
    r"\b(stopped|reason)\s*(=|==|!=)\s*[\"']",
    r"SolveOutcome\(\s*[^,()]+,\s*[\"']",
    r"(stopped|termination)\s+or\s+[\"']",
)]
# the words of the old vocabularies, which only Termination.of may spell
OLD_WORDS = re.compile(r"[\"'](maxTimeLimit|convergenceCriteriaSatisfied|provenInfeasible|licensingProblems|"
                       r"locallyInfeasible|infeasibleOrUnbounded|maxIterations|iterationLimit)[\"']")


def _sources() -> list[Path]:
    return sorted(p for folder in SOURCE for p in (REPO / folder).rglob("*.py") if "workloads" not in p.parts)


def _deadlines_made(path: Path) -> int:
    calls = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "Deadline") or (isinstance(f, ast.Attribute)
                                                                    and f.attr == "Deadline"):
                calls += 1
    return calls


def test_a_deadline_is_made_only_where_a_run_starts():
    made, files = {}, 0
    for path in _sources():
        files += 1
        n = _deadlines_made(path)
        if n:
            made[path.relative_to(REPO).as_posix()] = n
    assert files >= 150, files
    assert made == DEADLINE_MADE, made


def test_no_deadline_travels_through_a_context_variable():
    checked = 0
    for path in _sources():
        text = path.read_text()
        checked += 1
        assert "ContextVar" not in text or "deadline" not in text.lower() or path.name == "progress.py", path
    assert checked >= 150, checked


def test_every_termination_is_set_from_the_enum():
    bad, uses, files = [], 0, 0
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        files += 1
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            uses += code.count("Termination.")
            if any(p.search(code) for p in BARE) or (rel != "runtime/termination.py" and OLD_WORDS.search(code)):
                bad.append(f"{rel}:{no}: {line.strip()}")
    assert files >= 150, files
    assert bad == [], bad
    assert uses >= 40, uses  # the sites that set or compare one


def test_old_records_read_in_the_one_vocabulary():
    old = Result(problem="maxload", method="ip", instance="g", status="feasible", termination="maxTimeLimit")
    assert old.termination is Termination.TIME_LIMIT and old.to_dict()["termination"] == "time_limit"
    read = Result.from_dict({"problem": "maxload", "method": "ip", "instance": "g", "status": "optimal",
                             "termination": "convergenceCriteriaSatisfied"})
    assert read.termination is Termination.OPTIMAL
    kept = Result.from_dict({"problem": "maxload", "method": "dp", "instance": "g", "status": "optimal",
                             "termination": "completed"})  # records in the new vocabulary read unchanged
    assert kept.to_dict()["termination"] == "completed"
    words = [t.value for t in Termination]
    assert len(words) == len(set(words)) >= 12
    assert all(Termination.of(w) is Termination(w) for w in words)


def test_stage_deadlines_are_derived_and_never_past_the_run():
    run = Deadline(2.0)
    for d in (run.share(0.5), run.within(10.0), run.less(0.5), run.within(None)):
        assert d.end is not None and d.end <= run.end + 1e-9
    assert run.within(0.5).remaining() <= 0.5 and run.later(1.0).end == pytest.approx(run.end + 1.0, abs=0.01)
    assert NO_DEADLINE.within(None) is NO_DEADLINE and NO_DEADLINE.less(1.0) is NO_DEADLINE


def test_the_relaxed_start_solves_within_the_ilp_deadline(monkeypatch):
    """The congestion-free model first (option relaxed_start) gets its share of the ILP's
    deadline, never a limit of its own past it."""
    from instances import pesto_tiny_instance

    import dnnplace.formulations.multilevel.stages as stages
    from dnnplace.formulations.multilevel.pesto import PipelineOptions, pesto
    from dnnplace.formulations.solvers.options import SolverOptions

    seen = []
    real = stages.solve_exact

    def spy(*args, **kwargs):
        seen.append(args[7] if len(args) > 7 else kwargs.get("deadline"))
        return real(*args, **kwargs)

    monkeypatch.setattr(stages, "solve_exact", spy)
    g, cl = pesto_tiny_instance(0)
    run = Deadline(20.0)
    r = pesto(g, cl, PipelineOptions(congestion=True, relaxed_start=0.3, solver=SolverOptions(time_limit=20.0,
                                                                                               threads=1)),
              deadline=run)
    assert "relaxed_start" in r.size
    assert len(seen) == 2, seen  # the relaxed model, then the full one
    assert all(d is not None and d.end is not None and d.end <= run.end + 1e-9 for d in seen), seen
    assert seen[0].remaining() <= 0.3 * 20.0 + 1e-9


def test_a_warm_start_method_runs_within_half_the_time_and_the_method_in_the_rest(monkeypatch):
    """The latency IP warm-started by latency-ls (a search that runs to its deadline): the
    search gets half of the run's remaining time, the IP the rest (a search given the run's
    whole limit once left the IP 0.5 s of 60, and Table 4's IP cells read 'faster')."""
    from instances import latency_tiny_instance

    import dnnplace.registry as registry

    real, given = registry.run_method, {}

    def spy(inst, method, request):
        import time

        name = method if isinstance(method, str) else method.name
        given[name] = (None if request.deadline is None else request.deadline.remaining(), time.monotonic())
        return real(inst, method, request)

    monkeypatch.setattr(registry, "run_method", spy)
    limit = 4.0
    res = registry.solve(latency_tiny_instance(3, k=2), "ip",
                         registry.SolveRequest("latency", warm_start="latency-ls",
                                               solver=registry.SolverOptions(time_limit=limit)))
    (_, t_ip), (share, t_ls) = given["ip"], given["latency-ls"]   # the run's deadline is made inside the call
    # half of what the run had left when the start began (imports and compiling before it count as spent)
    assert share is not None and share == pytest.approx(0.5 * (limit - (t_ls - t_ip)), abs=0.05)
    assert "model build" not in (res.message or "") and res.status in ("optimal", "feasible")
