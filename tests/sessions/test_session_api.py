"""``ctxlife.Session`` / ``ctxlife.AsyncSession``: one conversation across calls, hosts, processes, stores."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

import ctxlife
from ctxlife import sessions
from ctxlife.config import Settings, settings_from_dict
from ctxlife.errors import InvalidMessagesError, SessionIdError, StoreError
from ctxlife.host_report import StrategyFailure
from ctxlife.messages import RECALL_PREFIX, is_summary, mark_inserted, summary_message
from ctxlife.sessions import Snapshot, open_store
from delegating_store import DelegatingStore

SRC = Path(__file__).resolve().parents[2] / "src"
SYSTEM = "You are a support clerk."


def config(store_url: str, *strategies: str, **tables: Any) -> Settings:
    return settings_from_dict({"store": store_url, "strategies": list(strategies), **tables})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages]


def raw(store_url: str, sid: str) -> list[dict[str, Any]]:
    with open_store(store_url) as store:
        return [r.message for r in store.read_records(sid)]


def test_a_conversation_continues_in_a_new_session_object(store_url: str) -> None:
    cfg = config(store_url)
    with ctxlife.Session("u42", cfg, system=SYSTEM, context_window=8000) as session:
        sent = session.prepare(user("Where is order 17?"))
        assert sent == [{"role": "system", "content": SYSTEM}, user("Where is order 17?")]
        record = session.record_reply("It shipped on Monday.")
        assert record.seq == 2 and record.message == assistant("It shipped on Monday.")
    with ctxlife.Session("u42", cfg, system=SYSTEM, context_window=8000) as again:  # a new host and store
        sent = again.prepare(user("And order 18?"))
        assert contents(sent) == [SYSTEM, "Where is order 17?", "It shipped on Monday.", "And order 18?"]
        again.record_reply("Tomorrow.")
        assert contents(again.get_items()) == [
            "Where is order 17?",
            "It shipped on Monday.",
            "And order 18?",
            "Tomorrow.",
        ]
        assert contents(again.get_items(limit=2)) == ["And order 18?", "Tomorrow."]
        assert again.get_items(limit=0) == []
    assert contents(raw(store_url, "u42")) == [
        "Where is order 17?",
        "It shipped on Monday.",
        "And order 18?",
        "Tomorrow.",
    ]


def test_asking_again_records_nothing_twice(store_url: str) -> None:
    with ctxlife.Session("s", config(store_url, "snapshot_restore"), context_window=8000) as session:
        session.prepare(user("q1"))
        first = session.messages()
        second = session.messages()  # no new turn: the same list, nothing recorded again
        assert first == second == [user("q1")]
        session.record_reply(assistant("a1"))
        session.messages(user("q2"))
    assert contents(raw(store_url, "s")) == ["q1", "a1", "q2"]


def test_the_agents_sdk_protocol_methods(store_url: str) -> None:
    with ctxlife.Session("sdk", config(store_url), context_window=8000) as session:
        assert session.session_id == "sdk"
        assert session.get_items() == [] and session.pop_item() is None
        session.add_items([user("a"), assistant("b"), user("c")])
        assert contents(session.get_items()) == ["a", "b", "c"]
        assert session.pop_item() == user("c")
        assert contents(session.get_items()) == ["a", "b"]
        session.add_items([user("d")])
        assert contents(session.get_items()) == ["a", "b", "d"]
        with open_store(store_url) as store:  # the log keeps the popped message, with a remove record
            assert [(r.seq, r.op, r.target) for r in store.read_records("sdk")] == [
                (1, "add", None),
                (2, "add", None),
                (3, "add", None),
                (4, "remove", 3),
                (5, "add", None),
            ]
            assert [r.seq for r in store.current("sdk")] == [1, 2, 5]
        session.clear_session()
        assert session.get_items() == []
        session.add(user("again"))  # a cleared session starts over
        assert contents(session.get_items()) == ["again"]


def test_reads_follow_what_others_write_and_hand_out_copies(store_url: str) -> None:
    # A session keeps the conversation it read last and adds only what was written since; what
    # another writer did meanwhile (appended, deleted and wrote again, compacted) must show.
    with ctxlife.Session("shared", config(store_url), context_window=8000) as session:
        session.add(user("a"), {"role": "assistant", "content": [{"type": "text", "text": "b"}]})
        first = session.get_items()
        first[1]["content"][0]["text"] = "edited by the caller"  # the caller's copy, not the session's
        first[0]["content"] = "edited too"
        assert session.get_items()[1]["content"][0]["text"] == "b"
        assert contents(session.get_items())[0] == "a"
        with open_store(store_url) as other:
            other.append("shared", [user("c")])
            assert contents(session.get_items())[2] == "c"
            other.delete("shared")  # deleted and written again, as long as before: other messages
            other.append("shared", [user("x"), user("y"), user("z")])
            assert contents(session.get_items()) == ["x", "y", "z"]
            other.save_snapshot(Snapshot(session_id="shared", messages=[user("summary of x y z")], raw_length=3))
            assert contents(session.get_items()) == ["summary of x y z"]
            other.append("shared", [user("w")])
            assert contents(session.get_items()) == ["summary of x y z", "w"]


def test_compaction_is_saved_and_the_next_call_starts_from_it(store_url: str) -> None:
    cfg = config(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": False, "always": True})
    with ctxlife.Session("long", cfg, system=SYSTEM, context_window=8000) as session:
        for i in range(4):
            sent = session.prepare(user(f"q{i}"))
            session.record_reply(f"a{i}")
        assert contents(sent) == [SYSTEM, "q3"]  # truncated to the last round
        report = session.last_report
        assert report is not None and "truncate_last_n" in report.acted
    with ctxlife.Session("long", cfg, system=SYSTEM, context_window=8000) as later:
        assert contents(later.get_items()) == ["q3", "a3"]  # the snapshot + the reply after it
        assert contents(later.prepare(user("q4"))) == [SYSTEM, "q4"]
    assert contents(raw(store_url, "long")) == ["q0", "a0", "q1", "a1", "q2", "a2", "q3", "a3", "q4"]


def test_a_system_message_added_as_an_item_is_kept_and_sent(store_url: str) -> None:
    # The Agents SDK hands a system item of the run's input to add_items like any other: it was
    # recorded, then left out of every read (never sent to the model again, missing from get_items).
    cfg = config(store_url, "truncate_last_n", truncate_last_n={"rounds": 2, "pin_first_user": False, "always": True})
    rule = {"role": "system", "content": "Answer in French."}
    with ctxlife.Session("sys", cfg, system=SYSTEM, context_window=8000) as session:
        session.add_items([user("q0"), rule])
        session.record_reply("a0")
        assert session.get_items() == [user("q0"), rule, assistant("a0")]
        assert contents(session.prepare(user("q1"))) == [SYSTEM, "q0", "Answer in French.", "a0", "q1"]
        session.record_reply("a1")
        for i in (2, 3):  # truncated to the last rounds (the rule, a system message, is pinned): a snapshot is saved
            session.prepare(user(f"q{i}"))
            session.record_reply(f"a{i}")
    with ctxlife.Session("sys", cfg, system="Another prompt.", context_window=8000) as later:
        assert contents(later.get_items()) == ["Answer in French.", "q2", "a2", "q3", "a3"]  # not the old prompt
        assert contents(later.prepare(user("q4"))) == ["Another prompt.", "Answer in French.", "q3", "a3", "q4"]


def test_pop_removes_the_message_from_the_snapshot_too(store_url: str) -> None:
    cfg = config(store_url, "truncate_last_n", truncate_last_n={"rounds": 2, "pin_first_user": False, "always": True})
    with ctxlife.Session("p", cfg, context_window=8000) as session:
        for i in range(3):
            session.prepare(user(f"q{i}"))
            session.record_reply(f"a{i}")
        session.prepare(user("q3"))  # compacted and saved: the snapshot covers q3
        with open_store(store_url) as store:
            snap = store.load_snapshot("p")
            assert snap is not None and snap.raw_length == 7 and contents(snap.messages)[-1] == "q3"
        assert session.pop() == user("q3")
        assert contents(session.get_items()) == ["q2", "a2"]  # the compacted context, without q3
    with ctxlife.Session("p", cfg, context_window=8000) as later:  # a new process restores it without q3
        assert contents(later.get_items()) == ["q2", "a2"]
        assert contents(later.prepare(user("q4"))) == ["q2", "a2", "q4"]
    with open_store(store_url) as store:
        assert [r.message.get("content") for r in store.current("p")] == ["q0", "a0", "q1", "a1", "q2", "a2", "q4"]


def test_views_keep_separate_conversations_in_one_log(store_url: str) -> None:
    cfg = config(store_url)
    with (
        ctxlife.Session("crew", cfg, view="researcher", context_window=8000) as researcher,
        ctxlife.Session("crew", cfg, view="writer", context_window=8000) as writer,
    ):
        researcher.prepare(user("find facts"))
        writer.prepare(user("write it up"))
        researcher.record_reply("facts")
        writer.record_reply("draft")
        assert contents(researcher.get_items()) == ["find facts", "facts"]
        assert contents(writer.get_items()) == ["write it up", "draft"]
        assert researcher.pop() == assistant("facts")  # each view pops its own latest message
        assert contents(researcher.get_items()) == ["find facts"]
        assert contents(writer.get_items()) == ["write it up", "draft"]
    with open_store(store_url) as store:
        assert [(r.seq, r.view) for r in store.read_records("crew")] == [
            (1, "researcher"),
            (2, "writer"),
            (3, "researcher"),
            (4, "writer"),
            (5, "researcher"),  # the remove record of the pop
        ]


class _SdkMessage(BaseModel):
    """Shaped like the OpenAI client's ChatCompletionMessage."""

    role: str = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


