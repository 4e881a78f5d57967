"""Fault injection: broken summarizers, failing stores, a Redis server killed and restarted.

For each fault the same four questions (issue 8): does the agent's call proceed; is the error a
structured event naming strategy, node and cause; is anything already stored lost; do writes resume
when the store comes back. The faults are real where the machine allows it: a kernel ENOSPC on a
tiny tmpfs, EROFS on a read-only remount, EFBIG from RLIMIT_FSIZE, ENOTDIR, EPERM under /sys, a
SIGKILLed and SIGSTOPped redis-server. Tests run as root, so ``chmod`` cannot make a folder
read-only; a delegating fault-injecting wrapper around a real file, SQLite or Redis store
(``fault_store.FaultyStore``) fails each store method the recorder, the restore and the strategies
call (refused, or "landed but reported failed"), on machines without mount rights too, and every
such test asserts the faults it injected happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_store import CAUSE, FaultPlan, FaultyStore, faulty_scheme
from reliability_gen import REPO, Probe, canon

import ctxlife
from ctxlife import sessions
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.messages import is_summary, is_system, validate
from ctxlife.sessions.recording import Recorder
from ctxlife.summarizers import register_summarizer, unregister_summarizer

sys.path.insert(0, str(REPO / "benchmarks"))
from synthetic import synthetic_session  # noqa: E402 - the long session the benchmarks measure on

WINDOW = 2000


# -- helpers -------------------------------------------------------------------------------------


def session_messages(calls: int = 40, seed: int = 7) -> list[dict[str, Any]]:
    return synthetic_session(calls, seed=seed, result_rows=4)


def call_points(messages: list[dict[str, Any]]) -> list[int]:
    """Prefix lengths at which a model was called (right before each assistant message)."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]


class Session:
    """Feeds a recorded conversation into a host call by call, like an agent loop; keeps reports."""

    def __init__(self, host: Host, messages: list[dict[str, Any]]) -> None:
        self.host = host
        self.source = messages
        self.points = call_points(messages)
        self.live: list[dict[str, Any]] = []
        self.fed = 0
        self.seen_by_a_call: list[dict[str, Any]] = []  # messages some model call received
        self.reports: list[Any] = []

    def step(self) -> Any:
        point = self.points[len(self.reports)]
        fresh = self.source[self.fed : point]
        self.live.extend(fresh)
        self.fed = point
        report = self.host.manage(self.live)
        self.seen_by_a_call.extend(m for m in fresh if not is_system(m) and not is_summary(m))
        assert validate(self.live) == [], "invalid output after a fault"
        self.reports.append(report)
        return report

    def run(self, n: int) -> list[Any]:
        return [self.step() for _ in range(n)]

    @property
    def remaining(self) -> int:
        return len(self.points) - len(self.reports)


def summary_settings(store: str, timeout_seconds: float | None = None, **llm: Any) -> Any:
    """llm_summary (extractive unless told) on ``store``; ``timeout_seconds`` goes to the [model] table."""
    table = {"summarizer": "extractive", "max_summary_tokens": 200, "min_gain_tokens": 50, **llm}
    model = {} if timeout_seconds is None else {"timeout_seconds": timeout_seconds}
    return settings_from_dict(
        {"strategies": ["llm_summary", "snapshot_restore"], "llm_summary": table, "store": store, "model": model}
    )


def raw_ids(store: Any, session: str) -> list[str]:
    return [canon(m) for m in [r.message for r in store.read_records(session)]]


def assert_raw_complete(store: Any, session: str, seen: list[dict[str, Any]]) -> None:
    raw = raw_ids(store, session)
    expected = [canon(m) for m in seen]
    missing = [e for e in expected if e not in raw]
    assert not missing, f"{len(missing)} message(s) a model call saw are not in the raw history"
    assert raw == expected, "raw history is not every message exactly once, in order"


@contextlib.contextmanager
def registered_summarizer(name: str, factory: Any) -> Iterator[None]:
    register_summarizer(name, factory, replace=True)
    try:
        yield
    finally:
        unregister_summarizer(name)


@contextlib.contextmanager
def store_scheme(scheme: str, factory: Any) -> Iterator[None]:
    with sessions.REGISTRY.registered(scheme, factory):
        yield


def failure_events(events: list[dict[str, Any]], strategy: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in events if e["event"] == "ctxlife.strategy_failed" and (strategy is None or e["strategy"] == strategy)
    ]


# -- 1. summarizers that raise, hang, or return garbage ---------------------------------------------


class Raising:
    def summarize(self, request: Any) -> str:
        raise ConnectionError("summarizer backend unreachable")


