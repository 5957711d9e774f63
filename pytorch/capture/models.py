"""One resolver from a model spec to ``(model, inputs, loss_fn)``: zoo names and the user's own
models, for every command that takes a model (``dnnplace capture`` and the executor).

A spec is one of

* a zoo name (``resnet-50``): :func:`dnnplace.pytorch.capture.zoo.build`, with ``batch``, ``seq``
  and ``params`` as its overrides;
* ``FILE.py:FACTORY`` (``mymodel.py:Net``, ``models/cnn.py:make``): the file is imported
  under a fresh module name (its folder on ``sys.path`` while it runs, like a script), the
  module is dropped from ``sys.modules`` again once the model is built;
* ``package.module:FACTORY`` (``mypkg.nets:build``): imported with :mod:`importlib`.

``FACTORY`` (a class or a function, ``Outer.make`` for an attribute of an attribute) is
called with no arguments, or with ``**params``. It returns either

* an ``nn.Module``: the example inputs then come from ``inputs`` (``--input``), the loss
  from ``loss`` (``--loss``, default ``sum``); or
* a tuple ``(model, inputs)`` or ``(model, inputs, loss_fn)`` for full control: ``inputs`` a
  tensor or a tuple of tensors, ``loss_fn(output, *inputs) -> scalar`` a callable, a name of
  :data:`LOSSES` or None (``sum``). ``inputs`` and ``loss`` given to :func:`load_model` (on
  the command line) **override** the factory's; so do they a zoo model's.

Input specs are ``SHAPE[:DTYPE[:HIGH]]``: ``16x3x32x32`` (float32), ``16x3x32x32:float16``,
``16x10:int64`` (integers drawn from ``[0, 2)``: a valid class label and token id of any
model), ``16x10:int64:30522`` (from ``[0, 30522)``). Floating inputs are standard normal.
Values come from a ``torch.Generator`` seeded 0, drawn in spec order, so two calls give
identical tensors.

Devices. ``device="meta"`` (capture: shapes only) builds under torch's ``meta`` default
device, so no weights are allocated (the zoo's convention); a factory that cannot run there
(it reads tensor values, loads a checkpoint into numpy, ...) is built on the CPU instead —
capture only needs shapes and fakeifies real tensors. A real device (``"cpu"``, ``"cuda"``)
builds a real model under ``torch.manual_seed(0)`` (the global RNG state is restored
afterwards), so another process calling :func:`load_model` with the same arguments rebuilds
identical weights and inputs. The model is returned in training mode.

Every bad spec raises an :class:`~dnnplace.graphs.errors.InputError` of one line naming the
culprit (the file, module, factory, input spec, dtype or loss).
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.named_losses import LOSSES, loss_by_name, sum_loss, with_article
from dnnplace.pytorch.capture.ops import require_torch

__all__ = ["load_model", "LOSSES", "INPUT_DTYPES", "is_user_spec", "parse_input"]

INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")
"""dtype names an input spec takes (torch's names; ``float``, ``half``, ``double``, ``long``
and ``int`` are accepted as aliases)."""

_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "long": "int64", "int": "int32"}
_SEED = 0
_counter = itertools.count()


# ---------------------------------------------------------------------------- inputs
def _spec_parts(text: str) -> tuple[tuple[int, ...], str, int | None]:
    """``"16x10:int64:100"`` -> ``((16, 10), "int64", 100)``; InputError naming the spec."""
    if not isinstance(text, str):
        raise InputError(f"input {text!r}: expected a string SHAPE[:DTYPE[:HIGH]] like 16x3x32x32 or 16x10:int64")
    parts = text.strip().split(":")
    if len(parts) > 3:
        raise InputError(f"input {text!r}: expected SHAPE[:DTYPE[:HIGH]] like 16x3x32x32 or 16x10:int64")
    dims = parts[0].strip().lower().split("x")
    if not all(re.fullmatch(r"[0-9]+", d.strip()) and int(d) > 0 for d in dims):
        raise InputError(f"input {text!r}: malformed shape {parts[0]!r}; expected positive sizes joined by x, "
                         "like 16x3x32x32")
    dtype = parts[1].strip().lower() if len(parts) > 1 else "float32"
    dtype = _ALIASES.get(dtype, dtype)
    if dtype not in INPUT_DTYPES:
        raise InputError(f"input {text!r}: unknown dtype {parts[1].strip()!r}; use one of: {', '.join(INPUT_DTYPES)}")
    high = None
    if len(parts) == 3:
        if dtype.startswith(("float", "bfloat")) or dtype == "bool":
            raise InputError(f"input {text!r}: an upper bound HIGH applies to integer dtypes only")
        if not re.fullmatch(r"[0-9]+", parts[2].strip()) or int(parts[2]) < 1:
            raise InputError(f"input {text!r}: HIGH {parts[2]!r} must be a positive integer (values in [0, HIGH))")
        high = int(parts[2])
    return tuple(int(d) for d in dims), dtype, high


def parse_input(text: str, *, device: str = "cpu", generator: Any = None) -> Any:
    """One example input tensor from its spec ``SHAPE[:DTYPE[:HIGH]]`` (see the module docstring).

    Floating dtypes are standard normal, integers uniform in ``[0, HIGH)`` (``HIGH`` = 2 by
    default), ``bool`` uniform; drawn on the CPU from ``generator`` (a fresh one seeded 0 by
    default), then moved to ``device``; on ``"meta"`` nothing is drawn.

    >>> x = parse_input("2x3:int64:5")
    >>> tuple(x.shape), x.dtype, bool(((0 <= x) & (x < 5)).all())
    ((2, 3), torch.int64, True)
    >>> bool((parse_input("4x4") == parse_input("4x4")).all())
    True
    >>> parse_input("4xx4")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: input '4xx4': malformed shape '4xx4'; expected positive sizes joined by x, ...
    """
    shape, dtype, high = _spec_parts(text)
    torch = require_torch()
    dt = getattr(torch, dtype)
    if str(device) == "meta":
        return torch.empty(shape, dtype=dt, device="meta")
    if generator is None:
        generator = torch.Generator().manual_seed(_SEED)
    if dt.is_floating_point:
        x = torch.randn(shape, generator=generator, dtype=torch.float32).to(dt)
    elif dt == torch.bool:
        x = torch.randint(0, 2, shape, generator=generator).bool()
    else:
        x = torch.randint(0, high or 2, shape, generator=generator, dtype=dt)
    return x.to(device)


def _inputs(specs: Sequence[str], device: str) -> tuple:
    torch = require_torch()
    for text in specs:
        _spec_parts(text)  # every spec checked before anything is drawn
    gen = torch.Generator().manual_seed(_SEED)
    return tuple(parse_input(text, device=device, generator=gen) for text in specs)


# ---------------------------------------------------------------------------- specs
def is_user_spec(spec: str) -> bool:
    """True for ``FILE.py:FACTORY`` and ``package.module:FACTORY`` (and a bare ``FILE.py``,
    which :func:`load_model` refuses for its missing factory); False for a zoo name.

    >>> is_user_spec("mymodel.py:Net"), is_user_spec("pkg.nets:make"), is_user_spec("resnet-50")
    (True, True, False)
    """
    return ":" in spec or spec.endswith(".py")


def _import_file(path_text: str, spec: str):
    """The module of a model file under a fresh name, its name in ``sys.modules`` (to drop later)."""
    path = Path(path_text).expanduser()
    if not path.exists():
        raise InputError(f"{spec}: model file {path_text!r} not found")
    if not path.is_file():
        raise InputError(f"{spec}: {path_text!r} is not a file")
    name = f"_dnnplace_user_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{next(_counter)}"
    ispec = importlib.util.spec_from_file_location(name, path)
    if ispec is None or ispec.loader is None:
        raise InputError(f"{spec}: {path_text!r} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(ispec)
    sys.modules[name] = module  # while it runs: dataclasses, pickling and relative lookups find it
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        ispec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of the user's file is named
        sys.modules.pop(name, None)
        raise InputError(f"{spec}: importing {path_text!r} failed: {_raised(exc)}") from exc
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module, name


def _import_module(module_name: str, spec: str):
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module_name):
        raise InputError(f"{spec}: {module_name!r} is neither a FILE.py nor a package.module name")
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise InputError(f"{spec}: module {module_name!r} is not importable (No module named {exc.name!r}); "
                             "give FILE.py:FACTORY for a file, or put its package on PYTHONPATH") from exc
        raise InputError(f"{spec}: importing module {module_name!r} failed: {_first(exc)}") from exc
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise InputError(f"{spec}: importing module {module_name!r} failed: {_raised(exc)}") from exc


def _raised(exc: BaseException) -> str:
    """What the user's code did, on one line: ``ValueError: bad width``, or ``called
    sys.exit(3)`` (a :class:`SystemExit` must not end the command with the user's status)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})" if exc.code is not None else "called sys.exit()"
    return f"{type(exc).__name__}: {_first(exc)}"


def _first(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _factory(module: Any, attr: str, spec: str, where: str) -> Callable[..., Any]:
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == module.__name__)
            known = f"; it defines: {', '.join(names)}" if names else ""
            raise InputError(f"{spec}: {where} has no factory {attr!r}{known}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{spec}: {attr!r} in {where} is {with_article(obj)}, not a callable factory")
    return obj


def _call_factory(factory: Callable[..., Any], params: dict, spec: str, device: str) -> Any:
    """The factory's result, built on ``device`` (see the module docstring)."""
    torch = require_torch()

    def run(dev: str) -> Any:
        with torch.random.fork_rng(devices=[]), torch.device(dev):
            torch.manual_seed(_SEED)
            return factory(**params)

    try:
        if str(device) == "meta":
            try:
                return run("meta")
            except Exception:  # noqa: BLE001 - the factory needs real tensors: capture fakeifies them
                return run("cpu")
        return run(device)
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        what = _raised(exc)
        raise InputError(f"{spec}: the factory {what if isinstance(exc, SystemExit) else 'raised ' + what}") \
            from exc


def _unpack(out: Any, spec: str) -> tuple[Any, tuple | None, Any]:
    """``(model, inputs or None, loss or None)`` of what a factory returned."""
    torch = require_torch()
    if isinstance(out, torch.nn.Module):
        return out, None, None
    if not isinstance(out, (tuple, list)) or len(out) not in (2, 3):
        raise InputError(f"{spec}: the factory returned {with_article(out)}; it must return an nn.Module or a "
                         "tuple (model, inputs[, loss_fn])")
    model, inputs, loss = (*out, None)[:3]
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"{spec}: the factory's model is {with_article(model)}, not a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise InputError(f"{spec}: the factory's inputs must be a tensor or a tuple of tensors, got "
                         f"{type(inputs).__name__}")
    if loss is not None and not callable(loss) and not isinstance(loss, str):
        raise InputError(f"{spec}: the factory's loss_fn is {with_article(loss)}, not a callable or a loss name")
    return model, tuple(inputs), loss


