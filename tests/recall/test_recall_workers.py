"""Recall across processes: workers share a session through a store; each keeps its index fresh.

With Redis, each worker keeps the index in memory, builds it from the raw history in Redis on first
use and then adds only the records past its last sequence number, including those another worker
wrote. With a file store, workers share one index file beside the store.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import is_recall_block

WORKER = Path(__file__).with_name("recall_worker.py")
sys.path.insert(0, str(Path(__file__).parent))

from test_recall_strategy import filler  # noqa: E402


def script(fact: str, start: int, turns: int = 24) -> list[dict[str, Any]]:
    out = [
        {"role": "user", "content": "Hello again!"},  # (the first user message of a run is pinned)
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": f"Please remember this: {fact}"},
        {"role": "assistant", "content": "Noted."},
    ]
    for i in range(start, start + turns):
        out += filler(i)
    return out


def run_worker(store: str, session: str, messages: list[dict[str, Any]], tmp: Path, name: str) -> list[dict[str, Any]]:
    script_path, out_path = tmp / f"{name}.json", tmp / f"{name}.out.json"
    script_path.write_text(json.dumps(messages), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(WORKER), store, session, "2000", str(script_path), str(out_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out_path.read_text(encoding="utf-8"))


def ask(host: Host, live: list[dict[str, Any]], question: str) -> str:
    live.append({"role": "user", "content": question})
    report = host.manage(live)
    assert report.failures == []
    found = [m["content"] for m in live if is_recall_block(m)]
    assert len(found) == 1, [a for a in report.actions]
    return found[0]


def worker_b(store: str, session: str) -> Host:
    """Worker B: this process, a stateless service's host with the workers' config (recall_worker.py's)."""
    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "truncate_last_n", "recall"],
            "store": store,
            "truncate_last_n": {"rounds": 3, "always": False},
        }
    )
    return Host(settings, context_window=2000, session_id=session)


@contextlib.contextmanager
def worker_b_that_recalled(store: str, session: str, tmp: Path) -> Iterator[tuple[Host, list[dict[str, Any]]]]:
    """Worker A records a conversation naming pier nineteen; worker B (this process) recalls it once,
    so B's index holds it; B's host and live list, closed on the way out."""
    run_worker(store, session, script("the boat is moored at pier nineteen.", 1), tmp, "a1")
    host = worker_b(store, session)
    try:
        live = [{"role": "system", "content": "You are a friendly companion."}]
        host.manage(live)
        assert "pier nineteen" in ask(host, live, "Where is the boat moored?")
        yield host, live
    finally:
        host.close()


def two_workers(store: str, tmp: Path, session: str) -> None:
    # Worker A (its own process) chats and compacts the first fact away.
    out = run_worker(store, session, script("the boat is moored at pier nineteen.", 1), tmp, "a1")
    assert not any("pier nineteen" in str(m.get("content")) for m in out if not is_recall_block(m))
    # Worker B (this process, a stateless service's fresh host) restores the session and asks.
    host = worker_b(store, session)
    try:
        live = [{"role": "system", "content": "You are a friendly companion."}]
        host.manage(live)
        assert "pier nineteen" in ask(host, live, "Where is the boat moored?")
        live.append({"role": "assistant", "content": "At pier nineteen."})
        # Worker A comes back (a new process) and adds a second fact, compacted away in turn.
        run_worker(store, session, script("the trailer key is in the red toolbox.", 40), tmp, "a2")
        # B's index picks up A's new records by sequence number: no rebuild, nothing missed.
        assert "red toolbox" in ask(host, live, "Where is the trailer key?")
    finally:
        host.close()


def test_two_workers_on_redis(redis_url, tmp_path):
    two_workers(redis_url, tmp_path, f"shared-{tmp_path.name[-12:]}")


def test_two_workers_on_a_file_store(tmp_path):
    two_workers(f"file://{tmp_path / 'sessions'}", tmp_path, "shared")
    assert (tmp_path / "sessions" / "shared_derived" / "recall.sqlite").exists()  # the session's derived data


def test_a_session_deleted_and_started_again_on_another_worker_is_not_recalled(redis_url, tmp_path):
    # Worker B keeps the session's index in memory. The session is deleted and its id started again
    # by worker A, with a history at least as long as the old one: B's next recall must not quote
    # the deleted conversation into the new one.
    from ctxlife.sessions import open_store

    session = f"reborn-{tmp_path.name[-12:]}"
    with worker_b_that_recalled(redis_url, session, tmp_path) as (host, live):
        with open_store(redis_url) as store:
            old_head = store.head(session)
            assert store.delete(session)
        run_worker(redis_url, session, script("the boat is moored at dock four.", 100, turns=30), tmp_path, "a2")
        with open_store(redis_url) as store:
            assert store.head(session) >= old_head  # longer than what B indexed: no shorter-history hint
        live = [{"role": "system", "content": "You are a friendly companion."}]
        host.start_run(session)
        host.manage(live)
        block = ask(host, live, "Where is the boat moored?")
        assert "pier nineteen" not in block and "dock four" in block


def test_two_workers_on_postgres(postgres_url, tmp_path):
    # Recall searches the database: no worker keeps an index of its own, in memory or on disk.
    two_workers(f"{postgres_url}?schema=t_rw_{tmp_path.name[-12:].lower()}", tmp_path, "shared")
    assert not list(tmp_path.rglob("*.sqlite*"))


def test_a_value_erased_on_one_worker_is_not_recalled_by_another(redis_url, tmp_path):
    # Worker B keeps the session's index in memory; an operator erases a value (another process's
    # store object): B's next recall must not quote it, though B indexed it before.
    from ctxlife.sessions import open_store

    session = f"erased-{tmp_path.name[-12:]}"
    with worker_b_that_recalled(redis_url, session, tmp_path) as (host, live):
        with open_store(redis_url) as store:
            assert store.erase_matching(session, "pier nineteen")
        live = [m for m in live if not is_recall_block(m)]  # as an app keeps its list: without the block
        live.append({"role": "assistant", "content": "I cannot say."})
        live.append({"role": "user", "content": "Where is the boat moored? Tell me again."})
        assert host.manage(live).failures == []
        assert "pier nineteen" not in json.dumps(live)