@pytest.mark.parametrize(
    "kind", ["raises", "hangs", "none", "int", "bytes", "dict", "empty", "blank", "oversized", "larger_than_span"]
)
def test_broken_summarizer_falls_back_to_truncation_and_loses_nothing(kind, tmp_path, events):
    release = threading.Event()
    answered = threading.Event()

    class Broken:
        def summarize(self, request: Any) -> Any:
            if kind == "raises":
                raise ConnectionError("summarizer backend unreachable")
            if kind == "hangs":
                release.wait(60)  # released after the run; the cap bounds a failing test only
                answered.set()
                return "The user asked about ORD-48213 (too late)."
            replied = {
                "none": None,
                "int": 42,
                "bytes": b"History summary: bytes",
                "dict": {"summary": "x"},
                "empty": "",
                "blank": " \n\t ",
                "oversized": "word " * 5000,
                "larger_than_span": "\n".join(str(m.get("content")) for m in request.messages) * 3,
            }
            return replied[kind]

    session = f"f-{kind}"
    with registered_summarizer("broken", lambda **kw: Broken()):
        host = Host(
            summary_settings(
                f"file://{tmp_path}",
                summarizer="broken",
                timeout_seconds=0.5,
                min_gain_tokens=0,
                max_summary_tokens=2000,
            ),
            context_window=WINDOW,
            session_id=session,
        )
        run = Session(host, session_messages())
        try:
            while run.remaining:
                report = run.step()
                assert report.failures == [], "the strategy must handle its summarizer's failure itself"
                # The call returned while the hanging summarizer was still held: it did not wait for it.
                assert not answered.is_set(), "a hanging summarizer held the agent's call until it answered"
        finally:
            release.set()
        compactions = [
            a for r in run.reports for a in r.actions if a.strategy == "llm_summary" and a.what == "compacted"
        ]
        assert compactions, "no compaction was attempted"
        failed = [e for e in events if e["event"] == "ctxlife.summary_failed"]
        if kind in ("oversized", "larger_than_span"):
            # An over-budget summary is cut to its budget, never discarded (issue 22).
            assert all(a.details["summarizer"] == "broken" for a in compactions) and not failed
            assert all(a.details["summary_tokens"] <= 2000 for a in compactions)
        else:
            # The broken summarizer's output never reaches the context: the extractive summary replaces it.
            assert all(a.details.get("fallback_from") == "broken" for a in compactions)
            assert all(a.details["summarizer"] == "extractive" for a in compactions)
            assert len(failed) == len(compactions)
        for e in failed:
            assert e["log_level"] == "error" and e["strategy"] == "llm_summary" and e["summarizer"] == "broken"
            assert e["fallback"] == "extractive" and e["evicted_messages"] > 0 and e["session_id"] == session
        if kind == "hangs":
            assert "did not answer within 0.5 s" in failed[0]["error"]
        assert_raw_complete(host.store, session, run.seen_by_a_call)
        host.close()


def test_summarizer_that_nests_markers_is_flattened(tmp_path):
    class Nesting:
        def summarize(self, request: Any) -> str:
            return "History summary: History summary: **History summary:** the user asked about ORD-48213."

    with registered_summarizer("nesting", lambda **kw: Nesting()):
        host = Host(
            summary_settings(f"file://{tmp_path}", summarizer="nesting"), context_window=WINDOW, session_id="nest"
        )
        run = Session(host, session_messages(60))
        run.run(run.remaining)
        compactions = [a for r in run.reports for a in r.actions if a.what == "compacted"]
        assert len(compactions) >= 2  # the running summary folded a previous one at least once
        summaries = [m for m in run.live if is_summary(m)]
        assert len(summaries) == 1 and summaries[0]["content"].count("History summary") == 1
        host.close()


def test_hanging_summarizer_releases_the_session_lock(tmp_path):
    """After a timed-out summary the next compaction in the session is not blocked by a stale lock."""
    release = threading.Event()

    class Hang:
        def summarize(self, request: Any) -> str:
            release.wait(30)
            return "late"

    with registered_summarizer("hang", lambda **kw: Hang()):
        host = Host(
            summary_settings(f"file://{tmp_path}", summarizer="hang", timeout_seconds=0.3),
            context_window=WINDOW,
            session_id="lock",
        )
        run = Session(host, session_messages(40))
        run.run(run.remaining)
        release.set()
        actions = [a for r in run.reports for a in r.actions if a.strategy == "llm_summary"]
        assert sum(a.details.get("fallback_from") == "hang" for a in actions) >= 2
        assert not [a for a in actions if a.details.get("reason") == "session_locked"]
        host.close()


# -- 2. every store method the recorder and the restore call, failing at the layer that writes ------------
#
# A delegating wrapper (fault_store.FaultyStore) around a REAL store (file, SQLite, Redis) fails the
# methods a test breaks: refused before the store sees the call, or "landed" (the store wrote, the
# caller is told it failed). Every test asserts the faults happened (FaultPlan counts them).


