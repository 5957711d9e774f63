"""Numbers read from user files, checked where they are read: a JSON number, never a
string (``"16GB"``), a boolean, an integer past the float range (``10**400``) or an
infinity (``1e999``, ``Infinity``). Each error is one :class:`InputError` line naming
the device, link or field.

- :func:`user_number`: one value;
- :func:`check_cluster_numbers`: every number of a cluster document (device memory,
  speed and per-op overhead, link costs as records, matrices or a default link), before
  :func:`dnnplace.graphs.io.native.cluster_from_dict` converts them.

>>> user_number(16e9, "device 'gpu0': memory")
16000000000.0
>>> user_number("16GB", "device 'gpu0': memory", " of bytes (e.g. 16e9)")
Traceback (most recent call last):
...
dnnplace.graphs.errors.InputError: device 'gpu0': memory must be a number of bytes (e.g. 16e9), got a string '16GB'
>>> user_number(10**400, "device 'gpu0': memory")
Traceback (most recent call last):
...
dnnplace.graphs.errors.InputError: device 'gpu0': memory is a 401-digit number, too large for a 64-bit float
"""

from __future__ import annotations

import math
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["user_number", "check_cluster_numbers"]

_LINK_KEYS = ("beta0", "beta1", "cost_factor")


def user_number(value: Any, where: str, hint: str = "") -> float:
    """``value`` as a finite float, or an :class:`InputError` ``"<where> must be a
    number<hint>, got ..."``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        what = "a string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise InputError(f"{where} must be a number{hint}, got {what} {value!r}")
    if isinstance(value, int) and abs(value) > 1e308:
        raise InputError(f"{where} is a {len(str(abs(value)))}-digit number, too large for a 64-bit float")
    if not math.isfinite(value):
        raise InputError(f"{where} must be a finite number{hint}, got {value}")
    return float(value)


def check_cluster_numbers(doc: dict) -> None:
    """Check every number of a cluster document (see the module docstring); device
    ``memory`` may be ``null`` (unbounded), nothing else may be infinite."""
    devices = doc.get("devices") if isinstance(doc, dict) else None
    if not isinstance(devices, list):
        return  # the loader says what is missing
    names = []
    for j, d in enumerate(devices):
        if not isinstance(d, dict):
            return
        who = f"cluster device {str(d.get('name', f'#{j}'))!r}"
        names.append(str(d.get("name", f"#{j}")))
        if d.get("memory") is not None:
            user_number(d["memory"], f"{who}: memory", " of bytes (e.g. 16e9; null for unbounded)")
        for key in ("speed", "op_overhead", "send_overhead", "recv_overhead"):
            if key in d:
                user_number(d[key], f"{who}: {key}")
    for key in ("op_overhead", "send_overhead", "recv_overhead"):
        if key in doc:
            user_number(doc[key], f"cluster: {key}")
    for key in _LINK_KEYS:  # matrices: one row per device
        rows = doc.get(key)
        if rows is None:
            continue
        d = len(names)
        if not isinstance(rows, list) or len(rows) != d or not all(isinstance(r, list) and len(r) == d for r in rows):
            raise InputError(f"cluster field {key!r}: expected a {d} x {d} matrix (one row per device)")
        for a, row in enumerate(rows):
            for b, v in enumerate(row):
                user_number(v, f"cluster link {names[a]}->{names[b]}: {key}")
    links = doc.get("links", [])
    if not isinstance(links, list):
        raise InputError("cluster: 'links' must be a list of {src, dst, beta0, beta1, cost_factor} records")
    for j, link in enumerate(links):
        if not isinstance(link, dict):
            raise InputError(f"cluster link #{j}: must be a {{src, dst, beta0, beta1, cost_factor}} record")
        label = f"{link.get('src', '?')}->{link.get('dst', '?')}"
        for key in _LINK_KEYS:
            if key in link:
                user_number(link[key], f"cluster link {label}: {key}")
    default = doc.get("default_link")
    if default is not None:
        if not isinstance(default, dict):
            raise InputError("cluster: 'default_link' must be a {beta0, beta1, cost_factor} record")
        for key in _LINK_KEYS:
            if key in default:
                user_number(default[key], f"cluster default_link: {key}")
