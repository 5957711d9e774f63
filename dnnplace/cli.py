"""The ``dnnplace`` command line.

Subcommands (a stable contract: later work adds methods and generator families, not new
shapes)::

    dnnplace info GRAPH [--json]
    dnnplace evaluate GRAPH PLACEMENT --problem maxload|latency|makespan [--transfer-mode M] [--out EVAL.json]
    dnnplace simulate GRAPH PLACEMENT [--no-congestion] [--policy P] [--transfer-mode M] [--gantt out.png]
                      [--out SIM.json]
    dnnplace generate FAMILY --nodes N --seed S --out GRAPH.json [--cluster PRESET]
    dnnplace solve GRAPH --problem P --method M [solver and method options] [--out RESULT.json]
    dnnplace methods
    dnnplace run CONFIG.toml [--fresh] [--jobs N] [--executor local|ray [--ray-address A]]
    dnnplace reproduce NAME [--quick] [--out DIR] [--check]
    dnnplace compare RESULTS... [--out DIR] [--no-plots]
    dnnplace capture MODEL [--batch B] [--seq S] [--inference] [--cost roofline:v100|measured|calibrated:v100] --out G
    dnnplace profile-links [--sizes ...] --out CLUSTER.json
    dnnplace calibrate RUN.json [RUN.json ...] --out CLUSTER.json
    dnnplace tune MODEL --cluster C [--methods M1,M2] [--top K] [--max-steps N] --out TUNED.json

Exit codes: 0 success; 2 bad input (one ``dnnplace: error: ...`` line on stderr naming
the culprit, nothing on stdout, no output file): unreadable or inconsistent files,
unknown methods, options, solvers or solver options, out-of-range solver settings
(``--time-limit`` <= 0, ``--rel-gap`` outside [0, 1), ``--threads`` < 1), an output path (``--out``,
``--gantt``) naming a folder, any input of the command or another output, or not writable (all checked before
any work), a result solved on another graph than the one given (its ``graph_fingerprint``),
a model over the solver's licence (Gurobi's size-limited pip licence), an invalid
experiment config (checked whole before its first run); 1 an unexpected failure (rerun
with ``--verbose`` for the traceback) or a sweep with failed runs; 130 interrupted
(Ctrl-C, also inside a solver: the run in progress is dropped, never recorded as an
error; finished runs are kept and the same command resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from dnnplace import commands, solve_command
from dnnplace.graphs.errors import InputError

__all__ = ["main", "build_parser"]


# ---------------------------------------------------------------------------- parser
def _add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="PRESET",
                   help="use (or replace the file's cluster with) a preset: single-host-N-nvlink|pcie[-MEM], "
                        "single-host-N-nvlink2|nvlink3|nvlink4|pcie3|pcie4|pcie5[-MEM], local-cpu-N[-MEM], "
                        "tarnawski-K-L-MEM (e.g. tarnawski-4-1-16GB), hierarchy-AxB (docs/formats.md); evaluate "
                        "and simulate default to the cluster a result JSON was solved on")


def _add_eval_flags(p: argparse.ArgumentParser, makespan_only: bool = False) -> None:
    from dnnplace.evaluation.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES

    if not makespan_only:
        p.add_argument("--objective", choices=MAXLOAD_OBJECTIVES, help="max-load variant (default pipedream)")
        p.add_argument("--contiguity", choices=CONTIGUITY_MODES,
                       help="contiguity the placement must satisfy (default none)")
    p.add_argument("--policy", choices=("fifo", "critical_path", "priority", "order"),
                   help="makespan: dispatch policy (default: order for a result with start times, else fifo; "
                        "priority: the result's priorities, else its start times)")
    p.add_argument("--congestion", dest="congestion", action="store_true", default=None,
                   help="makespan: one transfer at a time per link (default)")
    p.add_argument("--no-congestion", dest="congestion", action="store_false", help="makespan: links never queue")
    _add_transfer_mode(p)


def _add_transfer_mode(p) -> None:
    p.add_argument("--transfer-mode", type=lambda s: s.replace("_", "-"), choices=("per-destination", "per-edge"),
                   help="makespan: what is sent (docs/semantics.md 2.1): a tensor once to each device that consumes "
                        "it (per-destination, the default, or the mode a result was solved under) or one transfer "
                        "per cross-device edge (per-edge)")


class _Spelled(argparse.Action):
    """Store a flag's value and remember the spelling given (``args.spelled[dest]``), so
    that a message names the flag as typed (``--mip-gap``, the old name of ``--rel-gap``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.spelled = {**(getattr(namespace, "spelled", None) or {}), self.dest: option_string}


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line plus a hint (exit 2)."""

    def error(self, message: str):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# Subcommands whose parsing needs none of the imports that only other subcommands' parsers
# need (the generator families, the reproduction names read from the bundled configs, the
# capture and execute parsers): their process leaves those out (start-up time: results/startup.md).
_LEAN = frozenset({"info", "evaluate", "simulate", "solve", "methods", "run", "compare"})


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is not an option; the global
    options take no value), or ``None``."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``dnnplace`` argument parser; with ``command`` (one of ``_LEAN``) only enough of
    it to parse that subcommand's arguments (the other subcommands may be left out or
    lack their choices)."""
    lean = command in _LEAN
    from dnnplace import __version__
    from dnnplace.evaluation.evaluate import PROBLEMS

    parser = _Parser(prog="dnnplace", description="Device placement and scheduling of DNN operator graphs.")
    parser.add_argument("--version", action="version", version=f"dnnplace {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    common = argparse.ArgumentParser(add_help=False)  # the same flags after the subcommand
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks on errors")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add = sub.add_parser

    def add_parser(name: str, **kw):
        return _add(name, parents=[common], **kw)

    sub.add_parser = add_parser  # type: ignore[method-assign]

    p = sub.add_parser("info", help="graph statistics and the cluster summary")
    p.add_argument("graph", help="native or Tarnawski graph JSON")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_cluster(p)
    p.set_defaults(func=commands.cmd_info)

    p = sub.add_parser("evaluate", help="score a placement with the independent evaluator")
    p.add_argument("graph")
    p.add_argument("placement", help="result JSON, Tarnawski split file, or {node: device} map; a makespan result "
                                     "with start times is scored in its own order (--policy order) by default")
    p.add_argument("--problem", choices=PROBLEMS,
                   help="default: the result's problem (a result JSON), else maxload")
    _add_eval_flags(p)
    _add_cluster(p)
    p.add_argument("--out", metavar="EVAL.json", help="write the evaluation as JSON")
    p.set_defaults(func=commands.cmd_evaluate)

    p = sub.add_parser("simulate", help="discrete-event simulation of a placement")
    p.add_argument("graph")
    p.add_argument("placement", help="result JSON (its 'start' gives the order for --policy order|priority), "
                                     "Tarnawski split file, or {node: device} map")
    p.add_argument("--policy", choices=("fifo", "critical_path", "priority", "order"),
                   help="dispatch policy (default: a result's own order where it carries start times, else fifo)")
    p.add_argument("--congestion", dest="congestion", action="store_true", default=None,
                   help="one transfer at a time per directed link (default; an ordered result: as it was scored)")
    p.add_argument("--no-congestion", dest="congestion", action="store_false")
    _add_transfer_mode(p)
    p.add_argument("--gantt", metavar="OUT.png", help="draw the schedule as a Gantt chart")
    p.add_argument("--out", metavar="SIM.json", help="write the simulation summary and trace as JSON")
    _add_cluster(p)
    p.set_defaults(func=commands.cmd_simulate)

    if lean:
        GENERATORS: dict = {}  # the families are not needed to parse another subcommand
    else:
        from dnnplace.graphs.generators import GENERATORS

    p = sub.add_parser("generate", help="generate a synthetic graph")
    p.add_argument("family", choices=sorted(GENERATORS))
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--training", action="store_true", help="add a backward pass")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="generator option (value parsed as JSON if possible), repeatable")
    _add_cluster(p)
    p.add_argument("--out", required=True, metavar="GRAPH.json")
    p.set_defaults(func=commands.cmd_generate)

    p = sub.add_parser("solve", help="run a registered method and write its result JSON")
    p.add_argument("graph", help="graph file, or a bundled workload by name (e.g. captured/transformer-base)")
    p.add_argument("--problem", choices=PROBLEMS,
                   help="default: the method's problem when it solves one (heft: makespan), else maxload")
    p.add_argument("--method", required=True, help="see `dnnplace methods`")
    g = p.add_argument_group("solver")
    g.add_argument("--solver", default="highs",
                   help="MIP backend (default highs; gurobi needs gurobipy, scip pyscipopt; docs/backends.md)")
    g.add_argument("--time-limit", type=float, metavar="S",
                   help="seconds, > 0 (leave it out for no limit; 0 or negative is an error)")
    g.add_argument("--memory-limit", metavar="SIZE",
                   help="memory of the whole run, e.g. 4GB or 512MB (default: 75%% of this machine's memory less "
                        "what the process holds); past it the method returns its best answer, termination "
                        "memory_limit (docs/guide.md, 'Time and memory limits')")
    g.add_argument("--rel-gap", "--mip-gap", dest="rel_gap", type=float, metavar="G", action=_Spelled,
                   help="relative gap to stop at, >= 0 and < 1 (e.g. 0.01); --mip-gap is its old, deprecated name")
    g.add_argument("--threads", type=int, metavar="T", help=">= 1 (leave it out for the solver's default)")
    g.add_argument("--seed", type=int, metavar="N", help=">= 0")
    g.add_argument("--tee", action="store_true", help="show the solver log")
    g.add_argument("--solver-option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend-specific option, repeatable (checked against the HiGHS/Gurobi option list)")
    g.add_argument("--warm-start", metavar="METHOD_OR_FILE", help="a method name or a placement file")
    g.add_argument("--bound-time-limit", type=float, metavar="S",
                   help="makespan: also spend S seconds on the comm-aware relaxation bound (CP-SAT; default off)")
    g = p.add_argument_group("model")
    from dnnplace.evaluation.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES
    g.add_argument("--objective", choices=MAXLOAD_OBJECTIVES, help="max-load variant (default pipedream)")
    c = g.add_mutually_exclusive_group()
    c.add_argument("--contiguous", action="store_true",
                   help="contiguous subgraphs (maxload: 'both', otherwise 'all')")
    c.add_argument("--non-contiguous", action="store_true", help="no contiguity constraint ('none')")
    c.add_argument("--contiguity", choices=CONTIGUITY_MODES, help="explicit contiguity mode")
    g.add_argument("--subgraphs-per-device", type=int, metavar="Q")
    g.add_argument("--coarsen-to", type=int, help=argparse.SUPPRESS)  # the old spelling of --param coarsen_to=N
    g.add_argument("--policy", choices=("fifo", "critical_path", "priority", "order"),
                   help="makespan: dispatch policy used to score")
    g.add_argument("--congestion", dest="congestion", action="store_true", default=None)
    g.add_argument("--no-congestion", dest="congestion", action="store_false")
    _add_transfer_mode(g)
    g.add_argument("--transform", metavar="NAME",
                   help="solve a transformed graph, as a config's 'transform' key: contract-layers (every captured "
                        "layer one colocation class, Tarnawski's layer granularity; an optimum is the layer graph's) "
                        "or contract-calls (the same, with a layer that is not contiguous, an RNN cell called at "
                        "every step, split into its calls)")
    g.add_argument("--split", metavar="FILE", help="expert: the split file to evaluate")
    g.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="method-specific parameter (value parsed as JSON if possible), repeatable")
    _add_cluster(p)
    p.add_argument("--out", metavar="RESULT.json", help="write the result JSON")
    p.set_defaults(func=solve_command.cmd_solve)

    p = sub.add_parser("methods", help="list the methods per problem, or one method's options")
    p.add_argument("name", nargs="?", metavar="NAME", help="a method: print its options with types and defaults")
    p.set_defaults(func=commands.cmd_methods)

    p = sub.add_parser("run", help="run (or resume) an experiment config")
    p.add_argument("config", metavar="CONFIG.toml")
    r = p.add_mutually_exclusive_group()
    r.add_argument("--resume", dest="fresh", action="store_false", default=False,
                   help="skip runs already in runs.jsonl (default; a half-written last line is cut off, with a "
                        "warning)")
    r.add_argument("--fresh", dest="fresh", action="store_true",
                   help="start over (the old runs.jsonl, table.md and table.csv are kept as timestamped .bak files)")
    p.add_argument("--retry-errors", action="store_true",
                   help="run again the runs recorded as errors (the new record replaces the old line)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: the config's out_dir or results/NAME)")
    x = p.add_argument_group("executor (where the runs execute; only this process writes runs.jsonl)")
    x.add_argument("--jobs", type=int, metavar="N",
                   help="parallel CPU slots, >= 1 (local default 1: one run at a time in this process, the mode "
                        "for timing tables; ray default: the cluster's CPUs); a run with solver threads = T takes "
                        "T slots")
    x.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local processes (default) or a Ray cluster (pip install 'dnnplace[ray]')")
    x.add_argument("--ray-address", metavar="ADDR",
                   help="Ray head HOST:PORT, or auto (this machine's cluster, an error if none); default: this "
                        "machine's cluster if there is one, else a local Ray instance started for the sweep")
    x.add_argument("--hang-margin", type=float, default=60.0, metavar="S",
                   help="worker executors cancel a run still going its time limit plus max(S, time limit) "
                        "seconds after its start (default 60)")
    p.set_defaults(func=commands.cmd_run)

    p = sub.add_parser("compare", help="compare runs across methods, MIP backends and instances (tables, plots)")
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="runs.jsonl files, folders holding one (dnnplace run), or result JSON files (dnnplace solve "
                        "--out)")
    p.add_argument("--out", metavar="DIR", help="output folder, made when written to (default: the first RESULTS "
                                                "folder, or the folder of the first result file)")
    p.add_argument("--no-plots", dest="plots", action="store_false", help="tables only")
    p.set_defaults(func=commands.cmd_compare)

    if lean:
        NAMES: tuple[str, ...] = ()  # reading the configs' reproduction keys is left out
    else:
        from dnnplace.reproduce import reproductions

        NAMES = tuple(reproductions())

    p = sub.add_parser("reproduce", help="reproduce a published table or figure",
                       description="Reproductions: " + ", ".join(NAMES) + ". Runs resume from "
                                   "<out>/<name>/runs.jsonl; --fresh starts over.")
    p.add_argument("name", help="one of: " + ", ".join(NAMES))
    p.add_argument("--quick", action="store_true", help="a fast subset (CI)")
    p.add_argument("--fresh", action="store_true",
                   help="start over (the old runs.jsonl is kept as a timestamped runs.jsonl.<UTC time>.bak)")
    p.add_argument("--out", metavar="DIR", help="output folder (default results/; the papers' experiments: "
                   "results/pesto/, results/fastt/, results/celeritas/, results/pardnn/)")
    p.add_argument("--check", action="store_true",
                   help="run nothing: re-render the tables from the records in the tree (or in --out) in a temporary "
                        "folder and compare them with the tables there (.md, .csv); exit 1 at any difference")
    p.set_defaults(func=commands.cmd_reproduce)

    if not lean:
        from dnnplace.capture_commands import add_parsers as add_capture_parsers
        add_capture_parsers(sub)  # capture MODEL ..., profile-links ...
        from dnnplace.execute_command import add_parser as add_execute_parser
        add_execute_parser(sub)  # execute MODEL RESULT.json
        from dnnplace.tune_command import add_parser as add_tune_parser
        add_tune_parser(sub)  # tune MODEL --cluster C --out TUNED.json
        from dnnplace.calibrate_command import add_parser as add_calibrate_parser
        add_calibrate_parser(sub)  # calibrate RUN.json ... --out CLUSTER.json
    return parser


