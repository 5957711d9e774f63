"""PARDNN Table 4's batches from two captured profiles (results/pardnn/README.md): outputs that do not
grow with the batch keep their size, which the linear batch rule scaled."""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401  CI installs the extra: a missing torch must fail, not skip
else:
    pytest.importorskip("torch")

from dnnplace.experiments.pardnn import Model, batch_profiles  # noqa: E402
from dnnplace.graphs.batch_model import BatchModel  # noqa: E402


def test_profiled_batches_keep_batch_independent_outputs():
    m = Model("tiny-rnn", nodes=200, batch=8, paper={},
              block={"model": "rnnlm-2x2048", "part": "layer", "seq": 3, "hidden": 32})
    prof = batch_profiles(m)
    assert prof is not None and sorted(prof) == [4, 8]
    g4, g8 = prof[4], prof[8]
    assert g4.ids == g8.ids and "tiled" in g8.meta
    fixed = np.isclose(g4.output_bytes, g8.output_bytes) & (g8.output_bytes > 0)
    grows = np.isclose(g8.output_bytes, 2 * g4.output_bytes) & (g8.output_bytes > 0)  # proportional to the batch
    assert fixed.sum() > 10 and grows.sum() > 10  # weight-gradient partials vs activations
    profiled, linear = BatchModel(8, profiles=prof), BatchModel(8)
    for b in (1, 64):
        p, lin = profiled.at(g8, b).output_bytes, linear.at(g8, b).output_bytes
        np.testing.assert_allclose(p[fixed], g8.output_bytes[fixed])  # kept at every batch
        assert not np.allclose(lin[fixed], g8.output_bytes[fixed])  # the linear rule scaled them
        np.testing.assert_allclose(p[grows], g8.output_bytes[grows] * b / 8, rtol=1e-9)  # proportional ones
