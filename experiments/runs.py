"""The plumbing of Pesto's simulated experiments (:mod:`dnnplace.experiments.pesto`):
Pesto's :data:`SCHEMA` and :class:`Config` (its view of a config read by the one loader,
:mod:`dnnplace.experiments.config`), the cluster variants of its generated
graph written as native instance files (:class:`Variant`, :func:`write_variants`), the
:class:`~dnnplace.config.RunSpec` of every measured placement, and readers of the run
records (re-scored makespan, best list scheduler, the ``pesto`` method's extras, and
:func:`replay` of a recorded placement in its recorded order).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace.config import RunSpec, graph_label_of
from dnnplace.data import workloads_dir
from dnnplace.evaluation.link_orders import link_priorities_from_doc
from dnnplace.evaluation.simulate import SimResult, simulate
from dnnplace.experiments.config import Key, Reproduction, Schema, load
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import jsonable, load_instance, placement_from_doc, save_instance
from dnnplace.graphs.io.native import instance_to_native

__all__ = ["Config", "SCHEMA", "Variant", "LIST_SCHEDULERS", "MAX_ETF_NODES", "EXPERT", "scaled_cluster",
           "write_variants", "content_digest", "DIGEST_DIGITS", "experiment_graph", "run_spec", "list_specs",
           "pesto_spec", "makespan_of", "best_list",
           "extra_of", "ilp_gap", "pesto_source", "replay"]

LIST_SCHEDULERS = ("heft", "etf", "m-topo", "m-etf", "m-sct")
MAX_ETF_NODES = 3000  # ETF-like schedulers are skipped above this size (as best_list_schedule does)
EXPERT = "layer-split"

# Pesto's own keys of a reproduction config (beside the common graph, cluster, time_limit, rel_gap)
SCHEMA = Schema(kinds=("congestion", "hardware", "coarsening"), out_dir="results/pesto", time_limit=60.0,
                rel_gap=0.01, options={
                    "coarsen_to": Key(int, 100),                                  # congestion, hardware
                    "coarse_sizes": Key(list, [50, 100, 200, 300], item=int),     # coarsening axis
                    "gpus": Key(list, [2], item=int),                             # coarsening axis
                    "compute_scales": Key(list, [0.1, 0.3, 1.0, 3.0, 10.0], item=float),  # hardware axis
                    "link_scales": Key(list, [0.1, 0.3, 1.0, 3.0, 10.0], item=float),     # hardware axis
                    "engine": Key(str, None, choices=("mip", "cpsat")),           # the pesto method's engine
                })


@dataclass(frozen=True)
class Config:
    """A Pesto experiment config (see the TOML files for the meaning of each key): the common
    keys of :class:`~dnnplace.experiments.config.Reproduction` and :data:`SCHEMA`'s own."""

    name: str
    kind: str
    description: str = ""
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
        return cls(name=cfg.name, kind=cfg.kind, description=cfg.description, graph=cfg.graph or {},
                   cluster=dict(cfg.cluster), time_limit=cfg.time_limit, rel_gap=cfg.rel_gap, out_dir=cfg.out_dir,
                   **own)

    def solver(self) -> dict[str, Any]:
        """The ILP's solver options (one thread, the config's limits)."""
        return {"time_limit": self.time_limit, "rel_gap": self.rel_gap, "threads": 1}

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


# ---------------------------------------------------------------------------- instances and runs
@dataclass(frozen=True)
class Variant:
    """One instance file of an experiment: a cluster variant of its graph."""

    stem: str              # e.g. "gpus2-c0.3-l1"
    path: Path             # the written native instance file
    n: int                 # nodes of the graph
    gpus: int
    compute: float = 1.0
    link: float = 1.0

    @property
    def label(self) -> str:
        return graph_label_of(self.path)


DIGEST_DIGITS = 12  # significant digits of the floats an instance file's name digest is taken over


