"""dnnplace: optimal device placement and scheduling of DNN operator graphs.

The user-facing layer: the method registry (:mod:`dnnplace.registry`), result records
(:mod:`dnnplace.results`), the experiment runner (:mod:`dnnplace.runner`) and the
``dnnplace`` command line (:mod:`dnnplace.cli`). The problem domain lives in
:mod:`graphs`, optimisation models in :mod:`formulations`, heuristics in
:mod:`heuristics`.
"""

__version__ = "0.1.0"
