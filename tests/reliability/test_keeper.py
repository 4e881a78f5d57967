"""The keeper (ctxlife.sessions.keeper): explicit appends, concurrent writers, one snapshot writer, order.

Each test is one defect the outside review found in the session layer (issue 37), tried the way an
application meets it: workers sharing one conversation, one ``AsyncSession`` shared by concurrent
requests, a store that fails a write (FaultyStore around a real store), a file store that lost its
last writes. The oracle is the store's own raw history (``store.current``), read after the fact.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fault_store import FaultPlan, faulty_scheme

import ctxlife
from ctxlife.config import Settings, settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.sessions import open_store


@pytest.fixture(params=["file", "sqlite", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'sessions'}"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    if request.param == "postgres":
        return f"{request.getfixturevalue('postgres_url')}?schema=keeper_{uuid.uuid4().hex[:12]}"
    return f"{request.getfixturevalue('redis_url')}?prefix=keeper-{tmp_path.name}:"


def config(store_url: str, *strategies: str, **tables: Any) -> Settings:
    return settings_from_dict({"store": store_url, "strategies": list(strategies), **tables})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def contents(messages: list[Any]) -> list[str]:
    return [str(m["content"]) for m in messages]


def current(store_url: str, sid: str) -> list[str]:
    with open_store(store_url) as store:
        return [str(r.message.get("content")) for r in store.current(sid)]


def test_two_workers_taking_simultaneous_turns_lose_nothing(store_url: str) -> None:
    # Two workers (each its own host and store object, as two processes) on one conversation, 15
    # pairs of turns started at the same moment: every turn and every reply is recorded once, and
    # each reply follows its own question.
    sid = "shared-conversation"
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with ctxlife.Session(sid, config(store_url), context_window=100_000) as session:
                for turn in range(15):
                    start.wait(timeout=30)
                    session.prepare(user(f"{name} asks {turn}"))
                    session.record_reply(f"{name} answer {turn}")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
            start.abort()

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    history = current(store_url, sid)
    expected = [f"{n} {kind} {t}" for n in "AB" for kind in ("asks", "answer") for t in range(15)]
    assert Counter(history) == Counter(expected)  # 60 messages, each exactly once
    for name in "AB":
        for t in range(15):
            assert history.index(f"{name} asks {t}") < history.index(f"{name} answer {t}")


def test_one_async_session_shared_by_concurrent_requests_records_each_message_once(store_url: str) -> None:
    async def conversation() -> None:
        async with ctxlife.AsyncSession("async-shared", config(store_url), context_window=100_000) as session:

            async def request(name: str, turn: int) -> None:
                await session.prepare(user(f"{name} {turn}"))
                await session.record_reply(f"reply to {name} {turn}")

            for turn in range(6):
                await asyncio.gather(request("x", turn), request("y", turn))

    asyncio.run(conversation())
    history = current(store_url, "async-shared")
    assert len(history) == 24
    assert Counter(history) == Counter(f"{p}{n} {t}" for n in "xy" for t in range(6) for p in ("", "reply to "))


def compacting(store_url: str, *strategies: str) -> Settings:
    # truncate_last_n at a small window: every call past the first few compacts (a snapshot write)
    return config(store_url, *strategies, "truncate_last_n", threshold=0.1, truncate_last_n={"rounds": 1})


def test_a_failed_snapshot_write_is_reported_and_a_retry_records_nothing_twice(store_url: str) -> None:
    plan = FaultPlan()
    with (
        faulty_scheme(store_url, plan) as url,
        ctxlife.Session("snap", compacting(url), context_window=2000) as session,
    ):
        for turn in range(4):
            session.prepare(user(f"question {turn} " + "words " * 60))
            session.record_reply(f"answer {turn}")
        with plan.outage("save_snapshot"):
            sent = session.prepare(user("the turn whose snapshot fails " + "words " * 60))
        report = session.last_report
        assert report is not None and plan.failed["save_snapshot"] >= 1
        assert [f.strategy for f in report.failures] == ["session"]
        assert "save_snapshot" in report.failures[0].error
        assert contents(sent)[-1].startswith("the turn whose snapshot fails")
        # The turn is recorded: the caller goes on (no retry of the turn), the next call saves.
        session.record_reply("answer 4")
        session.prepare(user("next"))
        assert session.last_report is not None and session.last_report.failures == []
    history = current(store_url, "snap")
    assert sum(h.startswith("the turn whose snapshot fails") for h in history) == 1
    assert len(history) == 11


def test_a_write_that_failed_but_landed_is_recorded_once(store_url: str) -> None:
    plan = FaultPlan()
    with faulty_scheme(store_url, plan) as url, ctxlife.Session("landed", config(url), context_window=8000) as session:
        session.prepare(user("hello"))
        with plan.outage("append", mode="landed"):  # the store wrote, the reply was lost: found at once
            assert session.record_reply("the reply").message["content"] == "the reply"
        assert plan.landed["append"] == 1
        # Lost reply and the store unreadable right after: the error reaches the caller, whose
        # retry of the same message finds it written.
        plan.break_("append", mode="landed")
        plan.break_("read_records")
        with pytest.raises(StoreError):
            session.record_reply("the second reply")
        plan.heal()
        assert session.record_reply("the second reply").message["content"] == "the second reply"
        assert plan.landed["append"] == 2
    assert current(store_url, "landed") == ["hello", "the reply", "the second reply"]


def test_a_refused_write_is_never_written_later_after_another_workers_turns(store_url: str) -> None:
    plan = FaultPlan()
    with (
        faulty_scheme(store_url, plan) as url,
        ctxlife.Session("order", config(url), context_window=8000) as first,
        ctxlife.Session("order", config(store_url), context_window=8000) as second,
    ):
        first.prepare(user("q1"))
        with plan.outage("append"), pytest.raises(StoreError, match="append"):
            first.record_reply("a reply the store refused")
        second.prepare(user("q2 from the other worker"))
        second.record_reply("a2")
        first.prepare(user("q3"))  # nothing waits from the refused write: it is not appended now
    assert current(store_url, "order") == ["q1", "q2 from the other worker", "a2", "q3"]


def test_a_snapshot_ahead_of_the_raw_history_gives_way_to_it(tmp_path: Path) -> None:
    # A file store with fsync=false loses its last appends in a power loss, while the snapshot
    # (always fsynced) already reflects them; the turns recorded afterwards get the lost sequence
    # numbers again, and must still be restored.
    url = f"file://{tmp_path / 'sessions'}?fsync=false"
    with ctxlife.Session("power", compacting(url), context_window=2000) as session:
        for turn in range(6):
            session.prepare(user(f"question {turn} " + "words " * 60))
            session.record_reply(f"answer {turn}")
    with open_store(url) as store:
        snapshot = store.load_snapshot("power")
        assert snapshot is not None and snapshot.raw_length >= 10
        raw = tmp_path / "sessions" / "power_raw.jsonl"
        lines = raw.read_bytes().splitlines(keepends=True)
        raw.write_bytes(b"".join(lines[:-4]))  # the last four appends never reached the disk
    with ctxlife.Session("power", config(url), context_window=100_000) as again:
        again.prepare(user("after the power loss"))
        again.record_reply("still here")
        again.prepare(user("and again"))
    with ctxlife.Session("power", config(url), context_window=100_000) as restarted:
        items = contents(restarted.get_items())
    assert items[-3:] == ["after the power loss", "still here", "and again"]


@pytest.mark.parametrize("strategies", [(), ("snapshot_restore",)], ids=["session-only", "with-snapshot_restore"])
def test_one_snapshot_writer_whatever_the_config(store_url: str, strategies: tuple[str, ...]) -> None:
    # A message with a NaN field: the session records and snapshots it in a JSON-safe form, the
    # same way with or without snapshot_restore in the config, and never fails the call.
    with ctxlife.Session("nan", compacting(store_url, *strategies), context_window=2000) as session:
        session.prepare(user("first " + "words " * 60))
        session.record_reply({"role": "assistant", "content": "odd", "score": math.nan})
        for turn in range(3):
            session.prepare(user(f"question {turn} " + "words " * 60))
            assert session.last_report is not None and session.last_report.failures == []
            session.record_reply(f"answer {turn}")
        items = session.get_items()
    with open_store(store_url) as store:
        snapshot = store.load_snapshot("nan")
        assert snapshot is not None and "covered_fp" in snapshot.meta
        assert [r.op for r in store.read_records("nan")] == ["add"] * 8
    assert contents(items)[-1] == "answer 2"


@pytest.mark.parametrize("where", ["this process", "another process"])
def test_an_erased_message_the_app_still_holds_is_not_recorded_again(
    store_url: str, where: str, events: list[dict[str, Any]]
) -> None:
    # A running app keeps its list (manage() on it) after the session's secret was erased, here
    # (ctxlife.Session on the same host) or by another process (its own store object).
    cfg = config(store_url, "snapshot_restore")
    host = ctxlife.Host(cfg, context_window=100_000, session_id="app")
    live = [{"role": "system", "content": "You are a clerk."}, user("hello")]
    try:
        host.manage(live)
        live += [{"role": "assistant", "content": "Hi."}, user("my IBAN is DE89370400440532013000")]
        host.manage(live)  # the secret is the latest message when it is erased
        if where == "this process":
            erased = ctxlife.Session("app", host=host).erase_matching("DE89[0-9]+")
        else:
            with open_store(store_url) as other:
                erased = other.erase_matching("app", "DE89[0-9]+")
        assert erased
        for turn in range(3):
            live.append({"role": "assistant", "content": f"reply {turn}"})
            live.append(user(f"next {turn}"))
            assert host.manage(live).failures == []
    finally:
        host.close()
    with open_store(store_url) as store:
        texts = [str(r.message.get("content")) for r in store.read_records("app")]
        calls = [json.dumps(c.doc) for c in store.read_calls("app")]  # what each call was sent
    assert not any("DE89370400440532013000" in t for t in texts + calls)
    assert current(store_url, "app")[-2:] == ["reply 2", "next 2"]
    assert any(e["event"] == "ctxlife.removed_message_not_recorded" for e in events)


def test_a_compaction_of_a_list_still_holding_an_erased_message_does_not_snapshot_it(store_url: str) -> None:
    # A running app keeps its list after an operator erased a message of it; the next compaction
    # saves a snapshot of that list: without the erased message, so a restart does not restore it.
    secret = "DE89370400440532013000"
    summary = {"summarizer": "extractive", "target": 0.05}
    cfg = config(store_url, "snapshot_restore", "llm_summary", threshold=0.3, llm_summary=summary)
    host = ctxlife.Host(cfg, context_window=2000, session_id="app")
    live = [{"role": "system", "content": "sys"}, user(f"My IBAN is {secret}, keep it.")]
    try:
        host.manage(live)
        live.append({"role": "assistant", "content": "Saved."})
        with open_store(store_url) as other:
            assert other.erase_matching("app", secret) == [1]
        for i in range(30):  # enough turns for compactions after the erase
            live.append(user(f"Question {i}: what is the weather and the delivery time in town today?"))
            assert host.manage(live).failures == []
            live.append({"role": "assistant", "content": f"Answer {i}: sunny, deliveries from nine to five."})
    finally:
        host.close()
    with open_store(store_url) as store:
        snapshot = store.load_snapshot("app")
        assert snapshot is not None  # a compaction saved one
        assert secret not in json.dumps(snapshot.messages)
    again = ctxlife.Host(cfg, context_window=2000, session_id="app")  # a restart restores the session
    try:
        restored = [{"role": "system", "content": "sys"}, user("What is my IBAN?")]
        again.manage(restored)
    finally:
        again.close()
    assert secret not in json.dumps(restored)


def test_erased_messages_leave_memory_with_the_session_and_are_read_back(
    store_url: str, events: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host's LRU drops an idle session: what this process knew was erased from it goes too
    # (memory stays bounded), and the next call on the session reads it back from the store.
    import ctxlife.host_sessions
    from ctxlife.sessions.keeper import keeper_for

    monkeypatch.setattr(ctxlife.host_sessions, "SESSIONS", 2)
    host = ctxlife.Host(config(store_url, "snapshot_restore"), context_window=100_000)
    live = [{"role": "system", "content": "sys"}, user("hello"), {"role": "assistant", "content": "Hi."}]
    live.append(user("my IBAN is DE89370400440532013000"))
    try:
        host.before_llm_call(live, session_id="app")
        assert ctxlife.Session("app", host=host).erase_matching("DE89[0-9]+") == [3]
        recorder = keeper_for(host.open_store()).recorder
        assert recorder._removed.get("app")
        for other in ("beta", "gamma", "delta"):  # other sessions push it out of the LRU
            host.before_llm_call([user(f"hi {other}")], session_id=other)
        assert not recorder._removed.get("app") and "app" not in recorder._erased
        live += [{"role": "assistant", "content": "Noted."}, user("next")]
        assert host.before_llm_call(live, session_id="app").failures == []
    finally:
        host.close()
    assert current(store_url, "app") == ["hello", "Hi.", "Noted.", "next"]
    assert any(e["event"] == "ctxlife.removed_message_not_recorded" for e in events)


def test_a_turn_that_would_make_the_conversation_invalid_is_refused_before_it_is_recorded(store_url: str) -> None:
    with ctxlife.Session("invalid", config(store_url), context_window=8000) as session:
        session.prepare(user("hello"))
        session.record_reply("hi")
        with pytest.raises(ctxlife.InvalidMessagesError, match="orphan_tool_result.*nothing was recorded"):
            session.prepare({"role": "tool", "tool_call_id": "call_1", "content": "a result nobody asked for"})
        call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        session.prepare(user("look it up"))
        session.record_reply({"role": "assistant", "content": None, "tool_calls": [call]})
        session.prepare({"role": "tool", "tool_call_id": "call_1", "content": "found"})  # answers the call: fine
    assert current(store_url, "invalid") == ["hello", "hi", "look it up", "None", "found"]