def _canonical(x: Any) -> Any:
    """A JSON document with every float rounded to :data:`DIGEST_DIGITS` significant digits
    (what :func:`content_digest` hashes)."""
    if isinstance(x, dict):
        return {k: _canonical(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_canonical(v) for v in x]
    if isinstance(x, float):
        return float(f"{x:.{DIGEST_DIGITS}g}")
    return x


def content_digest(doc: Any) -> str:
    """The 8-hex-digit digest in an instance file's name: SHA-1 of the sorted JSON of the
    native document with its floats rounded to :data:`DIGEST_DIGITS` significant digits,
    so last-bit differences of a regenerated graph (numpy, summation order) keep the name,
    the run keys (whose graph label is the file's path) and so the recorded runs."""
    blob = json.dumps(_canonical(jsonable(doc)), sort_keys=True, allow_nan=False)
    return hashlib.sha1(blob.encode()).hexdigest()[:8]


def _file_digest(path: Path) -> str | None:
    """:func:`content_digest` of an instance file already written, ``None`` if unreadable."""
    try:
        with open(path) as fh:
            return content_digest(json.load(fh))
    except (OSError, ValueError):
        return None


def write_variants(g: OpGraph, clusters: dict[str, tuple[Cluster, int, float, float]], folder: Path,
                   source: str) -> dict[str, Variant]:
    """Write each ``stem -> (cluster, gpus, compute, link)`` as ``<folder>/<stem>-<digest>.json``
    (:func:`content_digest`: floats to :data:`DIGEST_DIGITS` significant digits), drop
    instance files of earlier configs, return the variants.

    The file is written as generated (full precision). A file of the same stem already in
    ``folder`` whose content has the same digest is kept and used under its own name, even
    one named by the earlier full-precision digest: its runs resume on exactly the floats
    they were computed on."""
    folder.mkdir(parents=True, exist_ok=True)
    existing: dict[tuple[str, str], Path] = {}
    for old in sorted(folder.glob("*.json")):
        stem, _, tail = old.stem.rpartition("-")
        if stem in clusters and len(tail) == 8 and (d := _file_digest(old)) is not None:
            existing.setdefault((stem, d), old)
    out: dict[str, Variant] = {}
    for stem, (cl, gpus, comp, link) in clusters.items():
        inst = Instance(g, cl, source)
        digest = content_digest(instance_to_native(inst))
        path = existing.get((stem, digest), folder / f"{stem}-{digest}.json")
        if not path.exists():
            save_instance(inst, path)
        out[stem] = Variant(stem, path, g.n, gpus, comp, link)
    keep = {v.path.name for v in out.values()}
    for old in folder.glob("*.json"):
        if old.name not in keep:
            old.unlink()
    return out


def run_spec(v: Variant, method: str, params: dict | None = None, solver: dict | None = None) -> RunSpec:
    """The makespan run of ``method`` on the instance file of ``v``."""
    return RunSpec(graph=str(v.path), graph_label=v.label, problem="makespan", method=method,
                   solver=dict(solver or {}), params=dict(params or {}))


def list_specs(v: Variant) -> list[RunSpec]:
    """The runs of every list scheduler on ``v`` (ETF-like ones up to :data:`MAX_ETF_NODES` nodes)."""
    return [run_spec(v, m) for m in LIST_SCHEDULERS
            if not (m in ("etf", "m-etf", "m-sct") and v.n > MAX_ETF_NODES)]


def pesto_spec(v: Variant, cfg: Config, coarsen_to: int | None, **params: Any) -> RunSpec:
    """The run of the ``pesto`` method on ``v`` (coarsened to ``coarsen_to``, with the config's
    engine where it names one) under the config's ILP limits."""
    engine = {} if cfg.engine is None else {"engine": cfg.engine}
    return run_spec(v, "pesto", {"coarsen_to": coarsen_to, **engine, **params}, cfg.solver())


# ---------------------------------------------------------------------------- records
def makespan_of(rec: dict | None) -> float | None:
    """The record's re-scored makespan (``evaluation.objective``), ``None`` for an error."""
    if not rec or rec.get("status") == "error":
        return None
    return (rec.get("evaluation") or {}).get("objective")


def best_list(v: Variant, done: dict[str, dict]) -> tuple[str | None, float | None]:
    """The best list scheduler on ``v`` by re-scored makespan: (method, makespan)."""
    best: tuple[str | None, float | None] = (None, None)
    for s in list_specs(v):
        ms = makespan_of(done.get(s.key))
        if ms is not None and (best[1] is None or ms < best[1] - 1e-12):
            best = (s.method, ms)
    return best


def replay(rec: dict, inst: Instance, *, congestion: bool = True) -> SimResult:
    """Simulate a record's placement in its recorded order: nodes ranked by their
    recorded start times (ties in topological order), replayed per device
    (``policy="order"``), and transfers in the record's link order where it has one
    (else FCFS links)."""
    g = inst.graph
    pl = placement_from_doc(rec["placement"], inst)
    start = np.array([float(rec["start"][str(v)]) for v in g.ids])
    pr = np.empty(g.n, dtype=np.int64)
    pr[np.lexsort((g.topo_position, start))] = np.arange(g.n)
    return simulate(pl, policy="order", priorities=pr, congestion=congestion,
                    link_priorities=link_priorities_from_doc(rec, g))


def extra_of(rec: dict | None, key: str) -> Any:
    """``extra[key]`` of a record (what the method reported beside its placement), or ``None``."""
    return ((rec or {}).get("extra") or {}).get(key)


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
