"""The machine a benchmark ran on and the clock: its load (every results page states it beside
its times), the time of day in UTC, and the wall time of a call."""

from __future__ import annotations

import os
import time

__all__ = ["load_average", "machine_load", "utc_now", "timed"]


def load_average() -> float:
    """The 1-minute load average (``nan`` where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def machine_load() -> str:
    """``load average 1.2 on 2 CPUs`` (``load unknown`` where there is none)."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except (AttributeError, OSError):
        return "load unknown"


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def timed(label: str, rows: list, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, appending ``(label, wall seconds)`` to ``rows``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    rows.append((label, time.perf_counter() - t0))
    return out
