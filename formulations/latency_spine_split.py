r"""The split read off the spine DP (:mod:`dnnplace.formulations.latency_spine`): a start for
the latency IP and for ``latency-ls`` on fork-join graphs (``q = 1``).

The DP is run as a *restriction* instead of a relaxation: memory of every part rounded up
(so each spine piece it builds fits the largest accelerator), the middle of a crossed
block on the CPU, except in a component that is one chain, where it may take up to
``KCAP`` pieces of its own (counted with the spine pieces). Each of its choices is a split:
the spine pieces (a cut node's piece, the blocks it takes whole, the down-closed ``P`` it
takes of the block after it and the up-closed ``Q`` of the block before it) and the middle
pieces become accelerator pieces, every other node a CPU node. Where every node's
out-edges carry one transfer cost (the Tarnawski inputs) the DP value is that split's
latency (the duration terms of the spine bound are then exact); the evaluator re-scores it
in every case (a middle piece may exceed the memory: then it is rejected).
"""

from __future__ import annotations

import numpy as np

from dnnplace.formulations.latency_closure_data import ClosureData
from dnnplace.formulations.latency_spine import GRID, spine_dp
from dnnplace.formulations.latency_spine_blocks import _path_costs, seg_table
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.placement import Placement

__all__ = ["spine_split"]


def _close(a: float, b: float) -> bool:
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) <= 1e-9 * max(1.0, abs(a)))


def _middle(d: ClosureData, o, i: int, j: int, k: int) -> list[list[int]]:
    """The pieces of a least-time segmentation of the chain ``o.chain_path[i:j]`` with at
    most ``k`` pieces (node lists)."""
    nodes = o.nodes[o.chain_path]
    f = seg_table(d, nodes, o.cin_prev, False, i)
    kk = int(np.argmin(f[j, :k + 1]))
    out, y = [], j
    while y > i:
        if kk == 0 or _close(f[y - 1, kk] + d.p_cpu[nodes[y - 1]], f[y, kk]):
            y -= 1
            continue
        piece = _path_costs(d, nodes, o.cin_prev, False)[1](np.arange(i, y), y)   # a piece on nodes[x:y]
        for x in range(i, y):
            if _close(f[x, kk - 1] + piece[x - i], f[y, kk]):
                out.append(nodes[x:y].tolist())
                y, kk = x, kk - 1
                break
        else:
            return out
    return out


class _Builder:
    """Node -> unit id (``-1``: CPU) while following the DP backwards."""

    def __init__(self, d: ClosureData):
        self.d, self.units, self.next_id = d, [-1] * d.g.n, 0

    def new(self) -> int:
        self.next_id += 1
        return self.next_id

    def crossed(self, st: dict, case: str, k: int, mp: int, mq: int, before: int, after: int) -> None:
        """``P`` to the piece before, ``Q`` to the piece after (``-1``: a CPU unit, which
        takes neither), the middle to its own pieces or the CPU."""
        rows = st["b"][case + "_rows"]
        at = np.flatnonzero((rows["k"] == k) & (rows["mp"] == mp) & (rows["mq"] == mq))
        r = at[np.argmin(rows["total"][at])]
        for o, x in zip(st["b"]["comps"], rows["idx"][r].tolist()):
            P, D2 = int(o.P[x]), int(o.D2[x])
            for i, v in enumerate(o.nodes.tolist()):
                if (P >> i) & 1 and before >= 0:
                    self.units[v] = before
                elif not (D2 >> i) & 1 and after >= 0:
                    self.units[v] = after
            if o.chain_path is not None and o.pieces[x] > 0:
                on = [(P >> i) & 1 for i in o.chain_path]
                inside = [(D2 >> i) & 1 for i in o.chain_path]
                for piece in _middle(self.d, o, int(sum(on)), int(sum(inside)), int(o.pieces[x])):
                    pid = self.new()
                    for v in piece:
                        self.units[v] = pid


