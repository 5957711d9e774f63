"""Gantt chart of a simulated schedule: one row per device, one per busy link.

Node bars are coloured by pass (forward / backward) for training graphs, otherwise by
``op_type`` (the eight most time-consuming types get their own colour, the rest are
grey); transfers are drawn on their directed link's row. matplotlib is imported inside
:func:`plot_gantt` with the ``Agg`` backend, so importing this module costs nothing and
needs no display.

Large schedules stay readable and cheap to draw (:func:`gantt_layout` plans the chart,
:func:`plot_gantt` draws the plan):

* a row draws at most ``max_bars`` items (nodes or transfers) one by one, the longest
  ones; the others are merged, per colour, into at most ``max_bars`` *busy intervals*
  (neighbours closer than the largest gaps are joined), drawn in the same colour
  without outlines; the title says how many items were merged;
* only the ``max_links`` busiest links get a row of their own; the other links share
  one row of merged busy intervals (``+k links``), so the chart has at most
  ``devices + max_links + 1`` rows (``max_rows`` caps it further);
* a bar gets an outline only when it is at least a few pixels wide (outlines on thin
  bars would paint them black), and a text label (node name, else id) only when the
  label fits inside it;
* the legend lists exactly the colours drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dnnplace.graphs.errors import InputError

__all__ = ["plot_gantt", "gantt_layout", "GanttLayout", "GanttRow"]

_FORWARD, _BACKWARD, _OTHER, _XFER = "#4C72B0", "#DD8452", "#B0B0B0", "#55A868"
_PALETTE = ["#4C72B0", "#DD8452", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974"]

# drawing geometry: a 12-inch figure at 110 dpi, of which the axes take about 75%
_FIG_W_IN, _DPI = 12.0, 110
_AXES_PX = 0.75 * _FIG_W_IN * _DPI
_OUTLINE_MIN_PX = 3.0         # thinner bars are drawn without an outline
_CHAR_PX, _LABEL_PAD_PX = 6.5, 8.0  # fontsize 7
_MAX_LABEL_CHARS = 18
_MAX_LABELS_PER_ROW = 80


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


@dataclass
class GanttRow:
    """One row of the chart: ``bars`` are ``(starts, widths, colour, outlined)`` groups,
    ``labels`` ``(x centre, text)``; ``items`` counts the nodes or transfers of the row
    and ``merged`` those drawn inside merged busy intervals."""

    label: str
    kind: str  # "dev", "link" or "links" (the merged row of the less busy links)
    bars: list[tuple[np.ndarray, np.ndarray, str, bool]] = field(default_factory=list)
    labels: list[tuple[float, str]] = field(default_factory=list)
    items: int = 0
    merged: int = 0

    @property
    def n_bars(self) -> int:
        """Rectangles drawn in this row."""
        return sum(int(s.size) for s, _, _, _ in self.bars)

    @property
    def colours(self) -> set[str]:
        return {c for s, _, c, _ in self.bars if s.size}


@dataclass
class GanttLayout:
    """What :func:`plot_gantt` draws: the rows, the legend (only colours drawn), the
    time span and how much was left out or merged."""

    rows: list[GanttRow]
    legend: list[tuple[str, str]]
    span: float
    hidden_rows: int = 0

    @property
    def n_bars(self) -> int:
        """Rectangles drawn in the whole chart."""
        return sum(r.n_bars for r in self.rows)

    @property
    def merged(self) -> int:
        """Nodes and transfers drawn inside merged busy intervals."""
        return sum(r.merged for r in self.rows)

    @property
    def merged_nodes(self) -> int:
        """Nodes drawn inside merged busy intervals."""
        return sum(r.merged for r in self.rows if r.kind == "dev")


def _merge(start: np.ndarray, finish: np.ndarray, cap: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as at most ``cap`` ``(start, width)`` bars: intervals are
    joined across gaps up to ``tol``, then across the smallest remaining gaps until at
    most ``cap`` are left."""
    if start.size == 0:
        return start, start
    o = np.argsort(start, kind="stable")
    s, f = start[o], np.maximum.accumulate(finish[o])
    gap = s[1:] - f[:-1]  # > 0: an idle gap between consecutive intervals
    cut = gap > tol
    if int(cut.sum()) > cap - 1:
        keep = np.flatnonzero(cut)
        if cap > 1:
            biggest = keep[np.argpartition(-gap[keep], cap - 2)[:cap - 1]]
        else:
            biggest = np.empty(0, dtype=np.int64)
        cut = np.zeros_like(cut)
        cut[biggest] = True
    first = np.r_[0, np.flatnonzero(cut) + 1]
    last = np.r_[first[1:] - 1, s.size - 1]
    return s[first], f[last] - s[first]


