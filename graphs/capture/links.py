"""Measured link parameters: time transfers over sizes, fit ``beta0 + beta1 * bytes``.

Pesto Sec. 3.1, FastT Sec. 4 and Celeritas Sec. 4 model a transfer of ``b`` bytes as
``beta0 + beta1 * b``, fitted by least squares from measured transfers. This module times

* ``d2d``: device-to-device copies between two GPUs (``tensor.to``), timed with CUDA
  events;
* ``h2d`` / ``d2h``: pinned host memory to a GPU and back (on a CPU-only machine: a
  host-to-host ``copy_`` between two buffers, the same code path with ``perf_counter``);
* ``p2p``: a ``torch.distributed`` send/recv between two processes (NCCL on GPUs, gloo on
  the CPU), the time of a round trip halved;

over a geometric range of sizes (median of repeats after a warm-up), fits each kind by
weighted least squares (:func:`dnnplace.graphs.cluster.fit_link` with relative weights,
so small and large sizes count alike), reports the residuals, and writes a cluster file
whose links carry the fitted figures (:func:`cluster_from_fits`).
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster, Device, LinkFit, fit_link
from dnnplace.graphs.errors import InputError

__all__ = ["LinkProfile", "fit_profile", "time_copies", "time_p2p", "cluster_from_fits", "DEFAULT_SIZES"]

DEFAULT_SIZES = tuple(int(4 ** k) for k in range(5, 13))  # 1 KiB .. 16 MiB
"""Transfer sizes in bytes (powers of four)."""


@dataclass(frozen=True)
class LinkProfile:
    """Measured samples of one link kind and their fit (seconds, bytes)."""

    kind: str
    nbytes: tuple
    seconds: tuple
    fit: LinkFit

    @property
    def residuals(self) -> np.ndarray:
        """Relative residuals ``(measured - fitted) / measured`` per sample."""
        y = np.asarray(self.seconds)
        return (y - (self.fit.beta0 + self.fit.beta1 * np.asarray(self.nbytes))) / y

    def row(self) -> dict:
        """One table row: fitted latency (us), bandwidth (GB/s), worst relative residual."""
        bw = 1.0 / self.fit.beta1 / 1e9 if self.fit.beta1 > 0 else float("inf")
        return {"kind": self.kind, "beta0_us": self.fit.beta0 * 1e6, "bandwidth_GBps": bw,
                "r2": self.fit.r2, "max_rel_residual": float(np.max(np.abs(self.residuals))),
                "samples": self.fit.samples}


def fit_profile(kind: str, nbytes: Sequence[float], seconds: Sequence[float]) -> LinkProfile:
    """Fit one link kind by relative-weighted least squares.

    >>> p = fit_profile("x", [1e3, 1e6, 1e7], [2e-6 + 1e-10 * b for b in (1e3, 1e6, 1e7)])
    >>> round(p.fit.beta0 * 1e6, 6), round(1 / p.fit.beta1 / 1e9, 6)
    (2.0, 10.0)
    """
    return LinkProfile(kind, tuple(float(b) for b in nbytes), tuple(float(s) for s in seconds),
                       fit_link(nbytes, seconds, relative=True))


def _median_time(fn, sync, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def time_copies(kind: str, sizes: Sequence[int] = DEFAULT_SIZES, *, repeats: int = 10, warmup: int = 3,
                devices: tuple[str, str] | None = None) -> LinkProfile:
    """Time copies of ``kind`` (``d2d``, ``h2d``, ``d2h``) over ``sizes``; CUDA events on GPUs.

    Without a GPU, ``h2d``/``d2h`` time host-to-host copies (the CPU equivalent) and
    ``d2d`` needs two GPUs.
    """
    import torch
    cuda = torch.cuda.is_available()
    if kind == "d2d" and (not cuda or torch.cuda.device_count() < 2):
        raise InputError("d2d copies need two GPUs; this machine has "
                         f"{torch.cuda.device_count() if cuda else 0}")
    a, b = devices or {"d2d": ("cuda:0", "cuda:1"), "h2d": ("cpu", "cuda:0"), "d2h": ("cuda:0", "cpu")}[kind]
    if not cuda:
        a, b = "cpu", "cpu"
    seconds = []
    for n in sizes:
        src = torch.empty(int(n), dtype=torch.uint8, device=a, pin_memory=(a == "cpu" and cuda))
        dst = torch.empty(int(n), dtype=torch.uint8, device=b, pin_memory=(b == "cpu" and cuda))
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for r in range(warmup + repeats):
                start.record()
                dst.copy_(src, non_blocking=True)
                end.record()
                end.synchronize()
                if r >= warmup:
                    times.append(start.elapsed_time(end) / 1e3)
            seconds.append(statistics.median(times))
        else:
            seconds.append(_median_time(lambda s=src, d=dst: d.copy_(s), lambda: None, repeats, warmup))
    return fit_profile(kind if cuda else f"{kind}(host)", sizes, seconds)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _p2p_worker(rank: int, port: int, backend: str, sizes: list, repeats: int, warmup: int, out) -> None:
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=2)
    dev = f"cuda:{rank}" if backend == "nccl" else "cpu"
    sync = (lambda: torch.cuda.synchronize(dev)) if backend == "nccl" else (lambda: None)
    res = []
    for n in sizes:
        buf = torch.empty(int(n), dtype=torch.uint8, device=dev)

        def ping(buf=buf):
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)

        res.append(_median_time(ping, sync, repeats, warmup) / 2)
    if rank == 0:
        out.put(res)
    dist.destroy_process_group()


def time_p2p(sizes: Sequence[int] = DEFAULT_SIZES, *, backend: str | None = None, repeats: int = 10,
             warmup: int = 3) -> LinkProfile:
    """Time a ``torch.distributed`` send/recv between two local processes (half a round trip)."""
    import torch
    import torch.multiprocessing as mp
    backend = backend or ("nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else "gloo")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_p2p_worker, args=(r, port, backend, list(sizes), repeats, warmup, q))
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        seconds = q.get(timeout=600)
    finally:
        for p in procs:
            p.join(timeout=60)
    return fit_profile(f"p2p({backend})", sizes, seconds)


def cluster_from_fits(n_gpus: int, gpu: LinkProfile, host: LinkProfile | None = None, *,
                      gpu_memory: float = 16e9, unit: str = "ms", name: str = "profiled") -> Cluster:
    """A one-host cluster whose GPU-GPU links carry ``gpu``'s fit and GPU-CPU links
    ``host``'s (default: the same), in ``unit`` (ms by default).

    >>> p = fit_profile("d2d", [1e3, 1e6], [1e-5 + 1e-11 * 1e3, 1e-5 + 1e-11 * 1e6])
    >>> c = cluster_from_fits(2, p)
    >>> round(float(c.beta0[0, 1]), 6), round(float(c.beta1[0, 1]) * 1e9, 6)
    (0.01, 10.0)
    """
    scale = {"ms": 1e3, "s": 1.0, "us": 1e6}[unit]
    host = host or gpu
    devs = [Device(f"gpu{i}", "gpu", gpu_memory) for i in range(n_gpus)] + [Device("cpu0", "cpu")]
    d = len(devs)
    b0, b1 = np.zeros((d, d)), np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            if i != j:
                f = gpu.fit if devs[i].kind == devs[j].kind == "gpu" else host.fit
                b0[i, j], b1[i, j] = max(f.beta0, 0.0) * scale, max(f.beta1, 0.0) * scale
    return Cluster(tuple(devs), b0, b1, np.ones((d, d)), name=name,
                   meta={"unit": unit, "fits": {p.kind: p.row() for p in {gpu.kind: gpu, host.kind: host}.values()}})
