"""The shared list-scheduling toolkit (docs/heuristics.md 0): nominal costs and the
insertion-based device timeline, each against a brute-force reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from instances import pesto_tiny_instance

from dnnplace.graphs.errors import InputError
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.timeline import Timeline


def _naive_slot(busy: list[tuple[float, float]], ready: float, dur: float) -> float:
    """Smallest t >= ready with [t, t+dur) disjoint from every busy interval: the
    candidates are ready and every interval end after it."""
    if dur <= 0:
        return ready
    for t in sorted({ready} | {e for _, e in busy if e > ready}):
        if all(t + dur <= s or t >= e for s, e in busy):
            return t
    raise AssertionError("unreachable: the end of the last interval always fits")


def test_timeline_matches_brute_force_on_random_reservations():
    checked = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        tl = Timeline(2)
        busy: list[list[tuple[float, float]]] = [[], []]
        for _ in range(40):
            d = int(rng.integers(2))
            ready = float(rng.integers(0, 40))
            dur = float(rng.choice([0.0, 1.0, 2.0, 3.5, 7.0]))
            t = tl.earliest_slot(d, ready, dur)
            assert t == _naive_slot(busy[d], ready, dur)
            checked += 1
            tl.reserve(d, t, t + dur)
            if dur > 0:
                busy[d].append((t, t + dur))
        for d in range(2):
            assert tl.busy(d) == _merged(busy[d])
    assert checked == 60 * 40


def _merged(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def test_timeline_append_only_and_overlap_error():
    tl = Timeline(1, insertion=False)
    tl.reserve(0, 3.0, 4.0)
    assert tl.earliest_slot(0, 0.0, 1.0) == 4.0 and tl.finish(0) == 4.0
    with pytest.raises(ValueError, match="overlaps"):
        tl.reserve(0, 3.5, 5.0)


@pytest.mark.parametrize("how,agg", [("max", max), ("mean", lambda xs: sum(xs) / len(xs)), ("min", min)])
def test_nominal_costs_match_loops_over_devices(how, agg):
    checked = 0
    for seed in range(40):
        g, cl = pesto_tiny_instance(seed)
        comp = cl.compute_matrix(g)
        w, c = nominal_costs(g, cl, how)
        for v in range(g.n):
            assert w[v] == pytest.approx(agg([x for x in comp[v] if not math.isnan(x)]))
        for e in range(g.m):
            u, v = int(g.src[e]), int(g.dst[e])
            times = [float(cl.transfer_time(np.array([a]), np.array([b]), g.edge_bytes[e:e + 1],
                                            g.edge_cost[e:e + 1])[0])
                     for a in range(cl.size) for b in range(cl.size)
                     if a != b and not math.isnan(comp[u, a]) and not math.isnan(comp[v, b])]
            assert c[e] == pytest.approx(agg(times) if times else 0.0)
            checked += 1
    assert checked > 150


def test_nominal_costs_reject_unknown_aggregate():
    g, cl = pesto_tiny_instance(0)
    with pytest.raises(InputError, match="median"):
        nominal_costs(g, cl, "median")