def load_model(spec: str, *, inputs: Sequence[str] = (), loss: str | None = None, batch: int | None = None,
               seq: int | None = None, device: str = "meta", params: dict | None = None):
    """The model, example inputs and training loss of ``spec`` (see the module docstring).

    Parameters
    ----------
    spec : str
        A zoo name, ``FILE.py:FACTORY`` or ``package.module:FACTORY``.
    inputs : sequence of str
        One ``SHAPE[:DTYPE[:HIGH]]`` per positional input of ``model.forward``; needed for a
        factory that returns only a module, otherwise they override the model's own.
    loss : str, optional
        ``sum``, ``mse`` or ``cross_entropy`` (:data:`LOSSES`); overrides the model's own.
        Default: the zoo's or the factory's loss, else ``sum``.
    batch, seq : int, optional
        Zoo models only (a user's model takes its sizes from ``inputs``).
    device : str
        ``"meta"`` (shapes only, for capture) or a real device (real, seeded weights).
    params : dict, optional
        Zoo overrides (``layers``, ``hidden``, ...) or the factory's keyword arguments.

    Returns
    -------
    model : torch.nn.Module
        In training mode.
    inputs : tuple of torch.Tensor
    loss_fn : callable
        ``loss_fn(model(*inputs), *inputs)`` is a scalar.

    Examples
    --------
    >>> model, xs, loss_fn = load_model("lenet-5", batch=4, loss="sum")
    >>> type(model).__name__, tuple(xs[0].shape), xs[0].device.type, loss_fn is LOSSES["sum"]
    ('_Classifier', (4, 1, 32, 32), 'meta', True)
    """
    if isinstance(inputs, str):
        inputs = (inputs,)
    params = dict(params or {})
    if loss is not None:
        loss_fn = loss_by_name(loss)
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"model spec {spec!r}: give a zoo name, FILE.py:FACTORY or package.module:FACTORY")
    spec = spec.strip()
    if not is_user_spec(spec):
        model, xs, own_loss = _zoo_model(spec, inputs, batch, seq, device, params)
        return model, xs, (loss_fn if loss is not None else own_loss)
    model, xs, own_loss = _user_model(spec, inputs, batch, seq, device, params)
    if loss is None:
        loss_fn = loss_by_name(own_loss) if isinstance(own_loss, str) else (own_loss or sum_loss)
    return model.train(), xs, loss_fn


