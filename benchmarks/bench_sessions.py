"""Sessions benchmark: the cost of recording per model call, and append/restore per store.

Two questions, on every store (file, SQLite, a real redis-server this script starts):

* **Recording cost per call (steady state)** at 1,000 and 10,000 messages, both in one run. The caller
  is stateless: it keeps its conversation as JSON text (a database row, an HTTP body) and rebuilds
  the list with ``json.loads`` before every call, appends the model's last reply and a new user
  message, and calls ``Host.manage`` (``snapshot_restore`` only, a window far above the
  conversation, so nothing is compacted). Timed: the ``manage()`` call alone (not the JSON rebuild).
  Each call is repeated, back to back, on a host with no strategies (shape check + token count only):
  the baseline; ``recording = manage - baseline`` per call (paired), median and p95, garbage collection
  off inside the timed pair (as ``timeit`` does; collected before it). It must not grow
  with the history. ``records_after`` = the store's head after the run (= messages passed when every
  message is recorded once).
* **Append and restore** on a fresh session of 10,000 messages (also on ``file?fsync=false`` and
  ``sqlite?synchronous=NORMAL``): ``append`` one message per
  call (msg/s), then in batches of 50 (msg/s), ``save_snapshot`` of all of them, the store-level
  restore (``load_snapshot`` + ``read_records`` of the whole history, median of 5), and the ctxlife-level
  restore: a fresh ``Host``'s first call with ``[system, new user]`` on a session whose snapshot holds
  the first half and whose raw tail holds the rest (median of 3). Restores are timed without garbage
  collection inside (collected before each).

Messages are real GPT-4o tau-bench airline trajectories (``tests/data/tau-bench-airline-gpt4o.json.gz``,
system prompts removed), cycled to the wanted count (later cycles tagged so no two are equal).

"Before and after": the same script measures any ctxlife tree put first on ``PYTHONPATH``::

    git worktree add /tmp/before 538abff
    PYTHONPATH=/tmp/before/src:/tmp/before/strategies .venv/bin/python benchmarks/bench_sessions.py \\
        --measure-only --out /tmp/sessions-before.json
    .venv/bin/python benchmarks/bench_sessions.py --before /tmp/sessions-before.json

The last command measures this tree and writes ``benchmarks/results/sessions.json`` (with
``commit``/``code_hash`` of this tree, and the "before" figures under ``"before"`` with their own
commit); without ``--before`` it keeps the "before" block already in that file.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from provenance import stamp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "sessions.json"
DATA = ROOT / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"
STORES = ("file", "sqlite", "redis")
#: Relaxed durability, for the append/restore table only: no fsync per append / synchronous=NORMAL.
RELAXED = ("file-nofsync", "sqlite-normal")
SYSTEM = {"role": "system", "content": "You are an airline customer service agent. Follow the policy."}
HUGE_WINDOW = 100_000_000


# -- data ----------------------------------------------------------------------------------------


def _pool() -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        trajectories = json.load(f)
    return [m for t in trajectories for m in t["traj"] if m.get("role") != "system"]


def conversation(count: int, pool: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``count`` tau-bench messages in order, cycled; cycle k > 0 tags contents and call ids with ``~k``."""
    pool = pool if pool is not None else _pool()
    out = []
    for i in range(count):
        cycle, m = divmod(i, len(pool))
        message = pool[m]
        if cycle:
            message = copy.deepcopy(message)
            if isinstance(message.get("content"), str):
                message["content"] += f" ~{cycle}"
            if message.get("tool_call_id"):
                message["tool_call_id"] += f"~{cycle}"
            for call in message.get("tool_calls") or ():
                call["id"] += f"~{cycle}"
        out.append(message)
    return out


# -- stores --------------------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str | None]:
    """A throw-away redis-server on a free 127.0.0.1 port (no persistence), or None where it is not installed."""
    import shutil
    import socket

    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if binary is None:
        yield None
        return
    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
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


def store_url(kind: str, workdir: Path, redis_url: str | None, tag: str) -> str | None:
    """Each store with its default durability (file: fsync per append; SQLite: synchronous=FULL)."""
    if kind == "file":
        return f"file://{workdir / tag}"
    if kind == "file-nofsync":
        return f"file://{workdir / tag}-nofsync?fsync=false"
    if kind == "sqlite":
        return f"sqlite:///{workdir / tag}.db"
    if kind == "sqlite-normal":
        return f"sqlite:///{workdir / tag}-normal.db?synchronous=NORMAL"
    return f"{redis_url}?prefix={tag}:" if redis_url else None


