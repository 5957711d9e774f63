"""Pesto's simulated experiments, their configs and runs: Pesto's :data:`SCHEMA` and
:class:`Config` (its view of a config read by the one loader,
:mod:`dnnplace.experiments.config`), the experiment's graph (:func:`experiment_graph`) and
its cluster variants (:func:`scaled_cluster`), the run of the ``pesto`` method
(:func:`pesto_spec`) and what its records report (:func:`ilp_gap`, :func:`pesto_source`).
The entry point is :mod:`dnnplace.experiments.pesto`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnplace.config import RunSpec
from dnnplace.data import workloads_dir
from dnnplace.experiments.config import Key, Reproduction, Schema, load
from dnnplace.experiments.instance_files import Variant
from dnnplace.experiments.makespan_runs import extra_of, run_spec
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.io import load_instance

__all__ = ["Config", "SCHEMA", "EXPERT", "experiment_graph", "scaled_cluster", "pesto_spec", "ilp_gap",
           "pesto_source"]

EXPERT = "layer-split"

# Pesto's own keys of a reproduction config (beside the common graph, cluster, time_limit, rel_gap)
SCHEMA = Schema(kinds=("congestion", "hardware", "coarsening", "gaps"), out_dir="results/pesto", time_limit=60.0,
                rel_gap=0.01, options={
                    "coarsen_to": Key(int, 100),                                  # congestion, hardware
                    "coarse_sizes": Key(list, [50, 100, 200, 300], item=int),     # coarsening axis
                    "gpus": Key(list, [2], item=int),                             # coarsening axis
                    "compute_scales": Key(list, [0.1, 0.3, 1.0, 3.0, 10.0], item=float),  # hardware axis
                    "link_scales": Key(list, [0.1, 0.3, 1.0, 3.0, 10.0], item=float),     # hardware axis
                    "engine": Key(str, None, choices=("mip", "cpsat")),           # the pesto method's engine
                    "base": Key(str, None),            # gaps: the congestion or hardware config whose ILPs it reruns
                    "seeds": Key(list, [0], item=int),  # gaps: the ILP's solver seeds (HiGHS random_seed)
                    "jobs": Key(int, 1),               # gaps: runs in parallel (worker processes)
                    "long_runs": Key(str, None),       # congestion, hardware: the gaps config that reran its ILPs
                    "subclusters": Key(bool, True),    # the pesto method's sub-cluster rungs (off: the ILP alone)
                })


@dataclass(frozen=True)
class Config:
    """A Pesto experiment config (see the TOML files for the meaning of each key): the common
    keys of :class:`~dnnplace.experiments.config.Reproduction` and :data:`SCHEMA`'s own."""

    name: str
    kind: str
    description: str = ""
    notes: tuple = ()                                # text printed with the table (the gaps tables)
    graph: dict | str = field(default_factory=dict)  # generate(**graph), or a file under the bundled workloads
    cluster: dict = field(default_factory=dict)      # Cluster.single_host(**cluster)
    coarsen_to: int | None = 100
    coarse_sizes: tuple = (50, 100, 200, 300)
    gpus: tuple = (2,)
    compute_scales: tuple = (0.1, 0.3, 1.0, 3.0, 10.0)
    link_scales: tuple = (0.1, 0.3, 1.0, 3.0, 10.0)
    time_limit: float = 60.0
    rel_gap: float = 0.01
    engine: str | None = None                        # the pesto method's exact engine (None: its default, the MIP)
    base: str | None = None                          # gaps: the config whose ILPs are rerun
    seeds: tuple = (0,)                              # gaps: the ILP's solver seeds
    jobs: int = 1                                    # gaps: runs in parallel
    long_runs: str | None = None                     # the gaps config that reran this config's ILPs
    subclusters: bool = True                         # the pesto method's sub-cluster rungs (False: the ILP alone)
    out_dir: str = "results/pesto"

    @classmethod
    def load(cls, path: str | Path) -> Config:
        """The config ``path`` (a bundled name or a TOML file) through the one loader,
        :func:`dnnplace.experiments.config.load`, against :data:`SCHEMA`."""
        return cls.of(load(path, module="pesto"))

    @classmethod
    def of(cls, cfg: Reproduction) -> Config:
        """Pesto's view of a loaded config: the common keys and :data:`SCHEMA`'s own."""
        own = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.options.items()}
        return cls(name=cfg.name, kind=cfg.kind, description=cfg.description, notes=cfg.notes, graph=cfg.graph or {},
                   cluster=dict(cfg.cluster), time_limit=cfg.time_limit, rel_gap=cfg.rel_gap, out_dir=cfg.out_dir,
                   **own)

    def solver(self, seed: int | None = None) -> dict[str, Any]:
        """The ILP's solver options (one thread, the config's limits; the solver's random
        seed where ``seed`` is given, else the solver's default)."""
        opts: dict[str, Any] = {"time_limit": self.time_limit, "rel_gap": self.rel_gap, "threads": 1}
        return opts if seed is None else {**opts, "seed": int(seed)}

    def engine_label(self) -> str:
        """The exact engine in words, for tables and plots."""
        return "OR-Tools CP-SAT" if self.engine == "cpsat" else "HiGHS"