def _zoo_model(spec: str, inputs: Sequence[str], batch: int | None, seq: int | None, device: str,
               params: dict) -> tuple[Any, tuple, Any]:
    """A zoo model, its inputs (``inputs`` override the zoo's) and the zoo's loss."""
    from dnnplace.pytorch.capture import zoo
    if spec not in zoo.ZOO:
        try:
            zoo.entry(spec)
        except InputError as exc:
            raise InputError(f"{exc}; or give your own model as FILE.py:FACTORY or package.module:FACTORY") \
                from None
    for text in inputs:
        _spec_parts(text)
    model, own_inputs, own_loss = zoo.build(spec, batch=batch, seq=seq, device=device, **params) \
        if str(device) == "meta" else _seeded(lambda: zoo.build(spec, batch=batch, seq=seq, device=device,
                                                                **params))
    return model, (_inputs(inputs, device) if inputs else own_inputs), own_loss


def _user_model(spec: str, inputs: Sequence[str], batch: int | None, seq: int | None, device: str,
                params: dict) -> tuple[Any, tuple, Any]:
    """A user's ``FILE.py:FACTORY`` or ``package.module:FACTORY`` model, its inputs and its
    own loss (None, a name or a callable); a file's module is dropped again afterwards."""
    where_text, sep, attr = spec.rpartition(":")
    if not sep:  # a bare FILE.py
        raise InputError(f"{spec}: name the factory that builds the model, as {spec}:FACTORY (a class or function)")
    if not where_text or not attr or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", attr):
        raise InputError(f"model spec {spec!r}: expected FILE.py:FACTORY or package.module:FACTORY")
    given = [k for k, v in (("batch", batch), ("seq", seq)) if v is not None]
    if given:
        raise InputError(f"{spec}: {' and '.join(given)} apply to zoo models only; give a user model's input "
                         "shapes as inputs (--input SHAPE[:dtype])")
    for text in inputs:
        _spec_parts(text)  # a malformed spec is named before the user's code runs
    require_torch()
    is_file = where_text.endswith(".py") or "/" in where_text or os.sep in where_text
    drop = None
    if is_file:
        module, drop = _import_file(where_text, spec)
        where = f"file {where_text!r}"
    else:
        module = _import_module(where_text, spec)
        where = f"module {where_text!r}"
    try:
        factory = _factory(module, attr, spec, where)
        model, own_inputs, own_loss = _unpack(_call_factory(factory, params, spec, device), spec)
        if inputs:
            xs = _inputs(inputs, device)
        elif own_inputs is not None:
            xs = own_inputs
        else:
            raise InputError(f"{spec}: the factory returns only a model; give its example inputs, one "
                             "--input SHAPE[:dtype] per positional input (e.g. --input 16x3x32x32)")
    finally:
        if drop is not None:
            sys.modules.pop(drop, None)
    return model, xs, own_loss


def _seeded(build: Callable[[], Any]) -> Any:
    """``build()`` under ``torch.manual_seed(0)``, the global RNG state restored afterwards."""
    torch = require_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        return build()