def settings_for(url: str | None) -> Any:
    """snapshot_restore on ``url`` (None: no strategies), with the store where this ctxlife expects it."""
    from ctxlife.config import Settings, settings_from_dict

    if url is None:
        return settings_from_dict({"strategies": []})
    if "store" in Settings.model_fields:  # issue 11: the host owns the store
        return settings_from_dict({"strategies": ["snapshot_restore"], "store": url})
    return settings_from_dict({"strategies": ["snapshot_restore"], "snapshot_restore": {"store": url}})


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Collect garbage first, then none inside the block (as ``timeit`` times)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def ms(seconds: list[float]) -> dict[str, float]:
    s = sorted(seconds)
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return {"median": round(statistics.median(s) * 1000, 2), "p95": round(p95 * 1000, 2), "n": len(s)}


# -- (a) recording cost per call, stateless caller ------------------------------------------------


def recording_cost(url: str, history: list[dict[str, Any]], calls: int, budget: float) -> dict[str, Any]:
    """``calls`` steady-state calls of a caller that rebuilds its list from JSON each time.

    Each call is timed twice, back to back, on the same list: on the session host (``snapshot_restore``
    on ``url``) and on a host with no strategies (the baseline: shape check + token count). The
    recording cost is the median of the paired differences, so machine load drifts out of it.
    """
    from ctxlife.host import Host

    host = Host(settings_for(url), session_id="rec", context_window=HUGE_WINDOW)
    bare = Host(settings_for(None), context_window=HUGE_WINDOW)
    text = json.dumps([SYSTEM, *history, {"role": "user", "content": "Hello again, one more question."}])
    t0 = time.perf_counter()
    messages = json.loads(text)
    host.manage(messages)  # the first call: restores nothing (new session) and records the history
    first = time.perf_counter() - t0
    bare.manage(json.loads(text))  # warm the baseline too
    text = json.dumps(messages)
    times: list[float] = []
    base: list[float] = []
    diffs: list[float] = []
    started = time.perf_counter()
    for i in range(calls):
        messages = json.loads(text)  # the stateless caller: its list comes from JSON every call
        messages.append({"role": "assistant", "content": f"Reply {i}: your reservation is confirmed."})
        messages.append({"role": "user", "content": f"Question {i + 1}: and the baggage allowance?"})
        twin = json.loads(json.dumps(messages))
        # As timeit does: no garbage collection inside the timed pair (a full collection of the
        # caller's freshly decoded 10,000 messages costs ~200 ms and lands on whichever call runs).
        with no_gc():
            t = time.perf_counter()
            host.manage(messages)
            t1 = time.perf_counter()
            bare.manage(twin)
            t2 = time.perf_counter()
        times.append(t1 - t)
        base.append(t2 - t1)
        diffs.append((t1 - t) - (t2 - t1))
        text = json.dumps(messages)
        if time.perf_counter() - started > budget and len(times) >= 3:
            break
    records = host.store.head("rec") if host.store is not None else None
    host.close()
    bare.close()
    return {
        "first_call_ms": round(first * 1000, 1),
        "per_call_ms": ms(times),
        "baseline_ms": ms(base),
        "recording_only_ms": ms(diffs),
        "records_after": records,
        "messages_passed": len(messages) - 1,
    }


# -- (b) append and restore per store -------------------------------------------------------------


