"""The child process of :mod:`dnnplace.heuristics.aot`'s build: ``numba.pycc`` compiles
every kernel of :data:`~dnnplace.heuristics.aot.SIGNATURES` for its one signature into one
extension module (the kernels they call compiled into it). Run as ``python -c "from
dnnplace.heuristics.aot_build import build_here; build_here(OUT)"`` with ``DNNPLACE_AOT=0``;
its source is part of the extension's name (``aot._key``)."""

from __future__ import annotations

import os
import sys

import numpy as np

from dnnplace.heuristics import aot

__all__ = ["build_here"]


def _numba_type(dt: np.dtype, ndim: int):
    from numba import from_dtype, types

    return types.Array(from_dtype(dt), ndim, "C") if ndim else from_dtype(dt)


def build_here(out: str) -> None:
    """In the child: compile the kernels of :data:`SIGNATURES` with ``numba.pycc`` into ``out``."""
    import logging

    logging.disable(logging.WARNING)  # distutils' progress lines
    from numba.pycc import CC

    cc = CC(aot._NAME)
    cc.output_dir, cc.output_file = os.path.dirname(out), os.path.basename(out)
    kernels = []
    for name in aot.SIGNATURES:
        k = aot.kernel_named(name)
        if k is not None and len(k.aot_signature) == k.py_func.__code__.co_argcount:
            kernels.append(k)
        else:  # its calls take the JIT path; tests/test_aot.py says so
            print(f"AOT: {name} is missing or its signature has the wrong number of arguments", file=sys.stderr)
    kernel_type = type(kernels[0])
    aot.numba_for(kernel_type)  # kernels calling kernels
    for k in kernels:
        cc.export(aot._symbol(k), tuple(_numba_type(dt, nd) for dt, nd in k.aot_signature))(k.py_func)
    outside = sorted({c.__module__ for k in kernels for c in _called(k, kernel_type)} - set(aot._MODULES))
    if outside:
        raise RuntimeError(f"AOT kernels call kernels of modules not in SIGNATURES' key: {outside}")
    cc.compile()


def _called(kernel, kernel_type) -> list:
    """The kernels ``kernel`` calls, transitively."""
    seen, todo, out = {id(kernel)}, [kernel], []
    while todo:
        fn = todo.pop().py_func
        for v in (fn.__globals__.get(n) for n in fn.__code__.co_names):
            if isinstance(v, kernel_type) and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
                todo.append(v)
    return out