def _one_line(exc: BaseException, limit: int = 500) -> str:
    """An exception's whole message on one line (a multi-line message is joined, not cut
    after its first line), shortened to ``limit`` characters."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_INTERRUPTED: list[BaseException] = []  # the last Ctrl-C, kept with the work it stopped (see main)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dnnplace`` console script; returns the exit code.

    Ctrl-C (:func:`~dnnplace.formulations.solvers.interrupts.stop_on_ctrl_c`): 130, nothing
    recorded. The interrupt's traceback, and so the interrupted work (a Pesto model of
    millions of Pyomo objects), is kept until the next call: freeing it on the way out takes
    seconds (results/time-limits.md, "Ctrl-C and the interpreter's teardown"), and the console
    script ends without it
    (:func:`~dnnplace.formulations.solvers.interrupts.exit_process`)."""
    from dnnplace.formulations.solvers.interrupts import INTERRUPTED, stop_on_ctrl_c
    from dnnplace.formulations.solvers.progress import quiet

    _INTERRUPTED.clear()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    try:
        with stop_on_ctrl_c(), quiet(args.quiet):  # -q: no progress line of a long solve either
            return int(args.func(args) or 0)
    except BrokenPipeError:  # `dnnplace ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt as exc:
        _INTERRUPTED.append(exc)
        if args.verbose:
            traceback.print_exc()
        hint = " (finished runs are saved; the same command resumes)" if args.command == "run" else ""
        print(f"dnnplace: interrupted{hint}", file=sys.stderr)
        return INTERRUPTED
    except (InputError, FileNotFoundError, json.JSONDecodeError, IsADirectoryError, NotADirectoryError) as exc:
        if args.verbose:
            traceback.print_exc()
        msg = _one_line(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename:
            msg = f"{exc.filename}: {exc.strerror}"
        print(f"dnnplace: error: {msg}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line unless --verbose
        if args.verbose:
            traceback.print_exc()
        else:
            print(f"dnnplace: error: {type(exc).__name__}: {_one_line(exc)} (rerun with --verbose for the "
                  "traceback)", file=sys.stderr)
        return 1


def run() -> None:
    """The ``dnnplace`` console script: :func:`main`'s exit code as the process's
    (:func:`~dnnplace.formulations.solvers.interrupts.exit_process`: a solver thread left
    running past its deadline does not hold the process or abort it)."""
    from dnnplace.formulations.solvers.interrupts import exit_process

    exit_process(main())


if __name__ == "__main__":
    run()