def append_restore(url: str, messages: list[dict[str, Any]], single: int, repeat: int) -> dict[str, Any]:
    from ctxlife.host import Host
    from ctxlife.sessions import Snapshot, open_store

    sid = "bench"
    with open_store(url) as store:
        single = min(single, len(messages))
        t0 = time.perf_counter()
        for m in messages[:single]:
            store.append(sid, [m])
        t_single = time.perf_counter() - t0
        rest = messages[single:]
        t0 = time.perf_counter()
        for i in range(0, len(rest), 50):
            store.append(sid, rest[i : i + 50])
        t_batch = time.perf_counter() - t0
        half = len(messages) // 2
        t0 = time.perf_counter()
        store.save_snapshot(Snapshot(session_id=sid, messages=[SYSTEM, *messages], raw_length=len(messages)))
        t_save = time.perf_counter() - t0
        loads, reads = [], []
        for _ in range(repeat):
            with no_gc():
                t0 = time.perf_counter()
                loaded = store.load_snapshot(sid)
                t1 = time.perf_counter()
                raw = [r.message for r in store.read_records(sid)]
                t2 = time.perf_counter()
            loads.append(t1 - t0)
            reads.append(t2 - t1)
        assert loaded is not None and len(raw) == len(messages)
        # What a restart restores: a snapshot of the first half, the second half in the raw tail.
        store.save_snapshot(Snapshot(session_id=sid, messages=[SYSTEM, *messages[:half]], raw_length=half))
    settings = settings_for(url)
    restores, restored = [], 0
    for _ in range(max(1, repeat - 2)):
        host = Host(settings, session_id=sid, context_window=HUGE_WINDOW)
        fresh = [SYSTEM, {"role": "user", "content": "I am back: where were we?"}]
        with no_gc():
            t0 = time.perf_counter()
            host.manage(fresh)
            t1 = time.perf_counter()
        restores.append(t1 - t0)
        restored = len(fresh)
        host.close()
    return {
        "append_1_per_call_msgs_per_s": round(single / t_single) if single else None,
        "append_batch50_msgs_per_s": round(len(rest) / t_batch) if rest else None,
        "save_snapshot_ms": round(t_save * 1000, 1),
        "store_restore_ms": {
            "load_snapshot": ms(loads)["median"],
            "read_raw": ms(reads)["median"],
            "total": round(ms(loads)["median"] + ms(reads)["median"], 1),
        },
        "host_restore_ms": ms(restores),
        "restored_messages": restored,
    }


# -- the run -----------------------------------------------------------------------------------------


