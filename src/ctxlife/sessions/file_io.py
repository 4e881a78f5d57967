"""The file store's files: opened without following symlinks, read by byte range, written whole and
fsynced, and a raw history's lines decoded in bulk (:mod:`ctxlife.sessions.file` says the layout).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ctxlife.errors import StoreError
from ctxlife.sessions.records import RawRecord, decode_record

__all__ = [
    "CHUNK",
    "O_CLOEXEC",
    "O_SAFE",
    "Parsed",
    "Tail",
    "atomic_write",
    "digest",
    "fsync_dir",
    "link_new",
    "locked",
    "parse_bulk",
    "read_file",
    "read_range",
    "read_shared",
    "same_file",
    "write_all",
]

O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Session files are never symlinks: refuse to follow one planted in the folder.
O_SAFE = O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
CHUNK = 1 << 16


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open on ``fd`` (not deleted or replaced meanwhile)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    fst = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def parse_bulk(data: bytes, end: int) -> list[RawRecord] | None:
    """The records of ``data[:end]`` (complete lines) decoded in one ``json.loads``, or None when a
    line is not a valid record (the caller then reads line by line and says which).

    A stored line is one JSON document and never holds a raw line break (JSON escapes it in
    strings), so the lines joined with commas are one JSON array.
    """
    if end == 0:
        return []
    count = data.count(b"\n", 0, end)
    if data[:1] != b"{" or data.count(b"\n{", 0, end) != count - 1 or data.count(b"}\n", 0, end) != count:
        return None  # a line that is not one object (as written): read line by line
    try:
        values = json.loads(b"[" + data[: end - 1].replace(b"\n", b",") + b"]")
        if not isinstance(values, list) or len(values) != count:
            return None  # a line holding two documents: not a record
        return [decode_record(value) for value in values]
    except (ValueError, UnicodeDecodeError):
        return None


def read_range(fd: int, start: int, end: int) -> bytes:
    parts = []
    offset = start
    while offset < end:
        chunk = os.pread(fd, max(end - offset, CHUNK), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def read_file(path: Path) -> bytes:
    """Read a whole session file without following a symlink (ELOOP is an OSError)."""
    fd = os.open(path, os.O_RDONLY | O_SAFE)
    try:
        return read_range(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclasses.dataclass(frozen=True, slots=True)
class Tail:
    """Where the last readable record of a raw file ends, to read only what follows next time."""

    dev: int
    ino: int
    offset: int  # byte offset just after the last counted line
    lines: int  # complete lines before offset (positions, for records without a sequence number)
    seq: int  # the sequence number of the last record before offset (0: none)
    last_start: int  # where that last line starts
    last_digest: bytes  # a digest of that last line, to check the file was not rewritten


@dataclasses.dataclass(slots=True)
class Parsed:
    records: list[RawRecord]
    tail: Tail
    invalid_end: int | None  # offset where trailing invalid lines start, if any


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: written whole to a temporary file, fsynced, renamed, the folder fsynced."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"cannot create a temporary file in {path.parent}: {exc.strerror}") from None
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write {path}: {exc.strerror}") from None


def link_new(path: Path, data: bytes, what: str) -> None:
    """Store ``data`` at ``path`` unless a file is there: written whole to a temporary file, then
    linked in place (a link never replaces what another process stored first; both then use it)."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.")
    try:
        write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {what} {path}: {exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


@contextlib.contextmanager
def locked(path: Path, flags: int = os.O_RDONLY, lock: int = fcntl.LOCK_SH, what: str = "read") -> Iterator[int | None]:
    """``path`` opened (never through a symlink) and ``flock``-ed until the block ends; None when
    there is no such file. An ``OSError`` opening it or inside the block is a :class:`StoreError`
    ``cannot {what} {path}``."""
    try:
        fd: int | None = os.open(path, flags | O_SAFE)
    except FileNotFoundError:
        fd = None
    except OSError as exc:
        raise StoreError(f"cannot {what} {path}: {exc.strerror}") from None
    if fd is None:
        yield None
        return
    try:
        fcntl.flock(fd, lock)  # LOCK_SH waits for an append in progress
        yield fd
    except OSError as exc:
        raise StoreError(f"cannot {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_shared(path: Path) -> bytes | None:
    """The whole of ``path`` read under a shared ``flock``; None when there is no such file."""
    with locked(path) as fd:
        return None if fd is None else read_range(fd, 0, os.fstat(fd).st_size)
