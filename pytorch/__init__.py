"""The PyTorch layer: graphs captured from ``nn.Module`` s (:mod:`dnnplace.pytorch.capture`,
with the model zoo) and plans run as one process per device (:mod:`dnnplace.pytorch.execution`).

It stands on the domain model (:mod:`dnnplace.graphs`), the evaluator and simulator
(:mod:`dnnplace.evaluation`) and the runtime (:mod:`dnnplace.runtime`); nothing below it
imports torch. docs/architecture.md draws the layers.
"""
