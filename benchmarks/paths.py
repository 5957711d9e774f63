"""Where the benchmarks read and write: the repository root (bundled workloads, ``results/``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root (benchmarks read bundled workloads and write under ``results/``)."""
