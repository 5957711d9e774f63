"""The model graphs of PARDNN's experiments (:mod:`dnnplace.experiments.pardnn`): the models of
``pardnn-models.toml`` (:class:`Model`), each one's graph (:func:`model_graph`: a zoo block captured
and tiled, else a generated graph) and its graphs at two batches for a profiled
:class:`~dnnplace.graphs.batch_model.BatchModel` (:func:`batch_profiles`); both cached per process."""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnplace.experiments.config import Reproduction, load
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph

__all__ = ["Model", "model_graph", "batch_profiles"]


@dataclass(frozen=True)
class Model:
    """One model of ``pardnn-models.toml``."""

    name: str
    nodes: int
    batch: int
    paper: dict
    block: dict = field(default_factory=dict)
    generator: dict = field(default_factory=dict)


def _models(cfg: Reproduction | str) -> list[Model]:
    """The models of a loaded config (or of the bundled config of that name)."""
    if isinstance(cfg, str):
        cfg = load(cfg, module="pardnn")
    return [Model(m["name"], m["nodes"], m["batch"], dict(m["paper"]), dict(m["block"]), dict(m["generator"]))
            for m in cfg.models]


_CACHE: dict[str, tuple[OpGraph, str]] = {}
_PROFILES: dict[str, dict[int, OpGraph] | None] = {}


def batch_profiles(m: Model) -> dict[int, OpGraph] | None:
    """The model's graph at two batches, ``m.batch`` and ``m.batch // 2``, for a profiled
    :class:`~dnnplace.graphs.batch_model.BatchModel` (the block captured at both and tiled
    alike), or ``None`` where the graph is generated or torch is missing (the linear rule).

    Captured sizes are affine in the batch, so two profiles give every batch exactly; the
    linear rule scales every activation-side output with the batch, also the many that do not
    grow with it (PARDNN Sec. 5.4.1: a matrix product with the batch as its inner dimension,
    e.g. an unrolled LSTM's per-step weight-gradient partials). Word-RNN captured at 64 and
    128: 2,200 of 10,346 outputs do not scale, 73.9 of 87.4 GB at batch 128; at batch 16 the
    linear rule gives 16.1 GB of static memory, the profiles 79.6 GB."""
    if m.name in _PROFILES:
        return _PROFILES[m.name]
    g, _ = model_graph(m)
    out = None
    if m.block and "tiled" in g.meta and m.batch >= 2:
        from dnnplace.graphs.batch_model import check_profiles
        from dnnplace.pytorch.capture import zoo
        from dnnplace.pytorch.capture.tiling import capture_block, tile

        args = dict(m.block)
        name = args.pop("model")
        module, inputs = zoo.block(name, **{**args, "batch": m.batch // 2})
        half = tile(capture_block(module, inputs, name=name), g.meta["tiled"]["repeats"],
                    family=zoo.entry(name).family, name=m.name)
        out = check_profiles({m.batch // 2: half, m.batch: g})
    _PROFILES[m.name] = out
    return out


def model_graph(m: Model) -> tuple[OpGraph, str]:
    """The model's graph and its source: the zoo block captured and tiled to about
    ``m.nodes`` operators, else (no block, or no torch) the generator, else a
    random DAG of ``m.nodes`` nodes; cached for the process."""
    if m.name in _CACHE:
        return _CACHE[m.name]
    out = None
    if m.block:
        try:
            from dnnplace.pytorch.capture import zoo
            from dnnplace.pytorch.capture.ops import require_torch
            from dnnplace.pytorch.capture.tiling import capture_block, tile

            require_torch()
        except (ImportError, InputError):
            pass
        else:
            args = dict(m.block)
            name = args.pop("model")
            module, inputs = zoo.block(name, **{"batch": m.batch, **args})  # the batch m.batch says it is at
            b = capture_block(module, inputs, name=name)
            reps = max(1, round(m.nodes / len(b.body)))
            g = tile(b, reps, family=zoo.entry(name).family, name=m.name)
            opts = ", ".join(f"{k}={v}" for k, v in args.items())
            out = (g, f"captured {name} block{f' ({opts})' if opts else ''}, roofline V100, tiled x{reps}")
    if out is None:
        spec = m.generator or {"family": "random-dag", "n": m.nodes, "seed": 1, "training": True, "kinds": ["gpu"]}
        g = generate(**spec)
        out = (g.with_(name=m.name), "generated " + ", ".join(f"{k}={v}" for k, v in spec.items()))
    _CACHE[m.name] = out
    return out
