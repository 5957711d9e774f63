"""Devices, links and the linear transfer model (docs/semantics.md 1).

A node runs on a device in its kind's compute time divided by the device's ``speed``, plus
the device's ``op_overhead`` (a fixed per-operator launch cost in the graph's time unit,
default 0; fitted from measured executions), see :meth:`Cluster.compute_matrix`.

A transfer of ``b`` bytes over the directed link ``(a, c)`` takes
``beta0[a, c] + beta1[a, c] * b`` time units (Pesto Sec. 3.1, FastT Sec. 4, Celeritas
Sec. 4), fitted by least squares from measured transfers with :func:`fit_link`. An edge
with an explicit ``cost`` (Tarnawski's inputs) overrides the model and takes
``cost_factor[a, c] * cost``: the factor is 1 for a direct hop, 2 for accelerator to
accelerator through host memory, and 0 between devices that share memory (CPUs of one
host), where a transfer takes no time.

Each message also costs its two ends device time (docs/semantics.md 2.1, per-message
costs): the sending device's ``send_overhead`` (posting it: packing, handing it to the transport) and the
receiving device's ``recv_overhead`` (taking it: waking, unpacking), both in the graph's
time unit, default 0, fitted from measured executions (``dnnplace calibrate``).
:meth:`Cluster.message_time` is their sum on a device pair.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError

__all__ = ["Device", "Cluster", "LinkFit", "fit_link", "PORT_MODES", "MAX_DEVICES", "check_device_count"]

MAX_DEVICES = 4096
"""The most devices a cluster may have (a preset's ``N``, a cluster file's ``devices``, a
Tarnawski input's ``maxFPGAs`` or ``maxCPUs``): a cluster of ``D`` devices holds ``D x D``
link arrays, so a larger count (``single-host-99999-nvlink``, ``10**400``) is refused
before anything is built, not a cluster too large for memory."""


def check_device_count(count: int, what: str) -> None:
    """An :class:`InputError` ``"<what>: <count> devices; at most 4096 devices are
    supported"`` when ``count`` exceeds :data:`MAX_DEVICES` (checked before building).

    >>> check_device_count(5000, "cluster preset 'local-cpu-5000'")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: cluster preset 'local-cpu-5000': 5000 devices; at most 4096 devices are supported
    """
    if count > MAX_DEVICES:
        shown = count if count < 10 ** 12 else f"a {len(str(int(count)))}-digit number of"
        raise InputError(f"{what}: {shown} devices; at most {MAX_DEVICES} devices are supported")

#: How transfers share the interconnect under congestion (docs/semantics.md 2.1): ``"per_link"`` --
#: every directed device pair is its own link (NVLink, where a GPU's links are point to
#: point); ``"shared"`` -- a device's outgoing transfers share its egress port and its
#: incoming ones its ingress port (PCIe, host bridges), so a transfer ``a -> b`` also
#: waits for ``a``'s other outgoing and ``b``'s other incoming transfers.
PORT_MODES = ("per_link", "shared")


@dataclass(frozen=True)
class Device:
    """One device: ``kind`` selects the compute column, ``memory`` is its capacity in
    bytes (``inf`` = unbounded), ``speed`` divides compute times and ``op_overhead`` (in
    the graph's time unit, default 0) is added to every node it runs (a per-operator
    launch cost). ``send_overhead`` and ``recv_overhead`` (graph time unit, default 0)
    are the device time one message costs its sender and its receiver
    (docs/semantics.md 2.1, per-message costs)."""

    name: str
    kind: str
    memory: float = math.inf
    speed: float = 1.0
    op_overhead: float = 0.0
    send_overhead: float = 0.0
    recv_overhead: float = 0.0

    def __post_init__(self) -> None:
        if not self.name:
            raise InputError("device with an empty name")
        if not (self.memory >= 0):
            raise InputError(f"device {self.name!r}: memory must be >= 0, got {self.memory}")
        if not (self.speed > 0) or math.isinf(self.speed):
            raise InputError(f"device {self.name!r}: speed must be a positive number, got {self.speed}")
        for key in ("op_overhead", "send_overhead", "recv_overhead"):
            value = getattr(self, key)
            if not (value >= 0) or math.isinf(value):
                raise InputError(f"device {self.name!r}: {key} must be a finite number >= 0, got {value}")


@dataclass(frozen=True, eq=False)
class Cluster:
    """Devices plus per-ordered-pair link parameters (``(D, D)`` arrays).

    Use the presets (:meth:`single_host`, :meth:`tarnawski`) or give the arrays directly.
    ``ports`` (:data:`PORT_MODES`, default ``"per_link"``) says whether transfers queue
    per directed link or on each device's egress and ingress port (simulated with
    congestion). ``meta["device_limit"]`` (``{kind: count}``) optionally bounds how many devices of a
    kind a placement may use: a Tarnawski split naming more accelerators than the
    instance's ``maxFPGAs`` is scored on a wider cluster and flagged by ``validate``.
    """

    devices: tuple[Device, ...]
    beta0: np.ndarray
    beta1: np.ndarray
    cost_factor: np.ndarray
    name: str = "cluster"
    meta: dict = field(default_factory=dict)
    ports: str = "per_link"

    def __post_init__(self) -> None:
        if self.ports not in PORT_MODES:
            raise InputError(f"cluster {self.name!r}: unknown ports {self.ports!r}; use one of {list(PORT_MODES)}")
        object.__setattr__(self, "devices", tuple(self.devices))
        d = len(self.devices)
        if d == 0:
            raise InputError("cluster has no devices")
        check_device_count(d, f"cluster {self.name!r}")
        names = [dev.name for dev in self.devices]
        if len(set(names)) != d:
            dup = next(x for x in names if names.count(x) > 1)
            raise InputError(f"duplicate device name {dup!r}")
        for key in ("beta0", "beta1", "cost_factor"):
            arr = np.asarray(getattr(self, key), dtype=np.float64)
            if arr.shape != (d, d):
                raise InputError(f"cluster field {key!r}: expected shape ({d}, {d}), got {arr.shape}")
            if not np.all(arr >= 0):
                a, b = np.argwhere(~(arr >= 0))[0]
                raise InputError(f"link {names[a]}->{names[b]}: {key} must be >= 0, got {arr[a, b]}")
            np.fill_diagonal(arr, 0.0)
            object.__setattr__(self, key, arr)

    # ------------------------------------------------------------------ lookups
    @property
    def size(self) -> int:
        """Number of devices."""
        return len(self.devices)

    @cached_property
    def index(self) -> dict[str, int]:
        """Map from device name to device index."""
        return {dev.name: i for i, dev in enumerate(self.devices)}

    def index_of(self, name: str) -> int:
        """Index of a device name, with an error naming the known devices."""
        try:
            return self.index[str(name)]
        except KeyError:
            raise InputError(f"unknown device {name!r}; cluster {self.name!r} has "
                             f"{[d.name for d in self.devices]}") from None

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @cached_property
    def kinds(self) -> tuple[str, ...]:
        """Kind of each device."""
        return tuple(d.kind for d in self.devices)

    @cached_property
    def memory(self) -> np.ndarray:
        """Memory capacity per device (bytes)."""
        return np.array([d.memory for d in self.devices], dtype=np.float64)

    @cached_property
    def speed(self) -> np.ndarray:
        """Speed factor per device."""
        return np.array([d.speed for d in self.devices], dtype=np.float64)

    @cached_property
    def op_overhead(self) -> np.ndarray:
        """Per-operator launch overhead per device (graph time unit)."""
        return np.array([d.op_overhead for d in self.devices], dtype=np.float64)

    @cached_property
    def send_overhead(self) -> np.ndarray:
        """Device time a message costs its sender, per device (graph time unit)."""
        return np.array([d.send_overhead for d in self.devices], dtype=np.float64)

    @cached_property
    def recv_overhead(self) -> np.ndarray:
        """Device time a message costs its receiver, per device (graph time unit)."""
        return np.array([d.recv_overhead for d in self.devices], dtype=np.float64)

    @property
    def default_congestion(self) -> bool:
        """Whether transfers queue on this cluster's links unless a command says otherwise
        (``--congestion/--no-congestion``): ``meta["congestion"]``, which ``dnnplace
        calibrate`` writes from the runs it fitted (the local gloo processes' messages
        overlap), default ``True`` (docs/semantics.md 2.1, congestion)."""
        return bool(self.meta.get("congestion", True))

    @cached_property
    def has_message_costs(self) -> bool:
        """Whether any device has a non-zero ``send_overhead`` or ``recv_overhead``."""
        return bool(self.send_overhead.any() or self.recv_overhead.any())

    def message_time(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Device time of one message from ``a`` to ``b`` on its two ends,
        ``send_overhead[a] + recv_overhead[b]`` (0 where ``a == b``); a method that
        estimates a transfer's delay adds it to :meth:`transfer_time` (docs/semantics.md 2.1,
        per-message costs).

        >>> c = Cluster.from_links([Device("a", "cpu", send_overhead=0.1), Device("b", "cpu", recv_overhead=0.25)])
        >>> c.message_time(np.array([0, 1, 0]), np.array([1, 0, 0])).tolist()
        [0.35, 0.0, 0.0]
        """
        a, b = np.asarray(a), np.asarray(b)
        return np.where(a == b, 0.0, self.send_overhead[a] + self.recv_overhead[b])

    def devices_of_kind(self, kind: str) -> np.ndarray:
        """Indices of the devices of one kind."""
        return np.array([i for i, d in enumerate(self.devices) if d.kind == kind], dtype=np.int64)

    def compute_matrix(self, graph) -> np.ndarray:
        """``(n, D)`` processing times of every node on every device (``NaN`` = unsupported):
        the kind's compute time divided by the device's ``speed``, plus its ``op_overhead``.

        Everything that times a node goes through here (simulator, evaluator, bounds,
        methods), so an overhead changes them all alike.

        >>> from dnnplace.graphs import OpGraph
        >>> g = OpGraph.from_ids("ab", [("a", "b")], kinds=["gpu"], compute=[[1.0], [0.0]], memory=[0, 0])
        >>> Cluster.from_links([Device("g0", "gpu", speed=2.0, op_overhead=0.25)]).compute_matrix(g).ravel().tolist()
        [0.75, 0.25]
        """
        out = np.full((graph.n, self.size), np.nan)
        for j, dev in enumerate(self.devices):
            k = graph.kind_index(dev.kind)
            if k >= 0:
                out[:, j] = graph.compute[:, k] / dev.speed + dev.op_overhead
        return out

    def transfer_time(self, a: np.ndarray, b: np.ndarray, nbytes: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """Vectorised time to move tensors from devices ``a`` to ``b``; zero when ``a == b``.

        ``cost`` holds explicit edge costs (``NaN`` = use ``beta0 + beta1 * bytes``).
        """
        model = self.beta0[a, b] + self.beta1[a, b] * nbytes
        t = np.where(np.isnan(cost), model, self.cost_factor[a, b] * np.nan_to_num(cost))
        return np.where(a == b, 0.0, t)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_links(cls, devices: Sequence[Device], links: Iterable[dict[str, Any]] = (),
                   default: dict[str, float] | None = None, name: str = "cluster",
                   meta: dict | None = None, ports: str = "per_link") -> Cluster:
        """Build from a device list and link records ``{src, dst, beta0, beta1, cost_factor}``.

        ``default`` applies to every ordered pair not listed (``beta0 = beta1 = 0``,
        ``cost_factor = 1`` when omitted).
        """
        d = len(devices)
        default = {"beta0": 0.0, "beta1": 0.0, "cost_factor": 1.0, **(default or {})}
        arrs = {k: np.full((d, d), float(default[k])) for k in ("beta0", "beta1", "cost_factor")}
        idx = {dev.name: i for i, dev in enumerate(devices)}
        for j, link in enumerate(links):
            try:
                a, b = idx[str(link["src"])], idx[str(link["dst"])]
            except KeyError as exc:
                raise InputError(f"link #{j}: unknown device {exc.args[0]!r}") from None
            for k in arrs:
                if k in link:
                    arrs[k][a, b] = float(link[k])
        return cls(tuple(devices), name=name, meta=dict(meta or {}), ports=ports, **arrs)

    @classmethod
    def single_host(cls, n_gpus: int, *, interconnect: str = "nvlink", gpu_memory: float = 16e9,
                    with_cpu: bool = True, cpu_memory: float = math.inf,
                    latency: float | None = None, bandwidth: float | None = None,
                    unit: str = "ms") -> Cluster:
        """One host with ``n_gpus`` GPUs on NVLink or PCIe, optionally plus its CPU.

        Default link figures (times in ``unit``): NVLink ~ 25 GB/s per direction with
        0.01 ms start-up, PCIe 3.0 x16 ~ 12 GB/s with 0.02 ms, GPU<->CPU always PCIe.
        ``latency``/``bandwidth`` (bytes per second) override the GPU-GPU link. On PCIe a
        GPU's transfers go through its one x16 slot, so its outgoing transfers share one
        port and its incoming ones another (``ports="shared"``); NVLink presets keep a
        link per GPU pair (``"per_link"``).
        """
        scale = {"ms": 1e3, "s": 1.0, "us": 1e6}[unit]
        presets = {"nvlink": (0.01e-3, 25e9), "pcie": (0.02e-3, 12e9)}
        if interconnect not in presets:
            raise InputError(f"unknown interconnect {interconnect!r}; use one of {sorted(presets)}")
        g_lat, g_bw = presets[interconnect]
        g_lat = g_lat if latency is None else latency
        g_bw = g_bw if bandwidth is None else bandwidth
        check_device_count(n_gpus + bool(with_cpu), f"single host of {n_gpus} GPUs")
        p_lat, p_bw = presets["pcie"]
        devs = [Device(f"gpu{i}", "gpu", gpu_memory) for i in range(n_gpus)]
        if with_cpu:
            devs.append(Device("cpu0", "cpu", cpu_memory))
        d = len(devs)
        b0, b1 = np.zeros((d, d)), np.zeros((d, d))
        for a in range(d):
            for b in range(d):
                if a == b:
                    continue
                gpu_pair = devs[a].kind == "gpu" and devs[b].kind == "gpu"
                lat, bw = (g_lat, g_bw) if gpu_pair else (p_lat, p_bw)
                b0[a, b], b1[a, b] = lat * scale, scale / bw
        return cls(tuple(devs), b0, b1, np.ones((d, d)),
                   name=f"{n_gpus}x-gpu-{interconnect}", meta={"unit": unit},
                   ports="shared" if interconnect == "pcie" else "per_link")

    @classmethod
    def tarnawski(cls, k: int, l: int, memory: float, *, acc_kind: str = "acc",  # noqa: E741 (paper symbols)
                  host_beta0: float = 0.0, host_beta1: float = 0.0) -> Cluster:
        """Tarnawski et al.'s deployment: ``k`` accelerators of ``memory`` bytes and ``l``
        CPU cores, every transfer through host RAM (Sec. 3).

        Accelerator<->CPU transfers take one hop (``cost_factor`` 1), accelerator to
        accelerator two (out to RAM, then in), CPU to CPU none (shared RAM).
        """
        check_device_count(k + l, f"Tarnawski cluster of {k} accelerators and {l} CPUs")
        devs = [Device(f"{acc_kind}{i}", acc_kind, memory) for i in range(k)]
        devs += [Device(f"cpu{i}", "cpu") for i in range(l)]
        d = k + l
        is_acc = np.array([i < k for i in range(d)])
        hops = is_acc[:, None].astype(float) + is_acc[None, :].astype(float)
        return cls(tuple(devs), host_beta0 * hops, host_beta1 * hops, hops,
                   name=f"tarnawski-{k}acc-{l}cpu",
                   meta={"model": "tarnawski", "device_limit": {acc_kind: k, "cpu": l}})


@dataclass(frozen=True)
class LinkFit:
    """Least-squares fit of ``seconds = beta0 + beta1 * bytes`` with its R²."""

    beta0: float
    beta1: float
    r2: float
    samples: int


def fit_link(nbytes: Sequence[float], seconds: Sequence[float], *, relative: bool = False) -> LinkFit:
    """Fit the linear transfer model to measured (bytes, time) samples.

    ``relative=True`` weights each sample by ``1 / seconds`` (least squares on relative
    errors), so microsecond-scale small transfers count as much as large ones when the
    sizes span orders of magnitude.

    >>> f = fit_link([0, 1e6, 2e6], [1.0, 2.0, 3.0])
    >>> round(f.beta0, 6), round(f.beta1 * 1e6, 6), round(f.r2, 6)
    (1.0, 1.0, 1.0)
    """
    x = np.asarray(nbytes, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    if x.shape != y.shape or x.size < 2:
        raise InputError("fit_link needs at least two (bytes, time) samples of equal length")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise InputError("fit_link: samples must be finite numbers")
    a = np.column_stack([np.ones_like(x), x])
    w = 1.0 / np.maximum(np.abs(y), np.finfo(float).tiny) if relative else np.ones_like(y)
    (b0, b1), *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    resid = y - (b0 + b1 * x)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid ** 2)) / ss_tot if ss_tot > 0 else 1.0
    return LinkFit(float(b0), float(b1), r2, int(x.size))
