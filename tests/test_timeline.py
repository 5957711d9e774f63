"""The measured-vs-simulated timeline: every simulated transfer in the lane its label names."""

from __future__ import annotations

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.presets import cluster_preset
from dnnplace.pytorch.execution.timeline import plot_measured, simulated_lanes


def test_transfers_sit_in_their_labelled_lanes(tmp_path):
    g = random_layered_dag(40, seed=3)
    cl = cluster_preset("single-host-2-nvlink", g)   # gpu0, gpu1, cpu0
    rng = np.random.default_rng(0)
    sim = simulate(Placement.from_mapping(g, cl, {v: cl.names[int(rng.integers(cl.size))] for v in g.ids}))
    lanes = simulated_lanes(sim)
    labels = [label for label, _, _ in lanes]
    links = {(cl.names[int(a)], cl.names[int(b)]) for a, b in zip(sim.xfer_src_dev, sim.xfer_dst_dev)}
    assert len(links) >= 2 and len(labels) == len(set(labels)) == len(set(sim.schedule.placement.device)) + len(links)
    checked = 0
    for t in range(len(sim.xfer_start)):
        label = f"{cl.names[int(sim.xfer_src_dev[t])]}->{cl.names[int(sim.xfer_dst_dev[t])]}"
        bars = lanes[labels.index(label)][1]
        assert (float(sim.xfer_start[t]), float(sim.xfer_finish[t] - sim.xfer_start[t])) in bars
        checked += 1
    assert checked == len(sim.xfer_start) > 5
    assert sum(len(bars) for label, bars, _ in lanes if "->" not in label) == g.n
    ops = [{"node": v, "device": "gpu0", "start_ms": 0.0, "end_ms": 1.0} for v in g.ids[:3]]
    assert plot_measured(ops, sim, tmp_path / "t.png").stat().st_size > 10_000
