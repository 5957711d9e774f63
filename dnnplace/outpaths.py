"""Output paths checked before any work: the one home of the rule that no command
overwrites one of its own inputs or finds, after a long solve, that it cannot write.

Every subcommand with an output flag (``--out``, ``--gantt``, an output folder) calls
:func:`check_outputs` first, with its outputs and every input file it reads (graphs,
placements and results, ``--cluster`` and ``--split`` files, warm starts, ``--param``
values that name files, configs and the files they name, model files
``FILE.py:FACTORY``; tests/test_inputs_and_results.py goes through each input flag of each
subcommand). Each problem is one
:class:`~dnnplace.graphs.errors.InputError` line naming the flag and the path (exit 2):

- an output that *is* an input (the same file: compared with :func:`os.path.samefile`
  where it exists, hard links and symlinks included, else by resolved path), a file an
  output folder is written with (``runs.jsonl``, ``table.md``, ...) that is an input, or
  two outputs of one command that are the same file;
- an output file that names a folder, or an output folder that names a file;
- an output whose folder is missing a component that is a file, or whose nearest
  existing folder is not writable (missing folders are created when writing);
- an existing output file that is not writable.

>>> check_outputs([("--out", "result.json")], [("graph", "g.json")])  # nothing exists: fine
>>> check_outputs([("--out", "x.json"), ("--gantt", "./x.json")])
Traceback (most recent call last):
...
dnnplace.graphs.errors.InputError: --gantt ./x.json: the same file as --out x.json; give each output its own name
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dnnplace.graphs.errors import InputError

__all__ = ["check_outputs"]

PathArg = str | os.PathLike | None


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (``samefile`` when both exist, else equal
    resolved paths)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def _writable_folder(flag: str, path: Path, shown: str) -> None:
    """The nearest existing ancestor of ``path`` (a folder to be written into) must be a
    writable folder."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise InputError(f"{flag} {shown}: {p} is not a folder")
            if not os.access(p, os.W_OK | os.X_OK):
                raise InputError(f"{flag} {shown}: folder {p} is not writable")
            return


def check_outputs(outputs: Iterable[tuple[str, PathArg]], inputs: Iterable[tuple[str, PathArg]] = (), *,
                  folders: bool = False, contents: Iterable[str] = ()) -> None:
    """Fail before any work if an output path clashes with an input or cannot be written.

    Parameters
    ----------
    outputs : iterable of (flag, path)
        The command's outputs as given (``("--out", "r.json")``); ``None`` paths (flag
        not given) are skipped.
    inputs : iterable of (label, path)
        The files the command reads (``("graph", "g.json")``); ``None`` skipped, paths
        that do not exist (bundled names, method names) cannot clash.
    folders : bool
        The outputs are folders (``run --out DIR``): they may exist as folders, not as
        files; an input inside them is fine unless it is one of ``contents``.
    contents : iterable of str
        With ``folders``: the file names each output folder is written with
        (``runs.jsonl``, ``table.md``); an input that is one of them is refused.
    """
    outs = [(flag, str(p)) for flag, p in outputs if p is not None and str(p) != ""]
    ins = [(label, str(p)) for label, p in inputs if p is not None and str(p) != ""]
    seen: list[tuple[str, str, Path]] = []
    for flag, shown in outs:
        path = Path(os.path.expanduser(shown)).absolute()
        for label, given in ins:
            src = Path(os.path.expanduser(given))
            if src.is_file() and _same(path, src):
                raise InputError(f"{flag} {shown}: is the input {label} {given}; writing there would overwrite "
                                 "it (give another file name)")
        for other_flag, other_shown, other in seen:
            if _same(path, other):
                raise InputError(f"{flag} {shown}: the same file as {other_flag} {other_shown}; give each output "
                                 "its own name")
        seen.append((flag, shown, path))
        if folders:
            if path.exists() and not path.is_dir():
                raise InputError(f"{flag} {shown}: is a file, not a folder")
            for name in contents:
                for label, given in ins:
                    src = Path(os.path.expanduser(given))
                    if src.is_file() and _same(path / name, src):
                        raise InputError(f"{flag} {shown}: its {name} is the input {label} {given}; writing there "
                                         "would overwrite it (give another folder)")
            _writable_folder(flag, path, shown)
            continue
        if path.is_dir():
            raise InputError(f"{flag} {shown}: is a folder; give a file name (e.g. {path / 'out.json'})")
        _writable_folder(flag, path.parent, shown)
        if path.exists() and not os.access(path, os.W_OK):
            raise InputError(f"{flag} {shown}: the file exists and is not writable")