def test_record_reply_takes_text_dicts_and_sdk_objects(tmp_path: Path) -> None:
    with ctxlife.Session("r", config(f"file://{tmp_path}"), context_window=8000) as session:
        session.record_reply("plain")
        session.record_reply({"role": "assistant", "content": "dict"})
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        session.record_reply(_SdkMessage(tool_calls=[call]))
        assert session.get_items() == [
            assistant("plain"),
            assistant("dict"),
            {"role": "assistant", "tool_calls": [call]},
        ]
        with pytest.raises(InvalidMessagesError, match="cannot record a reply of type int"):
            session.record_reply(42)
        with pytest.raises(InvalidMessagesError, match="message 0 must be a message dict"):
            session.add("hello")  # type: ignore[arg-type]


def test_bad_ids_fail_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(SessionIdError):  # any other string maps to a safe key (session_key); these cannot
        ctxlife.Session("", config(f"file://{tmp_path / 's'}"))
    with pytest.raises(SessionIdError):
        ctxlife.Session("../" * 100, config(f"file://{tmp_path / 's'}"))
    with pytest.raises(SessionIdError):
        ctxlife.Session("ok", config(f"file://{tmp_path / 's'}"), view="a/b")
    assert not (tmp_path / "s").exists()


def test_sessions_share_one_host(tmp_path: Path) -> None:
    host = ctxlife.Host(config(f"file://{tmp_path}"), context_window=8000)
    for sid in ("a", "b"):
        with ctxlife.Session(sid, host=host) as session:
            session.prepare(user(f"hello from {sid}"))
            session.record_reply("hi")
    assert host.store is not None  # not closed by the sessions
    assert contents([r.message for r in host.store.read_records("b")]) == ["hello from b", "hi"]
    host.close()


def test_async_session(store_url: str) -> None:
    async def chat() -> list[str]:
        async with ctxlife.AsyncSession("as", config(store_url), system=SYSTEM, context_window=8000) as session:
            await session.prepare(user("q1"))
            await session.record_reply("a1")
            await session.add_items([user("q2")])
            popped = await session.pop_item()
            assert popped == user("q2")
            sent = await session.messages(user("q3"))
            await session.record_reply("a3")
            items = await session.get_items()
            assert contents(sent) == [SYSTEM, "q1", "a1", "q3"]
            await session.clear_session()
            assert await session.get_items() == []
            return contents(items)

    assert asyncio.run(chat()) == ["q1", "a1", "q3", "a3"]


WORKER = r"""
import json, sys
import ctxlife
from ctxlife.config import settings_from_dict

url, sid, text = sys.argv[1:4]
cfg = settings_from_dict({"store": url, "strategies": ["snapshot_restore"]})
with ctxlife.Session(sid, cfg, system="sys", context_window=8000) as session:
    sent = session.prepare({"role": "user", "content": text})
    session.record_reply("reply to " + text)  # the last thing this process does
print(json.dumps(sent))
"""


