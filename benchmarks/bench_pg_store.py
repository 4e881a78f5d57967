"""Fleet stores: PostgreSQL beside SQLite and Redis, and LangGraph's PostgresSaver, interleaved in one process.

Throw-away servers this script starts in a temporary folder: PostgreSQL (initdb + pg_ctl, default
durability: ``fsync=on``, ``synchronous_commit=on``; as the ``postgres`` user when run as root) and
redis-server (no persistence), both on 127.0.0.1 over TCP; a SQLite file (the store's default
``synchronous=FULL``) in the same folder. Wall time (``time.perf_counter``; the network round trips
are the cost), garbage collection off inside each timed call, median and p95. Within a case the
stores take turns call by call, so a slow moment of the machine hits them alike.

Cases:

* ``append``: ``append(sid, [message], if_head=head)``, the keeper's compare-and-append of one
  message; with PostgreSQL it also writes the message's recall rows (same transaction). LangGraph:
  ``graph.invoke({"messages": [message]})`` on a one-node ``MessagesState`` graph with a
  ``PostgresSaver`` (a checkpoint per turn, as LangGraph's persistence docs run it).
* ``read``: the whole history read before a call at 1,000 and 10,000 messages: ``read_records``;
  LangGraph ``get_state(config).values["messages"]``.
* ``recall``: one ``HistorySearch.passages(session, question)`` at 1,000 / 10,000 / 100,000 messages
  (``--quick``: 1,000 / 10,000), warm: SQLite's index file beside the store, Redis's index in the
  process's memory (built before), PostgreSQL's rows in the database. Questions name a planted
  fact among generated small talk. LangGraph's checkpointer has no history search: no row.
* ``cold``: a new worker's first call: a fresh Python process opens the store and runs one
  ``passages()`` on a session of 10,000 messages it never saw (timed from after the imports and
  the store's opening). SQLite: a process on the machine that wrote the index (its file is there);
  Redis: the worker builds its index from the raw history; PostgreSQL: nothing to build.

Run: ``.venv/bin/python benchmarks/bench_pg_store.py [--quick]`` (writes benchmarks/results/fleet.json;
``--print`` only prints it). Needs PostgreSQL (``apt-get install postgresql-15``), redis-server and
``langgraph-checkpoint-postgres`` (the ``bench`` extra).
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

from bench_sessions import redis_server

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "fleet.json"
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
COLD_SIZE = 10_000
STORES = ("sqlite", "redis", "postgres")
TOPICS = ("gardening", "the weather", "cooking pasta", "a walk by the river", "board games", "the timetable")


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


def summary_ms(seconds: list[float]) -> dict[str, float]:
    values = sorted(s * 1000 for s in seconds)
    return {"p50_ms": round(statistics.median(values), 3), "p95_ms": round(values[int(0.95 * (len(values) - 1))], 3)}


def message(i: int) -> dict[str, Any]:
    """Generated small talk; every 97th message plants a fact (``locker {i} ... kw{i}x``)."""
    if i % 97 == 50:
        return {"role": "user", "content": f"Please remember: the code of locker {i} is kw{i}x."}
    topic = TOPICS[i % len(TOPICS)]
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"Day {i}: a few words about {topic}, the usual routine and small talk."}


def question(size: int, k: int) -> str:
    planted = [i for i in range(size) if i % 97 == 50]
    return f"What was the code of locker {planted[(k * 7919) % len(planted)]}?"


def langgraph_graph(pg_url: str) -> tuple[Any, Any]:
    """A one-node MessagesState graph with a PostgresSaver (its own connection), as LangGraph's docs build one."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import START, MessagesState, StateGraph

    def agent(state: MessagesState) -> dict[str, Any]:
        return {}  # the model call is not measured: the turn's message comes in as input

    conn = psycopg.connect(pg_url, autocommit=True, prepare_threshold=0)
    saver = PostgresSaver(conn)  # type: ignore[arg-type]
    saver.setup()
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver), conn


_COLD = """
import json, sys, time
from ctxlife.recall import HistorySearch
from ctxlife.sessions import open_store
store = open_store(sys.argv[1])
search = HistorySearch(store)
t0 = time.perf_counter()
found = search.passages(sys.argv[2], sys.argv[3])
took = time.perf_counter() - t0
print(json.dumps({"seconds": took, "found": bool(found)}))
search.close()
store.close()
"""


def cold_call(url: str, session: str, text: str, home: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _COLD, url, session, text],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HOME": str(home)},
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if not found["found"]:
        raise RuntimeError(f"cold call on {url.split(':')[0]} found nothing for {text!r}")
    return float(found["seconds"])


