"""The history index: SQLite FTS5 (standard library), BM25 ranking, incremental by sequence number.

One index per session, a cache of the raw history that follows its event log (records past
:attr:`last_seq` only; always rebuildable: :meth:`HistoryIndex.reset`); storage, tokenization and where
it lives: docs/strategies/recall.md, "Part of the session" to "Where it lives". A record's documents
are numbered ``seq + part * PART_STRIDE`` (``+ TOOL_DOC`` for a tool result's: a search weighs tool
results without reading their records), so a whole message is found by its own sequence number and a
chunk of a long one is cut again from the record's text (the chunking is deterministic for a given
``chunk_chars``, which the index keeps and is rebuilt when it changes).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from ctxlife.errors import CtxlifeError
from ctxlife.messages import escape_surrogates, text_of
from ctxlife.recall import pruning
from ctxlife.recall.records import CHUNK_CHARS, Document, text_documents
from ctxlife.recall.text import count_term, count_terms, dates_in, index_text, query_terms
from ctxlife.sessions.records import RawRecord

#: Bumped when the schema or the tokenization changes: an index of another version is rebuilt.
INDEX_VERSION = 8  # 8: a message's text is messages.text_of (refusals and thinking now read)

#: A document's row in the full-text table is ``seq + part * PART_STRIDE`` (part 0: the record's seq),
#: plus :data:`TOOL_DOC` for a tool result's: the search weighs tool results in its one query, by rowid.
PART_STRIDE = 1 << 40
TOOL_DOC = 1 << 62

# md: month * 100 + day of the record (local time), what a dated question ("on May 2nd") looks for.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    recorded_at REAL,
    md INTEGER,
    view TEXT,
    calls INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_md ON records (md) WHERE md IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
);
"""

#: FTS5's bm25 parameters (k1, b): what a common term adds to a score is computed as bm25 would.
_K1, _B = 1.2, 0.75

#: Free pages (from deletions and FTS5 merges) given back to the file system past this many.
_SPARE_PAGES = 16


class IndexError_(CtxlifeError):  # noqa: N801 - not the builtin IndexError
    """The history index could not be opened or written."""


class Hit(NamedTuple):
    """One search result: the document (``seq``, ``part``) and how well it matched (higher is better).

    Named tuples (not frozen dataclasses): a search makes a few hundred of these and of
    :class:`StoredRecord`, and a tuple is built in a third of the time."""

    seq: int
    part: int
    score: float
    text: str
    role: str
    recorded_at: float | None
    day: str | None
    view: str | None
    head: str = ""


