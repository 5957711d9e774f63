"""Gantt chart of a simulated schedule: one row per device, one per used link.

Node bars are coloured by pass (forward / backward) for training graphs, otherwise by
``op_type`` (the eight most time-consuming types get their own colour, the rest are
grey); transfers are drawn on their directed link's row. matplotlib is imported inside
:func:`plot_gantt` with the ``Agg`` backend, so importing this module costs nothing and
needs no display.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["plot_gantt"]

_FORWARD, _BACKWARD, _OTHER, _XFER = "#4C72B0", "#DD8452", "#B0B0B0", "#55A868"
_PALETTE = ["#4C72B0", "#DD8452", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974"]


def _node_colours(graph, durations: np.ndarray) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """A colour per node and the legend entries ``(label, colour)``."""
    n = graph.n
    if graph.is_training:
        cols = np.where(graph.backward, _BACKWARD, _FORWARD).astype(object)
        return cols, [("forward", _FORWARD), ("backward", _BACKWARD)]
    if graph.op_types is not None:
        types = np.array([str(t) if t not in (None, "") else "?" for t in graph.op_types], dtype=object)
        uniq, inv = np.unique(types, return_inverse=True)
        weight = np.bincount(inv, weights=durations, minlength=uniq.size)
        top = np.argsort(-weight, kind="stable")[:len(_PALETTE)]
        colour_of = np.full(uniq.size, _OTHER, dtype=object)
        colour_of[top] = _PALETTE[:top.size]
        legend = [(str(uniq[k]), colour_of[k]) for k in top]
        if top.size < uniq.size:
            legend.append(("other", _OTHER))
        return colour_of[inv], legend
    return np.full(n, _FORWARD, dtype=object), [("node", _FORWARD)]


def plot_gantt(result, path, *, title: str | None = None, max_rows: int | None = None) -> Path:
    """Draw a :class:`~dnnplace.graphs.simulate.SimResult` as a Gantt chart and save it as PNG.

    Parameters
    ----------
    result : SimResult
        Output of :func:`dnnplace.graphs.simulate.simulate`.
    path : str or Path
        Where to write the PNG (parent folders are created).
    title : str, optional
        Figure title; default names the graph, policy, congestion and makespan.
    max_rows : int, optional
        Show at most this many rows: devices first (those holding nodes), then the
        links by decreasing busy time. ``None`` shows every used device and link.

    Returns
    -------
    Path
        The written file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    pl = result.schedule.placement
    g, cl = pl.graph, pl.cluster
    names = cl.names
    start, fin = result.schedule.start, result.schedule.finish
    dur = fin - start
    colours, legend = _node_colours(g, dur)

    # rows: used devices, then used links by decreasing busy time
    rows: list[tuple[str, str, object]] = [("dev", names[d], d) for d in np.unique(pl.device)]
    la, lb = np.nonzero(result.link_count)
    busy = result.link_busy[la, lb]
    for k in np.argsort(-busy, kind="stable"):
        rows.append(("link", f"{names[la[k]]}\u2192{names[lb[k]]}", (int(la[k]), int(lb[k]))))
    hidden = 0
    if max_rows is not None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]

    height = max(2.0, 0.45 * len(rows) + 1.4)
    fig, ax = plt.subplots(figsize=(12, height), dpi=110)
    xs_dev = result.xfer_src_dev * cl.size + result.xfer_dst_dev
    for y, (kind, _, key) in enumerate(rows):
        if kind == "dev":
            sel = np.flatnonzero(pl.device == key)
            for colour in np.unique(colours[sel]):
                s = sel[colours[sel] == colour]
                ax.broken_barh(list(zip(start[s], dur[s], strict=True)), (y - 0.4, 0.8), facecolors=colour,
                               edgecolor="black" if s.size < 200 else "none", linewidth=0.3)
        else:
            a, b = key
            s = np.flatnonzero(xs_dev == a * cl.size + b)
            spans = list(zip(result.xfer_start[s], result.xfer_finish[s] - result.xfer_start[s], strict=True))
            ax.broken_barh(spans, (y - 0.3, 0.6), facecolors=_XFER,
                           edgecolor="black" if s.size < 200 else "none", linewidth=0.3)
    n_dev = sum(1 for kind, _, _ in rows if kind == "dev")
    if 0 < n_dev < len(rows):
        ax.axhline(n_dev - 0.5, color="black", linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for _, label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(result.makespan, 1e-12) * 1.01)
    ax.set_xlabel(f"time ({g.unit})")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    if title is None:
        title = (f"{g.name}: policy {result.policy}, congestion "
                 f"{'on' if result.congestion else 'off'}, makespan {result.makespan:.4g} {g.unit}")
    if hidden:
        title += f" ({hidden} row(s) not shown)"
    ax.set_title(title)
    handles = [Patch(facecolor=c, label=lab) for lab, c in legend]
    if result.n_transfers:
        handles.append(Patch(facecolor=_XFER, label="transfer"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    plt.close(fig)
    return out
