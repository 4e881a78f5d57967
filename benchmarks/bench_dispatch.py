"""Median time of one ``before_llm_call`` dispatch with ``truncate_last_n`` on a long history.

Reports, for a 1,000-message history (native tool calls, realistic sizes):
* first call: a fresh host sees the whole history (every string is tokenized once);
* repeated call: the same host, the history grown by one new message
  (incremental counting: only the new string is tokenized).
The strategy is configured to act only above the threshold with a window large
enough that it does not cut, so every call measures the same history length.

Run: .venv/bin/python benchmarks/bench_dispatch.py [--messages N] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.testing import conversation, user


def history(n_messages: int) -> list[dict]:
    rounds = max(1, n_messages // 6)  # each round: user, 2 x (call + result), answer
    return conversation(rounds, tools_per_round=2, result_size=60)[:n_messages]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    settings = settings_from_dict({"strategies": ["truncate_last_n"], "truncate_last_n": {"only_above_threshold": True}})
    base = history(args.messages)
    Host(settings, context_window=10_000_000).manage(list(base))  # load the encoding once, outside the timings

    first = []
    for _ in range(args.repeats):
        host = Host(settings, context_window=10_000_000)
        messages = list(base)
        t = time.perf_counter()
        host.manage(messages)
        first.append(time.perf_counter() - t)

    host = Host(settings, context_window=10_000_000)
    messages = list(base)
    host.manage(messages)
    repeated = []
    for i in range(args.repeats):
        messages.append(user(f"follow-up question number {i}"))
        t = time.perf_counter()
        report = host.manage(messages)
        repeated.append(time.perf_counter() - t)
    result = {
        "messages": args.messages,
        "tokens": report.tokens_before,
        "first_call_median_ms": round(statistics.median(first) * 1000, 3),
        "repeated_call_median_ms": round(statistics.median(repeated) * 1000, 3),
        "repeats": args.repeats,
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"before_llm_call dispatch, truncate_last_n, {result['messages']} messages ({result['tokens']} tokens), {result['machine']}")
        print(f"  first call    (fresh host, all strings tokenized): median {result['first_call_median_ms']} ms")
        print(f"  repeated call (one new message):                   median {result['repeated_call_median_ms']} ms")


if __name__ == "__main__":
    main()
