"""Shared fixtures: where the bundled Tarnawski workloads live."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from any directory without installing the package
    sys.path.insert(0, str(REPO))

_BUNDLED = REPO / "graphs" / "workloads" / "tarnawski"
_SHARED = Path("/work/shared/workloads/tarnawski")


def solver_approx(expected: float):
    """A MIP solver's incumbent compared at the solver's own tolerance: HiGHS and Gurobi
    accept integrality and feasibility violations of about 1e-6, so an optimum of 18 may
    come back as 17.999999 (releases differ). Exact values come from the evaluator."""
    return pytest.approx(expected, rel=1e-5, abs=1e-5)


def tarnawski_root() -> Path:
    """The bundled workloads inside the repository, else the shared copy."""
    return _BUNDLED if _BUNDLED.is_dir() else _SHARED


@pytest.fixture(scope="session")
def tarnawski_dir() -> Path:
    """Directory holding ``latency-inputs/``, ``throughput-inputs/`` and ``human-experts/``."""
    root = tarnawski_root()
    if not root.is_dir():
        pytest.fail(f"Tarnawski workloads not found in {_BUNDLED} or {_SHARED}")
    return root
