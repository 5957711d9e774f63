"""Pesto experiments in simulation (Pesto Fig. 5, Fig. 8, Sec. 3.3/5.3), driven by TOML.

    dnnplace reproduce pesto-congestion      # experiments/pesto-congestion.toml
    dnnplace reproduce pesto-hardware        # experiments/pesto-hardware.toml
    dnnplace reproduce pesto-coarsening      # experiments/pesto-coarsening.toml

(``pesto-congestion-wide`` and ``pesto-hardware-100`` are variants on a wider graph and
with 100 coarse nodes; ``pesto-hardware-captured`` and ``pesto-coarsening-captured`` run
Fig. 8 and the coarsening trade-off on the captured RNNLM-2x2048 graph with CP-SAT.) Every
number is a *simulation* (evaluation/simulate.py, docs/semantics.md 2.1) of generated or captured operator
graphs (roofline costs) on a modelled cluster, not a hardware measurement.

How an experiment runs: it generates its graph deterministically
(:func:`dnnplace.graphs.generators.generate` with the config's ``graph`` table) or loads
the bundled workload file a ``graph`` string names (``"captured/rnnlm-2x2048.json"``,
:func:`~dnnplace.experiments.pesto_config.experiment_graph`), and the
cluster variants it needs (GPU counts; compute and link speeds scaled by
:func:`~dnnplace.experiments.pesto_config.scaled_cluster`), writes each variant as a native instance
file under ``<out>/<name>/instances/`` (the file name ends in a digest of its content with
floats to 12 significant digits, :func:`~dnnplace.experiments.instance_files.content_digest`, so a
changed config or generator never resumes from runs of another instance, while last-bit
noise of a regenerated graph keeps the file already there and its runs), and runs every
measured placement as an ordinary file-based :class:`~dnnplace.config.RunSpec` of a
registered method through the one sweep driver, :func:`dnnplace.runner.execute`: each
run goes through :func:`dnnplace.registry.solve` (re-scored by the independent
simulator, status from that evaluation) and is appended to ``<out>/<name>/runs.jsonl``
as it finishes, so an interrupted experiment resumes (``fresh=True`` starts over). Any
run can be repeated by hand with ``dnnplace solve INSTANCE --problem makespan --method
M``. Every makespan in a table is its record's ``evaluation.objective`` (simulated with
link congestion). Tables go through :func:`dnnplace.tables.write_table`
(``table.md``/``table.csv``); plots beside them. ``--quick`` caps every ILP at 10 s and
writes to ``<out>/<name>-quick/``.

Methods: ``pesto`` (the coarsened ILP; options ``coarsen_to``, ``ilp_congestion``,
``fallback``, and ``engine`` where the config names one), the list schedulers ``heft``,
``etf``, ``m-topo``, ``m-etf`` and ``m-sct``
(the *best list scheduler* is the best of their re-scored makespans; ETF-like ones only
up to :data:`~dnnplace.experiments.makespan_runs.MAX_ETF_NODES` nodes, as
:func:`dnnplace.heuristics.list_scheduling.best_list_schedule`) and ``layer-split``,
Pesto's layer-wise expert (Sec. 5.2), simulated with the ``fifo`` dispatch policy like
TensorFlow.

Experiment kinds (``kind`` in the TOML):

``congestion``  Fig. 5: the Pesto ILP without and with its congestion constraints (7),
                both reported as the ILP solved them (``fallback=false``) and simulated
                *with* congestion; makespan ratio, the same placements re-simulated
                without congestion, transfer counts, busiest link and Gantt charts (all
                replayed from the records). The earlier third run, the congestion ILP
                started from the no-congestion ILP's coarse solution, is dropped: it
                needs that run's in-memory coarse schedule, which no method option can
                name (on both graphs it had given the same answer as the
                list-scheduling start).
``hardware``    Fig. 8: compute speed and link speed scaled 0.1x-10x; Pesto vs the
                layer-wise expert and the best list scheduler; reduction over the expert
                in percent (the 1x point of both axes is one instance, run once).
``coarsening``  Sec. 3.3 / 5.3: coarse size vs ILP time, certified gap (of the coarse
                ILP) and simulated makespan on the original graph.
``gaps``        a ``congestion`` or ``hardware`` config's ILPs (its ``base``) rerun on its
                instances under other limits, once per solver seed (``seeds``), ``jobs``
                at a time (:mod:`dnnplace.experiments.pesto_gaps`; ``pesto-hardware-gaps``,
                ``pesto-congestion-gaps``). A base config's ``long_runs`` names its gaps
                config: what the long runs found joins the cause of its verdicts.

This module holds the entry point, :func:`reproduce`; :mod:`dnnplace.experiments.pesto_config`
the config, the graph, its cluster variants and the ``pesto`` run;
:mod:`dnnplace.experiments.instance_files` the instance files;
:mod:`dnnplace.experiments.makespan_runs` the run specs and the record readers;
:mod:`dnnplace.experiments.pesto_figures` the three figure kinds, each writing its table and plots;
:mod:`dnnplace.experiments.pesto_gaps` the ``gaps`` kind.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from dnnplace.experiments.makespan_runs import replay
from dnnplace.experiments.pesto_config import SCHEMA, Config
from dnnplace.experiments.pesto_figures import RUNNERS as FIGURES
from dnnplace.experiments.pesto_figures import records_only
from dnnplace.experiments.pesto_gaps import long_run_cause, run_gaps

RUNNERS = {**FIGURES, "gaps": run_gaps,
           **{k: functools.partial(FIGURES[k], long_cause=long_run_cause) for k in ("congestion", "hardware")}}
"""The experiment of each config ``kind``: the three figures (Fig. 5 and Fig. 8 citing their long runs, a
config's ``long_runs``) and ``gaps``, a figure's ILPs rerun per seed."""

__all__ = ["Config", "SCHEMA", "replay", "reproduce", "rerender"]


def reproduce(name: str, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run (or resume) ``experiments/<name>.toml`` and write its table and plots.

    Parameters
    ----------
    name : str
        The reproduction, e.g. ``"pesto-congestion"`` (its config file's stem), or a TOML file's path.
    quick : bool
        Cap every ILP at 10 s; outputs go to ``<config name>-quick``.
    out_dir : path, optional
        Parent of the output folder (default: the config's ``out_dir``, ``results/pesto``).
    fresh : bool
        Start over (the old ``runs.jsonl`` is kept as ``runs.jsonl.bak``).
    progress : bool
        Report each run on stderr.

    Returns
    -------
    Path
        ``<out_dir>/<config name>[-quick]/table.md`` (``table.csv``, ``runs.jsonl``,
        ``instances/`` and the plots beside it).
    """
    cfg = Config.load(name)
    if quick:
        cfg = dataclasses.replace(cfg, time_limit=min(cfg.time_limit, 10.0))
    out = (Path(out_dir) if out_dir is not None else Path(cfg.out_dir)) / (cfg.name + ("-quick" if quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    return RUNNERS[cfg.kind](name, cfg, out, quick=quick, fresh=fresh, progress=progress)


def rerender(name: str, out_dir: str | Path | None = None) -> Path:
    """Rewrite ``<out_dir>/<config name>/table.md`` (and plots) from the records of its ``runs.jsonl``
    alone (:func:`~dnnplace.experiments.pesto_figures.records_only`: no run; a named error where a
    record is missing), with the verdicts of the one rule."""
    cfg = Config.load(name)
    out = (Path(out_dir) if out_dir is not None else Path(cfg.out_dir)) / cfg.name
    return RUNNERS[cfg.kind](name, cfg, out, quick=False, fresh=False, progress=False, execute_fn=records_only)