def _row_bars(row: GanttRow, start: np.ndarray, finish: np.ndarray, colours: np.ndarray,
              names: list[str] | None, max_bars: int, px_per_unit: float, tol: float) -> None:
    """Fill ``row`` with the items ``start/finish/colours`` (see the module docstring)."""
    n = start.size
    row.items = n
    dur = finish - start
    if n > max_bars:
        pick = np.argsort(-dur, kind="stable")[:max_bars]
        own = np.zeros(n, dtype=bool)
        own[pick] = True
    else:
        own = np.ones(n, dtype=bool)
    row.merged = int(n - own.sum())
    merged, single = [], []  # merged intervals are drawn first, under the single bars
    for colour in dict.fromkeys(colours.tolist()):
        mine = colours == colour
        sel = np.flatnonzero(mine & own)
        if sel.size:
            wide = dur[sel] * px_per_unit >= _OUTLINE_MIN_PX
            for outlined in (True, False):
                s = sel[wide == outlined]
                if s.size:
                    single.append((start[s], dur[s], colour, outlined))
        rest = np.flatnonzero(mine & ~own)
        if rest.size:
            ms, mw = _merge(start[rest], finish[rest], max_bars, tol)
            merged.append((ms, mw, colour, False))
    row.bars = merged + single
    if names is not None:
        sel = np.flatnonzero(own)
        for i in sel[np.argsort(-dur[sel], kind="stable")].tolist():
            text = names[i]
            if len(text) > _MAX_LABEL_CHARS:
                text = text[:_MAX_LABEL_CHARS - 1] + "\u2026"
            if dur[i] * px_per_unit >= len(text) * _CHAR_PX + _LABEL_PAD_PX:
                row.labels.append((float(start[i] + dur[i] / 2), text))


def gantt_layout(result, *, max_rows: int | None = None, max_bars: int = 200, max_links: int | None = 12,
                 labels: bool = True) -> GanttLayout:
    """Plan the Gantt chart of a :class:`~dnnplace.evaluation.simulate.SimResult` (what
    :func:`plot_gantt` draws; see the module docstring).

    Parameters
    ----------
    result : SimResult
    max_rows : int, optional
        Keep at most this many rows (devices first, then links by busy time).
    max_bars : int
        Items drawn one by one per row, and merged busy intervals per row and colour.
    max_links : int, optional
        Links with a row of their own (the busiest); the rest share one merged row.
        ``None``: every used link gets a row.
    labels : bool
        Label the bars wide enough to hold their node's name.

    Examples
    --------
    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> from dnnplace.evaluation.simulate import simulate
    >>> n = 1000
    >>> g = OpGraph(ids=range(n), kinds=["gpu"], compute=np.ones((n, 1)), memory=np.zeros(n),
    ...             src=np.arange(n - 1), dst=np.arange(1, n))
    >>> lay = gantt_layout(simulate(Placement(g, Cluster.single_host(1, with_cpu=False), np.zeros(n, int))),
    ...                    max_bars=50)
    >>> lay.rows[0].items, lay.rows[0].merged, lay.n_bars <= 2 * 50
    (1000, 950, True)
    """
    if max_bars < 1:
        raise InputError(f"gantt: max_bars must be >= 1, got {max_bars}")
    pl = result.schedule.placement
    g, cl = pl.graph, pl.cluster
    names = cl.names
    start, fin = result.schedule.start, result.schedule.finish
    dur = fin - start
    colours, legend = _node_colours(g, dur)
    span = max(float(result.makespan), 1e-12)
    px_per_unit = _AXES_PX / (span * 1.01)
    tol = 0.5 / px_per_unit  # gaps under half a pixel are invisible anyway
    node_names = None
    if labels:
        nm = g.names
        node_names = [str(nm[i]) if nm is not None and nm[i] not in (None, "") else str(g.ids[i])
                      for i in range(g.n)]

    rows: list[GanttRow] = []
    for d in np.unique(pl.device).tolist():
        sel = np.flatnonzero(pl.device == d)
        row = GanttRow(names[d], "dev")
        _row_bars(row, start[sel], fin[sel], colours[sel],
                  None if node_names is None else [node_names[i] for i in sel], max_bars, px_per_unit, tol)
        rows.append(row)

    la, lb = np.nonzero(result.link_count)
    order = np.argsort(-result.link_busy[la, lb], kind="stable")
    xs_dev = result.xfer_src_dev * cl.size + result.xfer_dst_dev
    xfer_colour = np.array([_XFER], dtype=object)
    own_links = order if max_links is None else order[:max_links]
    for k in own_links.tolist():
        a, b = int(la[k]), int(lb[k])
        s = np.flatnonzero(xs_dev == a * cl.size + b)
        row = GanttRow(f"{names[a]}\u2192{names[b]}", "link")
        _row_bars(row, result.xfer_start[s], result.xfer_finish[s], np.repeat(xfer_colour, s.size), None,
                  max_bars, px_per_unit, tol)
        rows.append(row)
    rest = order[own_links.size:]
    if rest.size:
        keys = la[rest] * cl.size + lb[rest]
        s = np.flatnonzero(np.isin(xs_dev, keys))
        row = GanttRow(f"+{rest.size} links", "links", items=int(s.size), merged=int(s.size))
        ms, mw = _merge(result.xfer_start[s], result.xfer_finish[s], max_bars, tol)
        row.bars.append((ms, mw, _XFER, False))
        rows.append(row)

    hidden = 0
    if max_rows is not None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]
    drawn = set().union(*(r.colours for r in rows)) if rows else set()
    node_drawn = set().union(*(r.colours for r in rows if r.kind == "dev")) if rows else set()
    legend = [(lab, c) for lab, c in legend if c in node_drawn]
    if _XFER in drawn and any(r.kind != "dev" for r in rows):
        legend.append(("transfer", _XFER))
    return GanttLayout(rows, legend, span, hidden)


