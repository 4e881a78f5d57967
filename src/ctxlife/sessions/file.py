"""The default, embedded session store: plain files in one folder.

URL options, the folder's layout, crash safety and repair, locks, limits: docs/sessions.md, "The file store".

Incremental reads: the store remembers, per session, where the last record it read ends (checked
against that record's bytes before use, so a file truncated and rewritten by another process is
detected), so reading the records after a recent sequence number reads only the new bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.events import Logger
from ctxlife.sessions.base import (
    LockTimeoutError,
    SessionInfo,
    SessionStore,
    check_after_seq,
    check_blob_text,
    check_lock_args,
    conflict,
    decode_calls,
    erased_call,
    erased_doc,
)
from ctxlife.sessions.file_io import (
    O_SAFE,
    Parsed,
    Tail,
    atomic_write,
    digest,
    fsync_dir,
    link_new,
    locked,
    parse_bulk,
    read_file,
    read_range,
    read_shared,
    same_file,
    write_all,
)
from ctxlife.sessions.ids import validate_blob_key, validate_session_id, validate_view
from ctxlife.sessions.records import (
    CallRecord,
    RawRecord,
    appended_records,
    decode_record,
    json_text,
    record_json,
)
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.sessions.urls import parse_bool, parse_query, parse_ttl

__all__ = ["FileStore"]

log = Logger("ctxlife.sessions")

_CTX_SUFFIX = "_ctx.json"
_VIEW_MARK = "_ctx@"
_RAW_SUFFIX = "_raw.jsonl"
_CALLS_SUFFIX = "_calls.jsonl"
_BLOB_SUFFIX = "_blobs"
_DERIVED_SUFFIX = "_derived"  # data derived from the session (the recall index), deleted with it
_LOCK_SUFFIX = ".lock"
_MARK_KEY_FILE = ".ctxlife_mark_key"  # SessionStore.mark_key; no session id starts with "."


class FileStore(SessionStore):
    """Sessions as files in one folder (the layout and guarantees: docs/sessions.md, "The file store").

    Args:
        directory: the session folder; created (``0700``) on the first write.
        fsync: fsync the raw file after each append (snapshots and blobs are always fsynced).
        ttl: seconds of idle life per session (None: keep forever).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True, ttl: float | None = None) -> None:
        self.directory = Path(os.path.abspath(os.path.expanduser(os.fspath(directory))))
        self.fsync = fsync
        self.ttl = ttl
        self.url = f"file://{self.directory}"
        self._closed = False
        self._tails: dict[str, Tail] = {}
        self._tails_lock = threading.Lock()
        # per session: (dev, inode, size, lines) of its calls file after this process's last append
        self._call_counts: dict[str, tuple[int, int, int, int]] = {}

    @classmethod
    def from_url(cls, url: str) -> FileStore:
        """Open ``file://relative/path``, ``file:///abs/path`` (options ``?fsync=false``, ``?ttl=SECONDS``)."""
        if not url.lower().startswith("file://"):
            raise StoreError(f"not a file store URL: {url!r} (expected file://PATH)")
        rest = url[len("file://") :]
        path_part, _, query = rest.partition("?")
        path = unquote(path_part)
        if not path:
            raise StoreError(
                f"store URL {url!r} has no path; use file://workspace/sessions (relative) or file:///abs/path"
            )
        opts = parse_query(url, query, ("fsync", "ttl"))
        fsync = parse_bool(opts["fsync"], "fsync", url) if "fsync" in opts else True
        return cls(path, fsync=fsync, ttl=parse_ttl(opts, url))

    # -- paths ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"session store {self.url} is closed")

    def _path(self, session_id: str, suffix: str) -> Path:
        validate_session_id(session_id)
        self._check_open()
        return self.directory / f"{session_id}{suffix}"

    def _ctx_path(self, session_id: str, view: str) -> Path:
        validate_view(view)
        return self._path(session_id, _CTX_SUFFIX if not view else f"{_VIEW_MARK}{view}.json")

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

    def _entries(self) -> list[os.DirEntry[str]]:
        """The session folder's entries (none before the first write)."""
        try:
            return list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list session folder {self.directory}: {exc.strerror}") from None

    def _session_files(self, session_id: str) -> list[Path]:
        """The session's raw file and snapshot files that exist (not blobs or the lock)."""
        found: list[Path] = []
        view_prefix = f"{session_id}{_VIEW_MARK}"
        for entry in self._entries():
            name = entry.name
            if name in (f"{session_id}{_RAW_SUFFIX}", f"{session_id}{_CTX_SUFFIX}") or (
                name.startswith(view_prefix) and name.endswith(".json")
            ):
                found.append(Path(entry.path))
        return found

    # -- expiry ---------------------------------------------------------------------------------

    def _last_write(self, session_id: str) -> float | None:
        """When the session was last written: the raw file's modification time.

        Every write touches the raw file (appends by writing it; with a ttl, snapshot and blob writes
        by :meth:`_touch`), so one ``stat`` answers. A session with no raw file (only snapshots or
        blobs) falls back to its files' times.
        """
        try:
            return os.stat(self.directory / f"{session_id}{_RAW_SUFFIX}", follow_symlinks=False).st_mtime
        except FileNotFoundError:
            times = []
            for path in self._session_files(session_id):
                with contextlib.suppress(OSError):
                    times.append(os.stat(path, follow_symlinks=False).st_mtime)
            return max(times) if times else None
        except OSError:
            return None

    def _touch(self, session_id: str) -> None:
        """With a ttl: mark the session active now (the raw file's time is the session's clock)."""
        if self.ttl is None:
            return
        path = self.directory / f"{session_id}{_RAW_SUFFIX}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | O_SAFE, 0o600)
            try:
                os.utime(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot mark session {session_id!r} active ({path}): {exc.strerror}") from None

    def _expired(self, session_id: str) -> bool:
        """With a ttl: whether the session was idle longer than it (then it counts as gone)."""
        if self.ttl is None:
            return False
        last = self._last_write(session_id)
        return last is not None and time.time() - last > self.ttl

    def _drop_if_expired(self, session_id: str) -> bool:
        """Before a write or a listing: delete an expired session (a write starts it over, as Redis would)."""
        if not self._expired(session_id):
            return False
        self.delete(session_id)
        log.info("session_expired", store="file", session_id=session_id, ttl_seconds=self.ttl)
        return True

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        path = self._ctx_path(session_id, view)
        if self._expired(session_id):
            return None
        try:
            data = read_file(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read snapshot file {path}: {exc.strerror}") from None
        return Snapshot.from_json(data, source=f"snapshot file {path}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        path = self._ctx_path(snapshot.session_id, snapshot.view)
        data = snapshot.to_json().encode("utf-8")
        self._drop_if_expired(snapshot.session_id)
        self._ensure_dir()
        atomic_write(path, data)
        self._touch(snapshot.session_id)

    # -- raw history: parsing ----------------------------------------------------------------------

    def _cached_tail(self, session_id: str, fd: int, st: os.stat_result) -> Tail | None:
        """The remembered tail of this file, if it is still valid (same file, same last line)."""
        with self._tails_lock:
            tail = self._tails.get(session_id)
        if tail is None or (tail.dev, tail.ino) != (st.st_dev, st.st_ino) or st.st_size < tail.offset:
            return None
        if tail.offset and digest(os.pread(fd, tail.offset - tail.last_start, tail.last_start)) != tail.last_digest:
            return None  # truncated and rewritten meanwhile by another process
        return tail

    def _remember(self, session_id: str, tail: Tail) -> None:
        with self._tails_lock:
            self._tails[session_id] = tail

    def _forget(self, session_id: str) -> None:
        with self._tails_lock:
            self._tails.pop(session_id, None)

    def _parse(
        self,
        session_id: str,
        path: Path,
        fd: int,
        st: os.stat_result,
        start: Tail | None,
        *,
        after_seq: int,
        view: str | None,
        strict: bool,
        keep: bool,
        quiet: bool = False,
    ) -> Parsed:
        """Parse the records after ``start`` (None: the whole file); collect those after ``after_seq``."""
        base = start or Tail(st.st_dev, st.st_ino, 0, 0, 0, 0, b"")
        data = read_range(fd, base.offset, st.st_size)
        records: list[RawRecord] = []
        lines, seq, last_start, last_line = base.lines, base.seq, base.last_start, None
        pos = 0
        # Complete lines; a torn tail (no newline) is never a record.
        complete_end = data.rfind(b"\n") + 1
        if complete_end < len(data) and not quiet:
            log.warning(
                "raw_torn_record_skipped",
                store="file",
                session_id=session_id,
                file=path.name,
                reason="no trailing newline",
                bytes=len(data) - complete_end,
            )
        bulk = parse_bulk(data, complete_end)
        if bulk is not None:  # every line valid (the usual file): decoded in one call
            for record in bulk:
                if keep and record.seq > after_seq and (view is None or record.view == view):
                    records.append(record)
            if bulk:
                last = data.rfind(b"\n", 0, complete_end - 1) + 1
                last_start, last_line, seq = base.offset + last, data[last : complete_end - 1], bulk[-1].seq
            lines += len(bulk)
            pos = complete_end
        bad: list[tuple[int, int, str]] = []  # (offset in data, line number, problem) not yet judged
        good_end = complete_end if bulk is not None else 0  # offset in data just after the last valid line
        while pos < complete_end:
            nl = data.index(b"\n", pos)
            line = data[pos:nl]
            lines += 1
            try:
                value = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                bad.append((pos, lines, "blank line" if not line.strip() else "invalid JSON"))
                pos = nl + 1
                continue
            try:
                record = decode_record(value)
            except ValueError as exc:
                bad.append((pos, lines, str(exc)))
                pos = nl + 1
                continue
            for _, lineno, problem in bad:  # invalid lines followed by a valid one: corruption
                self._corrupt(
                    strict,
                    f"raw history of session {session_id!r} ({path}) is corrupt at line {lineno}: {problem}; only "
                    f"invalid lines at the end are skipped automatically. Inspect or restore the file",
                    store="file",
                    session_id=session_id,
                    file=path.name,
                    line=lineno,
                    problem=problem,
                )
            bad.clear()
            seq = record.seq
            last_start, last_line = base.offset + pos, line
            good_end = nl + 1
            if keep and record.seq > after_seq and (view is None or record.view == view):
                records.append(record)
            pos = nl + 1
        invalid_end = None
        if bad:
            invalid_end = base.offset + bad[0][0]
            for _, lineno, problem in [] if quiet else bad:
                log.warning(
                    "raw_torn_record_skipped",
                    store="file",
                    session_id=session_id,
                    file=path.name,
                    reason="invalid JSON in the last line"
                    if problem == "invalid JSON"
                    else f"invalid last line ({problem})",
                    line=lineno,
                )
            lines -= len(bad)
        if last_line is None:
            tail = base  # no valid line after it
        else:
            tail = Tail(st.st_dev, st.st_ino, base.offset + good_end, lines, seq, last_start, digest(last_line + b"\n"))
        return Parsed(records, tail, invalid_end)

    def _read(self, session_id: str, after_seq: int, view: str | None, strict: bool, keep: bool) -> Parsed | None:
        path = self._path(session_id, _RAW_SUFFIX)
        with locked(path) as fd:
            if fd is None:
                return None
            st = os.fstat(fd)
            tail = self._cached_tail(session_id, fd, st)
            start = tail if tail is not None and tail.seq <= after_seq else None
            if tail is not None and start is None and tail.offset and tail.seq - 1 == after_seq:
                # From the last record read (a reader checking it is unchanged): its line again.
                start = Tail(tail.dev, tail.ino, tail.last_start, tail.lines - 1, after_seq, tail.last_start, b"")
            parsed = self._parse(
                session_id, path, fd, st, start, after_seq=after_seq, view=view, strict=strict, keep=keep
            )
            self._remember(session_id, parsed.tail)
            return parsed

    # -- raw history: the interface -------------------------------------------------------------------

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        check_after_seq(after_seq)
        if view is not None:
            validate_view(view)
        if self._expired(session_id):
            return []
        parsed = self._read(session_id, after_seq, view, strict, keep=True)
        return parsed.records if parsed is not None else []

    def head(self, session_id: str) -> int:
        if self._expired(session_id):
            return 0
        parsed = self._read(session_id, 1 << 62, None, strict=False, keep=False)
        return parsed.tail.seq if parsed is not None else 0

    def append(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        *,
        view: str = "",
        if_head: int | None = None,
        fingerprints: list[str] | None = None,
    ) -> list[RawRecord]:
        path = self._path(session_id, _RAW_SUFFIX)
        prepared = self._prepare_append(session_id, messages, view, if_head, fingerprints)
        if not prepared:
            return []
        self._drop_if_expired(session_id)
        self._ensure_dir()
        try:
            return self._locked_append(session_id, path, view, if_head, prepared, messages)
        except OSError as exc:
            raise StoreError(f"cannot append {len(messages)} message(s) to {path}: {exc.strerror}") from None

    def _locked_append(
        self, session_id: str, path: Path, view: str, if_head: int | None, prepared: list[Any], messages: list[Any]
    ) -> list[RawRecord]:
        while True:
            created = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | O_SAFE, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not same_file(fd, path):
                    continue  # deleted or replaced while we waited: retry on the new file
                tail = self._repair_and_tail(session_id, path, fd)
                if if_head is not None and tail.seq != if_head:
                    raise conflict(session_id, if_head, tail.seq)
                now = time.time()
                texts = [record_json(tail.seq + 1 + i, view, now, p) + "\n" for i, p in enumerate(prepared)]
                data = "".join(texts).encode("utf-8")
                size_before = tail.offset
                try:
                    write_all(fd, data)  # one write() for the batch except on a short write
                    if self.fsync:
                        os.fsync(fd)
                except OSError:
                    # e.g. disk full: drop the partial batch so the batch stays all-or-nothing
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size_before)
                    self._forget(session_id)
                    raise
                if created:
                    fsync_dir(path.parent)
                last = texts[-1].encode("utf-8")
                st = os.fstat(fd)
                self._remember(
                    session_id,
                    Tail(
                        st.st_dev,
                        st.st_ino,
                        size_before + len(data),
                        tail.lines + len(texts),
                        tail.seq + len(texts),
                        size_before + len(data) - len(last),
                        digest(last),
                    ),
                )
                return appended_records(tail.seq + 1, messages, prepared, view, now)
            finally:
                os.close(fd)  # also releases the flock

    def _repair_and_tail(self, session_id: str, path: Path, fd: int) -> Tail:
        """Under the exclusive lock: cut torn or invalid lines at the end; return the valid tail."""
        st = os.fstat(fd)
        cached = self._cached_tail(session_id, fd, st)
        if cached is not None and cached.offset == st.st_size:
            return cached  # the common case: nothing was written since our last append or read
        parsed = self._parse(
            session_id, path, fd, st, cached, after_seq=1 << 62, view=None, strict=False, keep=False, quiet=True
        )
        cut = parsed.tail.offset
        if cut < st.st_size:
            os.ftruncate(fd, cut)
            log.warning(
                "raw_torn_record_repaired",
                store="file",
                session_id=session_id,
                file=path.name,
                bytes_removed=st.st_size - cut,
            )
        self._remember(session_id, parsed.tail)
        return parsed.tail

    # -- sessions --------------------------------------------------------------------------------

    def _session_ids(self) -> set[str]:
        self._check_open()
        ids: set[str] = set()
        for entry in self._entries():
            name = entry.name
            sid = None
            if name.endswith(_CTX_SUFFIX):
                sid = name[: -len(_CTX_SUFFIX)]
            elif name.endswith(_RAW_SUFFIX):
                sid = name[: -len(_RAW_SUFFIX)]
            elif _VIEW_MARK in name and name.endswith(".json"):
                sid = name.partition(_VIEW_MARK)[0]
            if sid is not None and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(SessionIdError):  # a foreign file that looks like ours
                    ids.add(validate_session_id(sid))
        return ids

    def _views_with_snapshots(self, session_id: str) -> list[str]:
        views = []
        for path in self._session_files(session_id):
            if path.name == f"{session_id}{_CTX_SUFFIX}":
                views.append("")
            elif _VIEW_MARK in path.name:
                with contextlib.suppress(SessionIdError):
                    views.append(validate_view(path.name.partition(_VIEW_MARK)[2][: -len(".json")]))
        return sorted(views)

    def list_sessions(self) -> list[SessionInfo]:
        infos = []
        for sid in sorted(self._session_ids()):
            if self._drop_if_expired(sid):
                continue
            updated = []
            for view in self._views_with_snapshots(sid):
                try:
                    snap = self.load_snapshot(sid, view)
                    if snap is not None:
                        updated.append(snap.updated_at)
                except StoreError as exc:
                    # one corrupt snapshot must not hide the other sessions from a listing
                    log.warning("snapshot_unreadable", store="file", session_id=sid, view=view, error=str(exc))
            infos.append(SessionInfo(sid, self.head(sid), max(updated) if updated else None, self._last_write(sid)))
        return infos

    def derived_dir(self, session_id: str) -> Path | None:
        return self._path(session_id, _DERIVED_SUFFIX)

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        path = self._path(session_id, _RAW_SUFFIX)
        if not values:
            return 0
        with locked(path, os.O_RDWR, fcntl.LOCK_EX, "erase records in") as fd:
            if fd is None:
                return 0
            # Only a rewrite, under this lock, writes a temporary copy of the raw history: one found
            # now is a killed erase's, whose original was never replaced (rolled back: erase again).
            self._remove_temps(session_id, snapshots=False)
            self._repair_and_tail(session_id, path, fd)
            lines = read_file(path).splitlines(keepends=True)
            changed = 0
            for i, line in enumerate(lines):
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                seq = doc.get("seq") if isinstance(doc, dict) else None
                if isinstance(seq, int) and seq in values and "msg" in doc:
                    lines[i] = (erased_doc(doc, values[seq]) + "\n").encode("utf-8")
                    changed += 1
            if changed:
                # Appenders wait on this file's lock, then see it was replaced (same_file) and retry.
                atomic_write(path, b"".join(lines))
                self._forget(session_id)
            return changed

    # -- call records ------------------------------------------------------------------------------

    def append_call(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        """One line appended under an exclusive ``flock`` of the calls file (its number: the lines before
        it, counted once per process and then remembered by size)."""
        path = self._path(session_id, _CALLS_SUFFIX)
        validate_view(view)
        line = (json_text({"view": view, "doc": doc}, what=f"call record of session {session_id!r}") + "\n").encode()
        self._drop_if_expired(session_id)
        self._ensure_dir()
        try:
            while True:
                created = not path.exists()
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | O_SAFE, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if not same_file(fd, path):
                        continue  # deleted or rewritten (erase) while we waited: append to the new file
                    st = os.fstat(fd)
                    known = self._call_counts.get(session_id)
                    if known is not None and known[:3] == (st.st_dev, st.st_ino, st.st_size):
                        lines = known[3]
                    else:
                        data = read_range(fd, 0, st.st_size)
                        if data and not data.endswith(b"\n"):
                            write_all(fd, b"\n")  # a torn last line (a crash) stays one unreadable line
                            data += b"\n"
                        lines = data.count(b"\n")
                    write_all(fd, line)
                    if self.fsync:
                        os.fsync(fd)
                    if created:
                        fsync_dir(path.parent)
                    st = os.fstat(fd)
                    self._call_counts[session_id] = (st.st_dev, st.st_ino, st.st_size, lines + 1)
                    break
                finally:
                    os.close(fd)
        except OSError as exc:
            self._call_counts.pop(session_id, None)
            raise StoreError(f"cannot append a call record to {path}: {exc.strerror}") from None
        self._touch(session_id)
        return lines + 1

    def read_calls(self, session_id: str, view: str | None = None) -> list[CallRecord]:
        path = self._path(session_id, _CALLS_SUFFIX)
        if view is not None:
            validate_view(view)
        if self._expired(session_id):
            return []
        data = read_shared(path)
        return [] if data is None else decode_calls(session_id, data.splitlines(), view)

    def _rewrite_calls(self, session_id: str, docs: dict[int, dict[str, Any]]) -> int:
        path = self._path(session_id, _CALLS_SUFFIX)
        if not docs:
            return 0
        with locked(path, os.O_RDWR, fcntl.LOCK_EX, "erase call records in") as fd:
            if fd is None:
                return 0
            lines = read_range(fd, 0, os.fstat(fd).st_size).splitlines(keepends=True)
            try:
                found = {n: erased_call(lines[n - 1], doc) for n, doc in docs.items() if 0 < n <= len(lines)}
            except ValueError as exc:
                raise StoreError(f"cannot erase call records in {path}: {exc}") from None
            for n, text in found.items():
                lines[n - 1] = (text + "\n").encode("utf-8")
            if found:
                # Appenders wait on this file's lock, then see it was replaced (same_file) and retry.
                atomic_write(path, b"".join(lines))
                self._call_counts.pop(session_id, None)
            return len(found)

    def _remove_temps(self, session_id: str, *, snapshots: bool) -> None:
        """Delete the session's temporary files (``atomic_write``'s, left by a process killed while
        writing): copies of its raw history (an erase's) and, with ``snapshots``, of its snapshots
        (only when deleting the session: another process may be saving one now)."""
        prefixes = [f".{session_id}{_RAW_SUFFIX}."]
        if snapshots:
            prefixes += [f".{session_id}{_CTX_SUFFIX}.", f".{session_id}{_VIEW_MARK}"]
        for entry in self._entries():
            name = entry.name
            if name.endswith(".tmp") and name.startswith(tuple(prefixes)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def delete(self, session_id: str) -> bool:
        raw = self._path(session_id, _RAW_SUFFIX)
        blobs = self._path(session_id, _BLOB_SUFFIX)
        derived = self._path(session_id, _DERIVED_SUFFIX)
        existed = False
        try:
            if derived.is_dir():
                shutil.rmtree(derived, ignore_errors=True)
                existed = True
            # Hold the raw file's lock while unlinking it; an appender waiting on the old file sees it
            # was unlinked (same_file) and retries on a new one.
            with locked(raw, lock=fcntl.LOCK_EX, what="delete") as fd:
                if fd is not None and same_file(fd, raw):
                    os.unlink(raw)
                    existed = True
            self._forget(session_id)
            for path in self._session_files(session_id):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    existed = True
            if blobs.is_dir():
                shutil.rmtree(blobs)
                existed = True
            self._call_counts.pop(session_id, None)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(session_id, _CALLS_SUFFIX))
                existed = True
            self._remove_temps(session_id, snapshots=True)
            self._remove_lock_file(session_id)
        except OSError as exc:
            raise StoreError(f"cannot delete session {session_id!r} in {self.directory}: {exc.strerror}") from None
        return existed

    def _remove_lock_file(self, session_id: str) -> None:
        """Remove the lock file if nobody holds it (filelock re-checks the inode after locking)."""
        path = self.directory / f"{session_id}{_LOCK_SUFFIX}"
        try:
            fd = os.open(path, os.O_RDONLY | O_SAFE)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        try:
            if same_file(fd, path):
                os.unlink(path)
        finally:
            os.close(fd)

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """Exclusive ``filelock.FileLock`` on ``{SESSION_ID}.lock``; released by the kernel if the holder dies.

        ``ttl_seconds`` is not needed here (the kernel releases a dead holder's ``flock``) and only validated.
        """
        import filelock  # lazy: slow to import, and only a writer takes the lock

        path = self._path(session_id, _LOCK_SUFFIX)
        check_lock_args(ttl_seconds, timeout)
        self._ensure_dir()
        if path.is_symlink():
            raise StoreError(f"cannot lock {path}: it is a symbolic link (refusing to follow it)")
        # A new FileLock per call: filelock counts re-entry per object, and the session lock must
        # not be re-entrant (a second holder in the same thread waits like any other).
        lock = filelock.FileLock(path, timeout=-1 if timeout is None else timeout, mode=0o600, thread_local=False)
        try:
            lock.acquire(poll_interval=0.002)
        except filelock.Timeout:
            raise LockTimeoutError(
                f"could not take the lock of session {session_id!r} ({path}) within {timeout} s: another "
                f"worker holds it. Retry later, raise the timeout, or check for a stuck worker"
            ) from None
        except OSError as exc:
            raise StoreError(f"cannot lock {path}: {exc.strerror}") from None
        try:
            yield
        finally:
            lock.release()

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        folder = self._path(session_id, _BLOB_SUFFIX)
        validate_blob_key(key)
        data = check_blob_text(session_id, key, text)
        self._drop_if_expired(session_id)
        self._ensure_dir()
        self._ensure_dir(folder)
        atomic_write(folder / key, data)
        self._touch(session_id)

    def get_blob(self, session_id: str, key: str) -> str | None:
        folder = self._path(session_id, _BLOB_SUFFIX)
        validate_blob_key(key)
        if self._expired(session_id):
            return None
        path = folder / key
        try:
            return read_file(path).decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read blob {path}: {exc}") from None

    def _delete_blob(self, session_id: str, key: str) -> None:
        path = self._path(session_id, _BLOB_SUFFIX) / validate_blob_key(key)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot delete blob {path}: {exc.strerror}") from None

    def _read_mark_key(self, create: bool) -> bytes | None:
        path = self.directory / _MARK_KEY_FILE
        try:
            return bytes.fromhex(read_file(path).decode("ascii").strip())
        except FileNotFoundError:
            if not create:
                return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read the store's mark key {path}: {exc}") from None
        self._ensure_dir()
        link_new(path, secrets.token_bytes(32).hex().encode("ascii"), "the store's mark key")
        return self._read_mark_key(create=False)

    def own_reader(self) -> FileStore:
        """A handle on the same folder whose read positions are its own.

        The store remembers where its last read of a session ended, one position per object, so a
        reader that must not be moved by another's appends (the recall index) reads through this.
        It is a copy of this object, so a subclass's reads stay as they are (a replay's scratch copy
        gives each record the time it was said); not ``copy.copy``, which gives a store itself back.
        """
        reader = object.__new__(type(self))
        reader.__dict__.update(vars(self))
        reader._tails = {}
        reader._tails_lock = threading.Lock()
        reader._call_counts = {}
        return reader

    def close(self) -> None:
        self._closed = True
