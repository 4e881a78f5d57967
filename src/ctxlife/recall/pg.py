"""History search in the database, for the postgres session store.

The rows are written by the store in the transaction of the records they index and deleted with the
session by the cascade; how they are tokenized, found and ranked: docs/sessions.md, "Recall in the
database" (the tables: "PostgreSQL"). Tokens are ctxlife's own (:func:`ctxlife.recall.text.index_text`),
written as a ``tsvector`` literal, because PostgreSQL's parser does not split Chinese and its stemmers
are per language; a term matches as :func:`ctxlife.recall.text.term_pattern` finds it. The session's
lexeme is ``§`` + the id: no token holds ``§``. The idf: :meth:`PostgresIndex.term_weights`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ctxlife.messages import escape_surrogates, text_of
from ctxlife.recall.index import (
    Hit,
    StoredRecord,
    calls_tools,
    document_body,
    hit_from_row,
    month_day_of,
    rank_day_documents,
    search_hits,
    stored_from_row,
)
from ctxlife.recall.records import CHUNK_CHARS, text_documents
from ctxlife.recall.text import NO_SPACE_RUN, TERM, index_text, stem
from ctxlife.sessions.records import RawRecord

__all__ = ["PostgresIndex", "drop_slots", "index_records", "terms_of"]

#: BM25's parameters (FTS5's, and the turn ranking's).
_K1, _B = 1.2, 0.75

#: tsvector positions run from 1 to 16383 (larger ones are stored as 16383).
_MAX_POS = 16383

#: Most positions PostgreSQL keeps per lexeme (BM25 saturates long before).
_MAX_POSITIONS = 256


# -- writing (in the store's transaction) ------------------------------------------------------------


def _lexeme(term: str) -> str:
    """A term quoted for a tsvector or tsquery literal."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def session_lexeme(session_id: str) -> str:
    """The lexeme every document of a session holds (no token has ``§``): a search asks for it with its
    terms, so the GIN index alone finds the session's matches (a scan of the session's rows costs
    what the session holds, 16-22 ms at 10,000 messages; the index, 1-2 ms)."""
    return "§" + session_id


def terms_of(text: str, session_id: str) -> tuple[str, int]:
    """``(tsvector literal, number of terms)`` of a document's text: ctxlife's tokens with positions,
    and the session's lexeme (no position: it counts in no score)."""
    positions: dict[str, list[str]] = {session_lexeme(session_id): []}
    tokens = TERM.findall(index_text(text).casefold())
    for at, token in enumerate(tokens, start=1):
        kept = positions.setdefault(token[:256], [])  # a lexeme is under 2 kB (256 characters of 4 bytes at most)
        if len(kept) < _MAX_POSITIONS:
            kept.append(str(min(at, _MAX_POS)))
    literal = " ".join(f"{_lexeme(t)}:{','.join(p)}" if p else _lexeme(t) for t, p in positions.items())
    return literal, len(tokens)


def _slot(record: RawRecord) -> int | None:
    op = record.op or "add"
    if op == "add":
        return record.seq
    return record.target if op in ("replace", "remove") else None


def index_records(conn: Any, s: str, session_id: str, records: Sequence[RawRecord]) -> tuple[int, int]:
    """Apply an append's records to the session's recall rows on ``conn`` (inside the append's
    transaction); return the change in (documents, terms) for the session's counters."""
    docs = length = 0
    adds: list[RawRecord] = []

    def flush() -> None:
        nonlocal docs, length
        if adds:
            d, n = _insert(conn, s, session_id, adds)
            docs, length = docs + d, length + n
            adds.clear()

    for record in records:
        op = record.op or "add"
        if op == "add":
            adds.append(record)
            continue
        flush()
        slot = _slot(record)
        if slot is None:
            continue  # an event this version does not know: its text is not indexed
        d, n = drop_slots(conn, s, session_id, [slot])
        docs, length = docs - d, length - n
        if op == "replace":
            adds.append(record)
            flush()
    flush()
    return docs, length


