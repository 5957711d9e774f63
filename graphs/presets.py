"""Cluster presets by name (``single-host-4-nvlink``, ``tarnawski-4-1-16GB``, ...) and
byte counts with units, as the command line and experiment configs write them."""

from __future__ import annotations

import math
import os
import re

import numpy as np

from dnnplace.graphs.cluster import MAX_DEVICES, Cluster, Device, check_device_count
from dnnplace.graphs.errors import InputError

__all__ = ["CLUSTER_PRESETS", "INTERCONNECTS", "LOCAL_CPU_LINK", "parse_bytes", "cluster_preset",
           "host_memory", "local_cpu_cluster"]

CLUSTER_PRESETS = {
    "single-host-<N>-<nvlink|pcie>[-<GPU memory>]": "one host, N GPUs (kind 'gpu') on NVLink or PCIe, plus cpu0",
    "single-host-<N>-<nvlink2|nvlink3|nvlink4|pcie3|pcie4|pcie5>[-<GPU memory>]":
        "the same with one interconnect generation's per-direction bandwidth (INTERCONNECTS)",
    "tarnawski-<K>-<L>-<memory>": "Tarnawski et al.: K accelerators of <memory> each and L CPUs, "
                                  "all transfers through host RAM",
    "hierarchy-<S>x<G>[-<memory>]": "Tarnawski App. C.3: S servers of G accelerators (e.g. hierarchy-2x4, "
                                    "hierarchy-4x8-16GB), a network 4x slower than the host copy between servers",
    "local-cpu-<N>[-<memory>]": "this host as N CPU worker processes (kind 'cpu', cpu0..cpu<N-1>, one thread "
                                "each), host RAM / N each unless given, every pair linked by the measured gloo "
                                "send/recv defaults (LOCAL_CPU_LINK); a profiled file: profile-links --gloo N",
}

INTERCONNECTS = {
    # (start-up seconds, bytes/s per direction): NVIDIA data sheets, GPU total over its links
    "nvlink2": (0.01e-3, 150e9),   # V100 SXM2: 6 links x 25 GB/s
    "nvlink3": (0.01e-3, 300e9),   # A100 SXM4: 12 links x 25 GB/s
    "nvlink4": (0.01e-3, 450e9),   # H100 SXM5: 18 links x 25 GB/s
    "pcie3": (0.02e-3, 15.75e9),   # PCIe Gen3 x16
    "pcie4": (0.02e-3, 31.5e9),    # PCIe Gen4 x16
    "pcie5": (0.02e-3, 63e9),      # PCIe Gen5 x16
}
"""Interconnect generations of the ``single-host`` presets: start-up time and bandwidth."""

LOCAL_CPU_LINK = (0.148e-3, 2.03e9)  # measured 2026-11-25 on the 2-CPU AMD EPYC VM, torch 2.13 CPU
"""Measured defaults of the ``local-cpu-N`` links: (start-up seconds, bytes/s), as ``INTERCONNECTS``
(in a graph's ms: ``beta0 = 0.148`` ms, ``beta1 = 4.93e-7`` ms per byte, 2.03 GB/s).

A ``torch.distributed`` gloo send/recv between two CPU processes of this host, one thread
each (:func:`dnnplace.pytorch.capture.links.time_p2p_pairs`), half a round trip; every size
(1 KiB .. 64 MiB, powers of two) the median of 20 round trips after 3 warm-ups, then the
median over 7 fresh process pairs; fitted by relative-weighted least squares (r2 0.989).
Measured 2026-11-25 on this project's development VM (2 vCPUs, AMD EPYC, 25 GB RAM, Linux
6.18, torch 2.13.0+cpu, load average 4-5 from other work) with::

    .venv/bin/python -m benchmarks local-links --runs 7 --repeats 20 --out results/local-cpu-links.md

(the table is in ``results/local-cpu-links.md``). On that shared machine small messages
are bimodal, about 0.1 ms or about 2 ms per run and size (a wake-up delay under CPU
contention, not pinned down; 3 of 17 sizes have the 2 ms median; the fit follows the other 14). Another host differs:
``dnnplace profile-links --gloo N --out cluster.json`` measures every pair there and writes a
``local-cpu-N`` cluster file to pass as ``--cluster cluster.json``.
"""