class StoredRecord(NamedTuple):
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
            # Before anything writes the file's header: takes effect in a new file (else see _drop_all).
            self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA secure_delete=ON")  # removed text is overwritten, not left in free pages
            self._db.executescript(_SCHEMA)
            version = self._meta("version")
            if version is None:
                self._set_meta("version", str(INDEX_VERSION))
                self._set_meta("chunk_chars", str(chunk_chars))
            elif version != str(INDEX_VERSION) or self._meta("chunk_chars") != str(chunk_chars):
                self._drop_all()
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot open the history index {self.path or ':memory:'}: {exc}") from None
        self._last_seq = self._read_last_seq()
        self._docs = self._count_docs()
        self._views = self._read_views()
        # Document frequencies: (term, tool results' only) -> (count, last_seq, edits) as counted then, so a
        # search ranks the same in a fresh process as in a long-running one. The same terms are looked up on
        # many calls of a conversation: after additions only, the count is brought up to date by counting the
        # term in the documents added since (see _doc_freq).
        self._df: dict[tuple[str, bool], tuple[int, int, int]] = {}
        # Rows read lately (see _rows) and the records made of them: a write that replaces or removes
        # a record empties both; an addition forgets only the slots it filled.
        self._memo: dict[int, tuple[Any, ...] | None] = {}
        self._stored: dict[int, StoredRecord] = {}
        # Searches made since the last write (see search).
        self._found: dict[tuple[Any, ...], list[Hit]] = {}
        self._found_state: tuple[int, int, int] = (-1, -1, -1)
        self._memo_of_records: dict[Any, Any] = {}
        self._memo_edits = -1

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
            if self._db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
                try:  # a file of an older version: switched to incremental auto-vacuum while it is empty
                    self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                    self._db.execute("VACUUM")
                except sqlite3.Error:
                    pass  # another connection reads it: the next rebuild switches
            self._db.executescript(_SCHEMA)
            self._set_meta("version", str(INDEX_VERSION))
            self._set_meta("chunk_chars", str(self.chunk_chars))
            self._last_seq = 0
            self._docs = 0
            self._views = set()
            self._df = {}
            self._forget_rows()
            self._give_back_pages()

    def _give_back_pages(self) -> None:
        """Return the free pages to the file system when there are more than a few (outside a transaction)."""
        try:
            if self._db.execute("PRAGMA freelist_count").fetchone()[0] > _SPARE_PAGES:
                # executescript: it steps the pragma to its end (execute would free one page only)
                self._db.executescript("PRAGMA incremental_vacuum;")
        except sqlite3.Error:
            pass  # busy: the next write tries again

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
                self._forget_rows()
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

    def add(self, records: Iterable[RawRecord]) -> int:
        """Apply the records past :attr:`last_seq` (add, replace, remove); return how many changed the index.

        Records at or below :attr:`last_seq` are skipped, so feeding the same records twice (or from
        two processes) applies them once. A text that a later record of the same call edits or
        removes is never written (a rebuild leaves no trace of deleted text, not even in postings
        waiting for a merge).
        """
        changed = 0
        filled: list[int] = []
        edited = external = False
        with self._lock:
            docs = self._docs
            try:
                self._db.execute("BEGIN IMMEDIATE")
                last = self._read_last_seq()
                external = last != self._last_seq
                if external:
                    self._docs = self._count_docs()  # another process wrote since: its count
                fp: str | None = None
                todo: list[RawRecord] = []
                for record in records:
                    if record.seq > last:
                        todo.append(record)
                        last, fp = record.seq, record.fingerprint
                filled = [record.seq for record in todo if (record.op or "add") == "add"]
                edited = len(filled) < len(todo)
                if not edited:  # additions only (the usual case): each to a slot of its own
                    changed += self._insert_many(todo)
                else:
                    final = {_slot(record): i for i, record in enumerate(todo)}  # the last record of each slot
                    adds: list[RawRecord] = []  # consecutive additions, written together
                    for i, record in enumerate(todo):
                        kept = final.get(_slot(record)) == i
                        if (record.op or "add") == "add":
                            if kept:
                                adds.append(record)
                        else:
                            changed += self._insert_many(adds) + self._apply(record, insert=kept)
                            adds = []
                    changed += self._insert_many(adds)
                if changed:
                    self._set_meta("docs", str(self._docs))
                if todo:  # (nothing new: another worker's last record and fingerprint stay as it wrote them)
                    self._set_meta("last_seq", str(last))
                    self._set_meta("last_fp", fp or "")
                self._db.execute("COMMIT")
            except BaseException as exc:
                # Whatever failed (a write, a text SQLite cannot take, an interrupt), the transaction is
                # rolled back: one left open would refuse every later write ("cannot start a
                # transaction within a transaction") and recall would stay broken for the session.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                self._docs = docs  # nothing was written
                if not isinstance(exc, (sqlite3.Error, ValueError)):
                    raise
                raise IndexError_(f"cannot write the history index {self.path or ':memory:'}: {exc}") from None
            self._last_seq = last
            if edited or external:  # (another process's write may have edited records)
                self._forget_rows()
            else:  # additions only: the rows read before are unchanged, the slots filled were empty
                for seq in filled:
                    self._memo.pop(seq, None)
                    self._stored.pop(seq, None)
            if changed:
                self._give_back_pages()
        return changed

    def _apply(self, record: RawRecord, *, insert: bool = True) -> int:
        """A replace or remove record (an addition goes through :meth:`_insert_many`); ``insert``:
        False when a later record replaces the new text again."""
        op = record.op or "add"
        if op in ("remove", "replace") and record.target is not None:
            removed = self._delete(record.target)
            if op == "replace" and insert:
                return self._insert_many([record], slot=record.target) or removed
            return removed
        return 0  # an event this version does not know: the text it carries is not indexed

    def _delete(self, slot: int) -> int:
        """Drop a slot's record and its postings (FTS5 contentless delete: the same bodies again)."""
        row = self._db.execute("SELECT role, text FROM records WHERE seq = ?", (slot,)).fetchone()
        if row is None:
            return 0
        docs = text_documents(slot, row[0], row[1], self.chunk_chars)
        self._db.executemany(
            "INSERT INTO fts (fts, rowid, body) VALUES ('delete', ?, ?)",
            [(_doc_id(doc), index_text(document_body(doc))) for doc in docs],
        )
        self._docs -= len(docs)
        self._db.execute("DELETE FROM records WHERE seq = ?", (slot,))
        return 1

    def _read_views(self) -> set[str | None]:
        return set(json.loads(self._meta("views") or "[]"))

    def _note_view(self, view: str | None) -> None:
        if view not in self._views:
            self._views = self._read_views() | {view}
            self._set_meta("views", json.dumps(sorted(self._views, key=lambda v: (v is None, v or ""))))

    def _count_docs(self) -> int:
        """How many documents the index holds: kept in ``meta`` by every write (counting them costs a
        scan, and a worker sharing the file must learn the count after each write of another)."""
        kept = self._meta("docs")
        if kept is not None:
            return int(kept)
        return int(self._db.execute("SELECT count(*) FROM fts_docsize").fetchone()[0])

    def _insert_many(self, records: Sequence[RawRecord], slot: int | None = None) -> int:
        """Insert records (at their own seq, or at ``slot`` for a replacement) and their documents.

        A slot that already holds a record keeps it (as ``INSERT OR IGNORE`` would): its postings
        must stay those of the text stored.
        """
        if not records:
            return 0
        slots = [slot if slot is not None else r.seq for r in records]
        taken = {
            row[0]
            for row in self._db.execute("SELECT seq FROM records WHERE seq BETWEEN ? AND ?", (min(slots), max(slots)))
        }
        rows: list[tuple[Any, ...]] = []
        bodies: list[tuple[int, str]] = []
        chunk_chars = self.chunk_chars
        for record, at in zip(records, slots, strict=True):
            if at in taken:
                continue
            taken.add(at)
            message = record.message if isinstance(record.message, dict) else {}
            # Lone surrogates (a non-UTF-8 file name) cannot go to SQLite: escaped, as the stores do.
            role = escape_surrogates(str(message.get("role") or ""))
            text = escape_surrogates(text_of(message).strip())
            at_time, view = record.recorded_at, record.view
            rows.append((at, role, at_time, month_day_of(at_time), view, int(calls_tools(message)), text))
            if view not in self._views:
                self._note_view(view)
            if len(text) <= chunk_chars:  # one document, numbered as its record (text_documents' rule)
                if text:
                    bodies.append((at + (TOOL_DOC if role == "tool" else 0), index_text(text)))
            else:
                bodies += [
                    (_doc_id(doc), index_text(document_body(doc)))
                    for doc in text_documents(at, role, text, chunk_chars)
                ]
        self._db.executemany(
            "INSERT INTO records (seq, role, recorded_at, md, view, calls, text) VALUES (?, ?, ?, ?, ?, ?, ?)", rows
        )
        self._db.executemany("INSERT INTO fts (rowid, body) VALUES (?, ?)", bodies)
        self._docs += len(bodies)
        return len(rows)

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
        query = escape_surrogates(query)  # as the texts were indexed
        if view is not None and self._views <= {view}:
            view = None  # one view only (the usual case): no filter to apply
        key = (query, limit, frozenset(excluded), use_dates, tool_weight, view)
        with self._lock:
            # The model calls of one turn (a tool loop) search the same words, and the index usually
            # has not changed in between (new records in view are held back): the same hits.
            self._unchanged()
            found = self._found.get(key)
            if found is None:
                found = self._search(query, limit, excluded, use_dates, tool_weight, view)
                if len(self._found) >= self._FOUND_KEPT:
                    self._found.clear()
                self._found[key] = found
        return list(found)

    def _unchanged(self) -> None:
        """Forget the searches made of the index before its last write."""
        state = (self._last_seq, self._docs, self._edits)
        if state != self._found_state:
            self._found.clear()
            self._found_state = state

    def memo(self) -> dict[Any, Any]:
        """A dict for what a caller derives from the records the index holds, by their sequence numbers
        (the turns a search ranks: their texts and term counts). Additions leave it (the records held
        stay as they were); it is emptied when one may have changed (an edit, a removal, a reset, a
        write by another process). The caller bounds its size."""
        with self._lock:
            if self._memo_edits != self._edits:
                self._memo_of_records.clear()
                self._memo_edits = self._edits
            return self._memo_of_records

    #: Searches remembered between writes (see :meth:`search`).
    _FOUND_KEPT = 64
    #: Writes that replaced or removed records, or reset the index (they may leave :attr:`last_seq`
    #: and the number of documents as they were): a remembered search is of an older index.
    _edits = 0

    def _search(
        self, query: str, limit: int, excluded: set[int], use_dates: bool, tool_weight: float, view: str | None
    ) -> list[Hit]:
        return search_hits(self._dated, self._ranked, query, limit, excluded, use_dates, tool_weight, view)

    def _ranked(self, terms: Sequence[str], limit: int, tool_weight: float = 1.0, view: str | None = None) -> list[Hit]:
        # One query: FTS5 scores its matches in C, tool results weighed by their rowid (no record
        # read), and SQLite keeps the best ``limit``; then the records of those few are read.
        score = f"-bm25(fts) * (CASE WHEN fts.rowid >= {TOOL_DOC} THEN ? ELSE 1.0 END)"
        order = f"ORDER BY 2 DESC, fts.rowid % {PART_STRIDE}, fts.rowid LIMIT ?"
        choosing, common = list(terms), []
        if self._docs >= self.SELECTIVE_DOCS and self.SELECTIVE_MATCHES:
            choosing = self._selective(terms)
            common = [t for t in terms if t not in choosing and self._doc_freq(t)]
        fetch = limit * self.SELECTIVE_FETCH if common else limit
        match = " OR ".join(f'"{t}"' for t in choosing)
        try:
            rows = None
            # Past PRUNE_DOCS, only the documents that can make the result are scored (the document
            # frequencies are this process's: after another's write, every match is).
            pruned = not common and view is None and self._docs >= self.PRUNE_DOCS
            if pruned and self._read_last_seq() == self._last_seq:
                hits = {t: self._doc_freq(t) for t in terms}
                tools = {t: self._doc_freq(t, tools=True) for t in terms} if tool_weight > 1 else None
                rows = pruning.ranked(self._db, terms, limit, tool_weight, hits, score, order, PART_STRIDE, tools)
            if rows is None and view is None:
                rows = self._db.execute(
                    f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? {order}", (tool_weight, match, fetch)
                ).fetchall()
            elif rows is None:
                rows = self._db.execute(
                    f"SELECT fts.rowid, {score} FROM fts JOIN records r ON r.seq = fts.rowid % {PART_STRIDE} "
                    f"WHERE fts MATCH ? AND r.view = ? {order}",
                    (tool_weight, match, view, fetch),
                ).fetchall()
            if common:
                rows = self._with_common(rows, common, tool_weight, limit)
        except sqlite3.Error as exc:
            raise IndexError_(f"searching the history index failed: {exc}") from None
        found = self._rows(doc % PART_STRIDE for doc, _ in rows)
        return [
            hit_from_row(row, (doc % TOOL_DOC) // PART_STRIDE, score, self.chunk_chars)
            for doc, score in rows
            if (row := found.get(doc % PART_STRIDE)) is not None
        ]

    #: From this many documents on, a question's common terms do not choose its hits (see :meth:`_selective`).
    SELECTIVE_DOCS = 5_000
    #: The documents the terms that choose a search's hits may match in all (FTS5 scores each: ~1 µs apiece).
    SELECTIVE_MATCHES = 500
    #: Documents fetched per hit wanted when the common terms then complete their scores.
    SELECTIVE_FETCH = 4

    def _selective(self, terms: Sequence[str]) -> list[str]:
        """The terms that choose a search's hits: the rarest, as many as match at most SELECTIVE_MATCHES
        documents in all (at least the rarest one)."""
        counts = {t: self._doc_freq(t) for t in terms}
        held = sorted((t for t in terms if counts[t]), key=lambda t: counts[t])
        chosen: list[str] = []
        matched = 0
        for term in held:
            if chosen and matched + counts[term] > self.SELECTIVE_MATCHES:
                break
            chosen.append(term)
            matched += counts[term]
        return chosen or list(terms)

    def _with_common(
        self, rows: Sequence[tuple[int, float]], common: Sequence[str], tool_weight: float, limit: int
    ) -> list[tuple[int, float]]:
        """The best ``limit`` of ``rows`` (document, score by the choosing terms, best first), each score
        completed with what FTS5's bm25 adds for the ``common`` terms: BM25 is a sum over terms, so this is
        the score the whole query gives the document."""
        docs, tokens = pruning.averages(self._db)
        if not rows or not docs:
            return list(rows)[:limit]
        average = tokens / docs
        idf = [pruning.idf(docs, self._doc_freq(t)) for t in common]
        marks = ",".join("?" * len(rows))
        sizes = dict(self._db.execute(f"SELECT id, sz FROM fts_docsize WHERE id IN ({marks})", [d for d, _ in rows]))
        texts = self._rows(doc % PART_STRIDE for doc, _ in rows)
        kept: list[tuple[int, float, float]] = []  # document, score by the choosing terms, BM25's length norm
        lowers: list[str] = []
        for doc, score in rows:
            row = texts.get(doc % PART_STRIDE)
            if row is None:
                continue
            part, text = (doc % TOOL_DOC) // PART_STRIDE, row[5]
            if part or len(text) > self.chunk_chars:  # a chunk of a long text: its own body
                documents = text_documents(int(row[0]), row[1], text, self.chunk_chars)
                text = document_body(documents[min(part, len(documents) - 1)])
            lowers.append(text.casefold())
            kept.append((doc, score, _K1 * (1 - _B + _B * pruning.size_of(sizes.get(doc, b"")) / average)))
        out: list[tuple[int, float]] = []
        for (doc, score, norm), counts in zip(kept, count_terms(lowers, common), strict=True):
            added = 0.0
            for weight, n in zip(idf, counts, strict=True):
                if n:
                    added += weight * n * (_K1 + 1) / (n + norm)
            out.append((doc, score + added * (tool_weight if doc >= TOOL_DOC else 1.0)))
        out.sort(key=lambda r: (-r[1], r[0] % PART_STRIDE, r[0]))
        return out[:limit]

    #: From this many documents on, a search scores only the documents that can make its result
    #: (:mod:`ctxlife.recall.pruning`); below, scoring every match costs less than proving which can.
    PRUNE_DOCS = 20_000

    def _rows(self, seqs: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The stored rows (seq, role, recorded_at, view, calls, text) of these records.

        Rows read since the last write are remembered: a search reads its hits' records, then the
        caller asks for the same records and their neighbours (:meth:`records`).
        """
        asked = set(seqs)
        memo = self._memo
        wanted = sorted(seq for seq in asked if seq not in memo)
        if wanted:
            marks = ",".join("?" * len(wanted))
            for row in self._db.execute(
                f"SELECT seq, role, recorded_at, view, calls, text FROM records WHERE seq IN ({marks})", wanted
            ):
                memo[row[0]] = row
            for seq in wanted:
                memo.setdefault(seq, None)  # not in the index: not asked again
            if len(memo) > self._MEMO_ROWS:
                self._memo = memo = {seq: memo[seq] for seq in asked}
        return {seq: row for seq in asked if (row := memo.get(seq)) is not None}

    #: Most rows :meth:`_rows` (and records :meth:`records`) remembers.
    _MEMO_ROWS = 4096

    def _forget_rows(self) -> None:
        self._memo = {}
        self._stored = {}
        self._edits += 1

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
        month_days = [month * 100 + day for month, day in days]
        where_view = "" if view is None else " AND view = ?"
        cursor = self._db.execute(
            "SELECT seq, role, recorded_at, view, calls, text FROM records "
            f"WHERE md IN ({','.join('?' * len(month_days))}){where_view} ORDER BY seq",
            [*month_days, *([] if view is None else [view])],
        )
        try:
            weights = self.term_weights(terms) if terms else {}
            return rank_day_documents(cursor, weights, limit, excluded, tool_weight, self.chunk_chars, self.DAY_DOCS)
        finally:
            cursor.close()

    def _doc_freq(self, term: str, *, tools: bool = False) -> int:
        """How many documents hold ``term`` (with ``tools``: how many of them are tool results').

        A count made before additions only (the index's ``_edits`` unchanged: an edit, a removal, a reset
        or another process's write changes it) is brought up to date from the documents added since: those
        of records past the ``last_seq`` it was made at (FTS5 seeks there; at 100k messages a common word's
        full count costs ~0.5 ms, a few per search).
        """
        key = (term, tools)
        last, edits = self._last_seq, self._edits
        entry = self._df.get(key)
        if entry is not None and entry[1:] == (last, edits):
            return entry[0]
        # A tool result's documents are numbered from TOOL_DOC up, and a document's record is rowid % PART_STRIDE.
        where = f" AND rowid >= {TOOL_DOC}" if tools else ""
        count = f"SELECT count(*) FROM fts WHERE fts MATCH ?{where}"
        try:
            if entry is not None and entry[2] == edits and entry[1] < last:
                since = entry[1]
                added = f"{count} AND rowid > ? AND rowid % {PART_STRIDE} > ?"
                found = entry[0] + self._db.execute(added, (f'"{term}"', since, since)).fetchone()[0]
            else:
                found = self._db.execute(count, (f'"{term}"',)).fetchone()[0]
        except sqlite3.Error:
            found = 1 if tools else 0  # (tool results: unknown, as if one held it)
        if len(self._df) >= self._DF_KEPT:
            self._df.clear()
        self._df[key] = (int(found), last, edits)
        return int(found)

    #: Most document frequencies kept (see :meth:`_doc_freq`).
    _DF_KEPT = 4096

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
        with self._lock:
            asked = set(seqs)
            stored = self._stored
            missing = [seq for seq in asked if seq not in stored]
            if missing:
                for seq, row in self._rows(missing).items():
                    stored[seq] = stored_from_row(row)
                if len(stored) > self._MEMO_ROWS:
                    self._stored = stored = {seq: stored[seq] for seq in asked if seq in stored}
            return {seq: found for seq in asked if (found := stored.get(seq)) is not None}

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


def calls_tools(message: dict[str, Any]) -> bool:
    if message.get("role") != "assistant":
        return False
    if message.get("tool_calls") or isinstance(message.get("function_call"), dict):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "tool_use" for p in content)


def hit_from_row(row: Sequence[Any], part: int, score: float, chunk_chars: int, doc: Document | None = None) -> Hit:
    """The hit for document ``part`` of a stored row ``(seq, role, recorded_at, view, calls, text)``
    (a chunk of a long record is cut again from its text), for this index and the postgres one."""
    seq, role, at, view, _, text = row
    if doc is None and len(text) > chunk_chars:  # a chunk (the first too) of a long record
        docs = text_documents(seq, role, text, chunk_chars)
        doc = docs[part] if part < len(docs) else None
    head = ""
    if doc is not None:
        text, head = doc.text, doc.head
    return Hit(int(seq), part, score, text, role, at, day_of(at), view, head)


def stored_from_row(row: Sequence[Any]) -> StoredRecord:
    """A stored row ``(seq, role, recorded_at, view, calls, text)`` as a :class:`StoredRecord`."""
    seq, role, at, view, calls, text = row
    return StoredRecord(int(seq), role, text, at, day_of(at), view, bool(calls))


def search_hits(
    dated: Callable[[Sequence[str], Sequence[tuple[int, int]], int, set[int], float, str | None], list[Hit]],
    ranked: Callable[[Sequence[str], int, float, str | None], list[Hit]],
    query: str,
    limit: int,
    excluded: set[int],
    use_dates: bool,
    tool_weight: float,
    view: str | None,
) -> list[Hit]:
    """A search's hits, from an index's ``dated`` and ``ranked`` queries (SQLite's and PostgreSQL's alike):
    the documents of the days the query names first, then the best ranked ones not among them and
    not ``excluded``."""
    terms = query_terms(query)
    days = dates_in(query) if use_dates else []
    hits: list[Hit] = []
    if days:
        hits = dated(terms, days, limit, excluded, tool_weight, view)
    if len(hits) < limit and terms:
        seen = {(h.seq, h.part) for h in hits}
        more = ranked(terms, limit + len(excluded) + len(hits), tool_weight, view)
        hits += [h for h in more if (h.seq, h.part) not in seen and h.seq not in excluded]
    return hits[:limit]


def rank_day_documents(
    rows: Iterable[Sequence[Any]],
    weights: dict[str, float],
    limit: int,
    excluded: set[int],
    tool_weight: float,
    chunk_chars: int,
    most: int,
) -> list[Hit]:
    """The best ``limit`` of the first ``most`` documents of stored rows (the records of the days a
    question names, in order): those holding more (and rarer) of the query's terms (``weights``:
    term -> idf) first, then in order. Shared by this index and the postgres one."""
    docs: list[tuple[Sequence[Any], Document]] = []
    for row in rows:
        docs += [(row, doc) for doc in text_documents(int(row[0]), row[1], row[5], chunk_chars)]
        if len(docs) >= most:
            break
    hits = []
    for row, doc in docs[:most]:
        if doc.seq in excluded:
            continue
        lower = document_body(doc).casefold()
        # count_term finds what term_pattern does, with str.find (no regex scan per term and document)
        score = sum(w for term, w in weights.items() if count_term(lower, term, first=True))
        hits.append(hit_from_row(row, doc.part, score * (tool_weight if doc.role == "tool" else 1.0), chunk_chars, doc))
    hits.sort(key=lambda h: (-h.score, h.seq))
    return hits[:limit]


# The local day of a quarter hour (every time zone's midnight falls on one): records of the same
# minutes cost one date conversion. Bounded: emptied when full.
_DAYS: dict[int, tuple[str, int] | None] = {}
_DAYS_KEPT = 4096


def _local_day(recorded_at: float | None) -> tuple[str, int] | None:
    """The local date ("2023-05-02") a record was recorded on and its month * 100 + day, if known."""
    if recorded_at is None:
        return None
    try:
        slot = int(recorded_at // 900)
    except (OverflowError, ValueError):
        return None
    found = _DAYS.get(slot, ())
    if found == ():
        try:
            day = datetime.fromtimestamp(recorded_at).date()
            found = (day.isoformat(), day.month * 100 + day.day)
        except (OverflowError, OSError, ValueError):
            found = None
        if len(_DAYS) >= _DAYS_KEPT:
            _DAYS.clear()
        _DAYS[slot] = found
    return found  # type: ignore[return-value]


def day_of(recorded_at: float | None) -> str | None:
    found = _local_day(recorded_at)
    return found[0] if found else None


def month_day_of(recorded_at: float | None) -> int | None:
    """What the ``md`` column holds: month * 100 + day of :func:`day_of`."""
    found = _local_day(recorded_at)
    return found[1] if found else None


def _slot(record: RawRecord) -> int | None:
    """The slot a record writes: its own for an addition, its target for a replace or remove."""
    op = record.op or "add"
    if op == "add":
        return record.seq
    return record.target if op in ("replace", "remove") else None


def _doc_id(doc: Document) -> int:
    return doc.seq + doc.part * PART_STRIDE + (TOOL_DOC if doc.role == "tool" else 0)


def document_body(doc: Document) -> str:
    """What the index holds of a document: its text, after the record's head for a later chunk."""
    return f"{doc.head}\n{doc.text}" if doc.head else doc.text


def now() -> float:
    return time.time()
