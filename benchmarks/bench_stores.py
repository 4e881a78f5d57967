"""Session store benchmark: append throughput and restore latency, per store.

For each store it measures, on a fresh session:

* ``append 1/call``: messages/s when appending one message per ``append_raw`` call, as an agent does
  after every model or tool step;
* ``append batch``: messages/s when appending ``--batch`` messages per call;
* restore latency of the resulting ``--messages``-message session: ``load_snapshot`` (a snapshot
  holding all the messages, the worst case of an uncompacted context) plus ``read_raw`` of the whole
  history; median of ``--repeat`` runs.

Messages are real GPT-4o tau-bench airline trajectories (``data/tau-bench-airline-gpt4o.json.gz``)
when the file is found, cycled to the wanted count; otherwise synthetic messages of similar size.
The Redis store uses a ``redis-server`` this script starts on a free 127.0.0.1 port (skipped when
the binary is missing). Run::

    PYTHONPATH=src python benchmarks/bench_stores.py            # table
    PYTHONPATH=src python benchmarks/bench_stores.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA_CANDIDATES = [
    ROOT / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz",
    ROOT.parent / "shared" / "data" / "tau-bench-airline-gpt4o.json.gz",
]
ALL_STORES = ["file", "file-nofsync", "sqlite", "sqlite-normal", "redis"]


def load_messages(count: int, data: Path | None) -> tuple[list[dict[str, Any]], str]:
    paths = [data] if data else DATA_CANDIDATES
    for path in paths:
        if path and path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as f:
                trajectories = json.load(f)
            pool = [m for t in trajectories for m in t["traj"]]
            return [pool[i % len(pool)] for i in range(count)], f"tau-bench ({path.name})"
    pool = [
        {"role": "user", "content": "I want to change my flight to Seattle on the 20th. " * 3},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_reservation_details", "arguments": '{"reservation_id": "ZFA04Y"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"flights": ["HAT136"] * 40})},
        {"role": "assistant", "content": "Your reservation has been updated. " * 8},
    ]
    return [pool[i % len(pool)] for i in range(count)], "synthetic"


@contextmanager
def redis_server(workdir: Path) -> Iterator[str | None]:
    """A throw-away redis-server on a free 127.0.0.1 port (no persistence), or None where it is not installed."""
    import shutil
    import socket
    import subprocess

    binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
    if binary is None:
        yield None
        return
    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def store_url(kind: str, workdir: Path, redis_url: str | None) -> str | None:
    return {
        "file": f"file://{workdir / 'files'}",
        "file-nofsync": f"file://{workdir / 'files-nofsync'}?fsync=false",
        "sqlite": f"sqlite:///{workdir / 'full.db'}",
        "sqlite-normal": f"sqlite:///{workdir / 'normal.db'}?synchronous=NORMAL",
        "redis": f"{redis_url}?prefix=bench:" if redis_url else None,
    }[kind]


def bench_store(url: str, messages: list[dict[str, Any]], single: int, batch: int, repeat: int) -> dict[str, Any]:
    from ctxlife.sessions import Snapshot, open_store

    sid = "bench-session"
    with open_store(url) as store:
        store.delete(sid)
        single = min(single, len(messages))
        t0 = time.perf_counter()
        for m in messages[:single]:
            store.append_raw(sid, [m])
        t_single = time.perf_counter() - t0

        rest = messages[single:]
        t0 = time.perf_counter()
        for i in range(0, len(rest), batch):
            store.append_raw(sid, rest[i : i + batch])
        t_batch = time.perf_counter() - t0

        snapshot = Snapshot(session_id=sid, messages=messages, raw_length=len(messages), meta={"summary": "benchmark"})
        t0 = time.perf_counter()
        store.save_snapshot(snapshot)
        t_save = time.perf_counter() - t0
        assert store.raw_length(sid) == len(messages)

        loads, reads, tails = [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            loaded = store.load_snapshot(sid)
            t1 = time.perf_counter()
            raw = store.read_raw(sid)
            t2 = time.perf_counter()
            store.read_raw(sid, start=len(messages) - 50)
            t3 = time.perf_counter()
            loads.append(t1 - t0)
            reads.append(t2 - t1)
            tails.append(t3 - t2)
        assert loaded is not None and loaded.messages == messages and raw == messages
        store.delete(sid)
    load_ms = statistics.median(loads) * 1000
    read_ms = statistics.median(reads) * 1000
    return {
        "url": url,
        "append_single_msgs_per_s": round(single / t_single) if single else None,
        "append_batch_msgs_per_s": round(len(rest) / t_batch) if rest else None,
        "batch_size": batch,
        "save_snapshot_ms": round(t_save * 1000, 1),
        "load_snapshot_ms": round(load_ms, 1),
        "read_raw_ms": round(read_ms, 1),
        "restore_ms": round(load_ms + read_ms, 1),
        "read_raw_last_50_ms": round(statistics.median(tails) * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="session size (default 10000)")
    parser.add_argument(
        "--single", type=int, default=2_000, help="how many of them to append one per call (default 2000)"
    )
    parser.add_argument("--batch", type=int, default=50, help="batch size for the rest (default 50)")
    parser.add_argument("--repeat", type=int, default=5, help="restore runs; the median is shown")
    parser.add_argument("--stores", default=",".join(ALL_STORES), help=f"comma-separated, from {','.join(ALL_STORES)}")
    parser.add_argument("--data", type=Path, default=None, help="tau-bench .json.gz to take messages from")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the stores (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(ALL_STORES))
    if unknown:
        parser.error(f"unknown store(s) {unknown}; choose from {ALL_STORES}")
    messages, source = load_messages(args.messages, args.data)
    payload = sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in messages)

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-", dir=args.dir) as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as redis_url:
            for kind in kinds:
                url = store_url(kind, workdir, redis_url)
                if url is None:
                    results[kind] = {"skipped": "redis-server not installed (apt-get install redis-server)"}
                    continue
                results[kind] = bench_store(url, messages, args.single, args.batch, args.repeat)

    report = {
        "messages": len(messages),
        "payload_bytes": payload,
        "source": source,
        "single_appends": min(args.single, len(messages)),
        "batch_size": args.batch,
        "python": sys.version.split()[0],
        "stores": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Session stores: {len(messages)} messages ({payload / 1e6:.1f} MB JSON, {source})",
        title_justify="left",
    )
    for col in [
        "store",
        "append\n1/call\nmsg/s",
        f"append\nx{args.batch}\nmsg/s",
        "save\nsnapshot\nms",
        "restore\nms",
        "= load\nsnapshot\nms",
        "+ read\nraw\nms",
        "read raw\nlast 50\nms",
    ]:
        table.add_column(col, justify="left" if col == "store" else "right", no_wrap=True)
    for kind, r in results.items():
        if "skipped" in r:
            table.add_row(kind, r["skipped"], *[""] * 6)
            continue
        table.add_row(
            kind,
            f"{r['append_single_msgs_per_s']:,}",
            f"{r['append_batch_msgs_per_s']:,}",
            f"{r['save_snapshot_ms']}",
            f"{r['restore_ms']}",
            f"{r['load_snapshot_ms']}",
            f"{r['read_raw_ms']}",
            f"{r['read_raw_last_50_ms']}",
        )
    console = Console()
    console.width = max(console.width, 110)  # keep every column readable in a pipe too
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
