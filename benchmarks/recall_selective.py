"""recall_selective: what letting only a question's rarest terms choose the hits costs in answers, and saves in time.

From ``HistoryIndex.SELECTIVE_DOCS`` documents on, a search lets only the question's rarest terms choose its hits
(as many as match at most ``SELECTIVE_MATCHES`` documents in all; the common ones still rank the turns those hits
bring): FTS5 then scores a few hundred documents instead of every document holding "like". This measures, on
histories where the answer is a needle in a large haystack, whether the passages still hold the answer.

Each MemoryBank person's own ten days of chat (timestamps from their days) come first, then the other persons'
chats (every exchange, repeated, dated a year later) up to 10k / 100k messages. Each of the person's probing
questions is searched as ``recall`` searches a question about the past (``past_top_k`` passages, one
neighbour each side, its ``min_score`` and ``tool_weight``), once with every term choosing the hits (FTS5's
full BM25, exact) and once as shipped. A question counts as found when every answer group has one value in the
passages' text (``grading.present``: no ctxlife code grades). Also the CPU time of the two searches (median).

Run: ``PYTHONPATH=src:strategies:benchmarks .venv/bin/python benchmarks/recall_selective.py [--sizes 10000 100000]
[--split heldout] [--languages en cn]``. Prints one JSON document (``--out PATH`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from typing import Any

from grading import present
from memorybank import LANGUAGES, load_answer_keys, load_bank

# recall's options for a turn that asks about the past (strategies/ctxlife_strategies/recall.py)
LIMIT, CONTEXT, MIN_SCORE, TOOL_WEIGHT = 8, 1, 1.0, 3.0


def histories(language: str, person: str, size: int) -> list[Any]:
    """The person's chat, then every other person's, repeated, up to ``size`` records."""
    from ctxlife.sessions import RawRecord

    bank = load_bank(language)
    own: list[tuple[dict[str, Any], float]] = []
    for day, exchanges in bank[person]["history"].items():
        at = datetime.fromisoformat(day + "T12:00").timestamp()
        for i, e in enumerate(exchanges):
            own.append(({"role": "user", "content": e["query"]}, at + 2 * i))
            own.append(({"role": "assistant", "content": e["response"]}, at + 2 * i + 1))
    others = [
        {"role": role, "content": e[key]}
        for name, data in bank.items()
        if name != person
        for exchanges in data["history"].values()
        for e in exchanges
        for role, key in (("user", "query"), ("assistant", "response"))
    ]
    later = datetime.fromisoformat("2024-06-01T12:00").timestamp()
    messages = own + [(others[i % len(others)], later + i) for i in range(max(0, size - len(own)))]
    return [RawRecord(seq=k + 1, message=dict(m), recorded_at=at) for k, (m, at) in enumerate(messages)]


def found(passages: list[Any], groups: list[list[str]]) -> bool:
    text = "\n".join(record.text for p in passages for record in p.records)
    return all(any(present(value, text) for value in group) for group in groups)


def measure(language: str, split: str, size: int, matches: int | None = None) -> dict[str, Any]:
    from ctxlife.recall.history import passages_from
    from ctxlife.recall.index import HistoryIndex

    keys = load_answer_keys(language)
    questions = [q for q in keys["questions"] if q["split"] == split]
    persons = sorted({q["user"] for q in questions})
    shipped = HistoryIndex.SELECTIVE_MATCHES if matches is None else matches
    counts = {"exact": 0, "selective": 0}
    cpu: dict[str, list[float]] = {"exact": [], "selective": []}
    differ = 0
    for person in persons:
        index = HistoryIndex(None)
        index.add(histories(language, person, size))
        for q in (q for q in questions if q["user"] == person):
            texts = {}
            for mode, matches in (("exact", 0), ("selective", shipped)):
                index.SELECTIVE_MATCHES = matches
                index._found.clear()  # the index remembers searches between writes: each mode searches anew
                started = time.process_time()
                passages = passages_from(
                    index, q["question"], limit=LIMIT, context=CONTEXT, min_score=MIN_SCORE, tool_weight=TOOL_WEIGHT
                )
                cpu[mode].append(time.process_time() - started)
                counts[mode] += found(passages, q["answers"])
                texts[mode] = [[r.text for r in p.records] for p in passages]
            differ += texts["exact"] != texts["selective"]
        index.close()
    return {
        "language": language,
        "split": split,
        "history_messages": size,
        "selective_matches": shipped,
        "selective_fetch": HistoryIndex.SELECTIVE_FETCH,
        "questions": len(questions),
        "found_exact": counts["exact"],
        "found_selective": counts["selective"],
        "passages_differ": differ,
        "search_ms_exact": round(statistics.median(cpu["exact"]) * 1000, 2),
        "search_ms_selective": round(statistics.median(cpu["selective"]) * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--split", choices=["dev", "heldout"], default="heldout")
    parser.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--matches", type=int, default=None, help="SELECTIVE_MATCHES to try (default: as shipped)")
    parser.add_argument("--fetch", type=int, default=None, help="SELECTIVE_FETCH to try (default: as shipped)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.fetch is not None:
        from ctxlife.recall.index import HistoryIndex

        HistoryIndex.SELECTIVE_FETCH = args.fetch
    rows = []
    for size in args.sizes:
        for language in args.languages:
            rows.append(measure(language, args.split, size, args.matches))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {"what": __doc__.split("\n\n")[0], "date": datetime.now().isoformat(timespec="seconds"), "rows": rows}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
