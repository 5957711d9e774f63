"""The decorator of the project's compiled kernels: numba's ``njit`` with the machine code
cached on disk, so that a later process loads it instead of compiling it again.

Where numba keeps the cache (the first of its locators that works, numba.core.caching):
``$NUMBA_CACHE_DIR`` when it is set; else ``__pycache__`` beside the kernel's module when
that folder is writable (a checkout, an editable install); else the user's cache folder,
``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba`` (a wheel in a read-only site-packages).
Where none is writable (a read-only install run by a user without a writable home, as in
some containers) numba refuses ``cache=True`` when the module is imported; the kernels are
then compiled in every process, with one warning saying how to keep them, instead of the
import failing.

Loading a cached kernel is not free: a process still imports numba (about 0.3 s of CPU)
and its first call of a kernel sets up numba's typing and lowering registries, which
import ``scipy.linalg`` (about 0.7 s), against 5-7 s for compiling the DP's kernels
(``benchmarks/bench_startup.py``, results/startup.md). Eager signatures would only move
that set-up to import time.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from numba import njit

__all__ = ["cached_njit"]


def cached_njit(fn: Callable) -> Callable:
    """``numba.njit(cache=True)(fn)``, or ``numba.njit(fn)`` (compiled in each process) where
    numba finds no writable cache folder."""
    try:
        return njit(cache=True)(fn)
    except RuntimeError as exc:  # numba: "cannot cache function ...: no locator available for file ..."
        if "cannot cache" not in str(exc):
            raise
        warnings.warn("numba finds no writable folder to cache the compiled kernels in, so each process "
                      "compiles them again; set NUMBA_CACHE_DIR to a writable folder to keep them",
                      RuntimeWarning, stacklevel=1)  # one warning per process, not per kernel
        return njit(fn)