def measure(quick: bool) -> dict[str, Any]:
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    sizes = QUICK_SIZES if quick else SIZES
    calls, repeat = (40, 5) if quick else (200, 15)
    out: dict[str, Any] = {"sizes": list(sizes)}
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-fleet-") as tmp, redis_server(Path(tmp)) as redis_url:
        if redis_url is None:
            raise SystemExit("bench_pg_store needs redis-server (apt-get install redis-server)")
        pg_url, stop = start_postgres(Path(tmp) / "pg")
        try:
            urls = {"sqlite": f"sqlite:///{Path(tmp) / 's.db'}", "redis": redis_url, "postgres": pg_url}
            stores = {kind: open_store(url) for kind, url in urls.items()}
            graph, lg_conn = langgraph_graph(pg_url)
            # append: one message per call, the stores (and LangGraph) taking turns
            appends: dict[str, list[float]] = {k: [] for k in (*STORES, "langgraph_postgres")}
            for i in range(calls):
                m = message(i)
                for kind, store in stores.items():
                    head = store.head("append")
                    appends[kind].append(timed(lambda s=store, h=head, m=m: s.append("append", [m], if_head=h)))
                config = {"configurable": {"thread_id": "append"}}
                appends["langgraph_postgres"].append(timed(lambda m=m, c=config: graph.invoke({"messages": [m]}, c)))
            out["append"] = {k: summary_ms(v) for k, v in appends.items()}
            out["read"], out["recall"] = {}, {}
            for size in sizes:
                sid = f"s{size}"
                for store in stores.values():
                    for start in range(0, size, 1000):
                        store.append(sid, [message(j) for j in range(start, min(size, start + 1000))])
                searches = {kind: HistorySearch(store) for kind, store in stores.items()}
                for search in searches.values():
                    search.passages(sid, question(size, 0))  # warm: builds the SQLite and Redis indexes
                found: dict[str, list[float]] = {k: [] for k in STORES}
                for k in range(1, repeat + 1):
                    text = question(size, k)
                    for kind, search in searches.items():
                        found[kind].append(timed(lambda s=search, q=text, i=sid: s.passages(i, q)))
                out["recall"][str(size)] = {k: summary_ms(v) for k, v in found.items()}
                for search in searches.values():
                    search.close()
                if size <= 10_000:
                    config = {"configurable": {"thread_id": sid}}
                    for start in range(0, size, 1000):
                        graph.invoke({"messages": [message(j) for j in range(start, start + 1000)]}, config)
                    reads: dict[str, list[float]] = {k: [] for k in (*STORES, "langgraph_postgres")}
                    for _ in range(repeat):
                        for kind, store in stores.items():
                            reads[kind].append(timed(lambda s=store, i=sid: s.read_records(i)))
                        reads["langgraph_postgres"].append(
                            timed(lambda c=config: graph.get_state(c).values["messages"])
                        )
                    out["read"][str(size)] = {k: summary_ms(v) for k, v in reads.items()}
            home = Path(tmp) / "home"
            home.mkdir()
            colds: dict[str, list[float]] = {k: [] for k in STORES}
            for k in range(3):
                for kind, url in urls.items():
                    colds[kind].append(cold_call(url, f"s{COLD_SIZE}", question(COLD_SIZE, 100 + k), home))
            out["cold"] = {str(COLD_SIZE): {k: summary_ms(v) for k, v in colds.items()}}
            lg_conn.close()
            for store in stores.values():
                store.close()
        finally:
            stop()
    out["how"] = (
        f"{calls} appends and {repeat} reads/searches per store, interleaved call by call in one process; "
        "cold: 3 fresh processes per store; PostgreSQL "
        f"{subprocess.run([_bin('postgres'), '--version'], capture_output=True, text=True).stdout.strip()} "
        "and redis-server over TCP on 127.0.0.1 (PostgreSQL fsync on; SQLite synchronous=FULL); Python "
        f"{sys.version.split()[0]}; {os.cpu_count()} cores (shared)"
    )
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """``make bench``'s entry point."""
    return measure(quick)


# -- the docs section -------------------------------------------------------------------------------------

_LABELS = {"sqlite": "ctxlife `sqlite://`", "redis": "ctxlife `redis://`", "postgres": "ctxlife `postgres://`"}
_LABELS["langgraph_postgres"] = "LangGraph `PostgresSaver`"


def _cell(found: dict[str, Any] | None) -> str:
    if not found:
        return "–"
    return f"{found['p50_ms']:,.2f} ({found['p95_ms']:,.2f})"


def section(results: dict[str, Any]) -> str:
    from report.fmt import table

    sizes = [str(n) for n in results["sizes"]]
    read_sizes = [n for n in sizes if n in results.get("read", {})]
    header = ["", "append one message", *[f"read {int(n):,}" for n in read_sizes]]
    header += [f"recall query {int(n):,}" for n in sizes]
    header += [f"cold first call {int(n):,}" for n in results["cold"]]
    rows = []
    for kind in (*STORES, "langgraph_postgres"):
        row = [_LABELS[kind], _cell(results["append"].get(kind))]
        row += [_cell(results["read"][n].get(kind)) for n in read_sizes]
        row += [_cell(results["recall"][n].get(kind)) for n in sizes]
        row += [_cell(results["cold"][n].get(kind)) for n in results["cold"]]
        rows.append(row)
    return (
        "Milliseconds, median (p95). "
        + results["how"]
        + ". LangGraph's checkpointer has no history search (no recall or cold row).\n\n"
        + table(header, rows)
    )


def summary(results: dict[str, Any]) -> list[str]:
    cold = next(iter(results["cold"].values()))
    big = str(results["sizes"][-1])
    recall = results["recall"][big]
    return [
        f"A new worker's first recall on a {int(next(iter(results['cold']))):,}-message session: "
        f"{cold['postgres']['p50_ms']:,.1f} ms with PostgreSQL (nothing to build), "
        f"{cold['redis']['p50_ms']:,.1f} ms with Redis (the worker builds its index).",
        f"Recall query at {int(big):,} messages: {recall['postgres']['p50_ms']:,.1f} ms PostgreSQL, "
        f"{recall['sqlite']['p50_ms']:,.1f} ms SQLite, {recall['redis']['p50_ms']:,.1f} ms Redis (median).",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 messages, fewer calls")
    parser.add_argument("--print", action="store_true", help="print the results, do not write them")
    args = parser.parse_args(argv)
    results = run(args.quick)
    text = json.dumps(results, indent=1)
    if args.print:
        print(text)
    else:
        RESULTS.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
