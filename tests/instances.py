"""Seeded tiny instances and exhaustive references shared by several test modules.

Import as ``from instances import ...`` (pytest puts ``tests/`` on ``sys.path``). Every
generator draws from ``np.random.default_rng(seed)`` in a fixed order, so a seed names
the same instance in every module; the known results quoted in the tests (e.g. seed 22
of :func:`random_inference`, seed 90 of :func:`pesto_tiny_instance`) depend on that.

- :func:`maxload_tiny_instance`, :func:`latency_tiny_instance`: 5-6 node instances of
  Tarnawski et al.'s model (1-2 accelerators + 1 CPU), both from :func:`_tarnawski_tiny`;
- :func:`random_inference`, :func:`random_training`: 4-8 node instances for the
  max-load DP (2 accelerators + CPU, or 3 accelerators);
- :func:`pesto_tiny_instance`: 4-6 node makespan instances (graph, cluster) with link
  models, memory, colocation and affinity; :func:`tight_memory_instance` and
  :func:`constrained_tiny_instance` (all regimes at once) derived from it;
- :func:`brute_force_latency`, :func:`exact_fcfs`: exhaustive references scored by the
  evaluator / the simulator;
- :func:`gurobi_is_size_limited`: which Gurobi licence is installed, asked of gurobipy
  with a path-packing model of ``n`` binaries.
"""

from __future__ import annotations

import graphlib
import importlib.util
import itertools
import math

import numpy as np

from dnnplace.evaluation.evaluate import latency
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement

__all__ = ["maxload_tiny_instance", "latency_tiny_instance", "random_inference", "random_training",
           "pesto_tiny_instance", "brute_force_latency", "placements", "topo_orders", "exact_fcfs",
           "gurobi_is_size_limited", "tight_memory_instance", "constrained_tiny_instance"]