@pytest.fixture(params=["file", "sqlite", "redis", "postgres"])
def real_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'sessions'}"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    if request.param == "postgres":
        return f"{request.getfixturevalue('postgres_url')}?schema=faults_{uuid.uuid4().hex[:8]}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=faults-{uuid.uuid4().hex[:8]}:"


@pytest.fixture
def faulty(real_store_url: str) -> Iterator[tuple[str, FaultPlan]]:
    """``(url, plan)``: a store URL whose every open wraps a new real store in a FaultyStore."""
    plan = FaultPlan()
    with faulty_scheme(real_store_url, plan) as url:
        yield url, plan


def outage(run: Session, breaks: Any, heals: Any, *, before: int = 12, during: int = 8) -> dict[str, Any]:
    """Run ``before`` calls, break the store, run ``during`` calls, heal it, run the rest."""
    run.run(before)
    stored_before = raw_ids(run.host.store, run.host.session_id)
    snapshot_before = run.host.store.load_snapshot(run.host.session_id)
    breaks()
    during_reports = run.run(during)
    heals()
    after_reports = run.run(run.remaining)
    return {
        "stored_before": stored_before,
        "snapshot_before": snapshot_before,
        "during": during_reports,
        "after": after_reports,
    }


def check_outage(run: Session, result: dict[str, Any], events: list[dict[str, Any]], cause: str) -> None:
    host, session = run.host, run.host.session_id
    # The agent's calls proceeded and the failure was isolated and reported.
    failed = [f for r in result["during"] for f in r.failures]
    assert failed, "the store fault was not reported"
    # (call_record: the host's record of what the call sent, written after the strategies, failed too)
    assert {f.strategy for f in failed} <= {"snapshot_restore", "llm_summary", "tool_output", "call_record"}
    evs = [e for e in failure_events(events) if cause in e["error"]]
    assert evs, f"no ctxlife.strategy_failed event naming the cause {cause!r}"
    for e in evs:
        assert e["log_level"] == "error" and e["node"] == "before_llm_call" and e["session_id"] == session
        assert e["error"].startswith("StoreError: ")
    # Nothing already stored was lost.
    raw = raw_ids(host.store, session)
    assert raw[: len(result["stored_before"])] == result["stored_before"], "records stored before the fault changed"
    snap = host.store.load_snapshot(session)
    assert snap is not None and (
        result["snapshot_before"] is None or snap.updated_at >= result["snapshot_before"].updated_at
    )
    # Writes resumed: the calls after the fault are in the raw history and produced no failures.
    assert all(r.failures == [] for r in result["after"]), [r.failures for r in result["after"]]
    last_call = [canon(m) for m in run.seen_by_a_call[-3:]]
    assert raw[-3:] == last_call, "writes did not resume after the store came back"


def restart_sees_exactly(url: str, session: str, saved: list[dict[str, Any]]) -> None:
    """A new host (a restarted process) on the store restores exactly the list ``saved`` (its
    system prompt replaced by the new process's) followed by the new user turn."""

    probe = Probe()
    new = Host(summary_settings(url), context_window=WINDOW, session_id=session, plugins=[probe])
    try:
        fresh = [{"role": "system", "content": "restarted"}, {"role": "user", "content": "after the restart"}]
        report = new.manage(list(fresh))
        assert report.failures == [], report.failures
        expected = [fresh[0], *[m for m in saved if not (is_system(m) and not is_summary(m))], fresh[1]]
        assert [canon(m) for m in probe.seen[0]] == [canon(m) for m in expected], "the restart restored another list"
    finally:
        new.close()


WRITE_FAULTS = {
    "append": ("append",),
    "save_snapshot": ("save_snapshot",),
    "lock": ("lock",),
    "every_write": ("append", "save_snapshot", "lock", "put_blob"),
}


@pytest.mark.parametrize("fault", list(WRITE_FAULTS))
def test_store_refusing_writes_call_proceeds_nothing_lost_writes_resume(fault, faulty, events):
    """The store refuses ``fault`` for 8 calls (compactions happen meanwhile), then heals: every call
    proceeded, the failures were reported, the raw history is every message a model call saw exactly
    once, and a restart restores exactly the last list."""
    url, plan = faulty
    methods = WRITE_FAULTS[fault]
    host = Host(summary_settings(url), context_window=WINDOW, session_id="outage")
    run = Session(host, session_messages(60))
    result = outage(run, lambda: plan.break_(*methods), plan.heal)
    # This config writes no blobs (tool_output: below); while appends fail no snapshot is attempted
    # (it would show messages the raw history lacks), so save_snapshot fails only when broken alone.
    must_fail = [m for m in methods if m != "put_blob" and not (m == "save_snapshot" and "append" in methods)]
    assert all(plan.failed[m] > 0 for m in must_fail), f"faults injected: {dict(plan.failed)}"
    compacted = [a for r in result["during"] for a in r.actions if a.what in ("compacted", "truncated")]
    assert compacted, "no compaction during the outage: the fault was never exercised where it matters"
    if "lock" in methods:
        assert any(e["event"] == "ctxlife.compacting_without_lock" for e in events)
    if {"append", "save_snapshot"} & set(methods):
        check_outage(run, result, events, CAUSE)
    assert all(r.failures == [] for r in result["after"]), [r.failures for r in result["after"]]
    assert_raw_complete(host.store, "outage", run.seen_by_a_call)
    host.close()
    restart_sees_exactly(url, "outage", run.live)


