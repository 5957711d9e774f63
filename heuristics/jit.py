"""The decorator of the project's compiled kernels: numba's ``njit`` with the machine code
cached on disk, made on first use, and for the kernels of the small-graph ``solve --method
dp`` path an ahead-of-time compiled version that loads without numba
(:mod:`dnnplace.heuristics.aot`).

``@cached_njit`` makes a :class:`Kernel`; numba is imported on its first call, not when the
module is imported. A kernel listed in :data:`dnnplace.heuristics.aot.SIGNATURES` (with the
one signature its callers use) runs the AOT function wherever the extension is loaded (or,
once per machine, built) and the arguments fit that signature exactly; every other call,
and every other kernel, takes the JIT path. Both are numba's compilation of the same Python
function for the same argument types.

Where numba keeps the JIT cache (the first of its locators that works, numba.core.caching):
``$NUMBA_CACHE_DIR`` when it is set; else ``__pycache__`` beside the kernel's module when
that folder is writable (a checkout, an editable install); else the user's cache folder,
``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba`` (a wheel in a read-only site-packages).
Where none is writable (a read-only install run by a user without a writable home, as in
some containers) numba refuses ``cache=True``; the kernels are then compiled in every
process, with one warning saying how to keep them, instead of failing.

Costs (``benchmarks/bench_startup.py``, measured in results/startup.md): the JIT path loading
numba's cache still imports numba and sets up numba's typing and lowering registries on the
first call (``scipy.linalg`` included), which is why the AOT path exists; it loads its
extension in milliseconds.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

from dnnplace.heuristics import aot

__all__ = ["cached_njit", "Kernel"]


class Kernel:
    """A numba kernel made on first use: ``kernel(*args)`` runs the AOT function where one is
    loaded and the arguments fit its signature, else numba's JIT dispatcher
    (:attr:`dispatcher`, ``njit(cache=True)``). Inside other kernels it is that dispatcher.
    ``aot_calls``/``jit_calls`` count the calls of each path (tests)."""

    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self.py_func = fn
        sig = aot.SIGNATURES.get(f"{fn.__module__}.{fn.__qualname__}")
        self.aot_signature = None if sig is None else aot.parse_signature(sig)
        self._dispatcher = None
        self._aot = None if self.aot_signature is not None else False  # None: not looked up yet
        self.aot_calls = self.jit_calls = 0

    def __call__(self, *args, **kwargs):
        if kwargs:
            self.jit_calls += 1
            return self.dispatcher(*args, **kwargs)
        f = self._aot
        if f is None:
            f = self._aot = aot.load(self) or False
        if f is not False and aot.fits(self.aot_signature, args):
            self.aot_calls += 1
            return f(*args)
        self.jit_calls += 1
        return self.dispatcher(*args)

    @property
    def dispatcher(self):
        """numba's dispatcher of this kernel (imports numba; compiles or loads on its first call)."""
        if self._dispatcher is None:
            self._dispatcher = _dispatcher(self.py_func)
        return self._dispatcher

    def __repr__(self) -> str:
        return f"<Kernel {self.__module__}.{self.__name__}>"


def cached_njit(fn: Callable) -> Kernel:
    """``@cached_njit``: a :class:`Kernel` of ``fn``."""
    return Kernel(fn)


def _dispatcher(fn: Callable):
    """``numba.njit(cache=True)(fn)``, or ``numba.njit(fn)`` (compiled in each process) where
    numba finds no writable cache folder."""
    numba = aot.numba_for(Kernel)
    try:
        return numba.njit(cache=True)(fn)
    except RuntimeError as exc:  # numba: "cannot cache function ...: no locator available for file ..."
        if "cannot cache" not in str(exc):
            raise
        _warn_no_cache()
        return numba.njit(fn)


def _warn_no_cache() -> None:
    warnings.warn("numba finds no writable folder to cache the compiled kernels in, so each process "
                  "compiles them again; set NUMBA_CACHE_DIR to a writable folder to keep them",
                  RuntimeWarning, stacklevel=4)  # shown once per process (the default filter)
