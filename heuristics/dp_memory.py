"""The exact max-load DP's memory: its default budget and what it allocates per ideal
(docs/guide.md, "Time and memory limits"; results/dp-scale.md).

The enumeration of ideals stops before its arrays, with the tables the DP then allocates
for each ideal, would outgrow the budget (:func:`~dnnplace.heuristics.ideals.enumerate_ideals`'s
``max_bytes``), so a graph with more ideals than fit ends with the linearized DP's split and
a bound instead of taking the machine's memory.
"""

from __future__ import annotations

from dnnplace.graphs.graph import OpGraph

__all__ = ["MAX_BYTES", "AVAILABLE_SHARE", "memory_budget", "bytes_per_ideal"]

MAX_BYTES = 4e9
"""The exact DP's memory budget (bytes) unless the caller gives one: its lattice and tables
(results/dp-scale.md: 4.3M ideals took 2.0 GB)."""
AVAILABLE_SHARE = 0.5
"""At most this share of the machine's available memory goes to the exact DP by default."""


def memory_budget() -> float:
    """The exact DP's default memory budget in bytes: :data:`MAX_BYTES`, and at most
    :data:`AVAILABLE_SHARE` of the memory the machine has available now (Linux
    ``MemAvailable``; :data:`MAX_BYTES` where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            avail = next(float(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return MAX_BYTES
    return min(MAX_BYTES, AVAILABLE_SHARE * avail)


def bytes_per_ideal(g: OpGraph, k: int, l: int) -> float:  # noqa: E741 (the paper's k, l)
    """What the exact DP allocates per ideal after the enumeration (an estimate, rounded up):
    the tables (14 bytes an entry, :func:`~dnnplace.heuristics.dp_kernel.new_tables`, and the
    prefix bound's temporaries, 24), the backward parts' bitsets of a training graph and about
    a dozen per-ideal vectors (sizes, sums, segment queries)."""
    words_bw = (int(g.backward.sum()) + 63) // 64
    return (k + 1) * (l + 1) * (14 + 24) + 8 * words_bw + 128