@pytest.mark.slow
def test_the_last_reply_of_a_process_is_restored_in_the_next(store_url: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p))
    sent = []
    for text in ("one", "two", "three"):
        proc = subprocess.run(
            [sys.executable, "-c", WORKER, store_url, "proc", text],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        sent.append(json.loads(proc.stdout.splitlines()[-1]))
    assert contents(sent[2]) == ["sys", "one", "reply to one", "two", "reply to two", "three"]
    assert contents(raw(store_url, "proc")) == ["one", "reply to one", "two", "reply to two", "three", "reply to three"]


def test_without_a_store_setting_the_default_store_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXLIFE_STORE", raising=False)
    with ctxlife.Session("plain", settings_from_dict({"strategies": []}), context_window=8000) as session:
        session.prepare(user("hi"))
        session.record_reply("hello")
    assert contents(raw("file://workspace/sessions", "plain")) == ["hi", "hello"]


MANAGE_WORKER = r"""
import json, sys
import ctxlife
from ctxlife.config import settings_from_dict

url, text = sys.argv[1:3]
cfg = settings_from_dict({"store": url, "strategies": ["snapshot_restore"]})
messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]
ctxlife.manage(messages, config=cfg, context_window=8000, session_id="m1")
sent = list(messages)
ctxlife.record_reply("reply to " + text, config=cfg, session_id="m1")  # the process's last reply
print(json.dumps(sent))
"""


@pytest.mark.slow
def test_manage_callers_record_the_last_reply_with_record_reply(store_url: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p))
    sent = []
    for text in ("one", "two"):
        proc = subprocess.run(
            [sys.executable, "-c", MANAGE_WORKER, store_url, text], capture_output=True, text=True, env=env, check=False
        )
        assert proc.returncode == 0, proc.stderr
        sent.append(json.loads(proc.stdout.splitlines()[-1]))
    assert contents(sent[1]) == ["sys", "one", "reply to one", "two"]
    assert contents(raw(store_url, "m1")) == ["one", "reply to one", "two", "reply to two"]


@pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")
def test_record_reply_uses_the_host_manage_made_and_records_nothing_twice(tmp_path: Path) -> None:
    cfg = config(f"file://{tmp_path}", "snapshot_restore")
    messages = [{"role": "system", "content": "sys"}, user("q1")]
    ctxlife.manage(messages, config=cfg, context_window=8000, session_id="m2")
    messages.append(assistant("a1"))
    assert [r.seq for r in ctxlife.record_reply(messages, config=cfg, session_id="m2")] == [2]  # the list: aligned
    assert ctxlife.record_reply(messages, config=cfg, session_id="m2") == []
    messages.append(user("q2"))
    ctxlife.manage(messages, config=cfg, context_window=8000, session_id="m2")
    assert (
        asyncio.run(ctxlife.arecord_reply({"role": "assistant", "content": "a2"}, config=cfg, session_id="m2"))[0].seq
        == 4
    )
    assert contents(raw(f"file://{tmp_path}", "m2")) == ["q1", "a1", "q2", "a2"]
    from ctxlife.api import clear_hosts

    clear_hosts()