def _backtrack(d: ClosureData, steps: list, R: int) -> list | None:
    """Per node its unit (``-1``: CPU), following the DP's optimum backwards."""
    C = int(d.stretches)
    out = _Builder(d)
    G2 = steps[-1]["after"][1]
    kind, c, mu = "G", int(np.argmin(G2)), 0
    value, current = float(G2[c]), -1               # the piece of the unit after the step
    for st in reversed(steps):
        F, G, b, h, ma = st["F"], st["G"], st["b"], st["h"], st["ma"]
        if kind == "F":
            if st["nxt"] >= 0:
                out.units[st["nxt"]] = current
            sh = b["m"] + ma
            if mu - sh >= 0 and _close(F[c, mu - sh] + b["p"] + st["p_acc"], value):
                for v in st["nodes"].tolist():
                    out.units[v] = current
                mu, value = mu - sh, float(F[c, mu - sh])
                continue
            mq, found = mu - ma, False
            for k in range(C):
                c2 = c - 1 - k
                if c2 < 0:
                    break
                cand = h[c2] + b["pp"][k][:, mq] + st["p_acc"]
                if _close(float(cand.min()), value):
                    mp = int(np.argmin(cand))
                    mu2 = int(np.argmin(F[c2, :R + 1 - mp]))
                    before = out.new()
                    out.crossed(st, "pp", k, mp, mq, before, current)
                    kind, c, mu, value, current, found = "F", c2, mu2, float(F[c2, mu2]), before, True
                    break
                if _close(G[c2] + b["cp"][k, 0, mq] + st["p_acc"], value):
                    out.crossed(st, "cp", k, 0, mq, -1, current)
                    kind, c, mu, value, current, found = "G", c2, 0, float(G[c2]), -1, True
                    break
            if not found:
                return None
            continue
        found = False
        for k in range(c + 1):
            c2 = c - k
            cand = h[c2] + b["pc"][k][:, 0] + st["p_cpu"]
            if _close(float(cand.min()), value):
                mp = int(np.argmin(cand))
                mu2 = int(np.argmin(F[c2, :R + 1 - mp]))
                before = out.new()
                out.crossed(st, "pc", k, mp, 0, before, -1)
                kind, c, mu, value, current, found = "F", c2, mu2, float(F[c2, mu2]), before, True
                break
            if _close(G[c2] + b["cc"][k, 0, 0] + st["p_cpu"], value):
                out.crossed(st, "cc", k, 0, 0, -1, -1)
                kind, c, value, current, found = "G", c2, float(G[c2]), -1, True
                break
        if not found:
            return None
    return out.units


def spine_split(d: ClosureData, cluster: Cluster, grid: int = GRID) -> Placement | None:
    """The split of the module docstring (``q = 1``; ``None`` where the graph has no cut
    node, a block is too large, or no split is found): pieces on the accelerators with the
    most memory, the largest first, the rest on the first CPU. It is the start that lets
    ``latency-ls`` reach the best known InceptionV3 split (measured, with the time it takes:
    results/tarnawski-latency-cert.md, "The spine split on InceptionV3")."""
    if d.q != 1 or not cluster.devices_of_kind("cpu").size:
        return None
    value, steps = spine_dp(d, grid, split=True)
    if not steps or not np.isfinite(value):
        return None
    units = _backtrack(d, steps, int(grid))
    if units is None:
        return None
    accs = sorted((k for k in range(cluster.size) if cluster.kinds[k] != "cpu"), key=lambda k: -cluster.memory[k])
    units = np.array(units)
    ids = sorted({int(u) for u in units if u >= 0}, key=lambda u: -float(d.mem[units == u].sum()))
    if len(ids) > len(accs):
        return None
    device = np.full(d.g.n, int(cluster.devices_of_kind("cpu")[0]))
    for u, a in zip(ids, accs):
        device[units == u] = a
    return Placement(d.g, cluster, device)
