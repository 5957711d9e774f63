"""A cluster from the local machine's GPU topology, read through NVML.

For every pair of GPUs, NVML says whether NVLink joins them and which NVLink version,
else they talk over PCIe; each pair's link gets the start-up time and per-direction
bandwidth of the matching :data:`~dnnplace.graphs.presets.INTERCONNECTS` generation:

* NVLink: ``k`` links of the version NVML reports between the two GPUs carry ``k``
  times the generation's bandwidth per link (its data-sheet total over its links per
  GPU: V100 6, A100 12, H100 18 links of 25 GB/s). GPUs whose links end on an NVSwitch
  (the remote PCI bus id is no GPU's) reach every other such GPU at the full total.
* PCIe: the lower of the two GPUs' maximum PCIe generations; GPU-host links use each
  GPU's own.

NVML versions (``nvml.h``): 1-3 are NVLink 1.0/2.0/2.2 (mapped to ``nvlink2``), 4-5
NVLink 3.x (``nvlink3``), 6 and later NVLink 4+ (``nvlink4``). This code has been run
only against a fake NVML in the tests, never on real GPUs; ``dnnplace profile-links``
measures the links themselves.

NVML comes from the optional ``nvidia-ml-py`` package (module ``pynvml``), or any object
with its functions (``nvml=``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InputError

__all__ = ["cluster_from_nvml", "NVLINK_LINKS", "nvlink_generation"]

NVLINK_LINKS = {"nvlink2": 6, "nvlink3": 12, "nvlink4": 18}
"""NVLinks per GPU of each generation's data-sheet part (V100 SXM2, A100 SXM4, H100 SXM5)."""


def nvlink_generation(version: int) -> str:
    """Preset name of an NVML NVLink version (module docstring).

    >>> [nvlink_generation(v) for v in (2, 4, 6)]
    ['nvlink2', 'nvlink3', 'nvlink4']
    """
    return "nvlink2" if version <= 3 else "nvlink3" if version <= 5 else "nvlink4"


def _bus(info: Any) -> str:
    b = info.busId
    return (b.decode() if isinstance(b, bytes) else str(b)).lower()


def _load_nvml():
    try:
        import pynvml
    except ImportError:
        raise InputError("reading the GPU topology needs NVML: pip install nvidia-ml-py") from None
    return pynvml


def cluster_from_nvml(nvml: Any = None, *, unit: str = "ms", cpu: bool = True) -> Cluster:
    """The local GPUs (kind ``gpu``, memory from NVML) plus ``cpu0``, with per-pair links
    from the topology (module docstring); times in ``unit``.

    The NVLink and PCIe figures are the presets' data-sheet numbers, not measurements.
    """
    from dnnplace.graphs.presets import INTERCONNECTS
    nv = nvml if nvml is not None else _load_nvml()
    scale = {"ms": 1e3, "s": 1.0, "us": 1e6}[unit]
    try:
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError has no common base outside pynvml
        raise InputError(f"NVML did not start (no NVIDIA driver?): {exc}") from None
    try:
        n = int(nv.nvmlDeviceGetCount())
        if n < 1:
            raise InputError("NVML sees no GPU on this machine")
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        bus = [_bus(nv.nvmlDeviceGetPciInfo(h)) for h in handles]
        mem = [float(nv.nvmlDeviceGetMemoryInfo(h).total) for h in handles]
        names = [nv.nvmlDeviceGetName(h) for h in handles]
        names = [x.decode() if isinstance(x, bytes) else str(x) for x in names]
        pcie = [int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)) for h in handles]
        links = np.zeros((n, n), dtype=np.int64)
        switched = np.zeros(n, dtype=bool)
        version = np.zeros(n, dtype=np.int64)
        for i, h in enumerate(handles):
            for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    if not nv.nvmlDeviceGetNvLinkState(h, link):
                        continue
                    remote = _bus(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link))
                    version[i] = max(version[i], int(nv.nvmlDeviceGetNvLinkVersion(h, link)))
                except Exception:  # noqa: BLE001 - a link NVML does not know: not present
                    continue
                if remote in bus:
                    links[i, bus.index(remote)] += 1
                else:
                    switched[i] = True
    finally:
        nv.nvmlShutdown()
    devs = [Device(f"gpu{i}", "gpu", mem[i]) for i in range(n)] + ([Device("cpu0", "cpu")] if cpu else [])
    d = len(devs)
    b0, b1 = np.zeros((d, d)), np.zeros((d, d))
    kind = np.full((d, d), "", dtype=object)
    for i in range(d):
        for j in range(d):
            if i == j:
                continue
            if i < n and j < n:
                k = max(links[i, j], links[j, i])
                if k or (switched[i] and switched[j]):
                    gen = nvlink_generation(int(max(version[i], version[j])))
                    lat, bw = INTERCONNECTS[gen]
                    bw = bw if not k else min(bw, bw * k / NVLINK_LINKS[gen])
                    kind[i, j] = f"{gen}x{k}" if k else f"{gen}-switch"
                else:
                    gen = f"pcie{min(max(min(pcie[i], pcie[j]), 3), 5)}"
                    lat, bw = INTERCONNECTS[gen]
                    kind[i, j] = gen
            else:
                g = i if i < n else j
                gen = f"pcie{min(max(pcie[g], 3), 5)}"
                lat, bw = INTERCONNECTS[gen]
                kind[i, j] = gen
            b0[i, j], b1[i, j] = lat * scale, scale / bw
    return Cluster(tuple(devs), b0, b1, np.ones((d, d)), name="nvml-topology",
                   meta={"unit": unit, "source": "nvml", "gpus": names,
                         "links": {f"{devs[i].name}-{devs[j].name}": kind[i, j] for i in range(d) for j in range(d)
                                   if i < j}})