@pytest.mark.parametrize("method", ["append", "save_snapshot"])
def test_write_that_landed_but_was_reported_failed_is_not_written_again(method, faulty, events):
    """A connection lost after the store wrote: the caller is told the write failed although it is
    stored. The next calls must not write it a second time (no duplicated records), and the session
    restores exactly."""
    url, plan = faulty
    host = Host(summary_settings(url), context_window=WINDOW, session_id="landed")
    run = Session(host, session_messages(60))
    outage(run, lambda: plan.break_(method, mode="landed"), plan.heal)
    assert plan.landed[method] > 0, f"no write landed-but-failed: {dict(plan.calls)}"
    assert_raw_complete(host.store, "landed", run.seen_by_a_call)
    host.close()
    restart_sees_exactly(url, "landed", run.live)


def saved_session(url: str, session: str) -> tuple[Session, Any]:
    """A 40-call compacted session run to its end by a host now closed, and the snapshot it saved."""
    first = Host(summary_settings(url), context_window=WINDOW, session_id=session)
    run = Session(first, session_messages(40))
    run.run(run.remaining)
    first.close()
    with sessions.open_store(url) as store:
        snapshot = store.load_snapshot(session)
    assert snapshot is not None
    return run, snapshot


@pytest.mark.parametrize("method", ["head", "read_records"])
def test_restart_during_a_read_outage_restores_once_the_store_is_back(method, faulty, events):
    """A process restarts while the store cannot be read: its first call proceeds with the list as
    the caller sent it (the failure is reported, nothing is overwritten), and the first call after
    the store is back restores the saved conversation and records the new turns exactly once."""
    url, plan = faulty
    run, snapshot_before = saved_session(url, "reread")
    calls_before = dict(plan.calls)
    second = Host(summary_settings(url), context_window=WINDOW, session_id="reread")
    system = {"role": "system", "content": "restarted"}
    u1 = {"role": "user", "content": "first question after the restart"}
    a1 = {"role": "assistant", "content": "an answer given without the history"}
    u2 = {"role": "user", "content": "second question"}
    live = [system, u1]
    with plan.outage(method):
        report = second.manage(live)
    assert plan.failed[method] > 0, (
        f"{method} was never called during the outage: {dict(plan.calls)} (before: {calls_before})"
    )
    assert report.failures and report.failures[0].strategy == "snapshot_restore"
    assert CAUSE in report.failures[0].error
    assert live == [system, u1], "a failed restore changed the caller's list"
    with sessions.open_store(url) as store:
        assert store.load_snapshot("reread") == snapshot_before, "the saved snapshot was overwritten"
    live += [a1, u2]
    report = second.manage(live)
    assert report.failures == [], report.failures
    assert "restored" in [a.what for a in report.actions if a.strategy == "snapshot_restore"], report.actions
    restored = [canon(m) for m in live]
    assert restored[-3:] == [canon(u1), canon(a1), canon(u2)]
    second.close()
    with sessions.open_store(url) as store:
        raw = raw_ids(store, "reread")
    assert raw == [*[canon(m) for m in run.seen_by_a_call], canon(u1), canon(a1), canon(u2)]


def test_a_restart_while_snapshots_cannot_be_read_restores_from_the_raw_history(faulty, events):
    """The raw history is the source of truth (issue 20): when only the snapshot cannot be read, the
    first call after a restart restores the conversation from the raw history (reported, not failed),
    and nothing is lost or recorded twice."""
    url, plan = faulty
    run, _ = saved_session(url, "reread")
    second = Host(summary_settings(url), context_window=WINDOW, session_id="reread")
    u1 = {"role": "user", "content": "first question after the restart"}
    live = [{"role": "system", "content": "restarted"}, u1]
    with plan.outage("load_snapshot"):
        report = second.manage(live)
    assert plan.failed["load_snapshot"] > 0, dict(plan.calls)
    assert report.failures == [], report.failures
    assert "ctxlife.snapshot_unreadable" in [e["event"] for e in events]
    assert "restored" in [a.what for a in report.actions if a.strategy == "snapshot_restore"], report.actions
    assert canon(live[-1]) == canon(u1) and len(live) > 2  # the raw history in front of the new turn
    second.close()
    with sessions.open_store(url) as store:
        raw = raw_ids(store, "reread")
    assert raw == [*[canon(m) for m in run.seen_by_a_call], canon(u1)]


