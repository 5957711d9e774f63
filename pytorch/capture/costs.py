"""Node costs of captured graphs: one :class:`CostModel` interface, three implementations.

* :class:`Roofline` ``(spec)``: per ATen node ``t = launch + max(F / P, B / W)`` with
  ``F`` its FLOPs (PyTorch's own formulas, ``torch.utils.flop_counter``, so the total
  equals ``FlopCounterMode``), ``B`` the bytes it moves (distinct input tensors plus its
  outputs, each by storage size), ``P`` the data-sheet dense peak for the output dtype
  and ``W`` the memory bandwidth of :data:`SPECS`, and ``launch`` a per-kernel floor
  (5 us, the ``t0`` of docs/heuristics.md 0's ``BatchModel``). Views cost nothing.
* :class:`Measured` ``(device)``: every node timed through an ``fx.Interpreter`` on real
  tensors of the traced shapes (random values): ``perf_counter`` around each node on the
  CPU, a pair of CUDA events per node on a GPU; median of ``repeats`` runs after
  ``warmup`` runs. On the CPU the timing runs under ``torch.set_num_threads(threads)``
  (default 1, as the executor runs each CPU device; restored afterwards) and
  ``cost_model("measured:cpu")`` gives the graph the compute kind ``cpu``. Profiles are
  cached as JSON (:func:`cache_path`), keyed by the model's content (its origin and source
  text, nodes, operators, input and parameter shapes and dtypes, loss, optimizer), the
  device (a CPU's model name and thread count) and the torch version, so a GPU profile is
  reused on CPU-only machines and in CI; ``fresh`` re-measures and overwrites the entry.
* :class:`Calibrated` ``(target)``: one measured run fits a per-op-type efficiency
  ``e_op = median(measured / roofline_local)``; the times are ``roofline_target * e_op``
  (op types never measured use the median over all nodes).

A merged node (views folded into their producer) costs the sum of its ATen nodes; an
optimizer ``apply`` node moves ``(3 + 2 s) * param_bytes`` (read parameter, gradient and
``s`` state tensors, write parameter and states). All times are in milliseconds; the
model's :meth:`CostModel.describe` lands in ``graph.meta["cost"]``.

The FLOPs and bytes the models start from are :mod:`dnnplace.pytorch.capture.work`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.op_table import Captured
from dnnplace.pytorch.capture.ops import (
    apply_update,
    cpu_only_op,
    is_view,
    require_torch,
    steady_malloc,
)
from dnnplace.pytorch.capture.work import Work, node_work, per_node_times

__all__ = ["cost_models", "DeviceSpec", "SPECS", "CostModel", "Roofline", "Measured", "Calibrated", "cost_model",
           "cache_path", "cpu_model", "model_origin"]


@dataclass(frozen=True)
class DeviceSpec:
    """Data-sheet figures of one device: dense peak FLOP/s per dtype, memory bandwidth
    (bytes/s) and a per-kernel launch floor (s)."""

    name: str
    peak: dict
    bandwidth: float
    launch: float = 5e-6

    def peak_for(self, dtype: str) -> float:
        return self.peak.get(dtype, self.peak["float32"])


SPECS = {
    # NVIDIA V100 SXM2 data sheet: 15.7 TFLOPS FP32, 125 TFLOPS tensor FP16, 900 GB/s HBM2
    "v100": DeviceSpec("v100", {"float32": 15.7e12, "float16": 125e12, "bfloat16": 15.7e12}, 900e9),
    # A100 SXM4 80GB: 19.5 TFLOPS FP32, 312 TFLOPS FP16/BF16 tensor (dense), 2039 GB/s
    "a100": DeviceSpec("a100", {"float32": 19.5e12, "float16": 312e12, "bfloat16": 312e12}, 2039e9),
    # H100 SXM5: 67 TFLOPS FP32, 989 TFLOPS FP16/BF16 tensor (dense), 3.35 TB/s
    "h100": DeviceSpec("h100", {"float32": 67e12, "float16": 989e12, "bfloat16": 989e12}, 3350e9),
    # nominal host CPU (only the local reference of a calibration run): 1 TFLOPS, 100 GB/s
    "cpu": DeviceSpec("cpu", {"float32": 1e12}, 100e9, launch=2e-6),
}
"""Device figures by name (lower case)."""


# ---------------------------------------------------------------------------- models
class CostModel:
    """Interface: ``times(cap, model=, inputs=, key=) -> (n,)`` ms per merged node."""

    kind = "gpu"

    def times(self, cap: Captured, *, model: Any = None, inputs: tuple = (), key: str = "model") -> np.ndarray:
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError


@dataclass
class Roofline(CostModel):
    """``launch + max(FLOPs / peak, bytes / bandwidth)`` per ATen node on ``spec``."""

    spec: DeviceSpec
    kind: str = "gpu"

    def fx_times(self, work: Work) -> np.ndarray:
        peak = np.array([self.spec.peak_for(d) for d in work.dtype])
        return 1e3 * (self.spec.launch + np.maximum(work.flops / peak, work.bytes / self.spec.bandwidth))

    def apply_times(self, work: Work) -> dict[int, float]:
        return {a: 1e3 * (self.spec.launch + b / self.spec.bandwidth) for a, b in work.apply_bytes.items()}

    def times(self, cap, *, model=None, inputs=(), key="model"):
        work = node_work(cap)
        cap.meta["flops"] = float(work.flops.sum())
        return per_node_times(cap, work, self.fx_times(work), self.apply_times(work))

    def describe(self):
        s = self.spec
        return {"model": f"roofline:{s.name}", "peak_flops": s.peak, "bandwidth": s.bandwidth,
                "launch_s": s.launch}


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``, else ``platform.processor()``,
    else the machine type): part of a CPU profile's cache key."""
    import platform
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def model_origin(spec: str, params: dict | None = None, loss: str | None = None, **sizes: Any) -> dict:
    """Where a captured model came from, for the profile cache key: the model spec, the
    factory's or zoo builder's arguments (``params`` and ``sizes`` such as batch and seq), the
    ``--loss`` asked for and a hash of the source text that builds it (the ``FILE.py`` or
    ``package.module`` file of a user's factory; the zoo builder's module of a zoo name)."""
    import importlib.util
    where = ""
    where_text, sep, _ = spec.rpartition(":")
    if sep and where_text.endswith(".py"):
        where = where_text
    elif sep:
        try:
            found = importlib.util.find_spec(where_text)
        except (ImportError, ValueError):
            found = None
        where = (found.origin or "") if found is not None else ""
    else:
        from dnnplace.pytorch.capture.zoo import ZOO

        entry = ZOO.get(spec)
        if entry is not None:
            zoo_dir = Path(importlib.util.find_spec("dnnplace.pytorch.capture.zoo").origin).parent
            where = str(zoo_dir / (entry.build.split(":")[0] + ".py"))
    try:
        source = hashlib.sha1(Path(where).read_bytes()).hexdigest() if where else None
    except OSError:
        source = None
    return {"spec": spec, "params": dict(params or {}), "loss": loss,
            "sizes": {k: v for k, v in sizes.items() if v is not None}, "source": source}


