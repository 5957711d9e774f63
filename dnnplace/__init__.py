"""dnnplace: optimal device placement and scheduling of DNN operator graphs.

The Python API (docs/guide.md, "The Python API"): ``from dnnplace import load_graph,
load_cluster, capture, solve, evaluate, simulate, execute, list_methods`` (the functions of
:mod:`dnnplace.api`, :mod:`dnnplace.api_scoring` and :mod:`dnnplace.api_torch`,
imported on first use so that ``import dnnplace`` stays cheap) and the
types they take and return, ``Instance``, ``Cluster``, ``Result`` and ``InputError``.

The user-facing layer: the method registry (:mod:`dnnplace.registry`), result records
(:mod:`dnnplace.results`), the experiment runner (:mod:`dnnplace.runner`) and the
``dnnplace`` command line (:mod:`dnnplace.cli`). The problem domain lives in
:mod:`graphs`, optimisation models in :mod:`formulations`, heuristics in
:mod:`heuristics`.
"""

__version__ = "0.1.0"

_API = {"load_graph": "dnnplace.api", "load_cluster": "dnnplace.api", "capture": "dnnplace.api_torch",
        "solve": "dnnplace.api", "evaluate": "dnnplace.api_scoring", "simulate": "dnnplace.api_scoring",
        "execute": "dnnplace.api_torch", "list_methods": "dnnplace.api", "Instance": "dnnplace.graphs.instance",
        "Cluster": "dnnplace.graphs.cluster",
        "Result": "dnnplace.results", "InputError": "dnnplace.graphs.errors"}
"""Each public name and the module it comes from."""

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """The API's names, imported on first use."""
    if name not in _API:
        raise AttributeError(f"module 'dnnplace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