def test_tool_results_are_offloaded_to_the_workspace_while_blobs_fail(faulty, tmp_path):
    """tool_output keeps a capped result recallable when the store refuses blobs (the full text goes
    to its workspace folder instead), and stores it in the session again once the store is back."""
    url, plan = faulty
    settings = settings_from_dict(
        {
            "store": url,
            "strategies": ["tool_output"],
            "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path / "tool_outputs")},
        }
    )
    host = Host(settings, context_window=8000, session_id="blobs")
    strategy = next(s for s in host.strategies if s.name == "tool_output")
    from ctxlife.contexts import ToolCallContext

    def call(result: str) -> tuple[str, str]:
        ctx = ToolCallContext(tool_name="search", tool_input={"q": result[:8]}, result=result, raw_result=result)
        report = host.after_tool_call(ctx)
        assert report.failures == []
        capped = [a for a in report.actions if a.what == "capped"]
        assert capped, "the result was not capped"
        return capped[0].details["ref"], result

    with plan.outage("put_blob"):
        during = call("row during the outage " * 400)
    assert plan.failed["put_blob"] > 0
    after = call("row after the outage " * 400)
    for ref, full in (during, after):
        found = strategy.load(ref, host.store, "blobs")
        assert found is not None and found[0] == full, "a capped result cannot be recalled"
    assert (tmp_path / "tool_outputs").is_dir(), "the outage's result did not go to the workspace"
    with sessions.open_store(url.split("://", 1)[1]) as store:
        assert store.get_blob("blobs", after[0]) == after[1], "the result after the outage is not in the session"
    host.close()


# -- the recorder itself, directly over a faulty real store --------------------------------------------


def _m(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _contents(store: Any, session: str) -> list[str]:
    return [r.message["content"] for r in store.read_records(session)]


def test_recorder_add_after_an_outage_writes_only_its_own_batch(real_store_url):
    plan = FaultPlan()
    store = FaultyStore(sessions.open_store(real_store_url), plan)
    recorder = Recorder(store)
    recorder.add("s", [_m("a")])
    with plan.outage("append"), pytest.raises(StoreError):
        recorder.add("s", [_m("b"), _m("c")])
    assert plan.failed["append"] == 1 and recorder.pending("s") == 0
    recorder.add("s", [_m("d")])
    assert _contents(store.inner, "s") == ["a", "d"]
    store.close()


def test_recorder_record_after_a_write_that_landed_does_not_write_it_again(real_store_url):
    plan = FaultPlan()
    store = FaultyStore(sessions.open_store(real_store_url), plan)
    recorder = Recorder(store)
    first = [_m("q1"), {"role": "assistant", "content": "r1"}]
    recorder.record("s", first)
    with plan.outage("append", mode="landed"), pytest.raises(StoreError):
        recorder.record("s", [*first, _m("q2")])
    assert plan.landed["append"] == 1
    recorder.record("s", [*first, _m("q2"), {"role": "assistant", "content": "r2"}])
    assert _contents(store.inner, "s") == ["q1", "r1", "q2", "r2"]
    store.close()


def test_recorder_add_retrying_a_write_that_landed_records_it_once(real_store_url):
    plan = FaultPlan()
    store = FaultyStore(sessions.open_store(real_store_url), plan)
    recorder = Recorder(store)
    batch = [_m("a"), _m("b"), _m("c")]
    plan.break_("append", mode="landed")
    plan.break_("read_records")  # and the store cannot be read right after: the caller is told
    with pytest.raises(StoreError):
        recorder.add("s", batch)
    plan.heal()
    assert plan.landed["append"] == 1
    try:
        recorder.add("s", batch)  # the caller retries what it was told failed
        assert _contents(store.inner, "s") == ["a", "b", "c"]
    finally:
        store.close()


def test_session_folder_replaced_by_a_file(tmp_path, events):
    """ENOTDIR from the kernel: the session folder's parent is a regular file during the outage."""
    parent = tmp_path / "data"
    store = f"file://{parent / 'sessions'}"
    host = Host(summary_settings(store), context_window=WINDOW, session_id="enotdir")
    run = Session(host, session_messages(60))
    moved = tmp_path / "data-moved"

    def breaks() -> None:
        parent.rename(moved)
        parent.write_text("not a folder")

    def heals() -> None:
        parent.unlink()
        moved.rename(parent)

    result = outage(run, breaks, heals)
    check_outage(run, result, events, "Not a directory")
    host.close()


def test_unwritable_system_folder(events):
    """/sys refuses mkdir even to root (EPERM, or EROFS where it is mounted read-only): every call
    proceeds, every failure is an event."""
    target = Path("/sys") / f"ctxlife-reliability-{uuid.uuid4().hex[:8]}" / "sessions"
    host = Host(summary_settings(f"file://{target}"), context_window=WINDOW, session_id="eperm")
    run = Session(host, session_messages(30))
    reports = run.run(run.remaining)
    assert all("snapshot_restore" in [f.strategy for f in r.failures] for r in reports)
    evs = failure_events(events, "snapshot_restore")
    refused = (
        "Operation not permitted",
        "Read-only file system",
        "Permission denied",
    )  # sysfs: EPERM; some containers: EROFS
    assert evs and all(
        "cannot create session folder" in e["error"] and any(r in e["error"] for r in refused) for e in evs
    )
    assert not target.parent.exists()
    host.close()


# -- real "disk full" and "read-only": a tiny tmpfs (needs mount rights) ---------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
            "the FaultyStore and RLIMIT_FSIZE tests cover disk full"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True, capture_output=True)