def test_responses_items_are_refused_with_the_session_that_converts_them(store_url: str) -> None:
    # What the Agents SDK's Runner saves: stored as they are, the next messages() call would fail.
    call = {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"}
    with ctxlife.Session("sdk", config(store_url, "snapshot_restore")) as session:
        with pytest.raises(InvalidMessagesError, match="AgentsSession"):
            session.add_items([{"role": "user", "content": "hi"}, call])
        assert raw(store_url, "sdk") == []  # nothing of the refused batch is recorded

    async def main() -> None:
        async with ctxlife.AsyncSession("sdk", config(store_url, "snapshot_restore")) as session:
            with pytest.raises(InvalidMessagesError, match="openai_agents"):
                await session.add_items([call])
            await session.add_items([{"role": "user", "content": "plain chat messages still go in"}])

    asyncio.run(main())
    assert [m["content"] for m in raw(store_url, "sdk")] == ["plain chat messages still go in"]


def test_async_session_edits_removes_erases_and_clears_like_session(store_url: str) -> None:
    async def main() -> list[str]:
        session = ctxlife.AsyncSession("edits", config(store_url), context_window=8000)
        await session.close()  # never used: nothing to close, nothing opened
        assert repr(session) == "AsyncSession('edits')"
        async with session:
            added = await session.add(user("q1"), assistant("a1"), user("q2"), assistant("a2"))
            assert [r.seq for r in added] == [1, 2, 3, 4]
            assert [r.seq for r in await session.records()] == [1, 2, 3, 4]
            edited = await session.edit(1, user("q1, corrected"))
            assert edited.op == "replace" and edited.target == 1
            removed = await session.remove(2)
            assert [(r.op, r.target) for r in removed] == [("remove", 2)]
            assert await session.pop() == assistant("a2")
            assert contents(await session.get_items()) == ["q1, corrected", "q2"]
            await session.add(user("my card is 4111 1111"))
            assert await session.erase_matching("4111 1111") == [8]
            assert await session.erase(3) == [3]
            items = contents(await session.get_items())
            await session.clear()
            assert await session.get_items() == []
            return items

    assert asyncio.run(main()) == ["q1, corrected"]
    assert raw(store_url, "edits") == []  # clear() deleted the whole session
    assert repr(ctxlife.AsyncSession("s", view="planner")) == "AsyncSession('s', view='planner')"


def test_remove_takes_messages_out_of_the_conversation_and_keeps_them_in_the_log(store_url: str) -> None:
    with ctxlife.Session("rm", config(store_url), context_window=8000) as session:
        session.add(user("q1"), assistant("a1"), user("q2"), assistant("a2"))
        removed = session.remove(2, 3)
        assert [(r.seq, r.op, r.target) for r in removed] == [(5, "remove", 2), (6, "remove", 3)]
        assert contents(session.get_items()) == ["q1", "a2"]
        assert [r.seq for r in session.records()] == [1, 4]
    assert contents(raw(store_url, "rm"))[:4] == ["q1", "a1", "q2", "a2"]  # the log keeps them (until erase)


def test_a_session_names_its_id_view_and_store(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    with ctxlife.Session("u42", config(url)) as session:
        assert repr(session) == f"Session('u42', store={url!r})"
    with ctxlife.Session("u42", config(url), view="planner") as session:
        assert repr(session) == f"Session('u42', view='planner', store={url!r})"


def test_a_turn_that_would_make_the_conversation_invalid_is_refused_and_not_recorded(store_url: str) -> None:
    with ctxlife.Session("bad", config(store_url), context_window=8000) as session:
        session.prepare(user("q"))
        session.record_reply("a")
        orphan = {"role": "tool", "tool_call_id": "call_9", "content": "result"}
        with pytest.raises(InvalidMessagesError) as refused:
            session.prepare(orphan)
        assert str(refused.value) == (
            "session 'bad': the new turn would make the conversation invalid (orphan_tool_result: tool result "
            "without a preceding assistant tool call); nothing was recorded. Send tool results right after the "
            "assistant message that made the calls"
        )
        assert contents(session.get_items()) == ["q", "a"]
    assert contents(raw(store_url, "bad")) == ["q", "a"]


def test_get_items_with_a_limit_gives_the_latest_items(store_url: str) -> None:
    with ctxlife.Session("lim", config(store_url), context_window=8000) as session:
        session.add(user("q1"), assistant("a1"), user("q2"), assistant("a2"))
        assert session.get_items(limit=1) == [assistant("a2")]
        assert contents(session.get_items(limit=3)) == ["a1", "q2", "a2"]
        assert contents(session.get_items(limit=10)) == ["q1", "a1", "q2", "a2"]

    async def latest() -> list[dict[str, Any]]:
        async with ctxlife.AsyncSession("lim", config(store_url), context_window=8000) as again:
            return await again.get_items(limit=1)

    assert asyncio.run(latest()) == [assistant("a2")]


def test_what_is_not_a_message_is_refused_naming_its_position(tmp_path: Path) -> None:
    with ctxlife.Session("pos", config(f"file://{tmp_path}"), context_window=8000) as session:
        with pytest.raises(InvalidMessagesError) as refused:
            session.prepare(user("fine"), "not a message")  # type: ignore[arg-type]
        assert str(refused.value) == (
            "message 1 must be a message dict (e.g. {'role': 'user', 'content': '...'}), got str; "
            "for a model's reply object use record_reply()"
        )
        session.add(user("q"))
        with pytest.raises(InvalidMessagesError, match=r"^message 0 must be a message dict .*got str"):
            session.edit(1, "not a message")  # type: ignore[arg-type]
        responses_call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
        with pytest.raises(InvalidMessagesError) as refused:
            session.add_items([user("x"), responses_call])
        assert str(refused.value) == (
            "add_items: item 1[0] is not an OpenAI chat or Anthropic Messages message: it looks like OpenAI "
            "Responses API input items; send OpenAI chat messages (role/content) to ctxlife. For the OpenAI "
            "Agents SDK's Runner.run(session=...), use ctxlife.integrations.openai_agents.AgentsSession (pip "
            "install 'ctxlife[agents]'): it converts Responses items and manages each model call"
        )
        with pytest.raises(InvalidMessagesError, match=r"^message 0 must be a message dict .*got int"):
            session.add_items([42])  # type: ignore[list-item]
        with pytest.raises(InvalidMessagesError) as refused:  # add() too: every later call would fail
            session.add(user("x"), responses_call)
        assert str(refused.value).startswith(
            "session 'pos' add()[1] is not an OpenAI chat or Anthropic Messages message: it looks like OpenAI "
            "Responses API input items"
        )
        assert contents(session.get_items()) == ["q"]  # nothing of the refused calls recorded


def test_an_edit_or_add_every_later_call_would_send_as_an_invalid_list_is_refused(tmp_path: Path) -> None:
    """What edit() and add() record is sent on every later call: a message of no known shape, or an
    edit that breaks a tool call's unit, is refused and nothing is written (the session stays usable)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    result = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    with ctxlife.Session("Zoë/42", config(f"file://{tmp_path}"), context_window=8000) as session:
        session.add(user("q"), {"role": "assistant", "content": None, "tool_calls": [call]}, result, assistant("a"))
        refusals = {
            "edit(1)[0] has the unknown role 'bogus'": lambda: session.edit(1, {"role": "bogus", "content": "q"}),
            "edit(1)[0] has int content (3)": lambda: session.edit(1, {"role": "user", "content": 3}),
            "edit(1) would make the conversation invalid (orphan_tool_result": lambda: session.edit(1, result),
            "edit(2) would make the conversation invalid (orphan_tool_result": lambda: session.edit(2, user("hm")),
            "add()[1] has the unknown role 'robot'": lambda: session.add(user("x"), {"role": "robot", "content": "y"}),
        }
        for words, refused in refusals.items():
            with pytest.raises(InvalidMessagesError) as info:
                refused()
            assert words in str(info.value), str(info.value)
        with pytest.raises(InvalidMessagesError) as info:
            session.edit(3, assistant("no result"))
        assert str(info.value).endswith(  # (the session named by its store key: the test's id is not one)
            " edit(3) would make the conversation invalid (tool_call_without_result: 1 of 1 tool "
            "call(s) have no result (ids ['c1'])); nothing was recorded"
        )
        assert contents(session.get_items()) == ["q", "None", "r", "a"]  # nothing of them written
        session.edit(4, assistant("a, edited"))
        session.add({"role": "user", "content": b"bytes are text once stored"})  # (recorded in a JSON-safe form)
        sent = session.prepare(user("next"))
    assert contents(sent)[-3:] == ["a, edited", "bytes are text once stored", "next"]


def test_a_reply_of_no_known_shape_is_refused_and_the_session_goes_on(tmp_path: Path) -> None:
    bot = {"role": "bot", "content": "x"}  # (a LangChain-style role)
    with ctxlife.Session("reply", config(f"file://{tmp_path}"), context_window=8000) as session:
        session.prepare(user("q"))
        with pytest.raises(InvalidMessagesError, match=r"^session 'reply' record_reply\(\)\[0\] .*'bot' role"):
            session.record_reply(bot)
        for reply in (bot, [user("q"), bot]):  # the host's record_reply: a message, or the list it ends
            with pytest.raises(InvalidMessagesError, match=r"^record_reply\[0\] .*'bot' role"):
                session.host.record_reply(reply, session_id="reply")
        session.record_reply("a")
        assert contents(session.prepare(user("next"))) == ["q", "a", "next"]


def test_a_number_the_session_does_not_hold_names_the_callers_id_and_the_command_that_lists_them(
    tmp_path: Path,
) -> None:
    with ctxlife.Session("Zoë/42", config(f"file://{tmp_path}"), context_window=8000) as session:
        session.add(user("q"))
        with pytest.raises(StoreError) as info:
            session.edit(9, user("x"))
    assert str(info.value) == (
        "session 'Zoë/42' view '' has no message at sequence number(s) [9]; "
        "list them with `ctxlife session export 'Zoë/42' --all`"
    )


def test_a_turn_in_another_format_than_the_configured_one_is_refused(tmp_path: Path) -> None:
    cfg = config(f"file://{tmp_path}", message_format="anthropic")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with ctxlife.Session("fmt", cfg, context_window=8000) as session:
        with pytest.raises(InvalidMessagesError) as refused:
            session.prepare(user("q"), {"role": "assistant", "content": None, "tool_calls": [call]})
        assert str(refused.value) == (
            "session 'fmt'[1] is an OpenAI chat message but message_format is 'anthropic'; "
            'set message_format = "openai" (or "auto") or convert the list'
        )
        assert session.get_items() == []


def test_an_add_edit_or_reply_in_another_format_than_the_configured_one_is_refused(tmp_path: Path) -> None:
    # Recorded, an OpenAI tool call in a session configured for Anthropic Messages made every later
    # call fail (each call checks the whole list against message_format): refused, nothing written.
    cfg = config(f"file://{tmp_path}", message_format="anthropic")
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    with ctxlife.Session("fmt", cfg, context_window=8000) as session:
        session.add(user("q"), assistant("a"))
        refusals = {
            "session 'fmt' add()[1] is an OpenAI chat message but message_format is 'anthropic'": lambda: session.add(
                user("x"), call
            ),
            "session 'fmt' edit(2)[0] is an OpenAI chat message but message_format is 'anthropic'": lambda: (
                session.edit(2, call)
            ),
            "session 'fmt' record_reply()[0] is an OpenAI chat message but message_format is 'anthropic'": lambda: (
                session.record_reply(call)
            ),
        }
        for words, refused in refusals.items():
            with pytest.raises(InvalidMessagesError) as info:
                refused()
            assert str(info.value).startswith(words), str(info.value)
        assert contents(session.get_items()) == ["q", "a"]  # nothing of them written
        assert contents(session.prepare(user("next"))) == ["q", "a", "next"]  # and the session goes on


def test_with_auto_a_message_in_the_other_format_than_the_conversations_is_refused(tmp_path: Path) -> None:
    # message_format auto: a session whose conversation holds OpenAI tool calls took an Anthropic tool_use
    # reply and tool_result, and every later call failed ("one list must use one format"): refused now.
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "weather", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "rain"}]}
    cfg = config(f"file://{tmp_path}")
    assert cfg.message_format == "auto"
    with ctxlife.Session("mix", cfg, context_window=8000) as session:
        session.add(user("weather?"), {"role": "assistant", "content": None, "tool_calls": [call]})
        session.add({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        refusals = {
            "session 'mix' record_reply()[0] is an Anthropic Messages message": lambda: session.record_reply(use),
            "session 'mix' add()[1] is an Anthropic Messages message": lambda: session.add(assistant("ok"), use),
            "session 'mix' edit(2)[0] is an Anthropic Messages message": lambda: session.edit(2, use),
        }
        for words, refused in refusals.items():
            with pytest.raises(InvalidMessagesError) as info:
                refused()
            assert str(info.value).startswith(words), str(info.value)
            assert "conversation is in OpenAI chat format" in str(info.value)
        assert [m["role"] for m in session.get_items()] == ["user", "assistant", "tool"]  # nothing written
        assert contents(session.prepare(user("thanks")))[-2:] == ["sunny", "thanks"]  # the session goes on
    # A new object (nothing read yet) reads the conversation once to tell its format.
    with ctxlife.Session("mix", cfg, context_window=8000) as fresh:
        with pytest.raises(InvalidMessagesError, match="conversation is in OpenAI chat format"):
            fresh.add(result)
    # A conversation of plain text takes either format, and keeps to the one it then has.
    with ctxlife.Session("plain", cfg, context_window=8000) as session:
        session.add(user("weather?"), use, result)
        assert session.prepare(user("and tomorrow?"))[-1] == user("and tomorrow?")
        with pytest.raises(InvalidMessagesError, match="conversation is in Anthropic Messages format"):
            session.record_reply({"role": "assistant", "content": None, "tool_calls": [call]})


def test_a_tool_result_that_answers_no_recorded_call_is_refused(tmp_path: Path) -> None:
    # Recorded, it was sent on every later call, and a provider refuses a tool result with no call before it.
    with ctxlife.Session("orphan", config(f"file://{tmp_path}"), context_window=8000) as session:
        session.prepare(user("hi"))
        for where, bad in (
            ("record_reply()[0]", lambda: session.record_reply({"role": "tool", "tool_call_id": "c9", "content": "x"})),
            ("add()[1]", lambda: session.add(assistant("a"), {"role": "tool", "tool_call_id": "c9", "content": "x"})),
        ):
            with pytest.raises(InvalidMessagesError) as info:
                bad()
            assert str(info.value).startswith(
                f"session 'orphan' {where} is a tool result that answers no call recorded before it"
            ), str(info.value)
        assert contents(session.get_items()) == ["hi"]  # nothing written
        # A call and its result, recorded one after the other, are a tool loop: taken.
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        session.record_reply({"role": "assistant", "content": None, "tool_calls": [call]})
        session.add({"role": "tool", "tool_call_id": "c1", "content": "done"})
        assert contents(session.prepare(user("next")))[-2:] == ["done", "next"]


def test_the_results_of_a_call_with_many_are_taken_however_many_came_before(tmp_path: Path) -> None:
    # The turn was checked against the conversation's last 16 messages only: with 17 results recorded, the
    # call was cut off and the last results were refused as answering no call.
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "order", "arguments": "{}"}} for i in range(20)]
    results = [{"role": "tool", "tool_call_id": f"c{i}", "content": f"order {i} shipped"} for i in range(20)]
    with ctxlife.Session("many", config(f"file://{tmp_path}"), context_window=32000) as session:
        session.prepare(user("look up orders 0-19"))
        session.record_reply({"role": "assistant", "content": None, "tool_calls": calls})
        session.add(*results[:17])
        sent = session.prepare(*results[17:])
        assert [m["content"] for m in sent[-3:]] == ["order 17 shipped", "order 18 shipped", "order 19 shipped"]
    with ctxlife.Session("many2", config(f"file://{tmp_path}"), context_window=32000) as session:
        session.prepare(user("look up orders 0-19"))
        session.record_reply({"role": "assistant", "content": None, "tool_calls": calls})
        for result in results:
            session.add(result)
        assert len(session.prepare()) == 22


def test_errors_and_repr_name_the_session_by_the_callers_id(tmp_path: Path) -> None:
    with ctxlife.Session("Zoë/客户-42", config(f"file://{tmp_path}"), context_window=8000) as session:
        assert session.session_id != "Zoë/客户-42"  # the store key
        assert repr(session).startswith("Session('Zoë/客户-42', store=")
        with pytest.raises(InvalidMessagesError, match=r"^session 'Zoë/客户-42' add\(\)\[0\] "):
            session.add({"role": "bot", "content": "x"})
        with pytest.raises(InvalidMessagesError, match=r"^session 'Zoë/客户-42': the new turn"):
            session.prepare({"role": "tool", "tool_call_id": "z", "content": "x"})
        with pytest.raises(ctxlife.CtxlifeError, match=r"^erase of session 'Zoë/客户-42': the pattern"):
            session.erase_matching("")
    assert repr(ctxlife.AsyncSession("Zoë/客户-42")) == "AsyncSession('Zoë/客户-42')"


def test_the_hosts_record_reply_refuses_a_message_in_another_format_than_the_configured_one(tmp_path: Path) -> None:
    # It recorded it, and every later call of the session failed against message_format.
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}
    cfg = config(f"file://{tmp_path}", message_format="openai")
    with ctxlife.Session("hostfmt", cfg, context_window=8000) as session:
        session.prepare(user("q"))
        for reply in (use, [user("q"), use]):
            with pytest.raises(InvalidMessagesError) as info:
                session.host.record_reply(reply, session_id="hostfmt")
            assert str(info.value).startswith(
                "record_reply[0] is an Anthropic Messages message but message_format is 'openai'"
            )
        assert contents(session.get_items()) == ["q"]
        session.record_reply("a")
        assert contents(session.prepare(user("next"))) == ["q", "a", "next"]


def test_add_records_edit_and_remove_act_on_the_sessions_own_view(store_url: str) -> None:
    cfg = config(store_url)
    with (
        ctxlife.Session("lanes", cfg, view="planner", context_window=8000) as planner,
        ctxlife.Session("lanes", cfg, context_window=8000) as default,
    ):
        default.add(user("the default view's question"))
        added = planner.add(user("plan it"), assistant("step 1"))
        assert [r.view for r in added] == ["planner", "planner"]
        assert [r.message for r in planner.records()] == [user("plan it"), assistant("step 1")]
        assert [r.message for r in default.records()] == [user("the default view's question")]
        edited = planner.edit(added[1].seq, assistant("step 1, revised"))
        assert edited.view == "planner"
        assert contents(planner.get_items()) == ["plan it", "step 1, revised"]
        assert contents(default.get_items()) == ["the default view's question"]
        assert [r.view for r in planner.remove(added[0].seq)] == ["planner"]
        assert contents(planner.get_items()) == ["step 1, revised"]


def test_clear_and_erase_forget_what_the_hosts_manage_recorded(tmp_path: Path) -> None:
    # The host's manage() keeps what it recorded of the app's list: after a delete it records the list
    # again from the start; after an erase it never records an erased message the list still holds.
    url = f"file://{tmp_path}"
    host = ctxlife.Host(config(url, "snapshot_restore"), context_window=8000, session_id="app")
    try:
        live = [user("hello"), assistant("hi")]
        host.manage(live)
        with ctxlife.Session("app", host=host) as session:
            session.clear()
        live.append(user("card 4111 1111, please"))
        host.manage(live)
        assert contents(raw(url, "app")) == ["hello", "hi", "card 4111 1111, please"]
        with ctxlife.Session("app", host=host) as session:
            assert session.erase_matching("4111") == [3]
        live += [assistant("Done."), user("and my IBAN DE89 3704")]
        host.manage(live)
        with ctxlife.Session("app", host=host) as session:
            assert session.erase(6) == [6]  # (the erase of 3 wrote a remove record: 4)
        live += [assistant("Noted."), user("bye")]
        host.manage(live)
        with ctxlife.Session("app", host=host) as session:
            assert contents(session.get_items()) == ["hello", "hi", "Done.", "Noted.", "bye"]
    finally:
        host.close()


@pytest.mark.parametrize("how", ["clear", "erase"])
def test_clear_and_erase_delete_the_sessions_recall_index_in_index_dir(tmp_path: Path, how: str) -> None:
    index_dir = tmp_path / "indexes"
    cfg = config(f"file://{tmp_path / 'store'}", "snapshot_restore", "recall", recall={"index_dir": str(index_dir)})
    for sid in ("kept", "gone"):
        with ctxlife.Session(sid, cfg, system="sys", context_window=8000) as session:
            session.prepare(user("My locker code is 4417."))
            session.record_reply("Noted.")
            for i in range(3):
                session.prepare(user(f"Where did I put it, question {i}?"))
                session.record_reply("In your notes.")
            assert (index_dir / f"{sid}.sqlite").exists()  # precondition: recall kept an index there
            if sid == "gone":
                if how == "clear":
                    session.clear()
                else:
                    session.erase(1)
                assert not (index_dir / "gone.sqlite").exists()
    assert (index_dir / "kept.sqlite").exists()


class RefusingSnapshots(DelegatingStore):
    """A real store whose snapshot writes fail (a full disk), with an error longer than an event keeps."""

    def save_snapshot(self, snapshot: Any) -> None:
        raise StoreError("snapshot write refused: " + "no space left on device; " * 20)


def test_a_snapshot_that_cannot_be_written_is_reported_and_the_turn_kept(tmp_path: Path) -> None:
    inner = f"file://{tmp_path}"
    cause = "StoreError: snapshot write refused: " + "no space left on device; " * 20
    always = {"rounds": 1, "pin_first_user": False, "always": True}
    with sessions.REGISTRY.registered("refusing-snapshots", lambda url: RefusingSnapshots(open_store(inner))):
        cfg = config("refusing-snapshots://x", "truncate_last_n", truncate_last_n=always)
        with ctxlife.Session("full", cfg, view="desk", context_window=8000) as session:
            session.prepare(user("q0"))
            session.record_reply("a0")
            with capture_logs() as logs:
                sent = session.prepare(user("q1"))  # truncated to the last round: a snapshot is due
            assert contents(sent) == ["q1"]
            report = session.last_report
            assert report is not None and "truncate_last_n" in report.acted
            assert report.failures == [StrategyFailure("session", "before_llm_call", cause)]
            failed = [e for e in logs if e["event"] == "ctxlife.snapshot_save_failed"]
            assert failed == [
                {
                    "event": "ctxlife.snapshot_save_failed",
                    "log_level": "error",
                    "session_id": "full",
                    "view": "desk",
                    "error": cause[:300],
                    "hint": "the turn is recorded (do not send it again); the next call compacts from the raw history",
                }
            ]
    assert contents(raw(inner, "full")) == ["q0", "a0", "q1"]  # the turn is recorded


class _Recaller:
    """Puts a recall block before the latest message, as recall does: the conversation is unchanged."""

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        block = mark_inserted({"role": "user", "content": f"{RECALL_PREFIX}: the locker code is 4417"}, "recall")
        ctx.messages.insert(len(ctx.messages) - 1, block)


class _Summarizer:
    """Replaces everything before the latest message with a summary, as a compaction does."""

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        items = [m for m in ctx.messages if m.get("role") != "system" or is_summary(m)]
        if len(items) > 2:
            ctx.messages[:] = [*ctx.messages[:1], summary_message(items, "the user asked twice"), items[-1]]


@pytest.mark.parametrize("system", [SYSTEM, None], ids=["system-prompt", "no-system-prompt"])
def test_a_recall_block_alone_is_sent_but_neither_saved_nor_an_item(store_url: str, system: str | None) -> None:
    with ctxlife.Session("rb", config(store_url), system=system, context_window=8000, plugins=[_Recaller()]) as session:
        session.prepare(user("q0"))
        session.record_reply("a0")
        sent = session.prepare(user("what was the code?"))
        assert contents(sent)[-2].startswith(RECALL_PREFIX)  # precondition: the block was sent
        assert contents(session.get_items()) == ["q0", "a0", "what was the code?"]
    with open_store(store_url) as store:
        assert store.load_snapshot("rb") is None  # the conversation did not change: nothing to save


def test_a_summary_ctxlife_wrote_is_an_item_of_the_restored_conversation(store_url: str) -> None:
    cfg = config(store_url)
    with ctxlife.Session("sum", cfg, system=SYSTEM, context_window=8000, plugins=[_Summarizer()]) as session:
        for i in range(2):
            session.prepare(user(f"q{i}"))
            session.record_reply(f"a{i}")
        sent = session.prepare(user("q2"))
        assert is_summary(sent[1]) and contents(sent)[2] == "q2"  # precondition: compacted and saved
        items = session.get_items()
    with ctxlife.Session("sum", cfg, system="Another prompt.", context_window=8000) as later:
        assert later.get_items() == items
    assert len(items) == 2 and is_summary(items[0]) and items[1] == user("q2")


def test_a_user_turn_before_a_calls_result_is_refused_and_not_recorded(store_url: str) -> None:
    # The reply's call waits for its result: a user turn instead would send the model a call without
    # its result (a provider refuses the list). It was recorded and sent before (the same problem
    # before and after the turn: only a count of problems was compared).
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    with ctxlife.Session("wait", config(store_url), context_window=8000) as session:
        session.prepare(user("Where is order 17?"))
        session.record_reply({"role": "assistant", "content": None, "tool_calls": [call]})
        with pytest.raises(InvalidMessagesError) as refused:
            session.prepare(user("never mind"))
        assert str(refused.value) == (
            "session 'wait': the new turn would make the conversation invalid (tool_call_without_result: 1 of 1 "
            "tool call(s) have no result (ids ['call_1'])); nothing was recorded. Send tool results right after "
            "the assistant message that made the calls"
        )
        result = {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}
        assert contents(session.prepare(result)) == ["Where is order 17?", "None", "shipped"]  # its result: sent
        assert contents(session.prepare(user("thanks"))) == ["Where is order 17?", "None", "shipped", "thanks"]
    assert contents(raw(store_url, "wait")) == ["Where is order 17?", "None", "shipped", "thanks"]


class _Spy:
    """Notes the session, view and persistence flag each call's strategies are given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str, bool]] = []

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        self.seen.append((ctx.session_id, ctx.view, ctx.recorded_by_caller))


def test_strategies_see_the_sessions_id_and_view_on_a_shared_host(tmp_path: Path) -> None:
    spy = _Spy()
    host = ctxlife.Host(config(f"file://{tmp_path}"), context_window=8000, session_id="the-hosts", plugins=[spy])
    try:
        with ctxlife.Session("u7", host=host, view="planner") as session:
            session.prepare(user("plan it"))
    finally:
        host.close()
    # the Session restored and recorded the list itself: strategies leave persistence alone
    assert spy.seen == [("u7", "planner", True)]


def test_a_call_without_a_new_turn_checks_the_stored_list_against_message_format(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    # (recorded by a writer whose message_format is the default, auto: the add is accepted there)
    with ctxlife.Session("fmt2", config(f"file://{tmp_path}"), context_window=8000) as other:
        other.add(user("q"), {"role": "assistant", "content": None, "tool_calls": [call]})
    cfg = config(f"file://{tmp_path}", message_format="anthropic")
    with ctxlife.Session("fmt2", cfg, context_window=8000) as session:
        with pytest.raises(InvalidMessagesError) as refused:
            session.messages()
        assert str(refused.value).startswith(
            "session 'fmt2'[1] is an OpenAI chat message but message_format is 'anthropic'"
        )


def test_a_turn_leaving_one_of_two_calls_without_its_result_is_refused(store_url: str) -> None:
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"order": {i}}}'}}
        for i in (1, 2)
    ]
    with ctxlife.Session("two", config(store_url), context_window=8000) as session:
        session.prepare(user("Where are orders 1 and 2?"))
        session.record_reply({"role": "assistant", "content": None, "tool_calls": calls})
        session.add({"role": "tool", "tool_call_id": "call_1", "content": "order 1 shipped"})
        with pytest.raises(InvalidMessagesError, match=r"tool_call_without_result: 1 of 2 .*\['call_2'\]"):
            session.prepare(user("and?"))
        session.prepare({"role": "tool", "tool_call_id": "call_2", "content": "order 2 packed"})
    assert contents(raw(store_url, "two"))[-2:] == ["order 1 shipped", "order 2 packed"]


