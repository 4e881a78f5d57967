"""The history index: SQLite FTS5 (standard library), BM25 ranking, incremental by sequence number.

One index per session. Records are added as they are recorded (only those past :attr:`last_seq`),
so a call never re-indexes the history; the index is a cache of the raw history and can always be
rebuilt from it (:meth:`HistoryIndex.reset`, then add every record again). It follows the session's
event log: a ``replace`` record swaps the text of its slot, a ``remove`` record drops it, so edited
and deleted messages are never found again. It lives in a SQLite file
(several processes may share it: WAL mode, and a record is indexed once whoever adds it first) or in
memory.

Tokenization: FTS5's ``unicode61`` tokenizer with Porter stemming for words; scripts without spaces
are stored as character bigrams (:mod:`ctxlife.recall.text`), so Chinese is searchable without a
segmenter.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxlife.errors import CtxlifeError
from ctxlife.recall.records import CHUNK_CHARS, Record, documents, message_text
from ctxlife.recall.text import dates_in, index_text, query_terms, term_pattern

#: Bumped when the schema or the tokenization changes: an index of another version is rebuilt.
INDEX_VERSION = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    recorded_at REAL,
    day TEXT,
    md TEXT,
    view TEXT,
    calls INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    part INTEGER NOT NULL,
    head TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_seq ON docs (seq);
CREATE INDEX IF NOT EXISTS records_md ON records (md);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
);
"""


