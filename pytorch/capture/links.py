"""Measured link parameters: time transfers over sizes, fit ``beta0 + beta1 * bytes``.

Pesto Sec. 3.1, FastT Sec. 4 and Celeritas Sec. 4 model a transfer of ``b`` bytes as
``beta0 + beta1 * b``, fitted by least squares from measured transfers. This module times

* ``d2d``: device-to-device copies between two GPUs (``tensor.to``), timed with CUDA
  events;
* ``h2d`` / ``d2h``: pinned host memory to a GPU and back (on a CPU-only machine: a
  host-to-host ``copy_`` between two buffers, the same code path with ``perf_counter``);
* ``p2p``: a ``torch.distributed`` send/recv between two processes (NCCL on GPUs, gloo on
  the CPU), the time of a round trip halved; :func:`time_p2p_pairs` times every pair of
  ``N`` processes (one thread each for the executor's CPU devices) and
  :func:`cpu_cluster_from_p2p` writes them as a ``local-cpu-N`` cluster;

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

__all__ = ["LinkProfile", "fit_profile", "time_copies", "time_p2p", "time_p2p_pairs", "cluster_from_fits",
           "cpu_cluster_from_p2p", "DEFAULT_SIZES"]

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


def _p2p_worker(rank: int, world: int, port: int, backend: str, sizes: list, repeats: int, warmup: int,
                threads: int | None, out) -> None:
    import torch
    import torch.distributed as dist
    if threads:
        torch.set_num_threads(threads)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    staged = backend == "gloo+host"
    dist.init_process_group("gloo" if staged else backend, rank=rank, world_size=world)
    dev = f"cuda:{rank}" if backend == "nccl" else ("cuda:0" if staged and rank == 0 else "cpu")
    sync = (lambda: torch.cuda.synchronize(dev)) if dev != "cpu" else (lambda: None)

    def send(buf, peer):
        dist.send(buf.to("cpu") if staged and buf.is_cuda else buf, peer)

    def recv(buf, peer):
        if staged and buf.is_cuda:   # into host memory, then onto the GPU
            host = torch.empty(buf.shape, dtype=buf.dtype)
            dist.recv(host, peer)
            buf.copy_(host)
        else:
            dist.recv(buf, peer)

    for a in range(world):
        for b in range(a + 1, world):
            dist.barrier()  # one pair at a time: the others wait here
            if rank not in (a, b):
                continue
            peer = b if rank == a else a
            res = []
            for n in sizes:
                buf = torch.empty(int(n), dtype=torch.uint8, device=dev)

                def ping(buf=buf, peer=peer, first=rank == a):
                    if first:
                        send(buf, peer)
                        recv(buf, peer)
                    else:
                        recv(buf, peer)
                        send(buf, peer)

                res.append(_median_time(ping, sync, repeats, warmup) / 2)
            if rank == a:
                out.put(((a, b), res))
    dist.barrier()
    dist.destroy_process_group()


def time_p2p_pairs(world: int = 2, sizes: Sequence[int] = DEFAULT_SIZES, *, backend: str | None = None,
                   repeats: int = 10, warmup: int = 3, threads: int | None = None,
                   timeout: float = 600.0) -> dict[tuple[int, int], LinkProfile]:
    """Time ``torch.distributed`` send/recv between every pair of ``world`` local processes.

    One pair at a time (the others wait at a barrier), each size's time the median of
    ``repeats`` round trips after ``warmup``, halved. ``threads`` sets
    ``torch.set_num_threads`` in every process (1: as the executor runs its CPU devices).
    ``backend="gloo+host"``: process 0 holds its buffer on ``cuda:0`` and sends through host
    memory (a copy to the host, a gloo send; a gloo receive, a copy to the GPU), the path the
    executor takes between a GPU device and a CPU one; the time is the mean of the two
    directions. Returns ``{(a, b): profile}`` for ``a < b``; the kind is ``p2p(<backend>)``.
    """
    import torch
    import torch.multiprocessing as mp
    if world < 2:
        raise InputError(f"send/recv needs at least two processes, got {world}")
    if backend == "gloo+host" and not torch.cuda.is_available():
        raise InputError("send/recv through host memory (gloo+host) needs a CUDA GPU; this host has none")
    backend = backend or ("nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_p2p_worker,
                         args=(r, world, port, backend, list(sizes), repeats, warmup, threads, q))
             for r in range(world)]
    for p in procs:
        p.start()
    import queue
    fits = {}
    deadline = time.monotonic() + timeout
    try:
        while len(fits) < world * (world - 1) // 2:
            try:
                pair, seconds = q.get(timeout=1.0)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:
                    raise InputError(f"send/recv timing over {backend} failed: "
                                     + (f"process {dead[0]} exited with {procs[dead[0]].exitcode}" if dead
                                        else f"no result within {timeout:.0f} s")) from None
                continue
            fits[pair] = fit_profile(f"p2p({backend})", sizes, seconds)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    return dict(sorted(fits.items()))


def time_p2p(sizes: Sequence[int] = DEFAULT_SIZES, *, backend: str | None = None, repeats: int = 10,
             warmup: int = 3, threads: int | None = None) -> LinkProfile:
    """Time a ``torch.distributed`` send/recv between two local processes (half a round trip)."""
    return time_p2p_pairs(2, sizes, backend=backend, repeats=repeats, warmup=warmup, threads=threads)[(0, 1)]


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


def cpu_cluster_from_p2p(n: int, fits: dict[tuple[int, int], LinkProfile], *, memory: float | None = None,
                         unit: str = "ms", threads: int | None = 1) -> Cluster:
    """A ``local-cpu-<n>`` cluster whose pair ``(a, b)`` carries ``fits[(a, b)]``
    (:func:`time_p2p_pairs`; pairs not timed keep the preset's measured defaults).

    >>> p = fit_profile("p2p(gloo)", [1e3, 1e6], [1e-4 + 1e-9 * 1e3, 1e-4 + 1e-9 * 1e6])
    >>> c = cpu_cluster_from_p2p(2, {(0, 1): p}, memory=1e9)
    >>> c.name, c.names, round(float(c.beta0[1, 0]), 6), round(float(c.beta1[0, 1]) * 1e6, 6)
    ('local-cpu-2', ('cpu0', 'cpu1'), 0.1, 1.0)
    """
    from dnnplace.graphs.presets import local_cpu_cluster
    links = {pair: (max(p.fit.beta0, 0.0), 1.0 / p.fit.beta1 if p.fit.beta1 > 0 else float("inf"))
             for pair, p in fits.items()}
    return local_cpu_cluster(n, links=links, memory=memory, unit=unit,
                             meta={"threads": threads,
                                   "fits": {f"cpu{a}-cpu{b}": p.row() for (a, b), p in fits.items()}})
