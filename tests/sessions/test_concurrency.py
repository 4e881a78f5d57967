"""Several processes on one session: appends never interleave or get lost, the lock is exclusive,
and a lock whose holder died is freed (by the kernel for the file store, by expiry otherwise)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ctxlife.sessions import LockTimeoutError, open_store

# Each worker waits until the parent creates the "go" file, so the workers really run together.
APPENDER = r"""
import os, random, sys, time
from ctxlife.sessions import open_store

url, sid, worker, batches, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
rng = random.Random(worker)
store = open_store(url)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
for b in range(batches):
    size = rng.randint(1, 5)
    store.append(sid, [
        {"role": "assistant", "w": worker, "b": b, "i": i, "n": size,
         "content": "ü" * rng.choice([1, 100, 3000, 70000])}
        for i in range(size)
    ])
print("done", flush=True)
"""

LOCKER = r"""
import json, os, random, sys, time
from ctxlife.sessions import open_store

url, sid, worker, rounds, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
rng = random.Random(worker)
store = open_store(url)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
spans = []
for _ in range(rounds):
    with store.lock(sid, ttl_seconds=10, timeout=30):
        start = time.monotonic_ns()
        # a read-modify-write that loses updates unless the lock is exclusive
        value = int(store.get_blob(sid, "counter") or "0")
        time.sleep(rng.uniform(0, 0.003))
        store.put_blob(sid, "counter", str(value + 1))
        end = time.monotonic_ns()
    spans.append((start, end))
    time.sleep(rng.uniform(0, 0.001))
print("spans", json.dumps(spans), flush=True)
"""

HOLDER = r"""
import sys, time
from ctxlife.sessions import open_store

url, sid, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = open_store(url)
with store.lock(sid, ttl_seconds=ttl, timeout=5):
    print("locked", flush=True)
    time.sleep(600)
"""


def _expect_line(proc: Any, word: str) -> str:
    line = proc.stdout.readline()
    while line and not line.startswith(word):
        line = proc.stdout.readline()  # skip anything else a child prints
    if not line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"child exited before printing {word!r}:\n{err[-3000:]}")
    return line


def _run_together(spawn: Any, code: str, args: list[list[str]], go: Path) -> list[Any]:
    procs = [spawn(code, *a) for a in args]
    for p in procs:
        _expect_line(p, "ready")
    go.touch()
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-3000:]
        outputs.append(out)
    return outputs


@pytest.mark.parametrize("store_kind", ["file", "sqlite", "redis", "postgres"])
def test_two_processes_appending_never_interleave_or_lose(store_url: str, spawn: Any, tmp_path: Path) -> None:
    batches = 150
    _run_together(
        spawn,
        APPENDER,
        [[store_url, "shared", w, str(batches), str(tmp_path / "go")] for w in ("A", "B")],
        tmp_path / "go",
    )
    with open_store(store_url) as store:
        raw = [r.message for r in store.read_records("shared")]
        assert store.head("shared") == len(raw)
    # Walk the history batch by batch: each batch must be whole and contiguous.
    next_batch = {"A": 0, "B": 0}
    pos = 0
    switches = 0
    last_worker = None
    while pos < len(raw):
        head = raw[pos]
        w, b, n = head["w"], head["b"], head["n"]
        assert b == next_batch[w], f"worker {w}: batch {next_batch[w]} expected, got {b} (lost/reordered)"
        assert [(m["w"], m["b"], m["i"]) for m in raw[pos : pos + n]] == [(w, b, i) for i in range(n)], (
            f"batch {w}{b} was interleaved at position {pos}"
        )
        next_batch[w] += 1
        switches += last_worker is not None and w != last_worker
        last_worker = w
        pos += n
    assert next_batch == {"A": batches, "B": batches}
    assert switches > 0  # the two writers really ran at the same time


@pytest.mark.parametrize("store_kind", ["redis", "sqlite", "file", "postgres"])
def test_two_workers_never_hold_the_lock_at_once(store_url: str, spawn: Any, tmp_path: Path) -> None:
    rounds = 40
    outputs = _run_together(
        spawn,
        LOCKER,
        [[store_url, "contended", w, str(rounds), str(tmp_path / "go")] for w in ("A", "B")],
        tmp_path / "go",
    )
    spans = []
    for worker, out in zip("AB", outputs, strict=True):
        line = next(row for row in out.splitlines() if row.startswith("spans "))
        spans += [(start, end, worker) for start, end in json.loads(line[len("spans ") :])]
    spans.sort()
    assert len(spans) == 2 * rounds
    for (_, e1, w1), (s2, _, w2) in itertools.pairwise(spans):
        assert e1 <= s2, f"{w1} held the lock until {e1} but {w2} entered at {s2}"
    assert len({w for *_, w in spans}) == 2
    with open_store(store_url) as store:
        assert store.get_blob("contended", "counter") == str(2 * rounds)  # no lost update


@pytest.mark.parametrize(
    # max_wait bounds a failing test only; the file lock's TTL is far beyond it, so only the kernel frees it.
    ("store_kind", "ttl", "max_wait"),
    [("file", 3600.0, 60.0), ("sqlite", 1.0, 60.0), ("redis", 1.0, 60.0)],
)
def test_a_dead_holders_lock_is_freed(store_kind: str, store_url: str, spawn: Any, ttl: float, max_wait: float) -> None:
    holder = spawn(HOLDER, store_url, "orphan", str(ttl))
    _expect_line(holder, "locked")
    with open_store(store_url) as store:
        with pytest.raises(LockTimeoutError), store.lock("orphan", timeout=0.1):
            pass  # (never reached: the lock is really held while the holder lives)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        t0 = time.monotonic()
        # file: the kernel drops the flock with the process (its TTL, 1 h, is far beyond max_wait);
        # sqlite/redis: the lock row/key expires after its TTL (the lock raises LockTimeoutError otherwise).
        with store.lock("orphan", ttl_seconds=5, timeout=max_wait):
            waited = time.monotonic() - t0
        if store_kind != "file":
            assert waited >= 0.3  # it was the expiry that freed it, not a release (a lower bound: load only adds)
        with store.lock("orphan", timeout=0):  # and it is free again afterwards
            pass
