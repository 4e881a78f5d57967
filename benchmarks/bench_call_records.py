"""Call records: what writing "what the model was sent" costs per model call, on every store.

For each store (file with fsync, file without, SQLite with synchronous=FULL, a real redis-server
this script starts) and conversation size (1,000 and 5,000 tau-bench messages, recorded first), a
``ctxlife.Session`` on a host with no strategies and a window far above the conversation (nothing
is compacted) makes ``--calls`` calls, each with one new user message, then records a reply. Timed:
``ctxlife.host_recording.record_call`` alone (the recorder's slots of the list, the record's encoding and the one
write), per call, median and p95; beside it the whole ``Session.messages`` call, and the stored
bytes per call record (the JSON the store keeps, its length averaged over the calls).

    PYTHONPATH=src:strategies .venv/bin/python benchmarks/bench_call_records.py [--calls 60] [--out FILE]

Prints JSON (stamped with the commit and product-code hash); ``--out`` also writes it to FILE.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_sessions import HUGE_WINDOW, conversation, redis_server, store_url
from provenance import stamp

SIZES = (1000, 5000)


def ms(seconds: list[float]) -> dict[str, float]:
    s = sorted(seconds)
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return {"median": round(statistics.median(s) * 1000, 3), "p95": round(p95 * 1000, 3), "n": len(s)}


def measure(url: str, history: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    import ctxlife
    from ctxlife import host_recording
    from ctxlife.config import settings_from_dict
    from ctxlife.sessions import open_store

    with open_store(url) as store:
        for start in range(0, len(history), 500):
            store.append("bench", history[start : start + 500])
    settings = settings_from_dict({"strategies": [], "context_window": HUGE_WINDOW, "store": url})
    host = ctxlife.Host(settings)
    spent: list[float] = []
    original = host_recording.record_call

    def timed(*args: Any) -> None:
        start = time.perf_counter()
        original(*args)
        spent.append(time.perf_counter() - start)

    host_recording.record_call = timed  # the host looks it up at every call
    whole: list[float] = []
    with ctxlife.Session("bench", host=host) as session:
        session.messages()  # the first call restores the conversation (not timed)
        spent.clear()
        for i in range(calls):
            start = time.perf_counter()
            session.messages({"role": "user", "content": f"Question {i}: what is the status of my booking?"})
            whole.append(time.perf_counter() - start)
            session.record_reply(f"Answer {i}: your booking is confirmed.")
        docs = [c.doc for c in session.store.read_calls("bench")]
    host.close()
    host_recording.record_call = original
    sizes = [len(json.dumps(d, ensure_ascii=False, separators=(",", ":"))) for d in docs[1:]]
    return {
        "record_call_ms": ms(spent),
        "session_messages_ms": ms(whole),
        "bytes_per_record": round(statistics.mean(sizes)) if sizes else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"calls": args.calls, "stores": {}}
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as redis_url:
        for kind in ("file", "file-nofsync", "sqlite", "redis"):
            row = out["stores"][kind] = {}
            for size in SIZES:
                url = store_url(kind, Path(tmp), redis_url, f"calls-{kind}-{size}")
                if url is None:
                    row[str(size)] = {"skipped": "redis-server not installed"}
                    continue
                row[str(size)] = measure(url, conversation(size), args.calls)
                print(f"{kind} {size}: {row[str(size)]}", file=sys.stderr)
    text = json.dumps(stamp(out), indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