def experiment_graph(cfg: Config) -> tuple[OpGraph, str]:
    """The experiment's graph and where it comes from: ``generate(**cfg.graph)`` for a
    table, else the graph of the bundled workload file ``cfg.graph`` names (a path under
    :func:`dnnplace.data.workloads_dir`, e.g. ``"captured/rnnlm-2x2048.json"``)."""
    if isinstance(cfg.graph, dict):
        return generate(**cfg.graph), f"generate({cfg.graph})"
    path = workloads_dir() / cfg.graph
    if not path.is_file():
        known = sorted(str(q.relative_to(workloads_dir())) for q in workloads_dir().glob("captured/*.json"))
        raise InputError(f"experiment {cfg.name!r}: graph {cfg.graph!r} is no bundled workload file; e.g. {known}")
    return load_instance(path).graph, f"workload {cfg.graph}"


def scaled_cluster(base: Cluster, compute: float = 1.0, link: float = 1.0) -> Cluster:
    """Devices ``compute`` times faster, links ``link`` times faster (beta0, beta1 / link)."""
    devs = tuple(dataclasses.replace(d, speed=d.speed * compute) for d in base.devices)
    return Cluster(devs, base.beta0 / link, base.beta1 / link, base.cost_factor,
                   name=f"{base.name}-c{compute}-l{link}", meta=dict(base.meta), ports=base.ports)


def pesto_spec(v: Variant, cfg: Config, coarsen_to: int | None, *, seed: int | None = None,
               **params: Any) -> RunSpec:
    """The run of the ``pesto`` method on ``v`` (coarsened to ``coarsen_to``, with the config's
    engine where it names one, without its sub-cluster rungs where the config turns them off)
    under the config's ILP limits (and the solver seed ``seed``)."""
    engine = {} if cfg.engine is None else {"engine": cfg.engine}
    rungs = {} if cfg.subclusters else {"subclusters": False}   # (on: the keys of the records before the key)
    return run_spec(v, "pesto", {"coarsen_to": coarsen_to, **engine, **rungs, **params}, cfg.solver(seed))


def ilp_gap(rec: dict | None) -> float | None:
    """The certified gap of a ``pesto`` record's (coarse) ILP."""
    return extra_of(rec, "ilp_gap")


def pesto_source(rec: dict | None) -> str | None:
    """``warm_start`` or ``ilp/<order policy>`` of a pesto record."""
    src = extra_of(rec, "source")
    if src != "ilp":
        return src
    order = (extra_of(rec, "model_size") or {}).get("order_policy")
    return f"ilp/{order}" if order and order != "ilp" else "ilp"
