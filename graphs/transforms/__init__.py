"""Graph transforms: build another graph from the user's one and, where possible, map an
answer back.

:mod:`~dnnplace.graphs.transforms.replay` holds :class:`Transformed` (a transformed graph and
the labels that lift its answer), the named transforms of experiment configs and the steps a
record carries to rebuild the graph it answers for; the transforms themselves are
:mod:`~dnnplace.graphs.transforms.contract` (merge groups into nodes),
:mod:`~dnnplace.graphs.transforms.layers` (layer grouping, Tarnawski et al. Sec. 6),
:mod:`~dnnplace.graphs.transforms.colocate` (forward-backward colocation),
:mod:`~dnnplace.graphs.transforms.op_split` (FastT's operator splitting) and
:mod:`~dnnplace.graphs.transforms.data_parallel` (the data-parallel training graph).
"""