def _insert(conn: Any, s: str, session_id: str, records: Sequence[RawRecord]) -> tuple[int, int]:
    rows: list[tuple[Any, ...]] = []
    docs: list[tuple[Any, ...]] = []
    length = 0
    for record in records:
        slot = _slot(record)
        message = record.message if isinstance(record.message, dict) else {}
        role = escape_surrogates(str(message.get("role") or ""))
        text = escape_surrogates(text_of(message).strip()).replace("\x00", "")  # text columns take no NUL
        view = record.view or ""
        at = record.recorded_at
        rows.append((session_id, slot, role, at, month_day_of(at), view, calls_tools(message), text))
        for doc in text_documents(slot or 0, role, text, CHUNK_CHARS):
            terms, n = terms_of(document_body(doc), session_id)
            docs.append((session_id, slot, doc.part, view, n, terms))
            length += n
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {s}.ctxlife_recall (session_id, slot, role, recorded_at, md, view, calls, text) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            rows,
        )
        cur.executemany(
            f"INSERT INTO {s}.ctxlife_recall_docs (session_id, slot, part, view, len, terms) "
            "VALUES (%s, %s, %s, %s, %s, %s::tsvector) ON CONFLICT DO NOTHING",
            docs,
        )
    return len(docs), length


def drop_slots(conn: Any, s: str, session_id: str, slots: Iterable[int]) -> tuple[int, int]:
    """Delete the recall rows of these slots (their documents go by cascade); return the
    (documents, terms) removed. The caller updates the session's counters."""
    slots = sorted(set(slots))
    if not slots:
        return 0, 0
    row = conn.execute(
        f"SELECT count(*), coalesce(sum(len), 0) FROM {s}.ctxlife_recall_docs "
        "WHERE session_id = %s AND slot = ANY(%s::bigint[])",
        (session_id, slots),
    ).fetchone()
    conn.execute(
        f"DELETE FROM {s}.ctxlife_recall WHERE session_id = %s AND slot = ANY(%s::bigint[])", (session_id, slots)
    )
    return int(row[0]), int(row[1])


# -- searching -------------------------------------------------------------------------------------


def _query_term(term: str) -> tuple[str, bool]:
    """``(lexeme, prefix)``: how a search term is looked for (as :func:`term_pattern` finds it)."""
    if NO_SPACE_RUN.match(term):
        return term, False
    root = stem(term)
    return (root, True) if len(root) >= 3 and not root.isdigit() else (term, False)


def _tsquery(terms: Iterable[str], session_id: str | None = None) -> str:
    """Any of ``terms``; with ``session_id``, in that session's documents only."""
    found = " | ".join(_lexeme(lex) + (":*" if prefix else "") for lex, prefix in map(_query_term, terms))
    return found if session_id is None else f"{_lexeme(session_lexeme(session_id))} & ({found})"