# ---------------------------------------------------------------------------- Tarnawski model
def _tarnawski_tiny(seed: int, *, k: int | None, training: bool, chain_prob: float, cpu_slowdown: tuple,
                    max_cost: float, coloc_prob: float, mem_frac: tuple) -> Instance:
    """A random DAG on 5-6 nodes (edges only forward in index order; a node without a
    random predecessor gets one with probability ``chain_prob``), compute on acc/cpu
    (cpu = acc x U(cpu_slowdown); some nodes unsupported on acc), per-node transfer costs
    U(0, max_cost) (sometimes smaller on some out-edges), memory that binds (capacity
    U(mem_frac) of the total); ``k`` accelerators (random 1-2 when None) + 1 CPU.
    Training: the second half of the nodes is backward, and forward node i shares a
    colorClass with backward node n-1-i with probability ``coloc_prob``."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 7))
    k = int(rng.integers(1, 3)) if k is None else k
    src, dst = [], []
    for j in range(1, n):
        preds = [i for i in range(j) if rng.random() < 0.35]
        if not preds and rng.random() < chain_prob:
            preds = [int(rng.integers(0, j))]
        src += preds
        dst += [j] * len(preds)
    acc = rng.uniform(1, 10, n).round(1)
    cpu = (acc * rng.uniform(*cpu_slowdown, n)).round(1)
    acc[rng.random(n) < 0.15] = np.nan
    c_node = rng.uniform(0, max_cost, n).round(1)
    cost = np.array([c_node[u] for u in src], dtype=float)
    uneven = rng.random(len(src)) < 0.2
    cost[uneven] = (cost[uneven] * rng.uniform(0.2, 1.0, uneven.sum())).round(1)
    mem = rng.integers(1, 5, n).astype(float)
    coloc = np.full(n, -1)
    backward = None
    if training:
        backward = np.arange(n) >= n // 2
        for i in range(n // 2):  # backward partner n-1-i >= n // 2 always
            if rng.random() < coloc_prob:
                coloc[i] = coloc[n - 1 - i] = i
    g = OpGraph(ids=list(range(n)), kinds=("acc", "cpu"), compute=np.c_[acc, cpu], memory=mem, src=src, dst=dst,
                edge_cost=cost, backward=backward, colocation=coloc, colocation_labels=tuple(f"c{i}" for i in range(n)),
                name=f"tiny{seed}")
    M = float(mem.sum() * rng.uniform(*mem_frac))
    return Instance(g, Cluster.tarnawski(k, 1, M), source=f"tiny seed={seed}")


def maxload_tiny_instance(seed: int, *, training: bool) -> Instance:
    """The max-load IP's instances: CPU 1.5-5x slower, transfer costs up to 4, memory
    35-80% of the total; training: colocation with probability 1/2."""
    return _tarnawski_tiny(seed, k=None, training=training, chain_prob=0.8, cpu_slowdown=(1.5, 5),
                           max_cost=4.0, coloc_prob=0.5, mem_frac=(0.35, 0.8))


def latency_tiny_instance(seed: int, *, k: int | None = None, training: bool = False) -> Instance:
    """The latency IP's instances: acc much faster than CPU (1.2-4x, so splitting pays),
    transfer costs up to 3, memory 40-90% of the total; training: colocation with
    probability 0.6."""
    return _tarnawski_tiny(seed, k=k, training=training, chain_prob=0.7, cpu_slowdown=(1.2, 4),
                           max_cost=3.0, coloc_prob=0.6, mem_frac=(0.4, 0.9))


def brute_force_latency(inst: Instance, q: int) -> float:
    """Min evaluator latency over every device assignment with <= q evaluator pieces
    per accelerator (inf if none is feasible)."""
    g, cl = inst.graph, inst.cluster
    best = np.inf
    for combo in itertools.product(range(cl.size), repeat=g.n):
        ev = latency(Placement(g, cl, np.array(combo)))
        if ev.feasible and ev.objective is not None and max(ev.details["subgraphs"].values(), default=0) <= q:
            best = min(best, ev.objective)
    return float(best)


# ---------------------------------------------------------------------------- max-load DP
def random_inference(seed: int) -> Instance:
    """4-6 nodes, random DAG edges, random costs; sometimes a node the accelerators
    cannot run, sometimes a memory limit that binds."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 7))
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.4]
    acc = rng.integers(1, 10, n).astype(float)
    cpu = acc * rng.integers(2, 6, n)
    if rng.random() < 0.3:
        acc[rng.integers(n)] = np.nan
    node_cost = rng.integers(0, 4, n).astype(float)
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    mem = rng.integers(1, 5, n).astype(float)
    cap = float(mem.sum()) if rng.random() < 0.5 else float(rng.integers(4, 9))
    g = OpGraph(ids=range(n), kinds=("acc", "cpu"), compute=np.stack([acc, cpu], axis=1), memory=mem, src=src,
                dst=dst, edge_cost=node_cost[src])
    n_acc, n_cpu = (2, 1) if rng.random() < 0.6 else (3, 0)
    return Instance(g, Cluster.tarnawski(n_acc, n_cpu, cap))


def dp_costs(rng: np.random.Generator, n: int, edges: list[tuple[int, int]], *, cpu_only: float | None,
             full_memory: float, devices: tuple[int, int] | None = None) -> Instance:
    """Random max-load costs on ``n`` nodes and ``edges``, drawn from ``rng`` in this order:
    accelerator times 1-7 (ties), CPUs 2-7x slower, with probability ``cpu_only`` one node
    only a CPU can run (``None``: no draw), memory 1-4 per node with an accelerator cap of
    all of it with probability ``full_memory`` (else 1/3 to 2/3 of it), per-node transfer
    costs 0-3; ``devices`` = (accelerators, CPUs), else 2-4 and 0-2 at random."""
    acc = rng.integers(1, 8, n).astype(float)
    cpu = acc * rng.integers(2, 8, n)
    if cpu_only is not None and rng.random() < cpu_only:
        acc[rng.integers(n)] = np.nan
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    mem = rng.integers(1, 5, n).astype(float)
    cap = float(mem.sum()) if rng.random() < full_memory else float(mem.sum()) / rng.uniform(1.5, 3.0)
    g = OpGraph(ids=range(n), kinds=("acc", "cpu"), compute=np.stack([acc, cpu], axis=1), memory=mem, src=src,
                dst=dst, edge_cost=rng.integers(0, 4, n).astype(float)[src])
    k, cpus = devices or (int(rng.integers(2, 5)), int(rng.integers(0, 3)))
    return Instance(g, Cluster.tarnawski(k, cpus, cap))


