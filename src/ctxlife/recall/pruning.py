"""The best documents of a large index without scoring every match (MaxScore over FTS5's bm25), exactly.

FTS5's ``bm25()`` scores every document a query matches: at 100k messages a question's common
words match ~15k documents, and scoring them is most of what a search costs. A document's score is
a sum over the query's terms, and each term adds at most ``idf * gmax``, where ``gmax`` is the
most that term ever weighed in one document (measured once, from FTS5's own single-term scores,
and kept until the index is edited). So with the rare terms ``R`` and the common ones ``C``, a
document holding none of ``R`` scores at most the sum of the bounds of ``C``; when that is below
the ``limit``-th best score among the documents holding some of ``R`` (scored by FTS5 with the
whole query, so exactly as the full query scores them), no other document can enter the result,
and the common words' thousands of documents are never scored. When the bound does not prove it,
``R`` grows; with every term in ``R`` the query is the full one. Documents added since the bounds
were measured are scored apart (their weights are not bounded yet).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import Any

#: FTS5's bm25 parameters (k1, b): a term adds at most ``idf * (k1 + 1)`` to a score.
_K1 = 1.2

#: Bounds are measured again once this share of the documents (at least 1000) was added since
#: (the added ones are scored apart, and that query grows with them).
_NEW_SHARE = 0.05

#: Most terms whose bounds are kept (a long conversation's vocabulary).
_TERMS_KEPT = 4096

#: Slack on the bound: the scores are sums in floating point.
_MARGIN = 1e-9


class TermBounds:
    """Per-term bounds of one FTS5 table (``fts``), measured lazily, for :meth:`ranked`.

    Args:
        db: the index's connection.
        stride: ``rowid % stride`` is a document's record (its sequence number).
    """

    def __init__(self, db: sqlite3.Connection, stride: int) -> None:
        self._db = db
        self._stride = stride
        self._gmax: dict[str, tuple[float, float]] = {}  # term -> (most weight in a document, avgdl then)
        self._epoch: tuple[int, int] = (-1, -1)  # (last seq, edits) when the bounds were started

    def _averages(self) -> tuple[int, float]:
        """FTS5's document count and average document length (its ``averages`` record, id 1)."""
        row = self._db.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
        if row is None or not row[0]:
            return 0, 0.0
        values: list[int] = []
        at, block = 0, bytes(row[0])
        while at < len(block) and len(values) < 2:
            value, at = _varint(block, at)
            values.append(value)
        rows = values[0]
        return rows, (values[1] / rows if rows and len(values) > 1 else 0.0)

    def _idf(self, rows: int, hits: int) -> float:
        idf = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows else 0.0
        return idf if idf > 0 else 1e-6  # FTS5's floor

    def bound(self, term: str, rows: int, avgdl: float, hits: int) -> float:
        """The most ``term`` can add to a document's score now (documents added since the epoch aside)."""
        found = self._gmax.get(term)
        if found is None:
            best = self._db.execute(
                "SELECT -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY 1 DESC LIMIT 1", (f'"{term}"',)
            ).fetchone()
            gmax = (best[0] if best else 0.0) / self._idf(rows, hits)
            found = self._gmax[term] = (gmax, avgdl)
        gmax, then = found
        # A weight grows with the average length (shorter than average, relatively): at most in proportion.
        grown = max(1.0, avgdl / then) if then > 0 else _K1 + 1
        return self._idf(rows, hits) * min(gmax * grown, _K1 + 1) * (1 + _MARGIN)

    def ranked(
        self,
        terms: Sequence[str],
        limit: int,
        tool_weight: float,
        state: tuple[int, int, int],
        hits: dict[str, int],
        score: str,
        order: str,
    ) -> list[tuple[Any, ...]] | None:
        """The rows ``(rowid, score)`` the full query ``ORDER BY score DESC, seq LIMIT limit`` returns,
        or None when the bounds cannot prove them (the caller runs the full query).

        ``state``: the index's (last seq, edits, documents), as this process wrote it (another's
        writes are not bounded: the caller runs the full query then); ``hits``: each term's document
        count; ``score`` and ``order``: the full query's SQL for the score (with one ``?``:
        ``tool_weight``) and its ORDER BY ... LIMIT ?.
        """
        last_seq, edits, docs = state
        if len(terms) < 2:
            return None  # nothing to leave out
        if (
            self._epoch[1] != edits
            or last_seq - self._epoch[0] > max(_NEW_SHARE * docs, 1000)
            or len(self._gmax) > _TERMS_KEPT
        ):
            self._gmax.clear()  # an edit (bounds of replaced text), many new documents, many terms: start over
            self._epoch = (last_seq, edits)
        rows, avgdl = self._averages()
        if not rows:
            return None
        weight = max(1.0, tool_weight)
        bounds = {t: self.bound(t, rows, avgdl, hits[t]) * weight for t in terms}
        full = _any(terms)
        found: dict[int, float] = {}
        since = self._epoch[0]
        if last_seq > since:  # documents added since the bounds: scored with the full query
            found.update(
                self._db.execute(
                    f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? AND fts.rowid % {self._stride} > ? {order}",
                    (tool_weight, full, since, limit),
                ).fetchall()
            )
        by_bound = sorted(terms, key=lambda t: -bounds[t])
        rare = 1
        while rare < len(by_bound):
            kept = set(by_bound[:rare])
            common = [t for t in terms if t not in kept]
            # Documents holding a rare term, scored by the whole query (a NOT's phrases add nothing).
            expression = f"({full}) NOT (({_any(common)}) NOT ({_any([t for t in terms if t in kept])}))"
            found.update(
                self._db.execute(
                    f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? {order}", (tool_weight, expression, limit)
                ).fetchall()
            )
            best = sorted(found.items(), key=lambda row: (-row[1], row[0] % self._stride, row[0]))[:limit]
            floor = best[-1][1] if len(best) >= limit else 0.0
            if sum(bounds[t] for t in common) < floor:
                return best
            while rare < len(by_bound) and sum(bounds[t] for t in by_bound[rare:]) >= floor:
                rare += 1
            if sum(hits[t] for t in by_bound[:rare]) * 2 > sum(hits.values()):
                return None  # the rare terms match most of what the query does: no cheaper than the full one
        return None


def _any(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at`` (FTS5's records use it) and where the next starts."""
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return value, at + 9
