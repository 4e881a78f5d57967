"""recall_fts5_floor: what SQLite FTS5 itself costs recall's search, the floor under issue 41's 3 / 5 ms.

On the history ``bench_recall.py`` times recall on (a MemoryBank chat repeated to 10k / 100k messages, an
index in memory), for each of the 99 English questions: the ranking query as recall makes it (``_ranked``:
``bm25()`` over the question's terms, the best ``limit`` kept, pruned past ``PRUNE_DOCS``), the same
``MATCH`` with a constant in place of ``bm25()`` (what finding the documents costs), the documents the
terms match, and the whole search and block of a call (``passages`` + ``render``, the last seven messages
in view). Medians of CPU time per question; ``bm25_us_per_match`` is (ranked - match only) / matches.

Run: ``PYTHONPATH=src:strategies:benchmarks .venv/bin/python benchmarks/recall_fts5_floor.py [--sizes ...]``.
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from ctxlife.recall import HistoryIndex, HistorySearch, live_keys, query_terms, render
from ctxlife.sessions import RawRecord, open_store
from ctxlife.tokens import TokenCounter
from memorybank import chat_pool, question_texts

LIMIT = 8 * 3 + 4  # the hits recall ranks for its default 8 passages (history.MATCHES_PER_PASSAGE)
#: The ranking query with a constant for ``bm25()``: what finding the documents costs.
MATCH_ONLY = "SELECT rowid, 1 FROM fts WHERE fts MATCH ? ORDER BY 2 LIMIT ?"


def _cpu(run: Any) -> tuple[float, Any]:
    started = time.process_time()
    out = run()
    return (time.process_time() - started) * 1000, out


def floor(size: int, rounds: int = 3) -> dict[str, Any]:
    pool, questions = chat_pool("en"), question_texts("en")
    history = [dict(pool[i % len(pool)]) for i in range(size)]
    index = HistoryIndex()
    index.add(RawRecord(i + 1, m, recorded_at=1.7e9 + i) for i, m in enumerate(history))
    ranked, matched, counts = [], [], []
    for _ in range(rounds):
        for question in questions:
            terms = [t for t in query_terms(question) if index._doc_freq(t)]
            if not terms:
                continue
            ranked.append(_cpu(lambda found=terms: index._ranked(found, LIMIT))[0])
            match = " OR ".join(f'"{t}"' for t in terms)
            matched.append(_cpu(lambda words=match: index._db.execute(MATCH_ONLY, (words, LIMIT)).fetchall())[0])
            counts.append(index._db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (match,)).fetchone()[0])
    per_match = [(r - m) * 1000 / n for r, m, n in zip(ranked, matched, counts, strict=True) if n]
    return {
        "history_messages": size,
        "questions": len(ranked) // rounds,
        "ranked_ms": round(statistics.median(ranked), 3),
        "match_only_ms": round(statistics.median(matched), 3),
        "matches": int(statistics.median(counts)),
        "bm25_us_per_match": round(statistics.median(per_match), 3),
        "search_and_block_ms": _search_and_block(history, questions),
    }


def _search_and_block(history: list[dict[str, Any]], questions: list[str]) -> float:
    """Median CPU of recall's search and block per question, on a file store growing by each question and reply."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ctxlife-fts5-floor-") as tmp:
        store = open_store(f"file://{tmp}/sessions")
        for start in range(0, len(history), 5000):
            store.append("s", history[start : start + 5000])
        search = HistorySearch(store)
        count = TokenCounter(None).count_text
        search.passages("s", "warm up", limit=8)  # the index built
        lived, cpu = list(history), []
        for i, question in enumerate(questions):
            store.append("s", [{"role": "user", "content": question}])
            lived.append({"role": "user", "content": question})
            visible = live_keys(lived[-7:])

            def call(q: str = question, seen: set[tuple[str, str]] = visible) -> Any:
                passages = search.passages("s", q, limit=8, in_view=lambda r: (r.role, r.text) in seen)
                return render(passages, 1600, count, query=q)

            cpu.append(_cpu(call)[0])
            reply = lived[(i * 7) % len(history)]
            store.append("s", [reply])
            lived.append(dict(reply))
        search.close()
        store.close()
    return round(statistics.median(cpu), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    args = parser.parse_args()
    print(json.dumps([floor(size) for size in args.sizes], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