def test_a_call_left_without_its_result_earlier_does_not_block_later_turns(store_url: str) -> None:
    # An old call never answered (a crashed tool, recorded by add) is a problem of the history, not of
    # the turn: turns after it are checked for what they add, and the latest call's result goes in.
    def call(cid: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        }

    with ctxlife.Session("old", config(store_url), context_window=8000) as session:
        session.add(user("Where is order 17?"), call("call_1"), user("forget it"))
        session.prepare(user("where is 18?"))
        session.record_reply(call("call_2"))
        session.prepare({"role": "tool", "tool_call_id": "call_2", "content": "18 shipped"})
        session.prepare(user("thanks"))
    assert contents(raw(store_url, "old"))[-2:] == ["18 shipped", "thanks"]


def test_a_session_builds_its_host_with_its_model_id_and_summary_model(tmp_path: Path) -> None:
    def summarize(messages: list[dict[str, Any]], max_tokens: int) -> str:
        return "summary"

    with ctxlife.Session("u42", config(f"file://{tmp_path}"), model="gpt-4o-mini", summary_model=summarize) as session:
        assert session.last_report is None  # no call yet
        host = session.host
        assert (host.model, host.session_id, host.summary_model is not None) == ("gpt-4o-mini", "u42", True)
    with ctxlife.Session("u42", config(f"file://{tmp_path}")) as plain:
        assert plain.host.summary_model is None


