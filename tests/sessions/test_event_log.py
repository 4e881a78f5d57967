"""Sessions as an event log (issue 20): edits, regenerations, pops, deletions.

One test per reported failure, on the file, SQLite and Redis stores. "What the model sees" is
checked against the caller's own list (plain dict comparison), never against ctxlife's fingerprints.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import structlog
from pg_sql import pg_sql

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.messages import BOOTSTRAP_START
from ctxlife.sessions import ADD, REMOVE, REPLACE, Event, SessionStore, open_store
from ctxlife.testing import assistant, system, tool_call, tool_result, user

WINDOW = 100_000
# manage() warns that snapshot_restore also acts at task end; these tests drive only model calls.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")


def settings(url: str, *strategies: str, **tables: Any) -> Any:
    return settings_from_dict({"strategies": ["snapshot_restore", *strategies], "store": url, **tables})


def rebuilt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as a stateless caller sends it: rebuilt from JSON (new dicts every call)."""
    return json.loads(json.dumps(messages))


def conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recordable part of a list: what the raw history should hold (no system prompt)."""
    return [m for m in messages if m.get("role") != "system"]


def current(store_url: str, sid: str, view: str = "") -> list[dict[str, Any]]:
    with open_store(store_url) as store:
        return [r.message for r in store.current(sid, view)]


def log(store_url: str, sid: str) -> list[Any]:
    with open_store(store_url) as store:
        return store.read_records(sid)


def restarted_sees(store_url: str, cfg: Any, sid: str, new: dict[str, Any]) -> list[dict[str, Any]]:
    """What a new host (a restart) sends for a fresh ``[system, new]`` list."""
    host = Host(cfg, context_window=WINDOW, session_id=sid)
    try:
        fresh = [system("sys"), new]
        report = host.manage(fresh)
        assert not report.failures, report.failures
        return fresh
    finally:
        host.close()


# -- an edited earlier message re-records the whole list ------------------------------------------


def test_an_edited_earlier_question_is_one_replace_record(store_url: str) -> None:
    cfg = settings(store_url)
    history = [system("sys"), user("q1")]
    turns = [assistant("a1"), user("q2"), assistant("a2"), user("q3"), assistant("a3"), user("q4")]
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="edit")
    for message in turns:
        history.append(message)
        if message["role"] == "user":
            ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="edit")
    # The user corrects their first question; the app sends the whole list again.
    history[1] = user("q1, corrected")
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="edit")
    records = log(store_url, "edit")
    assert len(records) == 8  # 7 messages + 1 replace (was 13)
    assert (records[-1].op, records[-1].target) == ("replace", 1)
    assert current(store_url, "edit") == conversation(history)
    # A restart sends the corrected conversation once.
    sent = restarted_sees(store_url, cfg, "edit", user("q5"))
    assert sent == [system("sys"), *conversation(history), user("q5")]


def test_an_edit_made_in_place_on_a_kept_list_is_a_replace(store_url: str) -> None:
    """An app that keeps its list between calls and edits a message in place (``m["content"] = ...``,
    as context editing that clears old tool results does): the raw history follows the edit."""
    cfg = settings(store_url)
    history: list[dict[str, Any]] = [system("sys"), user("What is 2+2?")]
    ctxlife.manage(history, config=cfg, context_window=WINDOW, session_id="inplace")
    history += [assistant("5"), user("Are you sure?")]
    ctxlife.manage(history, config=cfg, context_window=WINDOW, session_id="inplace")
    history[1]["content"] = "What is 2+3?"  # the same dict, edited
    history += [assistant("Yes."), user("Thanks")]
    ctxlife.manage(history, config=cfg, context_window=WINDOW, session_id="inplace")
    records = log(store_url, "inplace")
    assert [(r.op, r.target) for r in records if r.op != "add"] == [("replace", 1)]
    assert current(store_url, "inplace") == conversation(history)
    sent = restarted_sees(store_url, cfg, "inplace", user("q"))
    assert sent == [system("sys"), *conversation(history), user("q")]


def test_clearing_old_tool_results_records_replaces_not_a_second_copy(store_url: str) -> None:
    cfg = settings(store_url)
    history: list[dict[str, Any]] = [system("sys"), user("look things up")]
    for i in range(4):
        call = tool_call("lookup", {"i": i}, call_id=f"c{i}")
        history += [assistant(None, [call]), tool_result(f"c{i}", f"result {i} " * 20)]
        ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="clear")
    history += [assistant("done"), user("thanks")]
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="clear")
    before = len(log(store_url, "clear"))
    assert before == 11
    # Context editing: the app clears the two oldest tool results (as Anthropic's and LangChain's do).
    for index in (3, 5):
        history[index] = {**history[index], "content": "[cleared]"}
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="clear")
    records = log(store_url, "clear")
    assert len(records) == before + 2 and {r.op for r in records[before:]} == {"replace"}
    assert current(store_url, "clear") == conversation(history)


# -- a regenerated reply is restored next to its replacement --------------------------------------


def test_a_regenerated_reply_replaces_the_old_one_after_a_restart(store_url: str) -> None:
    cfg = settings(store_url)
    host = Host(cfg, context_window=WINDOW, session_id="regen")
    history = [system("sys"), user("q1")]
    host.manage(history)
    host.record_reply(assistant("a1"))
    # The user asks for another answer: a1 is replaced by a1', then the conversation goes on.
    history = [system("sys"), user("q1"), assistant("a1, regenerated"), user("q2")]
    host.manage(rebuilt(history))
    host.close()
    sent = restarted_sees(store_url, cfg, "regen", user("q3"))
    assert sent == [system("sys"), user("q1"), assistant("a1, regenerated"), user("q2"), user("q3")]


def test_an_edit_of_an_earlier_turn_discards_what_followed(store_url: str) -> None:
    cfg = settings(store_url)
    history = [system("sys"), user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="fork")
    # The user edits q2: the turns after it are discarded (a fork of the conversation).
    history = [system("sys"), user("q1"), assistant("a1"), user("q2, edited")]
    ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="fork")
    assert current(store_url, "fork") == conversation(history)
    ops = [(r.op, r.target) for r in log(store_url, "fork")[5:]]
    assert sorted(ops, key=str) == sorted([("replace", 3), ("remove", 4), ("remove", 5)], key=str)
    sent = restarted_sees(store_url, cfg, "fork", user("q4"))
    assert sent == [*history, user("q4")]


# -- parallel tool results sent back in the other order ----------------------------------------------


def test_parallel_tool_results_in_another_order_are_recorded_once_and_restore(store_url: str) -> None:
    cfg = settings(store_url)
    calls = [tool_call("weather", {"city": "Oslo"}, call_id="w1"), tool_call("weather", {"city": "Rome"}, call_id="w2")]
    head = [system("sys"), user("weather?"), assistant(None, calls)]
    first = [*head, tool_result("w1", "cold"), tool_result("w2", "warm")]
    ctxlife.manage(rebuilt(first), config=cfg, context_window=WINDOW, session_id="par")
    # The app sends the results back in completion order, then the conversation goes on.
    second = [
        *head,
        tool_result("w2", "warm"),
        tool_result("w1", "cold"),
        assistant("Oslo cold, Rome warm"),
        user("ok"),
    ]
    ctxlife.manage(rebuilt(second), config=cfg, context_window=WINDOW, session_id="par")
    records = log(store_url, "par")
    assert len(records) == 6  # 3 results for 2 calls before
    assert sorted(r.message.get("tool_call_id") for r in records if r.message.get("role") == "tool") == ["w1", "w2"]
    with structlog.testing.capture_logs() as events:
        sent = restarted_sees(store_url, cfg, "par", user("and Paris?"))
    assert not [e for e in events if e.get("event") == "ctxlife.restore_failed"]
    assert [m.get("content") for m in sent[-3:]] == ["Oslo cold, Rome warm", "ok", "and Paris?"]
    assert len([m for m in sent if m.get("role") == "tool"]) == 2


def test_a_list_built_on_an_older_one_is_diffed_against_the_view_as_it_is_now(store_url: str) -> None:
    """A list that agrees longest with a list from before an edit (here: the results back in the
    order of an older list) is diffed against what the view holds now: what the edit replaced or
    removed since is not a place to write to (found by the session state machine: a removal later
    hit a slot removed before, and the message the caller dropped stayed in the raw history)."""
    host = Host(settings(store_url), context_window=WINDOW, session_id="back")
    calls = [tool_call("lookup", {"n": 1}, call_id="c1"), tool_call("lookup", {"n": 2}, call_id="c2")]
    head = [system("sys"), user("q1"), assistant(None, calls)]
    completion_order = [tool_result("c2", "two"), tool_result("c1", "one")]
    call_order = [tool_result("c1", "one"), tool_result("c2", "two")]

    def turn(messages: list[dict[str, Any]], reply: str | None) -> None:
        report = host.manage(messages)
        assert not report.failures, report.failures
        if reply is not None:
            messages.append(assistant(reply))
            host.record_reply(messages)

    try:
        turn([*head, *completion_order, assistant("a1"), user("q2")], "a2")
        turn([*head, *call_order, assistant("a1"), user("q2"), assistant("a2"), user("q3")], "a3")
        turn([*head, *call_order, assistant("a1"), user("q2, edited")], "a2 again")  # a fork at q2
        # Rebuilt with the results in completion order: the first list's order, not the newest's.
        later = [*head, *completion_order, assistant("a1"), user("q2, edited"), assistant("a2 again"), user("q4")]
        turn(later, None)
        # The user deletes the last exchange but one, and asks again.
        final = [*head, *completion_order, assistant("a1"), user("q5")]
        turn(final, None)
    finally:
        host.close()
    records = log(store_url, "back")
    live: set[int] = set()
    for record in records:
        assert record.op == "add" or record.target in live, f"{record.op} of slot {record.target}, not in the view"
        if record.op == "add":
            live.add(record.seq)
        elif record.op == "remove":
            live.discard(record.target)
    assert not [r for r in records if r.op == "replace" and r.message == records[r.target - 1].message]
    in_order = [*head[1:], *call_order, assistant("a1"), user("q5")]
    assert sorted(map(json.dumps, current(store_url, "back"))) == sorted(map(json.dumps, in_order))


# -- a one-message conversation restored in front of a list that holds it -----------------------------


def test_a_one_message_conversation_is_sent_and_recorded_once(store_url: str) -> None:
    cfg = settings(store_url)
    with ctxlife.Session("one", cfg, context_window=WINDOW) as session:
        session.add_items([user("hello")])
        sent = session.messages()
    assert sent == [user("hello")]
    assert current(store_url, "one") == [user("hello")]
    # A first request retried on another worker (a fresh host) is not restored in front of itself.
    for _ in range(2):
        host = Host(cfg, context_window=WINDOW, session_id="retry")
        request = [system("sys"), user("first question")]
        host.manage(request)
        host.close()
        assert request == [system("sys"), user("first question")]
    assert current(store_url, "retry") == [user("first question")]


# -- the latest message (what Session.pop removes) -------------------------------------------------


def test_latest_is_the_last_current_message_after_edits_inserts_and_removals(store_url: str) -> None:
    # SQLite and PostgreSQL find it from the slots and decode only the records from it on.
    with open_store(store_url) as store:
        assert store.latest("s") is None
        a, b, c = store.append("s", [user("a"), assistant("b"), user("c")])
        store.append("s", [user("other lane")], view="lane")
        store.append_events("s", [Event(REPLACE, user("c, edited"), c.seq)])
        store.append_events("s", [Event(ADD, user("x, inserted after a"), a.seq), Event(REMOVE, {}, b.seq)])
        latest = store.latest("s")
        assert latest is not None and latest == store.current("s")[-1]
        assert (latest.seq, latest.message) == (c.seq, user("c, edited"))
        store.append_events("s", [Event(REMOVE, {}, c.seq)])
        assert store.latest("s") == store.current("s")[-1]
        assert store.latest("s").message == user("x, inserted after a")  # type: ignore[union-attr]
        assert store.latest("s", "lane").message == user("other lane")  # type: ignore[union-attr]


# -- Session.pop() after a compaction ---------------------------------------------------------------


@pytest.mark.parametrize("pops", [1, 2], ids=["reply", "round"])
def test_pop_after_a_compaction_records_nothing_again(store_url: str, pops: int) -> None:
    # Popping a whole round (reply, then question) is what re-recorded the pinned q0 on e03a850.
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": True, "always": True})
    with ctxlife.Session("pop", cfg, system="sys", context_window=WINDOW) as session:
        for i in range(4):
            session.prepare(user(f"q{i}"))
            session.record_reply(f"a{i}")
        popped = [session.pop() for _ in range(pops)]
        assert popped == [assistant("a3"), user("q3")][:pops]
        sent = session.prepare(user("q4"))
        session.record_reply("a4")
    assert [m["content"] for m in sent][:2] == ["sys", "q0"] and sent[-1] == user("q4")
    adds = [r.message.get("content") for r in log(store_url, "pop") if r.op == "add"]
    assert adds.count("q0") == 1  # the pinned first user message is not recorded again
    kept = ["q0", "a0", "q1", "a1", "q2", "a2", "q3"][: 7 - (pops - 1)]
    assert [m.get("content") for m in current(store_url, "pop")] == [*kept, "q4", "a4"]


# -- Anthropic lists: the bootstrap section inside the user's first message ---------------------------


def _anthropic_turn(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_the_bootstrap_section_is_never_recorded_as_the_users_words(store_url: str) -> None:
    def cfg(profile: str) -> Any:
        return settings(store_url, "bootstrap", message_format="anthropic", bootstrap={"text": profile})

    history: list[dict[str, Any]] = [_anthropic_turn("hi")]
    host = Host(cfg("PROFILE v1"), context_window=WINDOW, session_id="anth")
    host.manage(history, context_window=WINDOW)
    assert BOOTSTRAP_START in json.dumps(history)  # the section opens the first user turn
    history += [{"role": "assistant", "content": [{"type": "text", "text": "hello"}]}, _anthropic_turn("next")]
    host.manage(history)
    host.close()
    records = log(store_url, "anth")
    assert len(records) == 3
    assert not any(BOOTSTRAP_START in json.dumps(r.message) for r in records)
    assert records[0].message == _anthropic_turn("hi")
    # A new rendering of the bootstrap text (an edited profile, {date} after midnight) is no edit.
    again = Host(cfg("PROFILE v2"), context_window=WINDOW, session_id="anth")
    sent = rebuilt(history) + [{"role": "assistant", "content": [{"type": "text", "text": "sure"}]}]
    sent.append(_anthropic_turn("third"))
    again.manage(sent)
    again.close()
    assert "PROFILE v2" in json.dumps(sent[0]) and "PROFILE v1" not in json.dumps(sent)
    records = log(store_url, "anth")
    assert [r.op for r in records] == ["add"] * 5
    assert not any(BOOTSTRAP_START in json.dumps(r.message) for r in records)


# -- a corrupt snapshot; a fresh host handed a list missing the newest stored message ----------------


def _corrupt_snapshot(store: SessionStore, store_url: str, sid: str) -> None:
    if store_url.startswith("file://"):
        (Path(store_url[len("file://") :]) / f"{sid}_ctx.json").write_text("{not json")
    elif store_url.startswith("sqlite://"):
        with sqlite3.connect(store_url[len("sqlite:///") :]) as conn:
            conn.execute("UPDATE ctxlife_snapshots SET json = '{not json' WHERE session_id = ?", (sid,))
    elif store_url.startswith("postgres"):
        pg_sql(store_url, "UPDATE {s}.ctxlife_snapshots SET json = '{not json' WHERE session_id = %s", (sid,))
    else:
        client, key = store._client, store._key(sid, "ctx")  # type: ignore[attr-defined]
        kind = client.type(key).decode()
        if kind == "hash":
            client.hset(key, "", "{not json")
        else:
            client.set(key, "{not json")


def test_a_corrupt_snapshot_restores_from_the_raw_history_and_is_written_again(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 2, "pin_first_user": False, "always": True})
    host = Host(cfg, context_window=WINDOW, session_id="bad")
    history = [system("sys"), user("q0")]
    for i in range(3):
        host.manage(history)
        history += [assistant(f"a{i}"), user(f"q{i + 1}")]
    host.close()
    with open_store(store_url) as store:
        assert store.load_snapshot("bad") is not None
        _corrupt_snapshot(store, store_url, "bad")
        with pytest.raises(ctxlife.StoreError):
            store.load_snapshot("bad")
    with structlog.testing.capture_logs() as events:
        sent = restarted_sees(store_url, cfg, "bad", user("again"))
    assert "ctxlife.snapshot_unreadable" in [e.get("event") for e in events]
    assert "ctxlife.restore_failed" not in [e.get("event") for e in events]
    assert sent[-1] == user("again") and len(sent) > 2  # restored (then truncated to the last rounds)
    with open_store(store_url) as store:
        snap = store.load_snapshot("bad")  # a new snapshot replaced the corrupt one
        assert snap is not None and snap.messages[-1] == user("again")


def test_a_fresh_host_given_a_list_without_the_newest_message_keeps_snapshots(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": False, "always": True})
    host = Host(cfg, context_window=WINDOW, session_id="miss")
    history = [system("sys"), user("q0"), assistant("a0"), user("q1")]
    host.manage(history)
    host.record_reply(assistant("a1"))
    host.close()
    # A fresh host (another worker) gets a list that has not seen a1.
    again = Host(cfg, context_window=WINDOW, session_id="miss")
    with structlog.testing.capture_logs() as events:
        report = again.manage([system("sys"), user("q0"), assistant("a0"), user("q1"), user("q2")])
    again.close()
    assert "ctxlife.restore_failed" not in [e.get("event") for e in events]
    assert "snapshot_saved" in [a.what for a in report.actions]
    # The list already holds the conversation: nothing of it is recorded again (e03a850 restored in
    # front of it and recorded q0 a0 q1 a second time).
    assert current(store_url, "miss") == [user("q0"), assistant("a0"), user("q1"), assistant("a1"), user("q2")]


# -- privacy: delete one message, or every message matching a pattern ---------------------------------


def _stored_text(store: SessionStore, store_url: str, sid: str) -> str:
    """Everything the store keeps of a session, as text (files, database rows, Redis values)."""
    if store_url.startswith("file://"):
        root = Path(store_url[len("file://") :])
        return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())
    if store_url.startswith("sqlite://"):
        path = Path(store_url[len("sqlite:///") :])
        # the bytes of the database and its write-ahead log: freed pages count too
        return "".join(
            p.read_bytes().decode(errors="replace") for p in path.parent.glob(path.name + "*") if p.is_file()
        )
    if store_url.startswith("postgres"):  # every row of the session, as an outsider reads them
        rows = pg_sql(store_url, "SELECT json FROM {s}.ctxlife_raw WHERE session_id = %s", (sid,))
        rows += pg_sql(store_url, "SELECT json FROM {s}.ctxlife_snapshots WHERE session_id = %s", (sid,))
        rows += pg_sql(
            store_url, "SELECT convert_from(data, 'UTF8') FROM {s}.ctxlife_blobs WHERE session_id = %s", (sid,)
        )
        return "".join(str(r[0]) for r in rows)
    client = store._client  # type: ignore[attr-defined]
    out = []
    for key in client.scan_iter(match=store._key(sid, "*")):  # type: ignore[attr-defined]
        kind = client.type(key).decode()
        if kind == "list":
            out += [v.decode() for v in client.lrange(key, 0, -1)]
        elif kind == "hash":
            out += [v.decode() for v in client.hvals(key)]
        elif kind == "string":
            out.append(client.get(key).decode())
    return "".join(out)


def test_erase_removes_a_message_from_every_place_the_store_keeps_it(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 2, "pin_first_user": False, "always": True})
    with ctxlife.Session("priv", cfg, system="sys", context_window=WINDOW) as session:
        session.prepare(user("my account is ACCT-998877"))
        session.record_reply("noted")
        session.prepare(user("what is the weather"))
        session.record_reply("sunny")
        seq = next(r.seq for r in session.records() if "ACCT-998877" in str(r.message))
        assert session.erase(seq) == [seq]
        assert "ACCT-998877" not in json.dumps(session.get_items())
        sent = session.prepare(user("and tomorrow?"))
        assert "ACCT-998877" not in json.dumps(sent)
        with open_store(store_url) as store:
            assert "ACCT-998877" not in _stored_text(store, store_url, "priv")


def test_erase_matching_scrubs_summaries_too(store_url: str) -> None:
    cfg = settings(store_url, "llm_summary", llm_summary={"summarizer": "extractive", "target": 0.02}, threshold=0.05)
    with ctxlife.Session("pat", cfg, system="sys", context_window=4000) as session:
        session.prepare(user("card 4111-1111-1111-1111 was charged twice for order R7"))
        session.record_reply("I see the double charge on R7.")
        for i in range(6):
            session.prepare(user(f"question {i} about delivery times and the weather in town"))
            session.record_reply(f"answer {i} with plenty of words to fill the context window up")
        erased = session.erase_matching(r"4111-1111-1111-1111")
        assert erased
        assert "4111-1111-1111-1111" not in json.dumps(session.get_items())
        with open_store(store_url) as store:
            assert "4111-1111-1111-1111" not in _stored_text(store, store_url, "pat")


def test_derived_data_goes_with_the_session(store_url: str) -> None:
    with open_store(store_url) as store:
        store.append("gone", [user("x")])
        folder = store.derived_dir("gone")
        if folder is None:
            assert store_url.startswith(("redis", "postgres"))
            return
        folder.mkdir(parents=True)
        (folder / "index.db").write_text("derived")
        assert store.delete("gone")
        assert not folder.exists()


# -- a message object appended twice (a shared "continue") ------------------------------------------


def test_a_reused_message_object_is_recorded_at_each_place(store_url: str) -> None:
    cfg = settings(store_url)
    keep_going = {"role": "user", "content": "continue"}
    history: list[dict[str, Any]] = [system("sys"), user("start")]
    host = Host(cfg, context_window=WINDOW, session_id="reuse")
    host.manage(history)
    for i in range(3):
        history += [assistant(f"part {i}"), keep_going]
        host.manage(history)
    history.append(assistant("the end"))
    host.record_reply(history)
    host.close()
    assert current(store_url, "reuse") == conversation(history)


# -- the CLI: the whole log for audit, erase for privacy -----------------------------------------------


def test_export_all_shows_the_log_and_erase_deletes_by_pattern(store_url: str) -> None:
    from tests.sessions.test_session_cli import run

    with open_store(store_url) as store:
        store.append("cli", [user("my card is 4111-1111"), assistant("noted")])
    with ctxlife.Session("cli", settings(store_url), context_window=WINDOW) as session:
        session.edit(2, assistant("noted, thanks"))
    code, out, _ = run("session", "export", "cli", "--all", "--store", store_url)
    log_doc = json.loads(out)
    assert code == 0 and [(r["seq"], r["op"], r.get("target")) for r in log_doc] == [
        (1, "add", None),
        (2, "add", None),
        (3, "replace", 2),
    ]
    code, out, _ = run("session", "export", "cli", "--raw", "--store", store_url)
    assert code == 0 and json.loads(out) == [user("my card is 4111-1111"), assistant("noted, thanks")]
    code, out, _ = run("session", "erase", "cli", "--match", r"4111-\d+", "--store", store_url)
    assert code == 0 and "erased 1 message(s)" in out
    code, out, _ = run("session", "export", "cli", "--all", "--store", store_url)
    assert "4111-1111" not in out and json.loads(out)[0]["erased"] is True
    assert run("session", "erase", "nobody", "--seq", "1", "--store", store_url)[0] == 1  # no such session
    assert run("session", "erase", "cli", "--match", "((", "--store", store_url)[0] == 2  # not a regular expression


def test_text_a_redaction_plugin_removes_never_comes_back_through_a_restore(store_url: str) -> None:
    pytest.importorskip("ctxlife_redact")  # the example plugin, installed by `make test`
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    with open_store(store_url) as store:  # recorded before redaction was configured
        store.append("red", [user(f"my key is {key}"), assistant("got it")])
    with ctxlife.Session("red", settings(store_url, "redact"), context_window=WINDOW) as session:
        assert key not in json.dumps(session.get_items())
        assert key not in json.dumps(session.prepare(user("what was my key?")))


@pytest.mark.parametrize(
    "value",
    [
        {"ctxlife_event": "bogus"},
        {"ctxlife_event": "replace", "message": {"role": "user", "content": "x"}, "target": "3"},
        {"ctxlife_event": "add", "message": "not a message", "target": 1},
    ],
)
def test_a_malformed_event_is_refused_before_anything_is_written(store: SessionStore, value: dict[str, Any]) -> None:
    """A message carrying ctxlife's event key is read back as an edit: one that is not a valid edit is
    refused with the batch, and the history stays as it was (readable, nothing half-written)."""
    store.append("s", [{"role": "user", "content": "kept"}])
    with pytest.raises(StoreError, match=r"append to session 's': message 1 is a malformed ctxlife_event record"):
        store.append("s", [{"role": "user", "content": "not written either"}, value])
    assert [r.message["content"] for r in store.read_records("s")] == ["kept"]
    assert store.head("s") == 1


# -- a restore applies the events written after a snapshot (issue 44: mutation scope `restore`) ---------


def test_events_after_a_snapshot_without_slot_marks_find_their_messages_by_text(tmp_path: Path) -> None:
    """A snapshot written before slot marks existed (no ``slots`` in its meta) is mapped onto the raw
    history by fingerprint, newest first, when an edit or a removal follows it: the edit and the
    removal hit the right messages, also when two messages read the same."""
    from ctxlife.sessions import Snapshot

    url = f"file://{tmp_path / 'sessions'}"
    raw = [user("ok"), assistant("first answer"), user("ok"), assistant("second answer"), user("and?")]
    summary = {"role": "user", "content": "[summary] the user said ok twice"}
    with open_store(url) as store:
        store.append("old", raw)
        store.save_snapshot(Snapshot(session_id="old", view="", messages=[summary, *raw[2:]], raw_length=5))
        store.append_events("old", [Event(REPLACE, assistant("second answer, edited"), 4), Event(REMOVE, {}, 3)])
    with ctxlife.Session("old", settings(url), context_window=WINDOW) as session:
        items = session.get_items()
    assert items == [summary, assistant("second answer, edited"), user("and?")]


def test_messages_inserted_after_a_snapshot_go_after_their_target_in_order(tmp_path: Path) -> None:
    from ctxlife.sessions import Snapshot

    url = f"file://{tmp_path / 'sessions'}"
    raw = [user("one"), assistant("two"), user("three")]
    with open_store(url) as store:
        store.append("ins", raw)
        store.save_snapshot(Snapshot(session_id="ins", view="", messages=raw, raw_length=3, meta={"slots": [1, 2, 3]}))
        store.append_events("ins", [Event(ADD, assistant("1a"), 1), Event(ADD, assistant("1b"), 1)])
        store.append_events("ins", [Event(ADD, user("2a"), 2), Event(ADD, user("four"))])
    with ctxlife.Session("ins", settings(url), context_window=WINDOW) as session:
        contents = [m["content"] for m in session.get_items()]
    assert contents == ["one", "1a", "1b", "two", "2a", "three", "four"]


@pytest.mark.parametrize("case", ["rewritten", "erased", "shorter"])
def test_a_snapshot_is_used_only_on_the_history_it_was_written_from(tmp_path: Path, case: str) -> None:
    """The snapshot's last record (``raw_length``, its fingerprint in ``meta["covered_fp"]``) must be
    in the raw history as the snapshot saw it: a history deleted and written again (rewritten) or
    shorter than the snapshot (a snapshot without covered_fp) restores from the raw history; a
    covered record that was erased since keeps the snapshot (an erase rewrites the record's text)."""
    from ctxlife.sessions import Snapshot
    from ctxlife.sessions.base import fingerprint

    folder = tmp_path / "sessions"
    url = f"file://{folder}"
    raw = [user("one"), assistant("two"), user("three")]
    summary = {"role": "user", "content": "[summary] one and two"}
    meta = {} if case == "shorter" else {"covered_fp": fingerprint(raw[2]), "slots": [None, 3]}
    with open_store(url) as store:
        store.append("s", raw)
        length = 5 if case == "shorter" else 3
        store.save_snapshot(Snapshot(session_id="s", view="", messages=[summary, raw[2]], raw_length=length, meta=meta))
        if case == "rewritten":  # another program deleted the raw history and wrote a new one
            (folder / "s_raw.jsonl").unlink()
            store.append("s", [user("uno"), assistant("dos"), user("tres")])
        elif case == "erased":
            store.append("s", [assistant("four")])
            assert store.erase("s", [3]) == [3]
    with (
        ctxlife.Session("s", settings(url), context_window=WINDOW) as session,
        structlog.testing.capture_logs() as events,
    ):
        contents = [m["content"] for m in session.get_items()]
    expected = {
        "rewritten": ["uno", "dos", "tres"],
        "erased": ["[summary] one and two", "four"],
        "shorter": ["one", "two", "three"],
    }
    assert contents == expected[case]
    ahead = [e for e in events if e["event"] == "ctxlife.snapshot_ahead_of_history"]
    if case == "erased":
        assert ahead == []
    else:  # the operator is told why the compacted context was not used
        assert [(e["log_level"], e["session_id"], e["view"], e["raw_length"]) for e in ahead] == [
            ("warning", "s", "", length)
        ]
        assert "restored from the raw history" in ahead[0]["hint"]


def test_a_restore_goes_on_when_an_interrupted_erase_cannot_be_completed(tmp_path: Path) -> None:
    """An unreadable erase intent does not stop the session from being used: the restore goes on and
    an error event names the session and says the erase is tried again on the next restore."""
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("stuck", [user("hello"), assistant("Hi.")])
        store.put_blob("stuck", "ctxlife_erase", "{not json")
    with (
        ctxlife.Session("stuck", settings(url), context_window=WINDOW) as session,
        structlog.testing.capture_logs() as events,
    ):
        contents = [m["content"] for m in session.get_items()]
    assert contents == ["hello", "Hi."]
    stuck = [e for e in events if e["event"] == "ctxlife.erase_not_completed"]
    assert stuck and all(e["log_level"] == "error" and e["session_id"] == "stuck" for e in stuck)
    assert "is unreadable" in stuck[0]["error"]
    assert stuck[0]["hint"] == "an interrupted erase could not be completed now; it is tried again on the next restore"


def test_a_session_object_sees_every_kind_of_write_another_writer_makes(tmp_path: Path) -> None:
    """``Session.get_items`` brings its last read up to date (new records only when they are plain
    adds); an edit, a removal, an insert or a new snapshot by another writer reads the view again."""
    from ctxlife.sessions import Snapshot

    url = f"file://{tmp_path / 'sessions'}"
    with ctxlife.Session("shared", settings(url), context_window=WINDOW) as session, open_store(url) as other:
        session.add(user("a"), assistant("b"))

        def seen() -> list[str]:
            return [m["content"] for m in session.get_items()]

        assert seen() == ["a", "b"]
        assert seen() == ["a", "b"]  # nothing new
        other.append("shared", [user("c")])
        assert seen() == ["a", "b", "c"]
        other.append_events("shared", [Event(REPLACE, user("a, edited"), 1)])
        assert seen() == ["a, edited", "b", "c"]
        other.append_events("shared", [Event(REMOVE, {}, 2)])
        assert seen() == ["a, edited", "c"]
        other.append_events("shared", [Event(ADD, assistant("a2"), 1)])
        assert seen() == ["a, edited", "a2", "c"]
        summary = {"role": "user", "content": "[summary] a and c"}
        other.save_snapshot(Snapshot(session_id="shared", view="", messages=[summary], raw_length=6))
        assert seen() == ["[summary] a and c"]
        other.append("shared", [assistant("d")])
        assert seen() == ["[summary] a and c", "d"]


@pytest.mark.parametrize("first_write", ["pop", "turn"])
def test_a_session_deleted_and_written_again_to_the_same_head_by_another_worker_is_read_anew(
    store_url: str, first_write: str
) -> None:
    """Another worker deletes the conversation and writes a new one exactly as long as the old: the
    head is the same number, so this worker's conditional writes would still pass. Its turns, pops
    and edits act on the new conversation, and what it sends holds nothing of the deleted one."""
    sid = "reborn"
    with ctxlife.Session(sid, settings(store_url), context_window=WINDOW) as first:
        first.prepare(user("old question 1"))
        first.record_reply("old answer 1")
        first.prepare(user("old question 2"))
        first.record_reply("old answer 2")
        assert first.pop() == assistant("old answer 2")
        first.record_reply("old answer 2, again")  # six records: the pop's remove among them
        with ctxlife.Session(sid, settings(store_url), context_window=WINDOW) as other:
            other.clear()
            other.add(*(user(f"new {i}") if i % 2 else assistant(f"new {i}") for i in range(1, 7)))
        assert len(log(store_url, sid)) == 6  # (the precondition: the head this worker last wrote)
        if first_write == "turn":
            sent = first.prepare(user("new 7"))
            assert [m["content"] for m in conversation(sent)] == [f"new {i}" for i in range(1, 8)]
            assert first.pop() == user("new 7")
        assert first.pop() == assistant("new 6")
        assert first.pop() == user("new 5")
        edited = first.edit(first.records()[0].seq, user("new 1, edited"))
        assert edited.message == user("new 1, edited")
        sent = first.prepare(user("new 8"))
        assert [m["content"] for m in conversation(sent)] == ["new 1, edited", "new 2", "new 3", "new 4", "new 8"]
    assert [m["content"] for m in current(store_url, sid)] == ["new 1, edited", "new 2", "new 3", "new 4", "new 8"]