def random_training(seed: int) -> Instance:
    """A 2-4 node forward chain/DAG, its mirrored backward part (each backward node
    colocated with its forward node), fw->bw activation edges, and sometimes an
    orphaned backward node (no forward partner)."""
    rng = np.random.default_rng(seed)
    nf = int(rng.integers(2, 5))
    fw_edges = [(u, v) for u in range(nf) for v in range(u + 1, nf) if v == u + 1 or rng.random() < 0.3]
    orphan = rng.random() < 0.4
    nb = nf + (1 if orphan else 0)
    n = nf + nb
    edges = list(fw_edges)
    edges += [(nf + v, nf + u) for u, v in fw_edges]  # mirrored backward edges
    edges.append((nf - 1, nf + nf - 1))  # loss: last forward -> its gradient
    edges += [(u, nf + u) for u in range(nf - 1) if rng.random() < 0.5]  # stashed activations
    if orphan:
        edges.append((nf + 0, n - 1))  # an extra backward node after the first gradient
    acc = rng.integers(1, 10, n).astype(float)
    cpu = acc * rng.integers(2, 6, n)
    node_cost = rng.integers(0, 4, n).astype(float)
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    coloc = np.array([u for u in range(nf)] + [u for u in range(nf)] + ([-1] if orphan else []), dtype=np.int64)
    backward = np.arange(n) >= nf
    g = OpGraph(ids=range(n), kinds=("acc", "cpu"), compute=np.stack([acc, cpu], axis=1), memory=np.ones(n),
                src=src, dst=dst, edge_cost=node_cost[src], colocation=coloc, colocation_labels=tuple(range(nf)),
                backward=backward)
    n_acc, n_cpu = (2, 1) if rng.random() < 0.6 else (3, 0)
    return Instance(g, Cluster.tarnawski(n_acc, n_cpu, float(n)))


# ---------------------------------------------------------------------------- makespan (Pesto)
def pesto_tiny_instance(seed: int) -> tuple[OpGraph, Cluster]:
    """A random tiny makespan instance: 4-6 nodes, 2-3 devices, memory/colocation/affinity on some."""
    rng = np.random.default_rng(seed)
    n_dev = 2 if seed % 3 else 3
    n = int(rng.integers(4, 7 if n_dev == 2 else 6))
    with_cpu = seed % 4 == 1
    heavy = seed % 2 == 0  # heavy traffic: fan-outs and large tensors, so links queue
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)
             if rng.random() < (0.8 if heavy and i == 0 else 0.4)]
    comp = rng.integers(1, 4 if heavy else 6, size=(n, 2)).astype(float)
    kinds = ("gpu", "cpu")
    if with_cpu:
        comp[:, 1] *= 2
        only = rng.random(n)
        comp[only < 0.2, 1] = np.nan   # gpu-only
        comp[only > 0.85, 0] = np.nan  # cpu-only
    else:
        comp[:, 1] = np.nan
    mem = rng.integers(1, 5, size=n).astype(float)
    coloc = np.full(n, -1)
    labels = []
    if seed % 5 == 2:
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        if not (np.isnan(comp[a]) != np.isnan(comp[b])).any():
            coloc[[a, b]] = 0
            labels = ["g0"]
    g = OpGraph.from_ids(list(range(n)), pairs, kinds=kinds, compute=comp, memory=mem,
                         edge_bytes=rng.integers(2 if heavy else 1, 7 if heavy else 4, size=len(pairs)).astype(float),
                         colocation=coloc, colocation_labels=labels, name=f"tiny{seed}")
    n_gpu = n_dev - (1 if with_cpu else 0)
    cap = float(mem.sum()) * 0.6 if seed % 3 == 0 else math.inf
    devs = [Device(f"gpu{i}", "gpu", cap) for i in range(n_gpu)]
    if with_cpu:
        devs.append(Device("cpu0", "cpu"))
    D = len(devs)
    b0 = np.full((D, D), float(rng.integers(0, 2)))
    b1 = np.full((D, D), float(rng.choice([0.5, 1.0, 2.0])))
    if with_cpu:  # slower PCIe to/from the CPU
        b1[-1, :] *= 1.5
        b1[:, -1] *= 1.5
    cl = Cluster(tuple(devs), b0, b1, np.ones((D, D)), name=f"tiny{D}")
    return g, cl



