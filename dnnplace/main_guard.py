"""The main-guard check before worker processes start (used by :func:`dnnplace.api_torch.execute`).

The executor starts its workers with the ``spawn`` method, which runs the main script again
in every worker; a call at a script's top level outside ``if __name__ == "__main__":`` would
start the run again in each of them. This module finds that line before anything starts.
"""

from __future__ import annotations

from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["check_main_guard"]


def _guarded_lines(tree: Any) -> list[tuple[int, int]]:
    """Line ranges of the bodies of ``if __name__ == "__main__":`` blocks."""
    import ast

    def is_guard(test: Any) -> bool:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
            return False
        sides = [test.left, test.comparators[0]]
        names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
        consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
        return len(names) == 1 and len(consts) == 1

    return [(node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno)
            for node in ast.walk(tree) if isinstance(node, ast.If) and is_guard(node.test)]


def check_main_guard(what: str = "execute()") -> None:
    """Refuse to start worker processes from a script's top level outside an ``if __name__ ==
    "__main__":`` block.

    The workers are started with the ``spawn`` method, which runs the main script again
    in every worker: unguarded, each worker would start the run again, and the run ends
    in ``a worker exited: ... exit code 1`` far from the cause. This looks, before anything
    is started, for the main script's frame among the callers (a script run as ``python
    script.py`` or ``python -m module``; an interactive session, a notebook or ``python -c``
    is not run again and passes) and checks, in the script's source, that the line it runs
    lies inside such a block; inside a worker that re-runs an unguarded script, it raises
    as well rather than start workers of its own.

    Raises
    ------
    InputError
        ``<script>:<line>: this line at the top level of the script calls execute() ...``:
        the line to move under ``if __name__ == "__main__":``.

    Examples
    --------
    >>> check_main_guard()  # a doctest runs no script's top level: nothing to say
    """
    import multiprocessing
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame = sys._getframe(1)
    while frame is not None:  # the main script's own top-level frame, if it is running
        g = frame.f_globals
        if frame.f_code.co_name == "<module>" and g.get("__name__") in ("__main__", "__mp_main__"):
            path = g.get("__file__", path)
            break
        frame = frame.f_back
    if frame is None or not path or not str(path).endswith(".py"):
        return
    line = frame.f_lineno
    fix = (f"this line at the top level of the script calls {what}, and every worker process runs the script "
           "again (the 'spawn' start method): put it under 'if __name__ == \"__main__\":'")
    if multiprocessing.current_process().name != "MainProcess" or frame.f_globals.get("__name__") == "__mp_main__":
        raise InputError(f"{path}:{line}: {fix}")
    import ast

    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return  # no source to read: nothing to check
    if not any(lo <= line <= hi for lo, hi in _guarded_lines(tree)):
        raise InputError(f"{path}:{line}: {fix}")
