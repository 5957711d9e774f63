"""Shared fixtures and checks: where the bundled Tarnawski workloads live, a sweep config
over two of them, the MIP tolerance, what a written PNG shows, the profile cache in a
temporary folder. Seeded tiny instances
shared by several modules are in ``tests/instances.py``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dnnplace.data import tarnawski_dir as _bundled_tarnawski

REPO = Path(__file__).resolve().parents[1]
LAYER = "tarnawski/throughput-inputs/LayerGraphs"
"""The Tarnawski layer graphs as an experiment config names them (bundled data)."""


def grid_config(name: str, methods: list[str], *, solver: str = "") -> str:
    """An experiment config sweeping ``methods`` over the BERT-24 and GNMT inference
    layer graphs into ``out/``; ``solver`` is the body of a ``[grid.solver]`` table
    (``methods`` is written as ``["a", "b"]``, so a test can swap the list by text)."""
    text = f"""
name = "{name}"
out_dir = "out"
[grid]
graphs = ["{LAYER}/bert24_inference.json", "{LAYER}/gnmt_inference.json"]
methods = {json.dumps(methods)}
"""
    return text + (f"[grid.solver]\n{solver}\n" if solver else "")


def solver_approx(expected: float):
    """A MIP solver's incumbent compared at the solver's own tolerance: HiGHS and Gurobi
    accept integrality and feasibility violations of about 1e-6, so an optimum of 18 may
    come back as 17.999999 (releases differ). Exact values come from the evaluator."""
    return pytest.approx(expected, rel=1e-5, abs=1e-5)


def png_pixels_by_colour(path: Path, *, min_width: int = 600, min_height: int = 150) -> dict[str, int]:
    """Read a written PNG back with matplotlib: ``{"#RRGGBB": pixels}`` over the whole
    image (a bar drawn in a colour shows up as thousands of pixels of exactly that
    colour). Asserts the file is a PNG of at least ``min_width`` x ``min_height`` pixels
    and not a single flat colour."""
    import matplotlib.image as mpimg

    path = Path(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    img = mpimg.imread(path)
    height, width = img.shape[:2]
    assert width >= min_width and height >= min_height, img.shape
    rgb = (img[..., :3] * 255).round().astype(int).reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    assert colours.shape[0] > 1, f"{path}: blank image"
    return {"#{:02X}{:02X}{:02X}".format(*c): int(k) for c, k in zip(colours.tolist(), counts.tolist())}


@pytest.fixture(scope="session", autouse=True)
def profile_cache(tmp_path_factory) -> Path:
    """Every test's measured-cost profiles (pytorch/capture/costs.py: ``cache_path``) go to a
    temporary folder, never into ``~/.cache/dnnplace``: ``DNNPLACE_PROFILE_CACHE`` is set
    for the session, subprocesses included (docs/execution.md, Profile cache)."""
    folder = tmp_path_factory.mktemp("profile-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DNNPLACE_PROFILE_CACHE", str(folder))
        yield folder


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