class PostgresIndex:
    """One session's recall rows, read as :class:`~ctxlife.recall.index.HistoryIndex` is by the
    search (:func:`ctxlife.recall.passages_from`): :meth:`search`, :meth:`records`, :meth:`term_weights`.

    Made for one call (:meth:`ctxlife.sessions.postgres.PostgresStore.search_index`): what it reads is
    kept for that call only (the counts, the term frequencies, the rows), never across calls.
    """

    #: A dated question looks at this many documents of the days it names, at most.
    DAY_DOCS = 500
    chunk_chars = CHUNK_CHARS
    path = None

    def __init__(self, store: Any, session_id: str) -> None:
        self._store = store
        self.session_id = session_id
        self._stats: tuple[int, float] | None = None
        self._df: dict[str, int] = {}
        self._rows_read: dict[int, tuple[Any, ...] | None] = {}

    def _query(self, what: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return list(self._store._query(what, sql, params, self.session_id))

    def _match(self, what: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """A full-text read through the GIN index alone (the session's lexeme scopes it). The planner
        misjudges prefix queries and may read every row of a table one session fills instead (20 ms
        at 10,000 messages against 1 ms): sequential scans are off for the statement (``SET LOCAL``
        in its own transaction, sent with it in one round trip; it holds behind PgBouncer too)."""
        store = self._store
        with store._connection(what, self.session_id) as conn:
            try:
                with conn.pipeline(), conn.transaction():  # BEGIN, SET and the query in one round trip
                    conn.execute("SET LOCAL enable_seqscan = off")
                    return list(conn.execute(sql.replace("{s}", store._s), params).fetchall())
            except (store._pg.errors.UndefinedTable, store._pg.errors.InvalidSchemaName):
                return []

    def _alive(self, alias: str) -> tuple[str, tuple[Any, ...]]:
        return self._store._alive(alias)  # type: ignore[no-any-return]

    def _counts(self) -> tuple[int, float]:
        """(documents, their average length in terms) of the session."""
        if self._stats is None:
            alive, extra = self._alive("h")
            rows = self._query(
                "recall search",
                "SELECT recall_docs, recall_len FROM {s}.ctxlife_sessions h WHERE h.session_id = %s" + alive,
                (self.session_id, *extra),
            )
            docs, length = (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)
            self._stats = (docs, length / docs if docs else 1.0)
        return self._stats

    def __len__(self) -> int:
        alive, extra = self._alive("r")
        rows = self._query(
            "recall count",
            "SELECT count(*) FROM {s}.ctxlife_recall r WHERE r.session_id = %s" + alive,
            (self.session_id, *extra),
        )
        return int(rows[0][0]) if rows else 0

    def term_weights(self, terms: Sequence[str]) -> dict[str, float]:
        """Inverse document frequency of each term in the session (as HistoryIndex.term_weights)."""
        total = self._counts()[0]
        missing = [t for t in dict.fromkeys(terms) if t not in self._df]
        if missing and total:
            counts = ", ".join("count(*) FILTER (WHERE d.terms @@ %s::tsquery)" for _ in missing)
            rows = self._match(
                "recall term counts",
                f"SELECT {counts} FROM {{s}}.ctxlife_recall_docs d WHERE d.terms @@ %s::tsquery",
                (*(_tsquery([t]) for t in missing), _tsquery(missing, self.session_id)),
            )
            found = rows[0] if rows else (0,) * len(missing)
            self._df.update({t: int(n) for t, n in zip(missing, found, strict=True)})
        out = {}
        for term in terms:
            df = self._df.get(term, 0)
            out[term] = math.log(1 + (total - df + 0.5) / (df + 0.5))
        return out

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
        """The documents that best match ``query``, best first (see HistoryIndex.search)."""
        query = escape_surrogates(query)
        return search_hits(self._dated, self._ranked, query, limit, set(exclude), use_dates, tool_weight, view)

    def _ranked(self, terms: Sequence[str], limit: int, tool_weight: float, view: str | None) -> list[Hit]:
        docs, average = self._counts()
        if not docs:
            return []
        weights = self.term_weights(terms)
        lexemes = [_query_term(t) for t in terms]
        lane = "" if view is None else " AND d.view = %s"
        alive, extra = self._alive("d")
        # BM25 of each candidate in the database, tool results weighed there (the best ``limit``
        # leave it): per query term, its occurrences in the document (a prefix term: of every word
        # it starts).
        rows = self._match(
            "recall search",
            "SELECT d.slot, d.part, (CASE WHEN r.role = 'tool' THEN %s ELSE 1.0 END) * "
            "(SELECT sum(w.idf * w.tf * %s / (w.tf + %s * (%s + %s * d.len / %s))) "
            "FROM (SELECT q.idf, sum(cardinality(u.positions))::float8 AS tf FROM unnest(d.terms) u "
            "JOIN unnest(%s::text[], %s::bool[], %s::float8[]) WITH ORDINALITY AS q(lex, pre, idf, i) "
            "ON CASE WHEN q.pre THEN starts_with(u.lexeme, q.lex) ELSE u.lexeme = q.lex END "
            "GROUP BY q.i, q.idf) w) AS score "
            "FROM {s}.ctxlife_recall_docs d "
            "JOIN {s}.ctxlife_recall r ON r.session_id = d.session_id AND r.slot = d.slot "
            f"WHERE d.terms @@ %s::tsquery{lane}{alive} ORDER BY score DESC, d.slot LIMIT %s",
            (
                tool_weight,
                _K1 + 1,
                _K1,
                1 - _B,
                _B,
                average,
                [lex for lex, _ in lexemes],
                [prefix for _, prefix in lexemes],
                [weights[t] for t in terms],
                _tsquery(terms, self.session_id),
                *([] if view is None else [view]),
                *extra,
                limit,
            ),
        )
        found = self._rows(int(slot) for slot, _, _ in rows)
        return [
            hit_from_row(found[int(slot)], int(part), float(score or 0.0), CHUNK_CHARS)
            for slot, part, score in rows
            if int(slot) in found
        ]

    def _dated(
        self,
        terms: Sequence[str],
        days: Sequence[tuple[int, int]],
        limit: int,
        excluded: set[int],
        tool_weight: float,
        view: str | None,
    ) -> list[Hit]:
        """The documents of the named days: those with more (and rarer) query terms first, then in order."""
        lane = "" if view is None else " AND r.view = %s"
        alive, extra = self._alive("r")
        rows = self._query(
            "recall dated search",
            "SELECT r.slot, r.role, r.recorded_at, r.view, r.calls, r.text FROM {s}.ctxlife_recall r "
            f"WHERE r.session_id = %s AND r.md = ANY(%s::integer[]){lane}{alive} ORDER BY r.slot LIMIT %s",
            (
                self.session_id,
                [m * 100 + d for m, d in days],
                *([] if view is None else [view]),
                *extra,
                self.DAY_DOCS,
            ),
        )
        for row in rows:
            self._rows_read[int(row[0])] = row
        weights = self.term_weights(terms) if terms else {}
        return rank_day_documents(rows, weights, limit, excluded, tool_weight, CHUNK_CHARS, self.DAY_DOCS)

    def _rows(self, seqs: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        """The rows (slot, role, recorded_at, view, calls, text) of these slots (each read once per call)."""
        asked = set(seqs)
        wanted = sorted(seq for seq in asked if seq not in self._rows_read)
        if wanted:
            alive, extra = self._alive("r")
            for row in self._query(
                "recall records",
                "SELECT r.slot, r.role, r.recorded_at, r.view, r.calls, r.text FROM {s}.ctxlife_recall r "
                "WHERE r.session_id = %s AND r.slot = ANY(%s::bigint[])" + alive,
                (self.session_id, wanted, *extra),
            ):
                self._rows_read[int(row[0])] = (int(row[0]), *row[1:])
            for seq in wanted:
                self._rows_read.setdefault(seq, None)
        read = self._rows_read
        return {seq: found for seq in asked if (found := read.get(seq)) is not None}

    def records(self, seqs: Iterable[int]) -> dict[int, StoredRecord]:
        """The stored records of these slots (those the session has)."""
        return {seq: stored_from_row(row) for seq, row in self._rows(s for s in seqs if s > 0).items()}

    def recent_keys(self, count: int) -> set[tuple[str, str]]:
        """(role, text) of the ``count`` latest records (by slot)."""
        alive, extra = self._alive("r")
        rows = self._query(
            "recall recent",
            "SELECT r.role, r.text FROM {s}.ctxlife_recall r WHERE r.session_id = %s"
            + alive
            + " ORDER BY r.slot DESC LIMIT %s",
            (self.session_id, *extra, count),
        )
        return {(role, text) for role, text in rows}

    def close(self) -> None:
        """Nothing to close: the rows are the store's (its pool's connections)."""