def cache_path(key: str, cap: Captured, device: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Profile cache file: ``<dir>/<key>-<hash>.json``. The hash covers what the times depend
    on (docs/execution.md, "Profile cache"): the model's origin (:func:`model_origin`, in
    ``cap.meta["origin"]``: spec, arguments, loss asked for, source text), the traced nodes
    and their operators, the shapes and dtypes of every input and parameter, the loss, mode
    and optimizer, the device (a CPU's model name and thread count) and the torch version.
    ``dir`` defaults to ``$DNNPLACE_PROFILE_CACHE`` or ``~/.cache/dnnplace/profiles``."""
    torch = require_torch()
    nodes = list(cap.gm.graph.nodes)

    def sig(val: Any) -> Any:
        return [list(val.shape), str(val.dtype)] if isinstance(val, torch.Tensor) else None

    ident = {"inputs": cap.meta.get("inputs"), "device": device, "torch": torch.__version__,
             "training": cap.meta.get("training"), "optimizer": cap.meta.get("optimizer"),
             "loss": cap.meta.get("loss_fn"), "origin": cap.meta.get("origin"),
             "nodes": [nd.name for nd in nodes], "ops": [str(nd.target) for nd in nodes if nd.op == "call_function"],
             "placeholders": [sig(nd.meta.get("val")) for nd in nodes if nd.op == "placeholder"],
             "apply": "apply_update", "malloc": "steady"}
    digest = hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    root = Path(cache_dir or os.environ.get("DNNPLACE_PROFILE_CACHE") or Path.home() / ".cache/dnnplace/profiles")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return root / f"{safe}-{digest}.json"


def _real(t: Any, device: str, gen: Any) -> Any:
    """A real tensor of ``t``'s shape and dtype on ``device`` (random floats, zero ints)."""
    torch = require_torch()
    if not isinstance(t, torch.Tensor):
        return t
    if t.is_floating_point():
        return (0.02 * torch.randn(tuple(t.shape), generator=gen)).to(dtype=t.dtype, device=device)
    return torch.zeros(tuple(t.shape), dtype=t.dtype, device=device)


@dataclass
class Measured(CostModel):
    """Each ATen node timed on ``device`` (``"cpu"`` or ``"cuda"``); see the module docstring.

    ``threads`` (CPU only): ``torch.set_num_threads`` while timing, restored afterwards
    (``None``: leave torch's setting); recorded in ``describe()`` and the cache key.
    ``fresh``: measure even when the cache holds the profile, and overwrite it. ``profiles``
    lists every profile taken (``{"cache": path, "hit": bool}``), for the ``capture`` command's
    line saying where the costs came from.
    """

    device: str = "cpu"
    warmup: int = 1
    repeats: int = 3
    cache_dir: str | None = None
    use_cache: bool = True
    fresh: bool = False
    kind: str = "gpu"
    threads: int | None = 1
    last_profile: dict = field(default_factory=dict, repr=False)
    profiles: list = field(default_factory=list, repr=False)

    def _threads(self) -> int | None:
        """The thread count the CPU timing runs under (``None`` on a GPU)."""
        if self.device.startswith("cuda"):
            return None
        return self.threads if self.threads else require_torch().get_num_threads()

    def _cache_device(self) -> str:
        t = self._threads()
        return self._device_name() + (f"/threads={t}" if t else "")

    def _device_name(self) -> str:
        torch = require_torch()
        if self.device.startswith("cuda"):
            return torch.cuda.get_device_name(torch.device(self.device))
        return f"cpu:{cpu_model()}"

    def profile(self, cap: Captured, key: str = "model") -> dict:
        """``{fx node name: median ms}`` plus ``apply:<param>`` entries; from the cache when present."""
        path = cache_path(key, cap, self._cache_device(), self.cache_dir)
        if self.use_cache and not self.fresh and path.exists():
            doc = json.loads(path.read_text())
            self.last_profile = {"cache": str(path), "hit": True}
            self.profiles.append(self.last_profile)
            return doc["ms"]
        torch = require_torch()
        before = torch.get_num_threads()
        if self._threads():
            torch.set_num_threads(self._threads())
        try:
            ms = self._run(cap)
        finally:
            torch.set_num_threads(before)
        if self.use_cache:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"key": key, "device": self._cache_device(), "ms": ms}))
        self.last_profile = {"cache": str(path) if self.use_cache else None, "hit": False}
        self.profiles.append(self.last_profile)
        return ms

    def _run(self, cap: Captured) -> dict:
        torch = require_torch()
        dev = torch.device(self.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise InputError("measured costs on 'cuda' need a GPU; this machine has none (use --cost measured "
                             "on the CPU, or a cached GPU profile)")
        bad = next((nd for nd in cap.gm.graph.nodes if dev.type == "cuda" and cpu_only_op(nd)), None)
        if bad is not None:
            raise InputError(f"measured costs on {self.device}: fx node {bad.name!r} runs {cpu_only_op(bad)}, a "
                             "CPU-only operator of the trace, which has no GPU kernel")
        gen = torch.Generator().manual_seed(0)
        steady_malloc()   # as the executor's workers run: no fresh pages per repeat
        args = [_real(nd.meta.get("val"), self.device, gen) for nd in cap.gm.graph.nodes if nd.op == "placeholder"]
        cuda = dev.type == "cuda"
        samples: dict[str, list[float]] = {}

        class Timer(torch.fx.Interpreter):
            def call_function(self, target, args, kwargs):
                if cuda and "device" in kwargs:   # factory operators were traced on the CPU
                    kwargs = {**kwargs, "device": dev}
                return super().call_function(target, args, kwargs)

            def fetch_attr(self, target):   # traced constants, on the timed device
                val = super().fetch_attr(target)
                return val.to(dev) if cuda and isinstance(val, torch.Tensor) else val

            def run_node(self, n):
                if n.op != "call_function" or is_view(n):
                    return super().run_node(n)
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    out = super().run_node(n)
                    end.record()
                    samples.setdefault(n.name, []).append((start, end))
                else:
                    t0 = time.perf_counter()
                    out = super().run_node(n)
                    samples.setdefault(n.name, []).append(1e3 * (time.perf_counter() - t0))
                return out

        with torch.no_grad():
            for r in range(self.warmup + self.repeats):
                if r == self.warmup:
                    samples.clear()
                Timer(cap.gm).run(*args)
                if cuda:
                    torch.cuda.synchronize(dev)
            ms = {k: float(np.median([s.elapsed_time(e) for s, e in v] if cuda else v)) for k, v in samples.items()}
            # optimizer updates: the executor's own update (pytorch/capture/ops.py: apply_update)
            ph = [nd for nd in cap.gm.graph.nodes if nd.op == "placeholder"]
            kind = cap.meta.get("optimizer") or "sgd"
            for p, a in cap.apply_of.items():
                idx = next(j for j, nd in enumerate(ph) if cap.rep.get(nd.name) == p)
                w = args[idx]
                if not w.is_floating_point():
                    ms[f"apply:{cap.ids[a]}"] = 0.0
                    continue
                g = torch.empty_like(w).normal_()
                reps, state = [], {}
                for _ in range(self.warmup + self.repeats):
                    if cuda:
                        torch.cuda.synchronize(dev)
                    t0 = time.perf_counter()
                    apply_update(kind, w, g, state, 1e-3)
                    if cuda:
                        torch.cuda.synchronize(dev)
                    reps.append(1e3 * (time.perf_counter() - t0))
                ms[f"apply:{cap.ids[a]}"] = float(np.median(reps[self.warmup:]))
        return ms

    def times(self, cap, *, model=None, inputs=(), key="model"):
        work = node_work(cap)
        cap.meta["flops"] = float(work.flops.sum())
        ms = self.profile(cap, key)
        fx = np.array([ms.get(nm, 0.0) for nm in work.names])
        apply = {a: ms.get(f"apply:{cap.ids[a]}", 0.0) for a in cap.apply_of.values()}
        return per_node_times(cap, work, fx, apply)

    def describe(self):
        return {"model": "measured", "device": self.device, "device_name": self._device_name(),
                "threads": self._threads(), "warmup": self.warmup, "repeats": self.repeats, **self.last_profile}


@dataclass
class Calibrated(CostModel):
    """Roofline on ``target`` scaled by per-op-type efficiencies of one measured run."""

    target: DeviceSpec
    measured: Measured = field(default_factory=Measured)
    local: DeviceSpec | None = None
    kind: str = "gpu"
    efficiency: dict = field(default_factory=dict)

    def _local(self) -> DeviceSpec:
        if self.local is not None:
            return self.local
        if self.measured.device.startswith("cuda"):
            name = self.measured._device_name().lower()
            return next((s for k, s in SPECS.items() if k in name), SPECS["a100"])
        return SPECS["cpu"]

    def times(self, cap, *, model=None, inputs=(), key="model"):
        work = node_work(cap)
        cap.meta["flops"] = float(work.flops.sum())
        ms = self.measured.profile(cap, key)
        local, target = Roofline(self._local()), Roofline(self.target)
        ratio = np.array([ms.get(nm, np.nan) for nm in work.names]) / local.fx_times(work)
        ok = np.isfinite(ratio)
        overall = float(np.median(ratio[ok])) if ok.any() else 1.0
        eff: dict[str, float] = {}
        ops = np.array(work.op)
        for op in sorted(set(work.op)):
            sel = ok & (ops == op)
            eff[op] = float(np.median(ratio[sel])) if sel.any() else overall
        self.efficiency = {"overall": overall, **eff}
        fx = target.fx_times(work) * np.array([eff[o] for o in work.op]) if len(work.op) else np.zeros(0)
        apply = {a: t * overall for a, t in target.apply_times(work).items()}
        return per_node_times(cap, work, fx, apply)

    def describe(self):
        return {"model": f"calibrated:{self.target.name}", "local_spec": self._local().name,
                "measured": self.measured.describe(), "efficiency": self.efficiency}


def cost_models(spec: Any) -> list[CostModel]:
    """The cost models of a spec of several joined by ``+`` (one compute column each, kinds
    distinct), or the one of a single spec.

    >>> [m.kind for m in cost_models("roofline:h100+measured:cpu")]
    ['gpu', 'cpu']
    >>> cost_models("roofline:v100+roofline:a100")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: cost 'roofline:v100+roofline:a100': two columns of kind 'gpu'; ...
    """
    if isinstance(spec, CostModel):
        return [spec]
    out = list(spec) if isinstance(spec, (list, tuple)) else [cost_model(part) for part in str(spec).split("+")]
    kinds = [m.kind for m in out]
    dup = next((k for i, k in enumerate(kinds) if k in kinds[:i]), None)
    if dup is not None:
        raise InputError(f"cost {spec!r}: two columns of kind {dup!r}; join models of different kinds "
                         "(e.g. measured:cuda+measured:cpu)")
    return out


def cost_model(spec: Any, *, kind: str | None = None) -> CostModel:
    """A cost model from its spec: ``roofline:<gpu>``, ``measured[:<device>]``,
    ``calibrated:<gpu>``; a :class:`CostModel` passes through.

    ``kind`` names the graph's compute column: by default ``cpu`` for ``measured:cpu``
    (one thread per operator, as the executor's CPU devices run), ``gpu`` otherwise.

    >>> cost_model("roofline:a100").describe()["model"]
    'roofline:a100'
    >>> m = cost_model("measured:cpu")
    >>> m.kind, m.threads, cost_model("measured:cuda").kind
    ('cpu', 1, 'gpu')
    >>> cost_model("roofline:tpu")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: unknown device 'tpu' in cost 'roofline:tpu'; known: v100, a100, h100, cpu
    """
    if isinstance(spec, CostModel):
        return spec
    text = str(spec).strip().lower()
    if "+" in text:
        raise InputError(f"cost {spec!r}: several cost models (one column each) are for a direct capture, "
                         "not here (leave out --tiled)")
    head, _, arg = text.partition(":")

    def device(name: str) -> DeviceSpec:
        if name not in SPECS:
            raise InputError(f"unknown device {name!r} in cost {spec!r}; known: {', '.join(SPECS)}")
        return SPECS[name]

    if head == "roofline":
        return Roofline(device(arg or "v100"), kind=kind or "gpu")
    if head == "measured":
        dev = arg or "cpu"
        return Measured(device=dev, kind=kind or ("cpu" if dev == "cpu" else "gpu"))
    if head == "calibrated":
        return Calibrated(device(arg or "v100"), kind=kind or "gpu")
    raise InputError(f"unknown cost model {spec!r}; use roofline:<v100|a100|h100>, measured[:cpu|cuda] "
                     "or calibrated:<v100|a100|h100>")
