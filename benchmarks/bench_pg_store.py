"""The postgres store beside the SQLite store: append and read latency, interleaved in one process.

A throw-away PostgreSQL server (initdb + pg_ctl in a temp folder, default durability: ``fsync=on``,
``synchronous_commit=on``; as the ``postgres`` user when run as root) on 127.0.0.1 over TCP, and a
SQLite file (the store's default ``synchronous=FULL``) in the same temp folder. For each store, one
store object (its pool warm), one session per size:

* ``append``: ``append(sid, [message], if_head=head)`` of one ~400-character message, the keeper's
  compare-and-append of one turn; N calls per store, the stores alternating call by call.
* ``read_records`` of the whole history and ``read_slots`` (what a recorder reads before a call) at
  1,000 and 10,000 messages; ``read_records(after_seq=head - 2)`` (the incremental read); ``head``.
  Each repeated R times, alternating stores.

Figures: median and p95 in milliseconds, garbage collection off inside each timed call. Run::

    PYTHONPATH=src:strategies .venv/bin/python benchmarks/bench_pg_store.py [--calls 300] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15"):
        path = f"/usr/lib/postgresql/{version}/bin/{name}"
        if os.access(path, os.X_OK):
            return path
    raise SystemExit(f"{name} not found: apt-get install postgresql-15")


def start_postgres(folder: Path) -> tuple[str, Callable[[], None]]:
    """A throw-away server in ``folder``; returns its URL and a function that stops it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        import pwd

        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        for parent in folder.parents:
            if parent.stat().st_uid == 0 and not parent.stat().st_mode & 0o001:
                parent.chmod(parent.stat().st_mode | 0o001)
        prefix = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    subprocess.run([*prefix, _bin("initdb"), "-D", str(data), "-U", "bench", "-E", "UTF8", "--no-locale",
                    "--auth=trust"], check=True, capture_output=True)  # fmt: skip
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={folder}"
    subprocess.run([*prefix, _bin("pg_ctl"), "start", "-D", str(data), "-l", str(folder / "log"), "-w",
                    "-o", options], check=True, capture_output=True)  # fmt: skip

    def stop() -> None:
        subprocess.run([*prefix, _bin("pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w"], capture_output=True)

    return f"postgresql://bench@127.0.0.1:{port}/postgres", stop


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3)}


def message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "lorem ipsum " * 32}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    from ctxlife.sessions.postgres import PostgresStore
    from ctxlife.sessions.sqlite import SQLiteStore

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-pg-") as tmp:
        pg_url, stop = start_postgres(Path(tmp) / "pg")
        try:
            stores = {"sqlite": SQLiteStore(Path(tmp) / "s.db"), "postgres": PostgresStore(pg_url)}
            for store in stores.values():
                store.append("warm", [message(0)])
            appends: dict[str, list[float]] = {k: [] for k in stores}
            for i in range(args.calls):
                for kind, store in stores.items():
                    head, m = store.head("append"), message(i)
                    appends[kind].append(timed(lambda s=store, h=head, m=m: s.append("append", [m], if_head=h)))
            out["append_one_if_head"] = {k: summary(v) for k, v in appends.items()}
            for size in (1000, 10000):
                sid = f"read{size}"
                for store in stores.values():
                    for start in range(0, size, 500):
                        store.append(sid, [message(start + j) for j in range(500)])
                reads: dict[str, dict[str, list[float]]] = {k: {} for k in stores}
                for _ in range(args.repeat):
                    for kind, store in stores.items():
                        for what, fn in (
                            ("read_records", lambda s=store, i=sid: s.read_records(i)),
                            ("read_slots", lambda s=store, i=sid: s.read_slots(i)),
                            (
                                "read_records_after_head_minus_2",
                                lambda s=store, i=sid, a=size - 2: s.read_records(i, a),
                            ),
                            ("head", lambda s=store, i=sid: s.head(i)),
                        ):
                            reads[kind].setdefault(what, []).append(timed(fn))
                out[f"reads_at_{size}"] = {k: {w: summary(v) for w, v in r.items()} for k, r in reads.items()}
            for store in stores.values():
                store.close()
        finally:
            stop()
    out["how"] = (
        f"{args.calls} appends and {args.repeat} reads per store, interleaved; one process; PostgreSQL "
        f"{subprocess.run([_bin('postgres'), '--version'], capture_output=True, text=True).stdout.strip()} "
        "over TCP on 127.0.0.1 with fsync on; SQLite synchronous=FULL; Python "
        f"{sys.version.split()[0]}; {os.cpu_count()} cores (shared)"
    )
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