def test_disk_full_on_a_tiny_tmpfs_then_grown(tiny_tmpfs, events):
    host = Host(summary_settings(f"file://{tiny_tmpfs / 'sessions'}"), context_window=WINDOW, session_id="full")
    run = Session(host, session_messages(200))
    run.run(4)
    filler = tiny_tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # take what is left, as another process would
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 4096)
    finally:
        os.close(fd)
    result = outage(run, lambda: None, lambda: _remount(tiny_tmpfs, "size=64m"), before=0, during=8)
    check_outage(run, result, events, "No space left on device")
    # The raw file is still whole JSON Lines: the failed batches were cut back (all-or-nothing).
    text = (tiny_tmpfs / "sessions" / "full_raw.jsonl").read_bytes()
    assert text.endswith(b"\n") and all(json.loads(line) for line in text.splitlines())
    host.close()


def test_read_only_remount_then_writable(tiny_tmpfs, events):
    host = Host(summary_settings(f"file://{tiny_tmpfs / 'sessions'}"), context_window=WINDOW, session_id="rofs")
    run = Session(host, session_messages(60))
    result = outage(run, lambda: _remount(tiny_tmpfs, "ro"), lambda: _remount(tiny_tmpfs, "rw"))
    check_outage(run, result, events, "Read-only file system")
    host.close()


# -- EFBIG from RLIMIT_FSIZE, in a child process -------------------------------------------------------

_FSIZE_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from structlog.testing import capture_logs
    sys.path[:0] = [sys.argv[3], sys.argv[3] + "/.."]  # test_faults, and tests/ (delegating_store)
    from test_faults import Session, session_messages, summary_settings, raw_ids
    from ctxlife.host import Host
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    store, headroom = sys.argv[1], int(sys.argv[2])
    host = Host(summary_settings(store), context_window=2000, session_id="efbig")
    run = Session(host, session_messages(60))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with capture_logs() as events:
        run.run(6)
        before = raw_ids(host.store, "efbig")
        raw_file = host.store.directory / "efbig_raw.jsonl"
        resource.setrlimit(resource.RLIMIT_FSIZE, (raw_file.stat().st_size + headroom, hard))
        during = run.run(8)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        after = run.run(run.remaining)
    raw = raw_ids(host.store, "efbig")
    print(json.dumps({
        "failures": [[f.strategy, f.error] for r in during for f in r.failures],
        "after_failures": [[f.strategy, f.error] for r in after for f in r.failures],
        "prefix_kept": raw[: len(before)] == before,
        "resumed": raw[-2:] == [json.dumps(m, sort_keys=True, ensure_ascii=True) for m in run.seen_by_a_call[-2:]],
        "events": [e["event"] for e in events if e["log_level"] == "error"],
    }))
    """
)


def test_file_size_limit_efbig_in_a_child_process(tmp_path):
    store = f"file://{tmp_path / 'sessions'}"
    # Small enough that the raw file crosses it during the outage, large enough for the first calls.
    child = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, store, "1500", str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert out["failures"], "RLIMIT_FSIZE produced no failure"
    assert all("File too large" in error for _, error in out["failures"]), out["failures"]
    assert "ctxlife.strategy_failed" in out["events"]
    assert out["prefix_kept"] and out["resumed"] and out["after_failures"] == []


# -- 3. Redis killed in the middle of a session, and restarted ------------------------------------------


def test_redis_killed_mid_session_and_restarted(redis_server, events):
    server = redis_server()
    url = server.url(query="prefix=rel:")
    host = Host(summary_settings(url), context_window=WINDOW, session_id="fleet-1")
    run = Session(host, session_messages(80))
    slowest: list[float] = []

    def timed_kill() -> None:
        server.kill()

    result = outage(run, timed_kill, server.start, before=15, during=10)
    for r in result["during"]:
        slowest.append(r.duration_ms)
    check_outage(run, result, events, "Connection refused")
    assert max(slowest) < 2000, f"a call during the outage took {max(slowest):.0f} ms"
    # The server restarted from its AOF: the snapshot and raw history from before the kill are there.
    assert host.store.load_snapshot("fleet-1") is not None
    host.close()


def test_redis_killed_mid_session_loses_nothing(redis_server):
    server = redis_server()
    host = Host(
        summary_settings(server.url(query="prefix=rel:")),
        context_window=WINDOW,
        session_id="fleet-2",
    )
    run = Session(host, session_messages(80))
    outage(run, server.kill, server.start, before=15, during=10)
    assert_raw_complete(host.store, "fleet-2", run.seen_by_a_call)
    host.close()


@pytest.mark.slow
def test_frozen_redis_with_a_socket_timeout_in_the_url_fails_fast(redis_server, events):
    """A SIGSTOPped server (a network partition) with ?socket_timeout=1: the call proceeds, with the
    store's failure reported, while the server is still frozen (it is thawed only after the call returned)."""
    server = redis_server()
    host = Host(
        summary_settings(server.url(query="prefix=rel:&socket_timeout=1")),
        context_window=WINDOW,
        session_id="frozen",
    )
    run = Session(host, session_messages(40))
    run.run(5)
    reports: list[Any] = []
    done = threading.Event()

    def call() -> None:
        reports.append(run.step())
        done.set()

    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        threading.Thread(target=call, daemon=True).start()
        finished = done.wait(60)  # the cap bounds a failing test only: the socket timeout is 1 s
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert finished, "the agent's call was still blocked on a frozen Redis after 60 s (socket_timeout=1)"
    (report,) = reports
    assert report.failures and report.failures[0].strategy == "snapshot_restore"
    assert "Timeout" in report.failures[0].error or "timed out" in report.failures[0].error
    run.run(run.remaining)
    host.close()