class CountingCloses(DelegatingStore):
    closed = 0

    def close(self) -> None:
        CountingCloses.closed += 1
        super().close()


def test_a_session_closes_the_host_it_made_once_and_never_a_shared_one(tmp_path: Path) -> None:
    inner = f"file://{tmp_path}"
    CountingCloses.closed = 0
    with sessions.REGISTRY.registered("counting-closes", lambda url: CountingCloses(open_store(inner))):
        session = ctxlife.Session("own", config("counting-closes://x"))
        session.close()
        session.close()  # idempotent
        assert CountingCloses.closed == 1
        host = ctxlife.Host(config("counting-closes://x"), context_window=8000)
        with ctxlife.Session("shared", host=host):
            pass
        assert CountingCloses.closed == 1  # the caller's host stays open
        host.close()
        assert CountingCloses.closed == 2


class _RestoreRedactor:
    """Masks a card number only where a restored conversation leaves the store (another path keeps it)."""

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx: ctxlife.TextContext) -> None:
        if ctx.where == "restore":
            ctx.text = ctx.text.replace("4111 1111", "[card]")


def test_a_restored_conversation_is_filtered_as_where_restore(tmp_path: Path) -> None:
    with ctxlife.Session("r", config(f"file://{tmp_path}"), context_window=8000, plugins=[_RestoreRedactor()]) as s:
        s.add(user("my card is 4111 1111"), assistant("noted"))
        assert contents(s.get_items()) == ["my card is [card]", "noted"]
        assert contents(s.prepare(user("thanks"))) == ["my card is [card]", "noted", "thanks"]
    assert contents(raw(f"file://{tmp_path}", "r"))[0] == "my card is 4111 1111"  # the store keeps it as given