def tight_memory_instance(seed: int, share: float = 0.55) -> Instance:
    """:func:`pesto_tiny_instance` with every GPU holding ``share`` of the graph's total
    memory: greedy placements overflow often, feasible ones exist on most seeds."""
    g, cl = pesto_tiny_instance(seed)
    devs = tuple(Device(d.name, d.kind, float(g.memory.sum()) * share if d.kind == "gpu" else d.memory, d.speed)
                 for d in cl.devices)
    return Instance(g, Cluster(devs, cl.beta0, cl.beta1, cl.cost_factor, name=cl.name), f"tight{seed}")


def constrained_tiny_instance(seed: int, share: float = 0.55) -> Instance:
    """Every regime of :func:`pesto_tiny_instance` at once: 4-6 nodes on 2 GPUs + 1 CPU,
    one node GPU-only and one CPU-only (affinity), one colocation group of two nodes
    that may share a device, every GPU holding ``share`` of the graph's memory; heavy
    traffic on even seeds. The CPU's memory is unbounded, so a feasible placement
    always exists; the tight GPUs decide which."""
    rng = np.random.default_rng(10_000 + seed)
    n = int(rng.integers(4, 7))
    heavy = seed % 2 == 0
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < (0.8 if heavy and i == 0 else 0.4)]
    comp = rng.integers(1, 4 if heavy else 6, size=(n, 2)).astype(float)
    comp[:, 1] *= 2
    gpu_only, cpu_only = rng.choice(n, 2, replace=False).tolist()
    comp[gpu_only, 1] = np.nan
    comp[cpu_only, 0] = np.nan
    rest = [i for i in range(n) if i not in (gpu_only, cpu_only)]
    a, b = sorted(rng.choice(rest, 2, replace=False).tolist())
    coloc = np.full(n, -1)
    coloc[[a, b]] = 0
    mem = rng.integers(1, 5, size=n).astype(float)
    g = OpGraph.from_ids(list(range(n)), pairs, kinds=("gpu", "cpu"), compute=comp, memory=mem,
                         edge_bytes=rng.integers(2 if heavy else 1, 7 if heavy else 4, size=len(pairs)).astype(float),
                         colocation=coloc, colocation_labels=["g0"], name=f"constrained{seed}")
    cap = float(mem.sum()) * share
    devs = (Device("gpu0", "gpu", cap), Device("gpu1", "gpu", cap), Device("cpu0", "cpu"))
    b1 = np.full((3, 3), float(rng.choice([0.5, 1.0, 2.0])))
    b1[-1, :] *= 1.5  # slower PCIe to/from the CPU
    b1[:, -1] *= 1.5
    cl = Cluster(devs, np.full((3, 3), float(rng.integers(0, 2))), b1, np.ones((3, 3)), name="tiny3")
    return Instance(g, cl, f"constrained{seed}")


