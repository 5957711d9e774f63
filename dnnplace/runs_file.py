"""The ``runs.jsonl`` file of a sweep (its contract: :mod:`dnnplace.runner`): reading it back
with repairs (:func:`read_runs`), appending a record durably (:func:`append_record`), replacing
a key's record and compacting repeated keys by atomic rewrites, the one-sweep-per-file lock
(:func:`sweep_lock`) and the timestamped backups of a fresh start (:func:`fresh_start`)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
from pathlib import Path

__all__ = ["read_runs", "append_record", "replace_record", "compact", "sweep_lock", "backup_name", "fresh_start",
           "warn"]


def warn(text: str) -> None:
    """One warning line on stderr, flushed."""
    print(f"dnnplace: warning: {text}", file=sys.stderr, flush=True)


def read_runs(path: str | os.PathLike, *, repair: bool = False) -> list[dict]:
    """The records of a ``runs.jsonl`` file (missing file: ``[]``), in file order (a key
    may repeat in files of older versions: the last record of a key is the newest).

    A last line cut short by a crash is ignored; with ``repair=True`` it is also cut
    off the file (one warning on stderr says which line and how many bytes), so that the
    next append starts on a fresh line. A complete JSON record that only lacks its final
    newline is kept (``repair`` adds the newline).
    """
    p = Path(path)
    unpack(p)
    if not p.exists():
        return []
    data = p.read_bytes()
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if tail:
        whole = None
        try:
            whole = json.loads(tail)
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
        if isinstance(whole, dict) and "run_key" in whole:  # complete, only the newline is missing
            if repair:
                with open(p, "ab") as fh:
                    fh.write(b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            end = len(data)
            data += b"\n"
        elif repair:
            with open(p, "r+b") as fh:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
            if tail.strip():
                line_no = data[:end].count(b"\n") + 1
                warn(f"{p}: cut off a half-written last line (line {line_no}, {len(tail)} bytes) left by an "
                      "interrupted write; its run will be run again")
    out = []
    for i, line in enumerate(data[:end].decode(errors="replace").splitlines()):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            warn(f"{p}:{i + 1}: skipping a line that is not JSON")
            continue
        if isinstance(rec, dict) and "run_key" in rec:
            out.append(rec)
    return out


def unpack(path: Path) -> None:
    """A committed ``runs.jsonl.gz`` beside ``path`` (results/README.md: records over about 1 MB
    are committed compressed) becomes ``path`` where ``path`` is missing or older than it, so
    that resuming and re-rendering read, and appending extends, every record."""
    gz = path.with_name(path.name + ".gz")
    if not gz.exists() or (path.exists() and path.stat().st_mtime >= gz.stat().st_mtime):
        return
    import gzip

    with gzip.open(gz, "rb") as fh:
        text = fh.read()
    if not path.exists() or path.read_bytes() != text:
        rewrite(path, text.decode())
    st = gz.stat()
    os.utime(path, (st.st_atime, st.st_mtime))  # in step with the compressed file


def dumps(record: dict) -> str:
    """``record`` as one line of the file."""
    return json.dumps(record, allow_nan=False, default=str) + "\n"


def append_record(path: Path, record: dict) -> None:
    """Append ``record`` as one line, flushed and fsynced (an interrupted sweep loses at most the run in progress)."""
    line = dumps(record)
    with open(path, "a") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def rewrite(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically (temporary file, fsync, rename)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, on disk
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def key_of(line: str) -> str | None:
    """The run key of a line (``None``: not a record)."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return rec.get("run_key") if isinstance(rec, dict) else None


def replace_record(path: Path, record: dict) -> None:
    """Write ``record`` in place of the line(s) of its key (atomic rewrite): one line per key."""
    key = record["run_key"]
    new = dumps(record)
    out: list[str] = []
    placed = False
    for line in path.read_text().splitlines(keepends=True):
        if line.strip() and key_of(line) == key:
            if not placed:
                out.append(new)
                placed = True
            continue
        out.append(line if line.endswith("\n") else line + "\n")
    if not placed:
        out.append(new)
    rewrite(path, "".join(out))


def compact(path: Path, records: list[dict]) -> None:
    """Older files may repeat a key (retries used to append): keep its newest record only."""
    newest: dict[str, int] = {}
    for i, r in enumerate(records):
        newest[r["run_key"]] = i
    dropped = len(records) - len(newest)
    if not dropped:
        return
    keep = sorted(newest.values())
    rewrite(path, "".join(dumps(records[i]) for i in keep))
    warn(f"{path}: dropped {dropped} older record(s) of keys recorded twice (the newest record of each key "
          "is kept; one line per run key)")


@contextlib.contextmanager
def sweep_lock(runs_path: Path, name: str = "sweep"):
    """One sweep at a time on ``runs_path``: an exclusive ``flock`` on
    ``<runs.jsonl>.lock`` beside it, held from before the file is read until the sweep
    ends, when the lock file is removed (the operating system drops the lock when the
    process dies, so a killed sweep leaves no stale lock, only the file). A second sweep
    on the same file says whom it waits for on stderr and waits; it then reads the
    records the first one wrote and runs only what is left, so two sweeps never run one
    key twice. Ctrl-C while waiting exits as usual (130). Where ``fcntl`` does not exist
    (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    import socket

    lock = runs_path.with_name(runs_path.name + ".lock")
    said = False
    while True:
        fh = open(lock, "a+")
        try:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    fh.seek(0)
                    holder = fh.read().strip() or "another process"
                    print(f"{name}: waiting for the sweep that is writing {runs_path} ({holder}); its records are "
                          "kept and not run again", file=sys.stderr, flush=True)
                    said = True
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:  # the holder removed the file on its way out: lock the file that is there now
                same = os.stat(lock).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            fh.close()
            raise
        if same:
            break
        fh.close()
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)  # still holding the lock: a waiter then finds its file gone and retries
        fh.close()


def backup_name(path: Path, stamp: str) -> Path:
    """``runs.jsonl`` -> ``runs.jsonl.<stamp>.bak``, never the name of an existing file."""
    cand = path.with_name(f"{path.name}.{stamp}.bak")
    n = 2
    while cand.exists():
        cand = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    return cand


def fresh_start(runs_path: Path) -> list[Path]:
    """Move ``runs.jsonl`` and the tables beside it to timestamped backups; return them."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = []
    for p in (runs_path, runs_path.with_name("table.md"), runs_path.with_name("table.csv")):
        if p.exists():
            dest = backup_name(p, stamp)
            os.replace(p, dest)
            moved.append(dest)
    return moved