LOCAL_CPU_OP_OVERHEAD = 15.8e-6
"""Seconds the executor spends per operator beyond its ``measured:cpu`` time on a
``local-cpu-N`` device (dispatch, bookkeeping, timing): the median over six models of
(one-device step - sum of operator costs) / operators, 2026-11-25 on the 2-vCPU VM
(``python -m benchmarks execution``, ``results/execution/predicted-vs-measured.md``; the six
values spread from -54 to 180 us: step times on that VM vary by 10-30 % between runs)."""

_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KIB": 2 ** 10, "MIB": 2 ** 20, "GIB": 2 ** 30, "TIB": 2 ** 40}


def parse_bytes(text: str) -> float:
    """A byte count such as ``16GB`` (10^9), ``16GiB`` (2^30), ``8e9`` or ``inf`` (unbounded,
    written as such: a number past the 64-bit float range, ``1e999GB``, is an error).

    >>> parse_bytes("16GB"), parse_bytes("1KiB"), parse_bytes("8e9"), parse_bytes("inf")
    (16000000000.0, 1024.0, 8000000000.0, inf)
    >>> parse_bytes("1e999GB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: cannot read '1e999GB' as a byte count: 1e999GB is past the 64-bit float range ...
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|inf)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise InputError(f"cannot read {text!r} as a byte count (e.g. 16GB, 16GiB, 8e9)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if m.group(1) != "inf" and not math.isfinite(value):
        raise InputError(f"cannot read {text!r} as a byte count: {str(text).strip()} is past the 64-bit float "
                         "range (write inf for unbounded memory)")
    return value


def _count(text: str, spec: str) -> int:
    """The device count ``text`` of preset ``spec``, refused past :data:`MAX_DEVICES` before
    it is read as a number (a 5000-digit ``N`` is no Python int)."""
    digits = text.lstrip("0") or "0"
    if len(digits) > 12:
        raise InputError(f"cluster preset {spec!r}: a {len(digits)}-digit number of devices; at most {MAX_DEVICES} "
                         "devices are supported")
    return int(digits)


def _memory(text: str, spec: str) -> float:
    """The ``-MEM`` part of preset ``spec`` (:func:`parse_bytes`), an error naming the preset."""
    try:
        return parse_bytes(text)
    except InputError as exc:
        raise InputError(f"cluster preset {spec!r}: {exc}") from None


def host_memory() -> float:
    """This host's physical RAM in bytes (``inf`` where the OS does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return math.inf


def local_cpu_cluster(n: int, *, links: dict | None = None, memory: float | None = None, unit: str = "ms",
                      name: str | None = None, meta: dict | None = None) -> Cluster:
    """This host as ``n`` CPU worker processes ``cpu0 .. cpu<n-1>`` (kind ``cpu``).

    ``memory`` per device defaults to a fair share of this host's RAM (:func:`host_memory`
    divided by ``n``). ``links`` maps a device pair ``(a, b)`` (either order) to its
    ``(start-up seconds, bytes/s)``; pairs not given use :data:`LOCAL_CPU_LINK`. Times are
    in ``unit``; ``cost_factor`` is 1 everywhere (separate processes copy their tensors).

    >>> c = local_cpu_cluster(3, links={(0, 1): (1e-3, 1e9)}, memory=8e9)
    >>> c.names, c.kinds[0], float(c.memory[2])
    (('cpu0', 'cpu1', 'cpu2'), 'cpu', 8000000000.0)
    >>> round(float(c.beta0[1, 0]), 9), round(float(c.beta1[0, 1]) * 1e6, 9)  # ms, ms per MB
    (1.0, 1.0)
    """
    if n < 1:
        raise InputError(f"local-cpu cluster: needs at least one device, got {n}")
    scale = {"ms": 1e3, "s": 1.0, "us": 1e6}[unit]
    mem = host_memory() / n if memory is None else float(memory)
    devs = tuple(Device(f"cpu{i}", "cpu", mem, op_overhead=LOCAL_CPU_OP_OVERHEAD * scale) for i in range(n))
    b0, b1 = np.zeros((n, n)), np.zeros((n, n))
    given = {tuple(sorted(map(int, k))): v for k, v in (links or {}).items()}
    for a in range(n):
        for b in range(n):
            if a != b:
                lat, bw = given.get((min(a, b), max(a, b)), LOCAL_CPU_LINK)
                b0[a, b], b1[a, b] = lat * scale, scale / bw
    return Cluster(devs, b0, b1, np.ones((n, n)), name=name or f"local-cpu-{n}",
                   meta={"unit": unit, "links": "profiled" if links else "measured defaults", **(meta or {})})