def test_the_results_of_a_call_that_opens_the_conversation_are_taken_whatever_their_number(tmp_path: Path) -> None:
    # The check reaches back from the last 16 messages to the call their first result answers, down to the
    # conversation's first message (here the call itself: no user turn before it).
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "order", "arguments": "{}"}} for i in range(20)]
    results = [{"role": "tool", "tool_call_id": f"c{i}", "content": f"order {i} shipped"} for i in range(20)]
    with ctxlife.Session("opens", config(f"file://{tmp_path}"), context_window=32000) as session:
        session.add({"role": "assistant", "content": None, "tool_calls": calls}, *results[:18])
        assert len(session.get_items()) == 19  # the precondition: an odd count, the call at the first place
        session.add(results[18])
        session.add(results[19])
        assert [m["content"] for m in session.get_items()[-3:]] == [f"order {i} shipped" for i in (17, 18, 19)]


def test_the_checks_confirm_on_a_fresh_read_what_another_writer_changed(tmp_path: Path) -> None:
    cfg = config(f"file://{tmp_path}")
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]}
    with (
        ctxlife.Session("two", cfg, context_window=8000) as mine,
        ctxlife.Session("two", cfg, context_window=8000) as other,
    ):
        # A tool result whose call another writer recorded after this object last read the conversation.
        mine.prepare(user("weather?"))
        other.record_reply({"role": "assistant", "content": None, "tool_calls": [call]})
        mine.add({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        assert contents(mine.get_items()) == ["weather?", "None", "sunny"]
        # The conversation (OpenAI, as this object knows it) replaced by another writer with an Anthropic one.
        with pytest.raises(InvalidMessagesError) as info:
            mine.add(use)  # the precondition: refused while the conversation is in OpenAI format
        assert str(info.value).endswith(
            "one conversation must use one format: convert the message "
            "(every later call would send both and fail); nothing was recorded"
        )
        other.clear()
        other.add(user("weather?"), {**use, "content": [{**use["content"][0], "id": "t0"}]})
        other.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "rain"}]})
        mine.add(use)
        assert [m["role"] for m in mine.get_items()] == ["user", "assistant", "user", "assistant"]


def test_a_refused_tool_result_says_what_to_record_first(tmp_path: Path) -> None:
    with ctxlife.Session("first", config(f"file://{tmp_path}"), context_window=8000) as session:
        with pytest.raises(InvalidMessagesError) as info:
            session.add({"role": "tool", "tool_call_id": "c9", "content": "x"})
        assert str(info.value).endswith(
            "nothing was recorded. Record the assistant message that made the call first (record_reply), "
            "then its results"
        )
