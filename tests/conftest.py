"""Shared fixtures: where the bundled Tarnawski workloads live."""

from __future__ import annotations

from pathlib import Path

import pytest

from dnnplace.data import tarnawski_dir as _bundled_tarnawski

REPO = Path(__file__).resolve().parents[1]


def solver_approx(expected: float):
    """A MIP solver's incumbent compared at the solver's own tolerance: HiGHS and Gurobi
    accept integrality and feasibility violations of about 1e-6, so an optimum of 18 may
    come back as 17.999999 (releases differ). Exact values come from the evaluator."""
    return pytest.approx(expected, rel=1e-5, abs=1e-5)


def tarnawski_root() -> Path:
    """The bundled Tarnawski workloads of the installed package."""
    return _bundled_tarnawski()


@pytest.fixture(scope="session")
def tarnawski_dir() -> Path:
    """Directory holding ``latency-inputs/``, ``throughput-inputs/`` and ``human-experts/``."""
    root = tarnawski_root()
    if not root.is_dir():
        pytest.fail(f"Tarnawski workloads not found in {root}")
    return root