class IndexError_(CtxlifeError):  # noqa: N801 - not the builtin IndexError
    """The history index could not be opened or written."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the document (``seq``, ``part``) and how well it matched (higher is better)."""

    seq: int
    part: int
    score: float
    text: str
    role: str
    recorded_at: float | None
    day: str | None
    view: str | None
    head: str = ""


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as the index keeps it (its text, not the whole message); ``calls``: it calls tools."""

    seq: int
    role: str
    text: str
    recorded_at: float | None
    day: str | None
    view: str | None
    calls: bool = False


class HistoryIndex:
    """A full-text index of one session's raw history.

    Args:
        path: the SQLite file to keep it in (created with its folder), or None for memory.
        chunk_chars: long texts are indexed in chunks of about this many characters.
    """

    def __init__(self, path: str | Path | None = None, *, chunk_chars: int = CHUNK_CHARS) -> None:
        self.path = Path(path) if path is not None else None
        self.chunk_chars = chunk_chars
        self._lock = threading.RLock()
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._db = sqlite3.connect(
                str(self.path) if self.path is not None else ":memory:",
                timeout=10.0,
                isolation_level=None,
                check_same_thread=False,
            )
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA secure_delete=ON")  # removed text is overwritten, not left in free pages
            self._db.executescript(_SCHEMA)
            version = self._meta("version")
            if version is None:
                self._set_meta("version", str(INDEX_VERSION))
            elif version != str(INDEX_VERSION):
                self._drop_all()
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot open the history index {self.path or ':memory:'}: {exc}") from None
        self._last_seq = self._read_last_seq()
        self._docs = self._count_docs()
        self._views = self._read_views()
        # Document frequencies, kept while the index has grown by less than a tenth: they only
        # weigh terms, and recomputing them on every add made every search pay for them again.
        self._df: dict[str, int] = {}
        self._df_docs = self._docs

    # -- bookkeeping -------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def _read_last_seq(self) -> int:
        value = self._meta("last_seq")
        return int(value) if value else 0

    @property
    def last_fingerprint(self) -> str | None:
        """The fingerprint of the record at :attr:`last_seq`, when the store gave one."""
        return self._meta("last_fp") or None

    def _drop_all(self) -> None:
        with self._lock:
            self._db.executescript(
                "DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS docs; DROP TABLE IF EXISTS fts; DELETE FROM meta;"
            )
            self._db.executescript(_SCHEMA)
            self._set_meta("version", str(INDEX_VERSION))
            self._last_seq = 0
            self._docs = 0
            self._views = set()
            self._df = {}

    @property
    def last_seq(self) -> int:
        """The highest sequence number indexed (0 when empty; the store numbers records from 1)."""
        return self._last_seq

    def refresh(self) -> int:
        """Re-read :attr:`last_seq` from the file (another process may have added records)."""
        with self._lock:
            last = self._read_last_seq()
            if last != self._last_seq:
                self._docs = self._count_docs()
                self._views = self._read_views()
            self._last_seq = last
            return last

    def reset(self) -> None:
        """Forget everything (to rebuild from the raw history); the old text is overwritten on disk."""
        self._drop_all()
        if self.path is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # no old page left in the log either
            except sqlite3.Error:
                pass  # another connection reads: the log is truncated at its next checkpoint

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM records").fetchone()[0])

    # -- adding ------------------------------------------------------------------------------

    def add(self, records: Iterable[Record]) -> int:
        """Apply the records past :attr:`last_seq` (add, replace, remove); return how many changed the index.

        Records at or below :attr:`last_seq` are skipped, so feeding the same records twice (or from
        two processes) applies them once.
        """
        changed = 0
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                last = self._read_last_seq()
                fp: str | None = None
                for record in records:
                    if record.seq <= last:
                        continue
                    changed += self._apply(record)
                    last, fp = record.seq, record.fingerprint
                if last != self._last_seq or fp is not None:
                    self._set_meta("last_seq", str(last))
                    self._set_meta("last_fp", fp or "")
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise IndexError_(f"cannot write the history index {self.path or ':memory:'}: {exc}") from None
            self._last_seq = last
        return changed

    def _apply(self, record: Record) -> int:
        op = record.op or "add"
        if op == "add":
            return self._insert(record, record.seq)
        if op in ("remove", "replace") and record.target is not None:
            removed = self._delete(record.target)
            if op == "replace":
                return self._insert(record, record.target) or removed
            return removed
        return 0  # an event this version does not know: the text it carries is not indexed

    def _delete(self, slot: int) -> int:
        """Drop a slot's record, documents and postings (FTS5 contentless delete: the same body again)."""
        rows = self._db.execute(
            "SELECT d.id, d.head, CASE WHEN d.text = '' THEN r.text ELSE d.text END FROM docs d "
            "JOIN records r ON r.seq = d.seq WHERE d.seq = ?",
            (slot,),
        ).fetchall()
        for doc_id, head, text in rows:
            body = f"{head}\n{text}" if head else text
            self._db.execute("INSERT INTO fts (fts, rowid, body) VALUES ('delete', ?, ?)", (doc_id, index_text(body)))
        self._db.execute("DELETE FROM docs WHERE seq = ?", (slot,))
        self._docs -= len(rows)
        cur = self._db.execute("DELETE FROM records WHERE seq = ?", (slot,))
        return 1 if cur.rowcount or rows else 0

    def _read_views(self) -> set[str | None]:
        return set(json.loads(self._meta("views") or "[]"))

    def _note_view(self, view: str | None) -> None:
        if view not in self._views:
            self._views = self._read_views() | {view}
            self._set_meta("views", json.dumps(sorted(self._views, key=lambda v: (v is None, v or ""))))

    def _count_docs(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM docs").fetchone()[0])

    def _insert(self, record: Record, slot: int) -> int:
        message = record.message if isinstance(record.message, dict) else {}
        role = str(message.get("role") or "")
        day = _day(record.recorded_at)
        text = message_text(message).strip()
        cur = self._db.execute(
            "INSERT OR IGNORE INTO records (seq, role, recorded_at, day, md, view, calls, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                slot,
                role,
                record.recorded_at,
                day,
                day[5:] if day else None,
                record.view,
                int(_calls_tools(message)),
                text,
            ),
        )
        if cur.rowcount == 0:
            return 0
        self._note_view(record.view)
        for doc in documents(Record(slot, message, record.recorded_at, record.view), self.chunk_chars):
            stored = "" if doc.text == text else doc.text  # a whole message is read from its record
            doc_id = self._db.execute(
                "INSERT INTO docs (seq, part, head, text) VALUES (?, ?, ?, ?)", (doc.seq, doc.part, doc.head, stored)
            ).lastrowid
            body = f"{doc.head}\n{doc.text}" if doc.head else doc.text
            self._db.execute("INSERT INTO fts (rowid, body) VALUES (?, ?)", (doc_id, index_text(body)))
            self._docs += 1
        return 1

    # -- searching ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        exclude: Iterable[int] = (),
        use_dates: bool = True,
        tool_weight: float = 1.0,
        view: str | None = None,
    ) -> list[Hit]:
        """The documents that best match ``query`` (BM25), best first, skipping records in ``exclude``.

        When the query names calendar dates ("on May 2nd", "5月2日"), documents recorded on those
        days come first (ranked among themselves by BM25, or in order when the query has no other
        words); the rest follow. ``tool_weight`` multiplies the score of tool results. ``view``
        keeps only the records of that view (None: every view).
        """
        excluded = set(exclude)
        if view is not None and self._views <= {view}:
            view = None  # one view only (the usual case): no filter to apply
        terms = query_terms(query)
        days = dates_in(query) if use_dates else []
        hits: list[Hit] = []
        with self._lock:
            terms = self._discriminating(terms)
            if days:
                hits = self._dated(terms, days, limit, excluded, tool_weight, view)
            if len(hits) < limit and terms:
                seen = {(h.seq, h.part) for h in hits}
                more = self._ranked(terms, limit + len(excluded) + len(hits), tool_weight, view)
                hits += [h for h in more if (h.seq, h.part) not in seen and h.seq not in excluded]
        return hits[:limit]

    _FIELDS = (
        "d.seq, d.part, CASE WHEN d.text = '' THEN r.text ELSE d.text END, r.role, r.recorded_at, r.day, r.view, d.head"
    )

    def _ranked(self, terms: Sequence[str], limit: int, tool_weight: float = 1.0, view: str | None = None) -> list[Hit]:
        match = " OR ".join(f'"{t}"' for t in terms)
        try:
            # The ranking alone first (FTS5 sorts its own matches fast), then the few rows it found.
            if view is None:
                rows = self._db.execute(
                    "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?", (match, limit * 3)
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT fts.rowid, -bm25(fts) FROM fts JOIN docs d ON d.id = fts.rowid "
                    "JOIN records r ON r.seq = d.seq WHERE fts MATCH ? AND r.view = ? ORDER BY bm25(fts) LIMIT ?",
                    (match, view, limit * 3),
                ).fetchall()
        except sqlite3.Error as exc:
            raise IndexError_(f"searching the history index failed: {exc}") from None
        if not rows:
            return []
        scores = dict(rows)
        found = self._db.execute(
            f"SELECT d.id, {self._FIELDS} FROM docs d "
            f"JOIN records r ON r.seq = d.seq WHERE d.id IN ({','.join('?' * len(scores))})",
            list(scores),
        ).fetchall()
        hits = [
            Hit(seq, part, scores[doc] * (tool_weight if role == "tool" else 1.0), text, role, at, day, v, head)
            for doc, seq, part, text, role, at, day, v, head in found
        ]
        hits.sort(key=lambda h: (-h.score, h.seq))
        return hits[:limit]

    #: A dated question looks at this many documents of the days it names, at most.
    DAY_DOCS = 500

    def _dated(
        self,
        terms: Sequence[str],
        days: Sequence[tuple[int, int]],
        limit: int,
        excluded: set[int],
        tool_weight: float = 1.0,
        view: str | None = None,
    ) -> list[Hit]:
        """The documents of the named days: those with more (and rarer) query terms first, then in order."""
        month_days = [f"{month:02d}-{day:02d}" for month, day in days]
        where_view = "" if view is None else " AND r.view = ?"
        rows = self._db.execute(
            f"SELECT {self._FIELDS} FROM records r JOIN docs d ON d.seq = r.seq "
            f"WHERE r.md IN ({','.join('?' * len(month_days))}){where_view} ORDER BY d.seq LIMIT ?",
            [*month_days, *([] if view is None else [view]), self.DAY_DOCS],
        ).fetchall()
        weights = self.term_weights(terms) if terms else {}
        patterns = [(term_pattern(t), w) for t, w in weights.items()]
        hits = []
        for seq, part, text, role, at, day, v, head in rows:
            if seq in excluded:
                continue
            lower = f"{head}\n{text}".casefold() if head else text.casefold()
            score = sum(w for pattern, w in patterns if pattern.search(lower))
            hits.append(Hit(seq, part, score * (tool_weight if role == "tool" else 1.0), text, role, at, day, v, head))
        hits.sort(key=lambda h: (-h.score, h.seq))
        return hits[:limit]

    #: Search terms in more than this share of the documents are left out of the search (when others
    #: remain): they barely change the ranking and cost the most (every document that has them is scored).
    COMMON_SHARE = 0.03

    def _discriminating(self, terms: Sequence[str]) -> list[str]:
        if len(terms) < 2:
            return list(terms)
        total = self._docs
        if total < 200:  # small histories are cheap to search whole
            return list(terms)
        limit = self.COMMON_SHARE * total
        kept = [t for t in terms if self._doc_freq(t) <= limit]
        return kept or list(terms)

    def _doc_freq(self, term: str) -> int:
        if abs(self._docs - self._df_docs) * 10 > self._df_docs + 100:
            self._df.clear()
            self._df_docs = self._docs
        found = self._df.get(term)
        if found is None:
            try:
                found = self._db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (f'"{term}"',)).fetchone()[0]
            except sqlite3.Error:
                found = 0
            self._df[term] = found
        return int(found)

    def term_weights(self, terms: Sequence[str]) -> dict[str, float]:
        """Inverse document frequency of each search term in this index (BM25's idf; rare terms weigh more)."""
        with self._lock:
            total = self._docs
            out = {}
            for term in terms:
                df = self._doc_freq(term)
                out[term] = math.log(1 + (total - df + 0.5) / (df + 0.5))
        return out

    def records(self, seqs: Iterable[int]) -> dict[int, StoredRecord]:
        """The stored records with these sequence numbers (those the index has)."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        with self._lock:
            marks = ",".join("?" * len(wanted))
            rows = self._db.execute(
                f"SELECT seq, role, text, recorded_at, day, view, calls FROM records WHERE seq IN ({marks})", wanted
            ).fetchall()
        return {
            seq: StoredRecord(seq=seq, role=role, text=text, recorded_at=at, day=day, view=view, calls=bool(calls))
            for seq, role, text, at, day, view, calls in rows
        }

    def recent_keys(self, count: int) -> set[tuple[str, str]]:
        """(role, text) of the ``count`` latest records (by slot)."""
        with self._lock:
            rows = self._db.execute("SELECT role, text FROM records ORDER BY seq DESC LIMIT ?", (count,)).fetchall()
        return {(role, text) for role, text in rows}

    def close(self) -> None:
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass


def _calls_tools(message: dict[str, Any]) -> bool:
    if message.get("role") != "assistant":
        return False
    if message.get("tool_calls") or isinstance(message.get("function_call"), dict):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "tool_use" for p in content)


def _day(recorded_at: float | None) -> str | None:
    if recorded_at is None:
        return None
    try:
        return datetime.fromtimestamp(recorded_at).date().isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def now() -> float:
    return time.time()
