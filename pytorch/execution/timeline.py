"""The measured timeline of an executed step above the simulator's timeline of the same plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_measured", "simulated_lanes"]

_COLOURS = {"forward": "#4C72B0", "backward": "#DD8452", "apply": "#55A868", "transfer": "#8172B3"}


def _kind(graph: Any, i: int) -> str:
    roles = getattr(graph, "roles", None)
    if roles is not None and roles[i] == "apply":
        return "apply"
    bw = getattr(graph, "backward", None)
    return "backward" if bw is not None and bool(bw[i]) else "forward"


def simulated_lanes(sim: Any) -> list[tuple[str, list[tuple[float, float]], list[str]]]:
    """The simulated panel's rows, bottom up: ``(label, [(start, duration)], colours)`` per
    busy device, then per busy link (``"a->b"``) with its transfers."""
    graph = sim.schedule.placement.graph
    pl = sim.schedule.placement
    names = pl.cluster.names
    lanes = []
    for d in sorted(set(pl.device.tolist())):
        nodes = [i for i in range(graph.n) if pl.device[i] == d]
        lanes.append((names[d], [(float(sim.schedule.start[i]), float(sim.schedule.finish[i] - sim.schedule.start[i]))
                                 for i in nodes], [_COLOURS[_kind(graph, i)] for i in nodes]))
    for a, b in sorted({(int(a), int(b)) for a, b in zip(sim.xfer_src_dev, sim.xfer_dst_dev)}):
        sel = [t for t in range(len(sim.xfer_start)) if sim.xfer_src_dev[t] == a and sim.xfer_dst_dev[t] == b]
        lanes.append((f"{names[a]}->{names[b]}",
                      [(float(sim.xfer_start[t]), float(sim.xfer_finish[t] - sim.xfer_start[t])) for t in sel],
                      [_COLOURS["transfer"]] * len(sel)))
    return lanes


def measured_links(messages: list[dict]) -> list[tuple[str, list[tuple[float, float]]]]:
    """The measured panel's link rows: per directed link ``"a->b"`` with messages, each
    message from its sender's start to the moment it is ready on the receiver
    (``Measured.messages``; docs/execution.md, "Message timeline").

    >>> measured_links([{"src": "cpu0", "dst": "cpu1", "send_start_ms": 1.0, "ready_ms": 1.5}])
    [('cpu0->cpu1', [(1.0, 0.5)])]
    """
    rows: dict[str, list[tuple[float, float]]] = {}
    for m in messages:
        rows.setdefault(f"{m['src']}->{m['dst']}", []).append(
            (m["send_start_ms"], max(m["ready_ms"] - m["send_start_ms"], 1e-6)))
    return sorted(rows.items())


def plot_measured(ops: list[dict], sim: Any, path: str | Path, *, title: str = "",
                  messages: list[dict] | None = None) -> Path:
    """Two panels sharing the time axis (ms): the measured per-device operator intervals
    (``ops`` as :class:`~dnnplace.pytorch.execution.launch.Measured` holds them) and, when
    ``sim`` (a :class:`~dnnplace.evaluation.simulate.SimResult`) is given, the simulated
    ones. Bars are coloured forward / backward / optimizer update; each panel adds one row
    per busy link with its transfers (the measured ones from ``messages``, when given: a
    message from its sender's start to when it is ready on the receiver)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    devices = sorted({o["device"] for o in ops})
    links = measured_links(messages or [])
    panels = 2 if sim is not None else 1
    fig, axes = plt.subplots(panels, 1, figsize=(11, 1.2 + 0.9 * panels * max(2, len(devices) + len(links))),
                             sharex=True, squeeze=False)
    graph = sim.schedule.placement.graph if sim is not None else None
    index = {v: i for i, v in enumerate(graph.ids)} if graph is not None else {}
    ax = axes[0, 0]
    for y, d in enumerate(devices):
        bars = [(o["start_ms"], max(o["end_ms"] - o["start_ms"], 1e-6),
                 _COLOURS[_kind(graph, index[o["node"]])] if o["node"] in index else _COLOURS["forward"])
                for o in ops if o["device"] == d]
        ax.broken_barh([(a, w) for a, w, _ in bars], (y - 0.4, 0.8), facecolors=[c for _, _, c in bars])
    for y, (_, bars) in enumerate(links, start=len(devices)):
        ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=_COLOURS["transfer"], alpha=0.6)
    ax.set_yticks(range(len(devices) + len(links)), devices + [label for label, _ in links])
    end = max((o["end_ms"] for o in ops), default=0.0)
    ax.set_title(f"measured (median step): {end:.2f} ms", fontsize=9, loc="left")
    if sim is not None:
        ax = axes[1, 0]
        lanes = simulated_lanes(sim)
        for y, (_, bars, colours) in enumerate(lanes):
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=colours)
        rows = [label for label, _, _ in lanes]
        ax.set_yticks(range(len(rows)), rows)
        ax.set_title(f"simulated: {sim.makespan:.2f} {graph.unit}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the step's start (ms)")
    fig.legend(handles=[Patch(color=c, label=k) for k, c in _COLOURS.items()], loc="upper right", ncol=4,
               fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
