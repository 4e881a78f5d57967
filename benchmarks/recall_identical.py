"""recall_identical: recall's passages and blocks on a fixed set of searches, to compare two checkouts byte for byte.

A speed change to recall's search must not change what it finds. This writes, for each search, the passages
(hit, score, records shown, core, term weights) and the block ``render`` draws from them, one JSON line per
search, and prints a digest; run it on two checkouts and ``cmp`` the outputs::

    PYTHONPATH=<checkout>/src:<checkout>/strategies:benchmarks .venv/bin/python benchmarks/recall_identical.py OUT

A checkout from before perf7r's excerpt fix drew some blocks differently with another ``PYTHONHASHSEED``: give both
runs the same one (``PYTHONHASHSEED=0``).

The searches (~700): MemoryBank EN and CN (each person's chat, searched after every day with two probing
questions), the WOZ dev halves (``BENCH_WOZ_DATA``; left out when missing), the synthetic tool-heavy agent
sessions (dev seeds, probes asked where they come), and 10k / 100k histories (``--sizes``) of repeated chat;
each with the last six messages in view, two option sets (bench_recall's defaults; a tighter one with tool
results weighted 2.5, a coverage floor and a text filter).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import memorybank
import woz
from ctxlife.recall import HistorySearch, live_keys, render
from ctxlife.sessions import open_store
from ctxlife.tokens import TokenCounter

OPTIONS: tuple[dict[str, Any], ...] = (
    {"limit": 8, "context": 1, "min_score": 0.0, "tool_weight": 1.0, "min_coverage": 0.0},
    {"limit": 5, "context": 1, "min_score": 0.5, "tool_weight": 2.5, "min_coverage": 0.3, "filter": True},
)


@contextmanager
def clock(when: float) -> Iterator[None]:
    """``time.time()`` reads ``when``: records get the same dates on every run."""
    real = time.time
    time.time = lambda: when
    try:
        yield
    finally:
        time.time = real


class Searcher:
    def __init__(self, tmp: str, name: str) -> None:
        self.url = f"file://{tmp}/{name}"
        self.store = open_store(self.url)
        self.search = HistorySearch(self.store, index_dir="memory")
        self.history: list[dict[str, Any]] = []
        self.count = TokenCounter(None).count_text

    def add(self, messages: list[dict[str, Any]], when: float) -> None:
        with clock(when):
            self.store.append("s", messages)
        self.history += messages

    def ask(self, label: str, query: str, out: Any) -> None:
        visible = live_keys(self.history[-6:])
        for n, options in enumerate(OPTIONS):
            options = dict(options)
            filtered = options.pop("filter", False)
            passages = self.search.passages(
                "s",
                query,
                in_view=lambda record: (record.role, record.text) in visible,
                text_filter=(lambda text: text.replace("e", "e\u0301")) if filtered else None,
                **options,
            )
            text, shown = render(passages, 600, self.count, query=query)
            row = {
                "search": f"{label}/{n}",
                "query": query,
                "passages": [
                    {
                        "hit": [p.hit.seq, p.hit.part, p.hit.role, round(p.hit.score, 9), p.hit.day, p.hit.text],
                        "records": [[r.seq, r.role, r.text, r.recorded_at, r.day, r.view] for r in p.records],
                        "core": sorted(p.core),
                        "weights": {t: round(w, 9) for t, w in sorted(p.weights.items())},
                        "asked": {t: round(w, 9) for t, w in sorted(p.asked.items())},
                    }
                    for p in passages
                ],
                "block": text,
                "shown": [p.hit.seq for p in shown],
            }
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    def close(self) -> None:
        self.search.close()
        self.store.close()


def at(day: str | None, k: int) -> float:
    start = datetime.fromisoformat((day or "2024-01-01") + ("" if day and "T" in day else "T09:00")).timestamp()
    return start + 60 * k


def replay(conv: memorybank.Conversation, tmp: str, out: Any, every_day: bool) -> int:
    searcher = Searcher(tmp, conv.name)
    asked = 0
    last_day = None
    texts = [q.text for q in conv.questions] or ["What did we talk about?"]
    for k, (day, before, after) in enumerate(conv.calls):
        if every_day and last_day is not None and day != last_day and searcher.history:
            searcher.ask(f"{conv.name}/{k}", texts[asked % len(texts)], out)
            asked += 1
        last_day = day
        if k in conv.interleaved:
            searcher.add(before, at(day, k))
            searcher.ask(f"{conv.name}/{k}", conv.interleaved[k].text, out)
            asked += 1
            searcher.add(after, at(day, k) + 1)
        else:
            searcher.add(before + after, at(day, k))
    for q in conv.questions:
        searcher.ask(f"{conv.name}/end", q.text, out)
        asked += 1
    searcher.close()
    return asked


def synthetic_conversations() -> list[memorybank.Conversation]:
    from bench_recall import synthetic

    return synthetic({"dev": (1, 2, 3)})


def long_history(size: int, tmp: str, out: Any, searches: int) -> int:
    pool = memorybank.chat_pool("en")
    questions = memorybank.question_texts("en")
    searcher = Searcher(tmp, f"long{size}")
    day0 = datetime(2024, 1, 1, 9).timestamp()
    for start in range(0, size, 1000):
        searcher.add([dict(pool[i % len(pool)]) for i in range(start, min(size, start + 1000))], day0 + start * 30)
    for k in range(searches):
        searcher.ask(f"long{size}/{k}", questions[k % len(questions)], out)
    searcher.close()
    return searches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    args = parser.parse_args(argv)
    searches = 0
    with tempfile.TemporaryDirectory(prefix="ctxlife-recall-identical-") as tmp, open(args.out, "w") as out:
        for language in ("en", "cn"):
            for conv in memorybank.conversations(language):
                searches += replay(conv, tmp, out, every_day=True)
        try:
            wozs = [c for language in ("en", "cn") for c in woz.conversations(language, ("dev",))]
        except woz.DataMissing:
            wozs = []
            print("WOZ data missing: left out", file=sys.stderr)
        for conv in wozs:
            searches += replay(conv, tmp, out, every_day=False)
        for conv in synthetic_conversations():
            searches += replay(conv, tmp, out, every_day=False)
        for size in args.sizes:
            searches += long_history(size, tmp, out, 40)
    digest = hashlib.sha256(open(args.out, "rb").read()).hexdigest()[:16]
    print(json.dumps({"searches": searches, "lines": searches * len(OPTIONS), "sha256": digest}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