@pytest.mark.slow
def test_frozen_redis_without_a_timeout_does_not_hang_the_agent(redis_server):
    server = redis_server()
    host = Host(
        summary_settings(server.url(query="prefix=rel:")),
        context_window=WINDOW,
        session_id="frozen-2",
    )
    run = Session(host, session_messages(40))
    run.run(5)
    done = threading.Event()

    def call() -> None:
        with contextlib.suppress(Exception):
            run.step()
        done.set()

    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        threading.Thread(target=call, daemon=True).start()
        # The store's default socket timeout (2 s) frees the call while the server is still frozen;
        # the cap bounds a failing test only.
        finished = done.wait(60)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    done.wait(60)
    host.close()
    assert finished, "the agent's call was still blocked on a frozen Redis after 60 s"


def test_redis_down_when_the_host_starts(events):
    """The store is opened when the strategy is built: an unreachable Redis is a clear StoreError at
    wrap()/manage()/Host() time (documented as a gap: the agent does not start)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    with pytest.raises(StoreError) as info:
        Host(summary_settings(url), context_window=WINDOW, session_id="down")
    message = str(info.value)
    assert message.startswith(f"redis store redis://:***@127.0.0.1:{port}/0: connect failed: ")
    assert "Connection refused" in message and "hunter2" not in message
    with pytest.raises(StoreError):
        ctxlife.manage(
            [{"role": "user", "content": "hi"}], config=summary_settings(url), context_window=WINDOW, session_id="down"
        )


# -- 4. strategies that raise or break the sequence, at every node ---------------------------------------


class Saboteur:
    """A third-party plugin that raises at every node, or leaves an invalid list."""

    name = "saboteur"

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def _boom(self, ctx: Any) -> None:
        raise RuntimeError(f"saboteur at {ctx.node}")

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx: Any) -> None:
        ctx.blocks.append("SABOTAGE")
        self._boom(ctx)

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        if self.mode == "invalid":
            ctx.messages.append({"role": "tool", "tool_call_id": "x", "content": "orphan"})
            return
        ctx.messages.clear()
        self._boom(ctx)

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: Any) -> None:
        ctx.tool_input["injected"] = True
        self._boom(ctx)

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        ctx.result = "sabotaged"
        self._boom(ctx)

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: Any) -> None:
        ctx.context_text = "sabotaged"
        self._boom(ctx)

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: Any) -> None:
        ctx.output = "sabotaged"
        self._boom(ctx)


def test_a_raising_plugin_is_rolled_back_at_every_node_and_the_others_still_run(tmp_path, events):
    from ctxlife.contexts import TaskContext, ToolCallContext

    settings = settings_from_dict(
        {
            "strategies": ["truncate_last_n", "tool_output"],
            "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path)},
        }
    )
    host = Host(settings, context_window=WINDOW, plugins=[Saboteur("raise")])
    messages = session_messages(30)
    original = list(messages)
    report = host.manage(messages)
    assert [f.node for f in report.failures] == ["before_llm_call"] and report.acted == ["truncate_last_n"]
    assert messages and "SABOTAGE" not in json.dumps(messages)
    tool = ToolCallContext(tool_name="search", tool_input={"q": 1})
    assert host.before_tool_call(tool).failures and tool.tool_input == {"q": 1}
    tool.result = tool.raw_result = "x " * 3000
    after = host.after_tool_call(tool)
    assert after.failures and after.acted == ["tool_output"] and tool.result != "sabotaged"
    start = TaskContext(task_name="t", context_text="earlier output")
    assert host.task_start(start).failures and start.context_text == "earlier output"
    end = TaskContext(task_name="t", output="final")
    assert host.task_end(end).failures and end.output == "final"
    nodes = {e["node"] for e in failure_events(events, "saboteur")}
    assert nodes == {"bootstrap", "before_llm_call", "before_tool_call", "after_tool_call", "task_start", "task_end"}
    assert all(e["error"].startswith("RuntimeError: saboteur at ") for e in failure_events(events, "saboteur"))
    assert original[-1] is messages[-1]
    host.close()


def test_a_plugin_leaving_an_invalid_sequence_is_rolled_back(events):
    host = Host(settings_from_dict({"strategies": []}), context_window=WINDOW, plugins=[Saboteur("invalid")])
    messages = session_messages(10)
    original = list(messages)
    report = host.manage(messages)
    assert messages == original and report.failures[0].strategy == "saboteur"
    event = next(e for e in events if e["event"] == "ctxlife.invalid_sequence")
    assert (
        event["problem"].startswith("left an invalid message list: message ")
        and "orphan_tool_result" in event["problem"]
    )
    host.close()


# -- 5. corrupt records in the store ----------------------------------------------------------------------


def test_corrupt_snapshot_and_torn_raw_line(tmp_path, events):
    store = f"file://{tmp_path}"
    first = Host(summary_settings(store), context_window=WINDOW, session_id="corrupt")
    run = Session(first, session_messages(40))
    run.run(run.remaining)
    stored = raw_ids(first.store, "corrupt")
    assert first.store.load_snapshot("corrupt") is not None
    first.close()
    (tmp_path / "corrupt_ctx.json").write_text('{"format_version": 1, "messages": [')
    with open(tmp_path / "corrupt_raw.jsonl", "ab") as f:
        f.write(b'{"role": "assistant", "content": "torn')
    second = Host(summary_settings(store), context_window=WINDOW, session_id="corrupt")
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "after the crash"}]
    report = second.manage(live)
    # The raw history is the source of truth (issue 20): an unreadable snapshot is reported and the
    # conversation is restored from the raw history; nothing fails.
    assert report.failures == []
    unreadable = [e for e in events if e["event"] == "ctxlife.snapshot_unreadable"]
    assert unreadable and "is not valid JSON" in unreadable[0]["error"]
    assert "restored" in [a.what for a in report.actions]
    assert live[-1]["content"] == "after the crash"  # the call proceeds
    # The torn line is skipped; the new user message is recorded, nothing else changes.
    assert raw_ids(second.store, "corrupt") == [*stored, canon(live[-1])]
    assert any(e["event"] == "raw_torn_record_skipped" for e in events)
    second.close()


def test_compaction_continues_while_the_store_is_down(tmp_path):
    parent = tmp_path / "data"
    host = Host(summary_settings(f"file://{parent / 'sessions'}"), context_window=WINDOW, session_id="nolock")
    run = Session(host, session_messages(80))
    run.run(10)
    parent.rename(tmp_path / "moved")
    parent.write_text("not a folder")  # the store is down from here on
    reports = run.run(25)
    # The same session on a healthy store: compaction must not depend on the store being up.
    healthy = Host(summary_settings(f"file://{tmp_path / 'healthy'}"), context_window=WINDOW, session_id="nolock")
    control = Session(healthy, session_messages(80))
    control.run(10)
    expected = control.run(25)
    assert [r.tokens_after for r in reports] == [r.tokens_after for r in expected]
    assert sum(a.what == "compacted" for r in reports for a in r.actions) > 0


def test_a_hung_summarizer_does_not_pile_up_threads(tmp_path):
    release = threading.Event()

    class Hung:
        def summarize(self, request: Any) -> str:
            release.wait(60)
            return "late"

    with registered_summarizer("hung", lambda **kw: Hung()):
        host = Host(
            summary_settings(f"file://{tmp_path}", summarizer="hung", timeout_seconds=0.1, min_gain_tokens=0),
            context_window=WINDOW,
            session_id="threads",
        )
        run = Session(host, session_messages(60))
        try:
            run.run(run.remaining)
            attempts = sum(a.details.get("fallback_from") == "hung" for r in run.reports for a in r.actions)
            alive = sum(t.name == "ctxlife-summary" and t.is_alive() for t in threading.enumerate())
        finally:
            release.set()
            host.close()
        assert attempts >= 3
        assert alive <= 1, f"{alive} summary threads still blocked after {attempts} timed-out summaries"
