"""graphs/components.py against scipy.sparse.csgraph.connected_components: the same labels
(not only the same partition), so the DP's node numbering did not change with the switch."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.graphs.components import strong_components, weak_components


def test_components_label_as_scipy_does():
    sparse = pytest.importorskip("scipy.sparse")
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    rng = np.random.default_rng(26)
    checked = 0
    for n in [1, 2, 3, 5, 8, 13, 21, 34, 55] * 40:
        m = int(rng.integers(0, 3 * n + 1))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)  # self-loops and repeats included
        adj = sparse.coo_matrix((np.ones(m), (src, dst)), shape=(n, n)).tocsr()
        _, strong = csgraph.connected_components(adj, directed=True, connection="strong")
        _, weak = csgraph.connected_components(adj, directed=False)
        assert np.array_equal(strong_components(n, src, dst), strong), (n, src, dst)
        assert np.array_equal(weak_components(n, src, dst), weak), (n, src, dst)
        checked += 1
    assert checked == 360


def test_components_of_small_cases():
    assert strong_components(0, [], []).size == 0
    assert weak_components(3, np.array([], np.int64), np.array([], np.int64)).tolist() == [0, 1, 2]
    # a cycle 0 -> 1 -> 2 -> 0 and a tail 2 -> 3: {3} completes first
    assert strong_components(4, np.array([0, 1, 2, 2]), np.array([1, 2, 0, 3])).tolist() == [1, 1, 1, 0]
    assert weak_components(5, np.array([3, 4]), np.array([1, 0])).tolist() == [0, 1, 2, 1, 0]