def cluster_preset(spec: str, graph=None) -> Cluster:
    """Build a cluster from a preset name (see :data:`CLUSTER_PRESETS`).

    ``graph`` (optional) adapts the preset to it: link times use ``graph.unit``, and a
    Tarnawski preset names its accelerator kind after the graph's first non-CPU kind
    when the graph has no ``"acc"`` column (so a generated ``gpu``/``cpu`` graph works).

    >>> c = cluster_preset("single-host-4-nvlink")
    >>> c.names
    ('gpu0', 'gpu1', 'gpu2', 'gpu3', 'cpu0')
    >>> round(1 / float(cluster_preset("single-host-2-nvlink3").beta1[0, 1]) / 1e9, 6)  # GB per ms
    0.3
    >>> c = cluster_preset("tarnawski-2-1-16GB")
    >>> c.names, float(c.memory[0])
    (('acc0', 'acc1', 'cpu0'), 16000000000.0)
    >>> c = cluster_preset("local-cpu-2-4GB")
    >>> c.names, c.kinds, float(c.memory[1])
    (('cpu0', 'cpu1'), ('cpu', 'cpu'), 4000000000.0)
    """
    s = str(spec).strip()
    unit = getattr(graph, "unit", "ms")
    m = re.fullmatch(r"single-host-(\d+)-(nvlink|pcie)([2-5]?)(?:-(.+))?", s)
    if m:
        n = _count(m.group(1), s)
        if n < 1:
            raise InputError(f"cluster preset {s!r}: needs at least one GPU")
        check_device_count(n + 1, f"cluster preset {s!r} ({n} GPUs and cpu0)")
        gen = m.group(2) + m.group(3)
        if m.group(3) and gen not in INTERCONNECTS:
            raise InputError(f"cluster preset {s!r}: unknown interconnect {gen!r}; use one of {list(INTERCONNECTS)}")
        lat, bw = INTERCONNECTS.get(gen, (None, None))
        mem = _memory(m.group(4), s) if m.group(4) else 16e9
        return Cluster.single_host(n, interconnect=m.group(2), gpu_memory=mem, latency=lat, bandwidth=bw,
                                   unit=unit if unit in ("ms", "s", "us") else "ms")
    m = re.fullmatch(r"local-cpu-(\d+)(?:-(.+))?", s)
    if m:
        n = _count(m.group(1), s)
        check_device_count(n, f"cluster preset {s!r}")
        return local_cpu_cluster(n, memory=_memory(m.group(2), s) if m.group(2) else None,
                                 unit=unit if unit in ("ms", "s", "us") else "ms")
    m = re.fullmatch(r"tarnawski-(\d+)-(\d+)-(.+)", s)
    if m:
        k, l_cpus = _count(m.group(1), s), _count(m.group(2), s)
        if k < 1:
            raise InputError(f"cluster preset {s!r}: needs at least one accelerator")
        check_device_count(k + l_cpus, f"cluster preset {s!r} ({k} accelerators and {l_cpus} CPUs)")
        acc = "acc"
        kinds = tuple(getattr(graph, "kinds", ()) or ())
        if kinds and "acc" not in kinds:
            acc = next((k_ for k_ in kinds if k_ != "cpu"), "acc")
        return Cluster.tarnawski(k, l_cpus, _memory(m.group(3), s), acc_kind=acc)
    m = re.fullmatch(r"hierarchy-(\d+)x(\d+)(?:-(.+))?", s)
    if m:
        from dnnplace.graphs.hierarchy import hierarchical_cluster

        kinds = tuple(getattr(graph, "kinds", ()) or ())
        acc = next((k_ for k_ in kinds if k_ != "cpu"), "acc")
        servers, gpus = _count(m.group(1), s), _count(m.group(2), s)
        check_device_count(servers * gpus, f"cluster preset {s!r} ({servers} servers of {gpus})")
        mem = _memory(m.group(3), s) if m.group(3) else float("inf")
        return hierarchical_cluster((servers, gpus), memory=mem, kind=acc)
    raise InputError(f"unknown cluster preset {s!r}; use one of {list(CLUSTER_PRESETS)} "
                     "(e.g. single-host-4-nvlink, single-host-2-pcie-32GB, tarnawski-4-1-16GB, local-cpu-2)")
