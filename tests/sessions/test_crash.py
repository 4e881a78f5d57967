"""Crash safety: SIGKILL a writer at random moments, many times; nothing readable is ever lost.

After every kill: the snapshot loads; the raw history loads (at most the torn last record missing,
skipped with a warning); records are exactly 0, 1, 2, ... (no gap, no duplicate, no glued line);
the history never shrinks; the snapshot only refers to records that are in the history. The next
writer then continues the same session (which exercises the file store's torn-tail repair).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from ctxlife.sessions import open_store

# A "zygote" imports ctxlife once, then forks one writer per command, so each of the many kills
# costs a fork instead of a Python start-up. Parent -> zygote: "go URL SEED". Writer -> parent:
# "ready PID" after its first snapshot. Zygote -> parent: "dead PID STATUS" once the writer died.
ZYGOTE = r"""
import os, random, sys
from collections import deque
import redis  # noqa: F401 - import everything once, before forking
import ctxlife.sessions.file, ctxlife.sessions.redis, ctxlife.sessions.sqlite  # noqa: F401
from ctxlife.sessions import Snapshot, open_store


def write_forever(url, sid, seed):
    rng = random.Random(seed)
    store = open_store(url)
    n = store.head(sid)
    recent = deque([r.message for r in store.read_records(sid, max(0, n - 3))], maxlen=3)
    announced = False
    while True:
        batch = []
        for _ in range(rng.randint(1, 4)):
            size = rng.choice([10, 300, 4000, 30000, 120000])
            batch.append({"role": "tool", "seq": n, "tool_call_id": f"call_{n}",
                          "content": "é😀" + "x" * size})
            n += 1
        store.append(sid, batch)
        recent.extend(batch)
        store.save_snapshot(Snapshot(session_id=sid, messages=list(recent), raw_length=n,
                                     meta={"summary": f"{n} messages so far"}))
        if not announced:
            print("ready", os.getpid(), flush=True)
            announced = True


print("zygote", flush=True)
for line in sys.stdin:
    _, url, sid, seed = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            write_forever(url, sid, int(seed))
        finally:
            os._exit(70)
    _, status = os.waitpid(pid, 0)
    print("dead", pid, status, flush=True)
