"""Compaction on real traces: unmanaged vs truncate_last_n vs llm_summary (extractive).

Replays the 200 tau-bench trajectories (tests/data) and one long synthetic session call
by call through ``ctxlife.manage`` at a small window, and reports per method: total prompt
tokens over all calls, peak context, compactions, the share of ledger facts (ids, codes,
amounts, dates, ...) from user turns and tool results still in the context at the end, and
calls that would have sent a provider-invalid sequence (must be 0).

Run: .venv/bin/python benchmarks/bench_compaction.py [--window 4000] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ctxlife.config import settings_from_dict
from ctxlife.replay import Conversation, load_conversations, replay
from synthetic import synthetic_session

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"

METHODS = {
    "unmanaged": {"strategies": []},
    "truncate_last_n": {"strategies": ["truncate_last_n"], "truncate_last_n": {"rounds": 2, "only_above_threshold": True}},
    "llm_summary": {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}},
}


def run(conversations: list[Conversation], window: int) -> dict[str, dict]:
    out = {}
    for method, table in METHODS.items():
        settings = settings_from_dict(table)
        totals = {"calls": 0, "prompt_tokens": 0, "unmanaged_tokens": 0, "peak": 0, "compactions": 0, "facts_total": 0, "facts_kept": 0, "invalid_calls": 0}
        started = time.perf_counter()
        for conversation in conversations:
            result = replay(conversation, settings, context_window=window)
            totals["calls"] += len(result.rows)
            totals["prompt_tokens"] += result.managed_total
            totals["unmanaged_tokens"] += result.unmanaged_total
            totals["peak"] = max(totals["peak"], result.peak_managed)
            totals["compactions"] += sum(1 for r in result.rows for a in r.actions if a.endswith(":compacted"))
            totals["facts_total"] += result.facts_total
            totals["facts_kept"] += result.facts_kept
            totals["invalid_calls"] += result.violations
        totals["fact_retention"] = round(totals["facts_kept"] / totals["facts_total"], 4) if totals["facts_total"] else 1.0
        totals["tokens_vs_unmanaged"] = round(totals["prompt_tokens"] / totals["unmanaged_tokens"], 4)
        totals["seconds"] = round(time.perf_counter() - started, 2)
        out[method] = totals
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--synthetic-calls", type=int, default=320)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    suites = {
        "tau-bench (200 trajectories)": load_conversations(DATA),
        f"synthetic ({args.synthetic_calls} calls)": [Conversation("synthetic", synthetic_session(args.synthetic_calls))],
    }
    results = {name: run(conversations, args.window) for name, conversations in suites.items()}
    if args.json:
        print(json.dumps({"window": args.window, "results": results}, indent=2))
        return
    for name, methods in results.items():
        print(f"\n{name}, window {args.window} tokens, threshold 0.4")
        print(f"{'method':<16}{'calls':>7}{'prompt tokens':>15}{'vs unmanaged':>14}{'peak':>8}{'compactions':>13}{'facts kept':>12}{'invalid':>9}")
        for method, t in methods.items():
            print(
                f"{method:<16}{t['calls']:>7}{t['prompt_tokens']:>15,}{t['tokens_vs_unmanaged']:>14.3f}{t['peak']:>8,}"
                f"{t['compactions']:>13}{t['fact_retention']:>12.1%}{t['invalid_calls']:>9}"
            )


if __name__ == "__main__":
    main()