def measure(
    quick: bool, stores: tuple[str, ...] = STORES, log: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    import ctxlife

    sizes = (1_000, 10_000) if not quick else (200, 2_000)
    calls = 20 if not quick else 5
    budget = 6.0 if not quick else 2.0
    size_b = 10_000 if not quick else 2_000
    pool = _pool()
    convs = {n: conversation(n, pool) for n in (*sizes, size_b)}
    out: dict[str, Any] = {
        "ctxlife": getattr(ctxlife, "__version__", None),
        "ctxlife_path": str(Path(ctxlife.__file__).resolve().parent),
        "sizes": list(sizes),
        "calls_per_size": calls,
        "append_restore_messages": size_b,
        "data": f"tau-bench airline GPT-4o trajectories ({DATA.name}), cycled",
        "recording": {},
        "append_restore": {},
    }
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-sessions-") as tmp, redis_server(Path(tmp)) as redis_url:
        workdir = Path(tmp)
        for kind in stores:
            if store_url(kind, workdir, redis_url, "probe") is None:
                out["recording"][kind] = out["append_restore"][kind] = {"skipped": "redis-server not installed"}
                continue
            out["recording"][kind] = {
                str(n): recording_cost(store_url(kind, workdir, redis_url, f"rec{n}"), convs[n], calls, budget)
                for n in sizes
            }
            log(f"{kind} recording done")
            url = store_url(kind, workdir, redis_url, "ar")
            assert url is not None
            out["append_restore"][kind] = append_restore(
                url, convs[size_b], single=1_000 if not quick else 200, repeat=5
            )
            log(f"{kind} append/restore done")
        for kind in RELAXED:
            url = store_url(kind, workdir, redis_url, "ar")
            assert url is not None
            out["append_restore"][kind] = append_restore(
                url, convs[size_b], single=1_000 if not quick else 200, repeat=5
            )
        log("relaxed stores done")
    return out


def run(quick: bool) -> dict[str, Any]:
    """Measure this tree; keep the "before" figures already recorded in results/sessions.json."""
    results = measure(quick)
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(OSError, ValueError):
        old = json.loads(RESULTS.read_text(encoding="utf-8"))
        if "before" in old and old["before"].get("sizes") == results["sizes"]:  # not a --quick run's
            results["before"] = old["before"]
    return stamp(results)


def _fmt(cell: Any) -> str:
    if isinstance(cell, dict) and "median" in cell:
        return f"{cell['median']:g} / {cell['p95']:g}"
    return "—" if cell is None else f"{cell:,}" if isinstance(cell, int) else str(cell)


def section(results: dict[str, Any]) -> str:
    """Markdown: recording cost per call (1k vs 10k) and append/restore per store, before and after."""
    before = results.get("before") or {}
    sizes = [str(n) for n in results["sizes"]]
    arrow = " → " if before else ""

    def pair(b: Any, a: Any) -> str:
        return f"{_fmt(b)}{arrow}{_fmt(a)}" if before else _fmt(a)

    lines = [
        "Recording per model call, stateless caller (list rebuilt from JSON before every call; "
        f"up to {results['calls_per_size']} calls per size), tau-bench messages. *recording* = the session "
        "host's `manage()` minus the same call on a host with no strategies, paired per call; median / p95 ms"
        + ("; before → after." if before else "."),
        "",
        "| store | "
        + " | ".join(f"recording @ {int(n):,} msgs" for n in sizes)
        + " | "
        + " | ".join(f"whole `manage()` @ {int(n):,}" for n in sizes)
        + " | "
        + " | ".join(f"records / passed @ {int(n):,}" for n in sizes)
        + " |",
        "|---|" + "---:|" * (3 * len(sizes)),
    ]
    for kind, row in results["recording"].items():
        if "skipped" in row:
            lines.append(f"| {kind} | {row['skipped']} |")
            continue
        old = (before.get("recording") or {}).get(kind) or {}
        new = {n: row.get(n) or {} for n in sizes}  # results of an older version may lack a field
        cells = [pair(old.get(n, {}).get("recording_only_ms"), new[n].get("recording_only_ms")) for n in sizes]
        cells += [pair(old.get(n, {}).get("per_call_ms"), new[n].get("per_call_ms")) for n in sizes]
        cells += [
            pair(old.get(n, {}).get("records_after"), new[n].get("records_after"))
            + f" / {_fmt(new[n].get('messages_passed'))}"
            for n in sizes
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Append and restore, {results['append_restore_messages']:,} messages per session"
        + (" (before → after)" if before else "")
        + "; store restore = `load_snapshot` + `read_records` of everything; host restore = a fresh host's first "
        "call with `[system, new user]` (median / p95 ms).",
        "",
        "| store | append 1/call msg/s | append x50 msg/s | save snapshot ms | store restore ms | host restore ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, row in results["append_restore"].items():
        if "skipped" in row:
            lines.append(f"| {kind} | {row['skipped']} |")
            continue
        old = (before.get("append_restore") or {}).get(kind) or {}

        def cell(key: str, sub: str | None = None, old: dict[str, Any] = old, row: dict[str, Any] = row) -> str:
            b, a = old.get(key), row.get(key)
            if sub is not None:
                b = b.get(sub) if isinstance(b, dict) else None
                a = a.get(sub) if isinstance(a, dict) else None
            return pair(b, a) if old else _fmt(a)

        lines.append(
            f"| {kind} | {cell('append_1_per_call_msgs_per_s')} | {cell('append_batch50_msgs_per_s')} | "
            f"{cell('save_snapshot_ms')} | {cell('store_restore_ms', 'total')} | {cell('host_restore_ms')} |"
        )
    if before:
        lines += [
            "",
            f"Before: commit {str(before.get('commit', '?'))[:7]}; "
            f"after: commit {str(results.get('commit', '?'))[:7]}.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--measure-only", action="store_true", help="measure the ctxlife on PYTHONPATH; write --out")
    parser.add_argument("--out", type=Path, default=None, help="where --measure-only writes its JSON")
    parser.add_argument("--before", type=Path, default=None, help="a --measure-only JSON of the code before")
    parser.add_argument("--before-commit", default="538abff", help="the commit --before measured")
    args = parser.parse_args(argv)

    def log(s: str) -> None:
        print(f"[bench_sessions {time.strftime('%H:%M:%S')}] {s}", file=sys.stderr, flush=True)

    if args.measure_only:
        results = measure(args.quick, log=log)
        results["load_average"] = [round(x, 2) for x in os.getloadavg()]
        text = json.dumps(results, indent=1)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
        return 0
    results = run(args.quick)
    if args.before is not None:
        before = json.loads(args.before.read_text(encoding="utf-8"))
        before["commit"] = args.before_commit
        results["before"] = before
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(section(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