"""

KILLS = {"file": 30, "sqlite": 20, "redis": 10, "postgres": 10}


def _check_file_tail(folder: Path, sid: str, readable: int) -> bool:
    """At most the torn last line is missing: complete lines == readable records, and a torn tail
    (if any) is the beginning of exactly the next record. Returns whether a torn tail exists."""
    data = (folder / f"{sid}_raw.jsonl").read_bytes()
    assert data.count(b"\n") == readable
    tail = data[data.rfind(b"\n") + 1 :]
    if tail:  # a record is one line: {"seq":N,"view":..,"at":..,"fp":..,"msg":{...}} (N counts from 1)
        expected_start = b'{"seq":%d,"view":"' % (readable + 1)
        assert (tail + b" " * len(expected_start)).startswith(expected_start[: len(tail)])
    return bool(tail)


def _leave_torn_write(path: Path, seq: int, rng: random.Random) -> None:
    """Append the first bytes of record ``seq``, as a writer killed inside write() leaves them.

    A real kill lands inside write() only rarely (encoding and fsync take most of a writer's time),
    so every third round adds such a tail by hand; the next writer, a real process, must repair it.
    """
    message = b'{"role":"tool","seq":%d,"tool_call_id":"call_%d","content":"' % (seq, seq) + b"x" * 5000
    record = b'{"seq":%d,"view":"","at":1.0,"fp":"0","msg":' % (seq + 1) + message
    with open(path, "ab") as f:
        f.write(record[: rng.randint(1, len(record) - 1)])


def _read_until(proc: Any, word: str, seen: list[str]) -> list[str]:
    """Read the zygote's stdout up to a line starting with ``word`` (other lines, e.g. warnings
    that unconfigured structlog prints, are collected in ``seen``)."""
    while True:
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"crash-test zygote stopped while waiting for {word!r}:\n{err[-3000:]}")
        if line.startswith(word):
            return line.split()
        seen.append(line)


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["file", "sqlite", "redis", "postgres"])
def test_sigkill_at_random_moments_never_loses_or_corrupts(store_kind: str, store_url: str, spawn: Any) -> None:
    rng = random.Random(20240531)
    sid = "crashy"
    reader = open_store(store_url)
    zygote = spawn(ZYGOTE)
    chatter: list[str] = []
    _read_until(zygote, "zygote", chatter)
    previous = 0
    torn_seen = 0
    check_time = 0.0
    kills = KILLS[store_kind]
    try:
        for attempt in range(kills):
            url = store_url
            if store_kind == "file" and attempt % 2:
                url += "?fsync=false"  # half the writers without fsync: longer write()s to hit
            zygote.stdin.write(f"go {url} {sid} {attempt}\n")
            zygote.stdin.flush()
            pid = int(_read_until(zygote, "ready", chatter)[1])
            time.sleep(rng.uniform(0.0, 0.08))
            os.kill(pid, signal.SIGKILL)
            _, dead_pid, status = _read_until(zygote, "dead", chatter)
            assert int(dead_pid) == pid
            assert os.WIFSIGNALED(int(status)) and os.WTERMSIG(int(status)) == signal.SIGKILL

            t_check = time.monotonic()
            with structlog.testing.capture_logs() as logs:
                snapshot = reader.load_snapshot(sid)
                raw = [r.message for r in reader.read_records(sid)]
                length = reader.head(sid)
            assert {e["event"] for e in logs} <= {"raw_torn_record_skipped"}
            assert snapshot is not None
            assert [m["seq"] for m in raw] == list(range(len(raw))), "gap, duplicate or glued record"
            assert length == len(raw)
            assert len(raw) >= previous, "the raw history shrank"
            assert snapshot.raw_length <= len(raw), "snapshot refers to records that are not there"
            assert snapshot.messages == raw[snapshot.raw_length - len(snapshot.messages) : snapshot.raw_length]
            assert snapshot.meta == {"summary": f"{snapshot.raw_length} messages so far"}
            if store_kind == "file":
                folder = Path(store_url[len("file://") :])
                torn_seen += _check_file_tail(folder, sid, len(raw))
                if attempt % 3 == 2:
                    _leave_torn_write(folder / f"{sid}_raw.jsonl", len(raw), rng)
            previous = len(raw)
            check_time += time.monotonic() - t_check
        assert previous > kills  # the writers made real progress
    finally:
        reader.close()
        zygote.stdin.close()
    repaired = sum("raw_torn_record_repaired" in line for line in chatter)
    print(
        f"{store_kind}: {kills} kills, {previous} records, {torn_seen} torn tails, {repaired} repaired, "
        f"{check_time:.1f}s checking"
    )


# A worker serving a stateless caller: each request is the whole conversation as JSON. The parent
# SIGKILLs it at random moments and starts a new one (a crash, a deploy); the caller resends.
STATELESS_WORKER = r"""
import json, sys
import ctxlife
from ctxlife.config import settings_from_dict
cfg = settings_from_dict({"strategies": ["snapshot_restore", "truncate_last_n"], "store": sys.argv[1],
                          "truncate_last_n": {"rounds": 2, "always": True}})
host = ctxlife.Host(cfg, context_window=100000, session_id="restarts")
print("ready", flush=True)
for line in sys.stdin:
    host.manage(json.loads(line))
    print("done", flush=True)
"""


@pytest.mark.slow
def test_killed_and_restarted_workers_record_a_stateless_conversation_exactly_once(
    store_kind: str, store_url: str, spawn: Any
) -> None:
    rng = random.Random(11)
    conversation: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    worker = None
    kills = 0
    for i in range(24):
        if worker is None:
            worker = spawn(STATELESS_WORKER, store_url)
            assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
        conversation.append({"role": "user", "content": f"q{i}" if i % 5 else "ok"})
        worker.stdin.write(json.dumps(conversation) + "\n")
        worker.stdin.flush()
        if rng.random() < 0.3:  # killed while (or right after) it records the request
            time.sleep(rng.random() * 0.05)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
            worker = None
            kills += 1
        else:
            assert worker.stdout.readline().strip() == "done", worker.stderr.read()
        conversation.append({"role": "assistant", "content": "ok" if i % 3 == 0 else f"a{i}"})
    if worker is not None:
        worker.stdin.close()
        worker.wait(timeout=30)
    # The caller's last request, resent to a fresh worker, records whatever a kill lost.
    last = spawn(STATELESS_WORKER, store_url)
    assert last.stdout.readline().strip() == "ready"
    last.stdin.write(json.dumps(conversation[:-1]) + "\n")
    last.stdin.flush()
    assert last.stdout.readline().strip() == "done"
    last.stdin.close()
    last.wait(timeout=30)
    assert kills >= 3
    with open_store(store_url) as store:
        got = [r.message for r in store.read_records("restarts")]
    assert got == conversation[1:-1], "every message exactly once, in order, across kills and restarts"