def plot_gantt(result, path, *, title: str | None = None, max_rows: int | None = None, max_bars: int = 200,
               max_links: int | None = 12, labels: bool = True) -> Path:
    """Draw a :class:`~dnnplace.evaluation.simulate.SimResult` as a Gantt chart and save it as PNG.

    Parameters
    ----------
    result : SimResult
        Output of :func:`dnnplace.evaluation.simulate.simulate`.
    path : str or Path
        Where to write the PNG, atomically (parent folders are created when it is written).
    title : str, optional
        Figure title; default names the graph, policy, congestion and makespan.
    max_rows : int, optional
        Show at most this many rows: devices first (those holding nodes), then the
        links by decreasing busy time. ``None`` shows every row of the layout.
    max_bars, max_links, labels
        See :func:`gantt_layout`: at most ``max_bars`` items drawn one by one per row
        (the rest merged into busy intervals), rows for the ``max_links`` busiest links
        (the rest merged into one row), labels on bars wide enough.

    Returns
    -------
    Path
        The written file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    lay = gantt_layout(result, max_rows=max_rows, max_bars=max_bars, max_links=max_links, labels=labels)
    g = result.schedule.placement.graph
    rows = lay.rows
    height = max(2.0, 0.45 * len(rows) + 1.4)
    fig, ax = plt.subplots(figsize=(_FIG_W_IN, height), dpi=_DPI)
    for y, row in enumerate(rows):
        half = 0.4 if row.kind == "dev" else 0.3
        for s, w, colour, outlined in row.bars:
            ax.broken_barh(list(zip(s.tolist(), w.tolist(), strict=True)), (y - half, 2 * half), facecolors=colour,
                           edgecolor="black" if outlined else "none", linewidth=0.3 if outlined else 0.0)
        for x, text in row.labels[:_MAX_LABELS_PER_ROW]:
            ax.text(x, y, text, ha="center", va="center", fontsize=7, clip_on=True)
    n_dev = sum(1 for r in rows if r.kind == "dev")
    if 0 < n_dev < len(rows):
        ax.axhline(n_dev - 0.5, color="black", linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.label for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, lay.span * 1.01)
    ax.set_xlabel(f"time ({g.unit})")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    if title is None:
        title = (f"{g.name}: policy {result.policy}, congestion "
                 f"{'on' if result.congestion else 'off'}, makespan {result.makespan:.4g} {g.unit}")
    notes = []
    if lay.merged_nodes:
        notes.append(f"{lay.merged_nodes:,} short nodes drawn as merged busy intervals")
    if lay.hidden_rows:
        notes.append(f"{lay.hidden_rows} row(s) not shown")
    if notes:
        title += f" ({'; '.join(notes)})"
    ax.set_title(title, fontsize=10)
    handles = [Patch(facecolor=c, edgecolor="none", label=lab) for lab, c in lay.legend]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    from dnnplace.graphs.io import write_figure

    try:
        return write_figure(fig, path)  # atomic: a full disk leaves no partial PNG
    finally:
        plt.close(fig)
