"""Ahead-of-time compiled kernels: the kernels of the small-graph ``solve --method dp`` path
built once, on first use, into one Python extension module (``numba.pycc``) that later
processes load without importing numba.

Why: a process that loads numba's JIT cache still imports numba and sets up its typing and
lowering registries on the first call, most of a warm command's start-up
(results/startup.md); the extension loads in milliseconds.

What is built: one extension exporting every kernel of :data:`SIGNATURES` for its one
signature, compiled by numba from the same Python function as the JIT path (the kernels
they call are compiled into it). Its file name holds a hash (:func:`_key`) of everything
the code depends on: the source of the modules in :data:`SIGNATURES`, of this module (the
signatures) and of ``jit.py``, the versions of Python, numpy, numba and llvmlite, and
:data:`FORMAT`; a change to any of them names a new file, so a stale module is never
loaded. The code is generic x86-64 (pycc's default target), so a cache folder shared
between machines stays valid.

Where (:func:`folder`, beside numba's own cache, ``heuristics/jit.py``):
``$NUMBA_CACHE_DIR/dnnplace-aot`` when set, else ``__pycache__`` beside this module when
writable, else ``$XDG_CACHE_HOME/numba/dnnplace-aot`` (``~/.cache/...``).

Safety: the build runs in a child process (the compiler's output captured) into a
temporary folder beside the target, and the finished file is renamed into place (atomic),
so a reader never sees half a file; a file lock serializes builders (a second one waits and
loads the first one's module). Beside the module a ``.sha256`` file holds its digest: a
module whose bytes do not match (corrupt, truncated) is rebuilt, never loaded. Where the
build fails (no C compiler, no Python headers, a kernel pycc cannot compile) a ``.failed``
file records why, and this and later processes take the JIT path without trying again
(until the source or a version changes, which names a new file; or delete the file).
``DNNPLACE_AOT=0`` turns the AOT path off (the JIT path).

Time limits: the build can take minutes (results/startup.md, "The AOT build's wall time"), so a
caller with a deadline runs its kernels inside :func:`no_build_wait`: where the extension is
missing there, the build starts in a detached background process (unless one is already
building: the lock is held) for the processes that come later, and this process takes the JIT
path at once (``status()``: ``building in the background``).

A call goes to the AOT function only when every argument has exactly the type declared
(:func:`fits`: dtype, number of dimensions, C-contiguous, aligned and writable arrays;
``int``/``np.int64`` for ``int64``, ``float``/``np.float64`` for ``float64``, ``bool``/``np.bool_``
for ``bool``), i.e. the type numba's JIT compiles the call for; any other call takes the JIT
path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import numpy as np

__all__ = ["parse_signature", "fits", "enabled", "load", "status", "no_build_wait", "waits_for_build",
           "FORMAT"]

FORMAT = 1
"""Version of how modules are built and named here; raising it renames (rebuilds) them all."""

_I, _F, _B = "int64", "float64", "bool"
SIGNATURES = {
    "dnnplace.heuristics.dp_kernel.ideal_sizes": f"{_I}[:], {_I}[:], {_I}[:], {_F}[:], {_I}",
    "dnnplace.heuristics.dp_kernel.run_dp_pruned": (
        f"{_I}, {_I}[:], {_I}[:], {_I}[:], {_F}[:], {_B}[:], {_F}[:], {_B}[:], {_F}[:], {_F}, "  # ... mem_cap
        f"{_I}[:], {_F}[:], {_I}[:], {_I}[:], {_I}[:], {_I}[:], {_I}[:], "  # owner ... tgt_term
        f"{_B}[:], uint64[:, :], uint64[:, :], uint64[:, :], {_B}, {_I}, {_I}, {_F}, {_B}, "  # ideal_ok ... overlap
        f"{_F}[:, :, :], int32[:, :, :], int8[:, :, :], int8[:, :, :], {_I}[:], {_I}, {_I}, "  # dp ... max_pairs
        f"{_F}[:], {_F}, {_I}, {_B}, {_F}[:], {_F}[:, :], {_I}, {_B}[:]"),  # wgt ... stop
    "dnnplace.heuristics.dp_segments._ideal_terms": (f"{_I}, {_I}[:], {_I}[:], {_I}[:], uint64[:, :], {_B}[:], "
                                                    f"{_F}[:], {_F}[:], {_F}[:], {_F}[:], {_I}[:], {_I}[:], {_I}[:], "
                                                    f"{_I}[:], {_I}[:], {_I}[:]"),
    "dnnplace.heuristics.dp_segments.cross_into": (f"{_I}, {_I}, {_I}[:], {_F}[:], {_F}[:], {_F}[:], {_F}[:], {_F}, "
                                                  f"{_I}, {_I}, {_F}, {_F}[:, :, :], int32[:, :, :], int8[:, :, :], "
                                                  "int8[:, :, :]"),
    "dnnplace.heuristics.dp_lattice.rehash": f"uint64[:, :], {_I}, {_I}[:]",
    "dnnplace.heuristics.dp_lattice.bfs_chunk": (f"{_I}, {_I}, uint64[:, :], {_I}[:], {_I}[:], {_I}[:], {_I}[:], "
                                                f"uint64[:, :], {_I}[:], {_I}[:], {_I}"),
}
"""The AOT kernels (those of the small-graph ``solve --method dp`` path: the ideal lattice and
the max-load DP) and the one signature their callers use, in the order of the arguments:
numpy dtype names, ``[:]``/``[:, :]``/...: a C-contiguous array of that many dimensions.
A kernel whose arguments change must change here too (else its calls take the JIT path and
``tests/test_aot.py`` fails); kernels it calls need no entry (they are compiled into it). An
entry whose module or kernel does not exist, or whose number of arguments is wrong, is left
out of the extension (its calls, if any, take the JIT path)."""

_SPEC = re.compile(r"\s*(\w+)\s*(?:\[([:,\s]*)\])?\s*")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_SCALAR_TYPES = {np.dtype(np.int64): (int, np.int64), np.dtype(np.float64): (float, np.float64),
                 np.dtype(np.bool_): (bool, np.bool_)}

_MODULES = sorted({name.rsplit(".", 1)[0] for name in SIGNATURES})
_NAME = "_dnnplace_aot"
_ext: ModuleType | None = None  # the extension, once looked up in this process
_status = "not yet"  # how it was found (tests, reports)
_wait = True  # build a missing extension here and wait for it (False inside no_build_wait)


def parse_signature(sig: str) -> tuple[tuple[np.dtype, int], ...]:
    """``"int64[:], uint64[:, :], float64, bool"`` -> ``((dtype, ndim), ...)`` (``ndim`` 0:
    a scalar). Arrays are C-contiguous (what numba's JIT compiles for a fresh array)."""
    out = []
    for part in _split(sig):
        m = _SPEC.fullmatch(part)
        if m is None:
            raise ValueError(f"bad AOT signature item {part!r} in {sig!r}")
        ndim = 0 if m.group(2) is None else m.group(2).count(":")
        if m.group(2) is not None and ndim == 0:
            raise ValueError(f"bad AOT signature item {part!r} in {sig!r}")
        dt = np.dtype(m.group(1))
        if ndim == 0 and dt not in _SCALAR_TYPES:
            raise ValueError(f"AOT scalar {part!r} must be one of int64, float64, bool")
        out.append((dt, ndim))
    return tuple(out)


def _split(sig: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in sig:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def fits(sig: tuple[tuple[np.dtype, int], ...], args: tuple) -> bool:
    """Does every argument have exactly the declared type (see the module's docstring)?"""
    if len(args) != len(sig):
        return False
    for (dt, ndim), a in zip(sig, args):
        if ndim:
            if type(a) is not np.ndarray or a.ndim != ndim or a.dtype != dt:
                return False
            flags = a.flags
            if not (flags.c_contiguous and flags.writeable and flags.aligned):
                return False
        else:
            t = type(a)
            if t not in _SCALAR_TYPES[dt]:
                return False
            if t is int and not _INT64_MIN <= a <= _INT64_MAX:
                return False
    return True


def enabled() -> bool:
    """The AOT path is on unless ``DNNPLACE_AOT=0``."""
    return os.environ.get("DNNPLACE_AOT", "1") != "0"


def status() -> str:
    """How this process found the extension: ``loaded``, ``built`` (then loaded), ``failed: <why>``
    (the JIT path), ``building in the background`` (the JIT path, :func:`no_build_wait`), ``off`` or
    ``not yet``."""
    return _status


def waits_for_build() -> bool:
    """Whether a missing extension is built in this process now (outside :func:`no_build_wait`)."""
    return _wait


@contextlib.contextmanager
def no_build_wait():
    """Within this block a missing extension is not built in this process but in a detached
    background one (for later processes), and the kernels take the JIT path at once: for
    callers with a deadline (see the module's docstring)."""
    global _wait
    old, _wait = _wait, False
    try:
        yield
    finally:
        _wait = old


def load(kernel):
    """The AOT function of ``kernel`` (listed in :data:`SIGNATURES`), or ``None`` (the JIT path)."""
    global _ext, _status
    if not enabled():
        _status = "off"
        return None
    if _status == "not yet":
        try:
            _ext, _status = _find_or_build()
        except Exception as exc:  # noqa: BLE001 - whatever goes wrong here, the JIT path still works
            _ext, _status = None, f"failed: {type(exc).__name__}: {exc}"
    return None if _ext is None else getattr(_ext, _symbol(kernel), None)


def _symbol(kernel) -> str:
    """The kernel's name in the extension: its module's last part and its name."""
    return f"{kernel.__module__.rsplit('.', 1)[-1]}__{kernel.__name__}"


# -- naming and locating ---------------------------------------------------------------------

def _source_bytes(module: str) -> bytes:
    """The source of ``module`` (found, not imported); ``b""`` where there is none."""
    mod = sys.modules.get(module)
    origin = getattr(mod, "__file__", None)
    if origin is None:
        spec = importlib.util.find_spec(module)
        origin = None if spec is None else spec.origin
    return Path(origin).read_bytes() if origin and Path(origin).is_file() else b""


def _package_version_text(name: str) -> str:
    """The text of ``name/_version.py`` (no import of the package): its version."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return f"{name}: absent"
    path = Path(list(spec.submodule_search_locations)[0]) / "_version.py"
    return path.read_text() if path.is_file() else f"{name}: no _version.py"


def _key() -> str:
    """Hash of what the extension depends on (see the module's docstring)."""
    h = hashlib.sha256()
    h.update(f"format {FORMAT}\n{sys.version}\n{sys.implementation.cache_tag}\nnumpy {np.__version__}\n".encode())
    for pkg in ("numba", "llvmlite"):
        h.update(_package_version_text(pkg).encode())
    for mod in [__name__, "dnnplace.heuristics.aot_build", "dnnplace.heuristics.jit", *_MODULES]:
        h.update(mod.encode() + b"\n" + _source_bytes(mod))
    return h.hexdigest()[:20]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def folder() -> Path | None:
    """Where the extension lives (see the module's docstring); ``None``: nowhere writable."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    candidates = [Path(env) / "dnnplace-aot"] if env else [
        Path(__file__).parent / "__pycache__",
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba" / "dnnplace-aot"]
    return next((c for c in candidates if _writable(c)), None)


def path() -> Path | None:
    """The extension's file (it may not exist yet); ``None``: no writable folder."""
    where = folder()
    return None if where is None else where / f"{_NAME}_{_key()}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


# -- loading ----------------------------------------------------------------------------------

def _digest(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _beside(file: Path, suffix: str) -> Path:
    return file.with_name(file.name.split(".", 1)[0] + suffix)


def _try_load(file: Path) -> ModuleType | None:
    """The extension in ``file`` if its bytes match the digest beside it, else ``None``."""
    try:
        if _digest(file) != _beside(file, ".sha256").read_text().strip():
            return None
    except OSError:
        return None
    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(file))
    spec = importlib.util.spec_from_file_location(_NAME, file, loader=loader)
    try:
        ext = importlib.util.module_from_spec(spec)
        loader.exec_module(ext)
    except (ImportError, OSError):
        return None
    return ext


def _find_or_build() -> tuple[ModuleType | None, str]:
    """(the extension or ``None``, how it was found)."""
    file = path()
    if file is None:
        return None, "failed: no writable cache folder"
    ext = _try_load(file)
    if ext is not None:
        return ext, "loaded"
    failed = _beside(file, ".failed")
    if failed.exists():
        return None, "failed: " + (failed.read_text(errors="replace").strip().splitlines() or ["?"])[0]
    if not _wait:
        _build_in_background(file)
        return None, "building in the background"
    with _Lock(_beside(file, ".lock")):
        ext = _try_load(file)  # built by another process while this one waited
        if ext is not None:
            return ext, "loaded"
        why = _build(file)
        ext = None if why else _try_load(file)
        if ext is None:
            why = why or "the built module does not load"
            try:
                _atomic_write(failed, (why + "\n").encode())
            except OSError:
                pass
            return None, "failed: " + why.splitlines()[0]
    _prune(file)
    return ext, "built"


def _prune(keep: Path) -> None:
    """Delete the other extensions of this folder (older sources or versions: never loaded
    again; a process that still has one loaded keeps it, and one about to load it rebuilds)."""
    stem = keep.name.split(".", 1)[0]
    for old in keep.parent.glob(_NAME + "_*"):
        if old.name.split(".", 1)[0] != stem:
            old.unlink(missing_ok=True)


def _atomic_write(file: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix="." + file.name + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Lock:
    """An exclusive ``flock`` on ``file`` (no lock where ``fcntl`` is missing: the renames
    alone keep readers safe, builders may then duplicate work)."""

    def __init__(self, file: Path):
        self.file, self.fd = file, None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        self.fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock


# -- building ---------------------------------------------------------------------------------

def _build_in_background(file: Path) -> None:
    """Start a detached process that builds (and checks) the extension, unless a build holds the
    lock now; it outlives this process."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        fd = os.open(_beside(file, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a build is under way
        os.close(fd)
        return
    os.close(fd)  # released: the child takes the lock itself
    cmd = [sys.executable, "-c", "from dnnplace.heuristics import aot; aot.load(aot.kernel_named("
           f"{next(iter(SIGNATURES))!r}))"]
    with contextlib.suppress(OSError):
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True, cwd=file.parent)  # not a folder that may go


BUILD_TIMEOUT_S = 900


def _build(file: Path) -> str:
    """Build the extension into ``file`` in a child process; ``""`` or why not."""
    tmp = Path(tempfile.mkdtemp(dir=file.parent, prefix=".build-"))
    try:
        cmd = [sys.executable, "-c", "import sys; from dnnplace.heuristics.aot_build import build_here; "
               "build_here(sys.argv[1])", str(tmp / file.name)]
        env = {**os.environ, "DNNPLACE_AOT": "0"}
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the build did not finish: {exc}"
        built = tmp / file.name
        if out.returncode != 0 or not built.is_file():
            tail = (out.stderr or out.stdout).strip().splitlines()
            errors = [line for line in tail if re.match(r"\w*(Error|Exception)\b", line)]  # the exception's line
            first = (errors or tail or [f"exit {out.returncode}"])[-1]
            return "\n".join(["the build failed: " + first, *tail[-30:]])
        digest = _digest(built)
        os.replace(built, file)
        _atomic_write(_beside(file, ".sha256"), digest.encode())
        return ""
    finally:
        for p in tmp.glob("*"):
            p.unlink(missing_ok=True)
        tmp.rmdir()


@functools.cache
def numba_for(kernel_type: type):
    """Import numba and teach it that a ``kernel_type`` object (``jit.Kernel``, a global of
    another kernel) is its dispatcher (``.dispatcher``)."""
    import numba
    from numba.core import types
    from numba.extending import typeof_impl

    @typeof_impl.register(kernel_type)
    def _typeof_kernel(val, c):
        return types.Dispatcher(val.dispatcher)

    return numba


def kernel_named(name: str):
    """The kernel ``module.name`` of :data:`SIGNATURES`, or ``None`` where there is none."""
    mod, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(mod), attr, None)
    except ImportError:
        return None