def consistent_outputs(g: OpGraph) -> OpGraph:
    """``g`` with an ``output`` per edge such that edges of one source share an output
    exactly when they carry the same bytes and explicit cost (docs/semantics.md 2.1: edges of one
    output carry the same bytes), so sending each output once per device never lasts
    longer than any of its edges."""
    key = np.stack([g.src.astype(np.float64), g.edge_bytes, np.nan_to_num(g.edge_cost, nan=-1.0)], axis=1)
    out = np.zeros(g.m, dtype=np.int64)
    seen: dict[int, dict] = {}
    for e, (u, b, c) in enumerate(key.tolist()):
        codes = seen.setdefault(int(u), {})
        out[e] = codes.setdefault((b, c), len(codes))
    return g.with_(edge_output=out)


def placements(g: OpGraph, cl: Cluster):
    """Every device assignment that respects affinity, memory and colocation."""
    p = cl.compute_matrix(g)
    options = [[d for d in range(cl.size) if not np.isnan(p[i, d])] for i in range(g.n)]
    for dev in itertools.product(*options):
        dev = np.array(dev)
        if np.any(np.bincount(dev, weights=g.memory, minlength=cl.size) > cl.memory + 1e-9):
            continue
        grp = g.colocation
        if any(len(set(dev[grp == c].tolist())) > 1 for c in set(grp[grp >= 0].tolist())):
            continue
        yield dev


def topo_orders(g: OpGraph):
    """Every topological order of ``g``."""
    preds = [set(g.predecessors(i).tolist()) for i in range(g.n)]

    def rec(done, seq):
        if len(seq) == g.n:
            yield list(seq)
            return
        for v in range(g.n):
            if v not in done and preds[v] <= done:
                done.add(v)
                seq.append(v)
                yield from rec(done, seq)
                seq.pop()
                done.remove(v)
    yield from rec(set(), [])


def exact_fcfs(g: OpGraph, cl: Cluster, congestion: bool, transfer_mode: str | None = None) -> float:
    """Best simulated makespan (FCFS links) over placements x topological orders, in
    ``transfer_mode`` (``None``: the simulator's current mode)."""
    orders = list(topo_orders(g))
    best = math.inf
    for dev in placements(g, cl):
        pl = Placement(g, cl, dev)
        for seq in orders:
            pr = np.empty(g.n)
            pr[seq] = np.arange(g.n)
            best = min(best, simulate(pl, policy="order", priorities=pr, congestion=congestion,
                                      transfer_mode=transfer_mode).makespan)
    return best


# ---------------------------------------------------------------------------- Gurobi licence
def gurobi_is_size_limited(n: int) -> bool:
    """Asked of gurobipy itself, not through the driver: does the installed licence
    refuse the ``n``-variable path-packing model (``x_i + x_{i+1} <= 1`` over ``n``
    binaries; error 10010, the size-limited pip licence)? ``False`` without gurobipy."""
    if importlib.util.find_spec("gurobipy") is None:
        return False
    import gurobipy as gp

    with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as m:
        x = m.addVars(n, vtype=gp.GRB.BINARY)
        m.addConstrs(x[i] + x[i + 1] <= 1 for i in range(n - 1))
        try:
            m.optimize()
        except gp.GurobiError as exc:
            if exc.errno == 10010:
                return True
            raise
    return False


def quotient_is_acyclic(parts: dict, pairs) -> bool:
    """Whether the quotient graph on ``parts`` (devices, servers) with arcs ``pairs`` (a, b),
    self-loops ignored, has no cycle: what a pipeline can run."""
    preds: dict = {p: set() for p in parts}
    for a, b in pairs:
        if a != b:
            preds[b].add(a)
    try:
        tuple(graphlib.TopologicalSorter(preds).static_order())
    except graphlib.CycleError:
        return False
    return True

