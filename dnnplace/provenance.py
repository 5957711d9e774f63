"""Where and when a record was made: the one provenance dict every sweep record carries,
and the one line a table says it with.

:func:`provenance` is taken once when a sweep starts (:func:`dnnplace.runner.execute`, and
PARDNN's own records in ``experiments/pardnn.py``) and stored in each record it writes
under ``"provenance"``: the git revision and whether the checkout had uncommitted changes,
the UTC date, the host (platform, CPU model, cores), the load average at the start and the
dnnplace version. :func:`stamp` turns the records behind a table into its ``run <date> at
<revision>`` line, from the records alone, so re-rendering a table from its committed
records gives the same text (docs/architecture.md, "Adding a reproduction").
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from typing import Any

__all__ = ["provenance", "stamp", "git_revision", "git_dirty", "cpu_model"]


def _git(args: list[str], path: str | os.PathLike | None) -> str | None:
    """``git <args>``'s output in the checkout holding ``path`` (default: this one), ``None`` if it fails."""
    from dnnplace.config import REPO_ROOT

    try:
        out = subprocess.run(["git", *args], cwd=path or REPO_ROOT, capture_output=True, text=True, timeout=20,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_revision(path: str | os.PathLike | None = None) -> str | None:
    """``git rev-parse HEAD`` of the checkout holding ``path`` (default: this one), or ``None``."""
    out = _git(["rev-parse", "HEAD"], path)
    return (out or "").strip() or None


def git_dirty(path: str | os.PathLike | None = None) -> bool | None:
    """Whether the checkout holding ``path`` has uncommitted changes to tracked files outside
    ``results/`` (``None``: not a checkout): the code a run ran, not the records it and its
    resumed runs write."""
    out = _git(["status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"], path)
    return None if out is None else bool(out.strip())


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance() -> dict[str, Any]:
    """``{"git_revision", "git_dirty", "date", "host", "load", "dnnplace_version"}`` of this process, now.

    ``date``: UTC ISO 8601 (seconds); ``host``: ``{"platform", "cpu", "cores"}``; ``load``: the
    1, 5 and 15 minute load averages (``None`` where the platform has none).
    """
    from dnnplace import __version__

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {"git_revision": git_revision(), "git_dirty": git_dirty(),
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "host": {"platform": platform.platform(), "cpu": cpu_model(), "cores": os.cpu_count()},
            "load": load, "dnnplace_version": __version__}


def _revision_and_date(rec: dict) -> tuple[str, str | None]:
    """A record's short revision (``+dirty`` where the checkout had changes) and UTC day; records
    made before provenance have only ``git_revision`` and ``timestamp``."""
    prov = rec.get("provenance") or {}
    rev = prov.get("git_revision") or rec.get("git_revision")
    short = rev[:7] if rev else "unknown revision"
    if rev and prov.get("git_dirty"):
        short += "+dirty"
    date = prov.get("date") or rec.get("timestamp")
    return short, (date[:10] if isinstance(date, str) and len(date) >= 10 else None)


def stamp(records) -> str:
    """``run <date> at <revision>`` of ``records`` (dates as a first..last range, every revision
    named, the number of records made before provenance said): from the records only, so the
    same records give the same line."""
    records = list(records)
    if not records:
        return "run: no records"
    revs: dict[str, int] = {}
    dates = []
    bare = 0
    for rec in records:
        short, day = _revision_and_date(rec)
        revs[short] = revs.get(short, 0) + 1
        if day:
            dates.append(day)
        if not rec.get("provenance"):
            bare += 1
    when = "unknown date" if not dates else (min(dates) if min(dates) == max(dates)
                                             else f"{min(dates)}..{max(dates)}")
    at = ", ".join(f"{r} ({n} records)" if len(revs) > 1 else r for r, n in sorted(revs.items()))
    line = f"run {when} at {at}"
    if bare:
        line += f"; {bare} of {len(records)} records from before provenance (revision and date only)"
    return line
