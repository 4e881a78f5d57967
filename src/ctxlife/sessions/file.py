"""The default, embedded session store: plain files in one folder.

URL: ``file://workspace/sessions`` (a path relative to the current directory when the store is
opened) or ``file:///abs/path``. Everything after ``file://`` is the path (percent-decoded), so there
is no host part. Query option: ``?fsync=false`` skips the ``fsync`` after each raw append (default
``true``: an append is on disk when ``append_raw`` returns; snapshots are always fsynced).

Layout of the folder (created lazily, owner-only ``0700``; files ``0600``)::

    {SESSION_ID}_ctx.json      the snapshot: one JSON object, replaced atomically
    {SESSION_ID}_raw.jsonl     the raw history: one JSON object per line, append-only
    {SESSION_ID}_blobs/{KEY}   blobs, one file each, replaced atomically
    {SESSION_ID}.lock          the lock file of :meth:`FileStore.lock`
    .{SESSION_ID}_ctx.json.*.tmp   temporary files of a snapshot write in progress (or a crash)

Crash safety:

* A snapshot is written to a temporary file in the same folder, fsynced, renamed over the old one
  (``os.replace``, atomic on POSIX) and the folder is fsynced: readers see the old or the new
  snapshot, never a partial one.
* A batch of raw messages is encoded first and written with one ``os.write`` on an ``O_APPEND``
  descriptor while holding an exclusive ``fcntl.flock`` on the raw file itself (the raw file is its
  own lock file: no extra file to leak). Concurrent writers, in threads or processes, therefore never
  interleave. Readers take a shared ``flock``, so they never see an append in progress.
* A process killed in the middle of a write can leave whole lines of its batch and one *torn* last
  line (no trailing newline). Readers skip a torn last line (or an invalid last line) with a
  ``raw_torn_record_skipped`` warning. **Repair choice:** the next append, under the lock, truncates
  the torn tail back to the last newline before writing (logging ``raw_torn_record_repaired``), so
  the file stays valid JSON Lines and new records never glue onto the torn one. The torn bytes were
  an incomplete record that no reader ever returned, so nothing readable is lost.
* Invalid JSON anywhere but the last line is corruption and raises :class:`StoreError`.

Locks: :meth:`FileStore.lock` is an exclusive ``flock`` on ``{SESSION_ID}.lock``. The kernel releases
a ``flock`` when its holder dies (even by ``SIGKILL``), so a dead holder never blocks the session;
``ttl_seconds`` is accepted for interface compatibility but a *live* holder keeps the lock until it
exits the ``with`` block. ``flock`` works between processes on one machine; on network file systems
(NFS, SMB) its behaviour depends on the server: use the SQLite store for one machine or Redis for
several.

Session files are opened with ``O_NOFOLLOW``: a symlink planted in the folder is an error, never a
way to read or write a file elsewhere.

Limits: session ids differing only in case collide on case-insensitive file systems (macOS default).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ctxlife.events import Logger

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.sessions.base import (
    SessionInfo,
    SessionStore,
    Snapshot,
    check_blob_text,
    check_lock_args,
    check_start,
    json_bytes,
    parse_bool,
    parse_query,
    poll_until,
    validate_messages,
)
from ctxlife.sessions.ids import validate_blob_key, validate_session_id

__all__ = ["FileStore"]

log = Logger("ctxlife.sessions")

_CTX_SUFFIX = "_ctx.json"
_RAW_SUFFIX = "_raw.jsonl"
_BLOB_SUFFIX = "_blobs"
_LOCK_SUFFIX = ".lock"
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Session files are never symlinks: refuse to follow one planted in the folder.
_O_SAFE = _O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 16


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open on ``fd`` (not deleted or replaced meanwhile)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    fst = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    parts = []
    offset = 0
    while True:
        chunk = os.pread(fd, max(size - offset, _CHUNK), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _read_file(path: Path) -> bytes:
    """Read a whole session file without following a symlink (ELOOP is an OSError)."""
    fd = os.open(path, os.O_RDONLY | _O_SAFE)
    try:
        return _read_all(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FileStore(SessionStore):
    """Sessions as files in one folder (see the module docstring for the layout and guarantees).

    Args:
        directory: the session folder; created (``0700``) on the first write.
        fsync: fsync the raw file after each append (snapshots and blobs are always fsynced).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(os.path.abspath(os.path.expanduser(os.fspath(directory))))
        self.fsync = fsync
        self.url = f"file://{self.directory}"
        self._closed = False

    @classmethod
    def from_url(cls, url: str) -> FileStore:
        """Open ``file://relative/path``, ``file:///abs/path`` (optional ``?fsync=false``)."""
        if not url.lower().startswith("file://"):
            raise StoreError(f"not a file store URL: {url!r} (expected file://PATH)")
        rest = url[len("file://") :]
        path_part, _, query = rest.partition("?")
        path = unquote(path_part)
        if not path:
            raise StoreError(
                f"store URL {url!r} has no path; use file://workspace/sessions (relative) or file:///abs/path"
            )
        opts = parse_query(url, query, ("fsync",))
        fsync = parse_bool(opts["fsync"], "fsync", url) if "fsync" in opts else True
        return cls(path, fsync=fsync)

    # -- paths ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"session store {self.url} is closed")

    def _path(self, session_id: str, suffix: str) -> Path:
        validate_session_id(session_id)
        self._check_open()
        return self.directory / f"{session_id}{suffix}"

    def _ensure_dir(self, path: Path | None = None) -> None:
        """Create ``path`` (default: the session folder) and missing parents with mode 0700."""
        target = path or self.directory
        if target.is_dir():
            return
        missing = []
        p = target
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot create session folder {d}: {exc.strerror}") from None
            os.chmod(d, 0o700)  # umask may have removed bits; make sure it is exactly 0700
        if not target.is_dir():
            raise StoreError(f"session folder {target} exists but is not a directory")

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        path = self._path(session_id, _CTX_SUFFIX)
        try:
            data = _read_file(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read snapshot file {path}: {exc.strerror}") from None
        return Snapshot.from_json(data, source=f"snapshot file {path}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        path = self._path(snapshot.session_id, _CTX_SUFFIX)
        data = snapshot.to_json().encode("utf-8")
        self._ensure_dir()
        self._atomic_write(path, data)

    def _atomic_write(self, path: Path, data: bytes) -> None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except OSError as exc:
            raise StoreError(f"cannot create a temporary file in {path.parent}: {exc.strerror}") from None
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StoreError(f"cannot write {path}: {exc.strerror}") from None

    # -- raw history -----------------------------------------------------------------------------

    def append_raw(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        path = self._path(session_id, _RAW_SUFFIX)
        validate_messages(session_id, messages)
        if not messages:
            return
        data = b"".join(
            [json_bytes(m, what=f"message {i} for session {session_id!r}") + b"\n" for i, m in enumerate(messages)]
        )
        self._ensure_dir()
        try:
            self._locked_append(session_id, path, data)
        except OSError as exc:
            raise StoreError(f"cannot append {len(messages)} message(s) to {path}: {exc.strerror}") from None

    def _locked_append(self, session_id: str, path: Path, data: bytes) -> None:
        while True:
            created = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_SAFE, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not _same_file(fd, path):
                    continue  # deleted or replaced while we waited: retry on the new file
                self._repair_tail(session_id, fd, path)
                size_before = os.fstat(fd).st_size
                try:
                    _write_all(fd, data)  # one write() for the batch except on a short write
                    if self.fsync:
                        os.fsync(fd)
                except OSError:
                    # e.g. disk full: drop the partial batch so the batch stays all-or-nothing
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size_before)
                    raise
                if created:
                    _fsync_dir(path.parent)
                return
            finally:
                os.close(fd)  # also releases the flock

    def _repair_tail(self, session_id: str, fd: int, path: Path) -> None:
        """Under the exclusive lock: cut a torn last line (no trailing newline) back to the last newline."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        cut = 0
        end = size
        while end > 0:
            begin = max(0, end - _CHUNK)
            idx = os.pread(fd, end - begin, begin).rfind(b"\n")
            if idx >= 0:
                cut = begin + idx + 1
                break
            end = begin
        os.ftruncate(fd, cut)
        log.warning(
            "raw_torn_record_repaired",
            store="file",
            session_id=session_id,
            file=path.name,
            bytes_removed=size - cut,
        )

    def _read_raw_bytes(self, path: Path) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | _O_SAFE)
        except FileNotFoundError:
            return b""
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # wait for an append in progress
            return _read_all(fd)
        finally:
            os.close(fd)

    def _complete_lines(self, session_id: str, path: Path, data: bytes) -> list[bytes]:
        """Split ``data`` into complete records; drop (and warn about) a torn or invalid last one."""
        if not data:
            return []
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        if tail:
            log.warning(
                "raw_torn_record_skipped",
                store="file",
                session_id=session_id,
                file=path.name,
                reason="no trailing newline",
                bytes=len(tail),
            )
        if lines and self._parse(lines[-1]) is None:
            log.warning(
                "raw_torn_record_skipped",
                store="file",
                session_id=session_id,
                file=path.name,
                reason="invalid JSON in the last line",
                bytes=len(lines[-1]),
            )
            lines.pop()
        return lines

    @staticmethod
    def _parse(line: bytes) -> dict[str, Any] | None:
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def read_raw(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        path = self._path(session_id, _RAW_SUFFIX)
        check_start(start)
        try:
            lines = self._complete_lines(session_id, path, self._read_raw_bytes(path))
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}") from None
        out = []
        for lineno, line in enumerate(lines[start:], start + 1):
            value = self._parse(line)
            if value is None:
                raise StoreError(
                    f"raw history {path} is corrupt at line {lineno} (not a JSON object); only a "
                    f"torn last line is skipped automatically. Inspect or restore the file"
                )
            out.append(value)
        return out

    def raw_length(self, session_id: str) -> int:
        path = self._path(session_id, _RAW_SUFFIX)
        try:
            return len(self._complete_lines(session_id, path, self._read_raw_bytes(path)))
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}") from None

    # -- sessions --------------------------------------------------------------------------------

    def _session_ids(self) -> set[str]:
        self._check_open()
        ids: set[str] = set()
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return ids
        except OSError as exc:
            raise StoreError(f"cannot list session folder {self.directory}: {exc.strerror}") from None
        for entry in entries:
            name = entry.name
            for suffix in (_CTX_SUFFIX, _RAW_SUFFIX):
                if name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(SessionIdError):  # a foreign file that looks like ours
                        ids.add(validate_session_id(name[: -len(suffix)]))
        return ids

    def list_sessions(self) -> list[SessionInfo]:
        infos = []
        for sid in sorted(self._session_ids()):
            try:
                snap = self.load_snapshot(sid)
                updated_at = snap.updated_at if snap else None
            except StoreError as exc:
                # one corrupt snapshot must not hide the other sessions from a listing
                log.warning("snapshot_unreadable", store="file", session_id=sid, error=str(exc))
                updated_at = None
            infos.append(SessionInfo(sid, self.raw_length(sid), updated_at))
        return infos

    def delete(self, session_id: str) -> bool:
        raw = self._path(session_id, _RAW_SUFFIX)
        ctx = self._path(session_id, _CTX_SUFFIX)
        blobs = self._path(session_id, _BLOB_SUFFIX)
        existed = False
        try:
            # Hold the raw file's lock while unlinking it; an appender waiting on the old file sees it
            # was unlinked (_same_file) and retries on a new one.
            try:
                fd = os.open(raw, os.O_RDONLY | _O_SAFE)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if _same_file(fd, raw):
                        os.unlink(raw)
                        existed = True
                finally:
                    os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ctx)
                existed = True
            if blobs.is_dir():
                shutil.rmtree(blobs)
                existed = True
            if self.directory.is_dir():
                prefix = f".{session_id}{_CTX_SUFFIX}."
                for entry in os.scandir(self.directory):
                    if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
            self._remove_lock_file(session_id)
        except OSError as exc:
            raise StoreError(f"cannot delete session {session_id!r} in {self.directory}: {exc.strerror}") from None
        return existed

    def _remove_lock_file(self, session_id: str) -> None:
        """Remove the lock file if nobody holds it (a holder keeps it; lock() re-checks the inode)."""
        path = self.directory / f"{session_id}{_LOCK_SUFFIX}"
        try:
            fd = os.open(path, os.O_RDONLY | _O_SAFE)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        try:
            if _same_file(fd, path):
                os.unlink(path)
        finally:
            os.close(fd)

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """Exclusive ``flock`` on ``{SESSION_ID}.lock``; released by the kernel if the holder dies.

        ``ttl_seconds`` is not needed here (see the module docstring) and only validated.
        """
        path = self._path(session_id, _LOCK_SUFFIX)
        check_lock_args(ttl_seconds, timeout)
        self._ensure_dir()
        held: list[int] = []

        def try_once() -> bool:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _O_SAFE, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            if not _same_file(fd, path):  # removed by delete() between open and flock
                os.close(fd)
                return False
            held.append(fd)
            return True

        try:
            poll_until(try_once, timeout, f"the lock of session {session_id!r} ({path})")
        except OSError as exc:
            raise StoreError(f"cannot lock {path}: {exc.strerror}") from None
        try:
            yield
        finally:
            os.close(held[0])

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        folder = self._path(session_id, _BLOB_SUFFIX)
        validate_blob_key(key)
        data = check_blob_text(session_id, key, text)
        self._ensure_dir()
        self._ensure_dir(folder)
        self._atomic_write(folder / key, data)

    def get_blob(self, session_id: str, key: str) -> str | None:
        folder = self._path(session_id, _BLOB_SUFFIX)
        validate_blob_key(key)
        path = folder / key
        try:
            return _read_file(path).decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read blob {path}: {exc}") from None

    def close(self) -> None:
        self._closed = True
