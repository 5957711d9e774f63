"""A cluster from the GPU topology read through NVML (dnnplace.pytorch.capture.topology),
tested with a fake NVML: no real GPU ran this code."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.presets import INTERCONNECTS
from dnnplace.pytorch.capture.topology import cluster_from_nvml


class FakeNVML:
    """pynvml's functions over a made-up machine: ``links[(i, link)] = remote bus id``."""

    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, n, links, version, pcie, memory=80e9):
        self.n, self.links, self.version, self.pcie, self.memory = n, links, version, pcie, memory
        self.started = 0

    def nvmlInit(self):
        self.started += 1

    def nvmlShutdown(self):
        self.started -= 1

    def nvmlDeviceGetCount(self):
        return self.n

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"Fake GPU"

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=self.memory)

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=f"00000000:{h:02X}:00.0".encode())

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self.pcie[h]

    def nvmlDeviceGetNvLinkState(self, h, link):
        if (h, link) not in self.links:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")  # as pynvml does for absent links
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return SimpleNamespace(busId=self.links[(h, link)].encode())

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return self.version


def bus(i):
    return f"00000000:{i:02X}:00.0"


def bandwidth(c, i, j):
    """Bytes per second of link i -> j (cluster in ms)."""
    return 1e3 / float(c.beta1[i, j])


def test_nvlink_pairs_and_pcie():
    """4 GPUs: 0-1 and 2-3 joined by 4 NVLink 3 links each (A100: 12 links = 300 GB/s),
    the other pairs over PCIe; GPU 3 on Gen3, the others Gen4."""
    links = {}
    for a, b in ((0, 1), (2, 3)):
        for k in range(4):
            links[(a, k)] = bus(b)
            links[(b, k)] = bus(a)
    nv = FakeNVML(4, links, version=4, pcie=[4, 4, 4, 3])
    c = cluster_from_nvml(nv)
    assert nv.started == 0  # shut down again
    assert c.names == ("gpu0", "gpu1", "gpu2", "gpu3", "cpu0") and float(c.memory[0]) == 80e9
    lat3, bw3 = INTERCONNECTS["nvlink3"]
    assert np.isclose(bandwidth(c, 0, 1), bw3 * 4 / 12) and np.isclose(bandwidth(c, 3, 2), bw3 * 4 / 12)
    assert np.isclose(float(c.beta0[0, 1]), lat3 * 1e3)
    assert np.isclose(bandwidth(c, 0, 2), INTERCONNECTS["pcie4"][1])
    assert np.isclose(bandwidth(c, 1, 3), INTERCONNECTS["pcie3"][1])  # the lower generation
    assert np.isclose(bandwidth(c, 3, 4), INTERCONNECTS["pcie3"][1]) and np.isclose(bandwidth(c, 4, 0),
                                                                                    INTERCONNECTS["pcie4"][1])
    assert c.meta["links"]["gpu0-gpu1"] == "nvlink3x4" and c.meta["links"]["gpu0-gpu2"] == "pcie4"
    checked = sum(1 for i in range(5) for j in range(5) if i != j and c.beta1[i, j] > 0)
    assert checked == 20


def test_nvswitch_gives_full_bandwidth():
    """8 H100s, all 18 links to NVSwitches (remote bus ids are no GPU's)."""
    links = {(i, k): f"00000000:F{k % 4}:00.0" for i in range(8) for k in range(18)}
    c = cluster_from_nvml(FakeNVML(8, links, version=6, pcie=[5] * 8), unit="s")
    bw = INTERCONNECTS["nvlink4"][1]
    assert all(np.isclose(1 / float(c.beta1[i, j]), bw) for i in range(8) for j in range(8) if i != j)
    assert np.isclose(1 / float(c.beta1[0, 8]), INTERCONNECTS["pcie5"][1])


def test_no_nvml_says_what_to_install(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    with pytest.raises(InputError, match="pip install nvidia-ml-py"):
        cluster_from_nvml()


def test_nvml_without_gpus():
    with pytest.raises(InputError, match="no GPU"):
        cluster_from_nvml(FakeNVML(0, {}, 4, []))


def test_profile_links_nvml_writes_cluster(tmp_path, monkeypatch, capsys):
    from dnnplace.cli import main
    from dnnplace.graphs.io import read_json
    from dnnplace.graphs.io.native import cluster_from_dict
    from dnnplace.pytorch.capture import topology
    links = {(0, k): bus(1) for k in range(6)} | {(1, k): bus(0) for k in range(6)}
    monkeypatch.setattr(topology, "_load_nvml", lambda: FakeNVML(2, links, version=2, pcie=[3, 3]))
    out = tmp_path / "c.json"
    assert main(["profile-links", "--nvml", "--out", str(out)]) == 0
    assert "gpu0-gpu1    nvlink2x6" in capsys.readouterr().out
    c = cluster_from_dict(read_json(out))
    assert np.isclose(1 / float(c.beta1[0, 1]) * 1e3, INTERCONNECTS["nvlink2"][1])
