"""Session ids from anywhere (a LangGraph thread id, an e-mail, an Agents SDK session id) map to store
keys safely and reversibly, and work end to end on every store; what cannot map fails at the call."""

from __future__ import annotations

import asyncio
import html
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import SessionIdError
from ctxlife.sessions import (
    MAX_SESSION_ID_LENGTH,
    SessionKey,
    open_store,
    original_session_id,
    session_key,
    validate_session_id,
)
from ctxlife.sessions.ids import KEY_PREFIX

# manage() with snapshot_restore warns that task_end is not called: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")

FRAMEWORK_IDS = [
    "slack:C01ABCDEF:1700000000.123456",
    "alice@example.com",
    "tenant/42/thread 7",
    "Zoë's chat ☕",
    "会話-1",
    "..",
]


@pytest.mark.parametrize("sid", ["u42", "user-42", "u42.chat_1", "A" * MAX_SESSION_ID_LENGTH])
def test_valid_ids_are_their_own_keys(sid: str) -> None:
    assert session_key(sid) == sid and original_session_id(sid) == sid


@pytest.mark.parametrize("sid", FRAMEWORK_IDS)
def test_other_ids_map_to_a_valid_key_and_back(sid: str) -> None:
    key = session_key(sid)
    assert key != sid and key.startswith(KEY_PREFIX)
    assert validate_session_id(key) == key
    assert original_session_id(key) == sid
    assert session_key(key) == key  # a key already made (a SessionKey) is its own key
    assert session_key(str(key)) != key  # the same text as a plain str is an id: it is mapped


def test_a_valid_id_that_looks_encoded_does_not_collide() -> None:
    assert session_key("_-x") != "_-x" and original_session_id(session_key("_-x")) == "_-x"
    assert session_key("x") != session_key("_-x")


def test_an_id_holding_a_lone_surrogate_maps_back_to_itself() -> None:
    """A thread id from JSON may hold a lone surrogate ("\\ud800"): its key decodes back to it (make mutate,
    scope ids: no test failed when the key was decoded without surrogatepass)."""
    sid = "chat-\ud800-7"
    key = session_key(sid)
    assert validate_session_id(key) == key and original_session_id(key) == sid


def test_a_prefixed_key_no_id_maps_to_is_shown_as_it_is() -> None:
    """``_-abc`` is no id's key ("abc" is its own key): shown as itself, never as another session's id
    (make mutate, scope ids: no test failed when such a key was decoded to "abc")."""
    assert session_key("abc") == "abc"
    assert original_session_id(KEY_PREFIX + "abc") == KEY_PREFIX + "abc"
    # "A " escaped another way than session_key escapes it: not its key, so not shown as "A "
    assert session_key("A ") == KEY_PREFIX + "A_20"
    assert original_session_id(KEY_PREFIX + "_41_20") == KEY_PREFIX + "_41_20"


def test_an_id_spelled_as_another_ids_key_gets_a_key_of_its_own(store_url: str) -> None:
    # The attack of issue 38: sign up as the victim's key, read and write the victim's session.
    victim, attacker = "alice.smith@example.com", "_-alice_2Esmith_40example_2Ecom"
    assert session_key(victim) == attacker  # the key the earlier version gave both of them
    assert session_key(attacker) != session_key(victim)
    assert original_session_id(session_key(attacker)) == attacker
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url, "context_window": 100_000})
    with ctxlife.Session(victim, config=settings) as session:
        session.prepare({"role": "user", "content": "My IBAN is DE89370400440532013000."})
    with ctxlife.Session(attacker, config=settings) as session:
        sent = session.prepare({"role": "user", "content": "What is my IBAN?"})
    assert [m["content"] for m in sent] == ["What is my IBAN?"]


def test_keys_written_by_the_earlier_version_are_still_found(store_url: str) -> None:
    # Migration: the store holds keys as the earlier session_key wrote them; nothing is rewritten.
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url, "context_window": 100_000})
    old = {"alice@example.com": "_-alice_40example_2Ecom", "slack:C01": "_-slack_3AC01", "_-x": "_-_5F-x"}
    with open_store(store_url) as store:
        for sid, key in old.items():
            store.append(key, [{"role": "user", "content": f"hello from {sid}"}])
    for sid in old:
        with ctxlife.Session(sid, config=settings) as session:
            assert [m["content"] for m in session.get_items()] == [f"hello from {sid}"]
    with ctxlife.Session(SessionKey("_-alice_40example_2Ecom"), config=settings) as session:  # a key read back
        assert [m["content"] for m in session.get_items()] == ["hello from alice@example.com"]


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_distinct_strings_never_share_a_key(a: str, b: str) -> None:
    keys = []
    for text in (a, b, KEY_PREFIX + a):
        try:
            keys.append((text, session_key(text)))
        except SessionIdError as exc:
            assert "limit is" in str(exc)  # only too long a key is refused
    for text, key in keys:
        assert validate_session_id(key) == key
        assert original_session_id(key) == text
        assert session_key(text) == key  # the same id always gives the same key
    assert len({k for _, k in keys}) == len({t for t, _ in keys})


@given(st.text(min_size=1, max_size=40))
def test_any_string_maps_reversibly(text: str) -> None:
    try:
        key = session_key(text)
    except SessionIdError as exc:
        assert "limit is" in str(exc)  # only too long a key is refused
        return
    assert validate_session_id(key) == key
    assert original_session_id(key) == text
    assert session_key(original_session_id(key)) == key
    assert session_key(key) == key and session_key(SessionKey(str(key))) == key


@pytest.mark.parametrize("bad", ["", b"u42", 42, "x" * (MAX_SESSION_ID_LENGTH + 1), "日本" * 30])
def test_what_cannot_map_fails_loudly_at_the_call(bad: Any) -> None:
    with pytest.raises(SessionIdError):
        session_key(bad)
    with pytest.raises(SessionIdError):
        ctxlife.manage([{"role": "user", "content": "hi"}], session_id=bad, context_window=1000)
    with pytest.raises(SessionIdError):
        ctxlife.Session(bad)


@pytest.mark.parametrize("sid", FRAMEWORK_IDS[:4])
def test_sessions_with_such_ids_record_and_restore_on_every_store(store_url: str, sid: str) -> None:
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url, "context_window": 100_000})
    with ctxlife.Session(sid, config=settings) as session:
        session.prepare({"role": "user", "content": "My order is ORD-4242."})
        session.record_reply("Noted.")
    with ctxlife.Session(sid, config=settings) as again:  # a restart
        sent = again.prepare({"role": "user", "content": "What was my order?"})
    assert [m["content"] for m in sent] == ["My order is ORD-4242.", "Noted.", "What was my order?"]

    async def agents_sdk_style() -> list[dict[str, Any]]:
        async with ctxlife.AsyncSession(sid, config=settings) as asession:
            return await asession.get_items()

    assert [m["content"] for m in asyncio.run(agents_sdk_style())][:2] == ["My order is ORD-4242.", "Noted."]

    # manage() + record_reply() with the same id reach the same session.
    messages = [{"role": "user", "content": "Hello again"}]
    ctxlife.manage(messages, config=settings, session_id=sid, context_window=100_000)
    ctxlife.record_reply("Welcome back.", config=settings, session_id=sid)
    with open_store(store_url) as store:
        assert [original_session_id(i.session_id) for i in store.list_sessions()] == [sid]
        contents = [r.message["content"] for r in store.read_records(session_key(sid))]
    assert contents[:3] == ["My order is ORD-4242.", "Noted.", "What was my order?"]
    assert contents[-2:] == ["Hello again", "Welcome back."]


def test_the_session_command_shows_and_takes_the_original_id(store_url: str) -> None:
    from ctxlife.cli import build_parser
    from ctxlife.cli.session import run_session_command

    sid = "alice@example.com"
    with open_store(store_url) as store:
        store.append(session_key(sid), [{"role": "user", "content": "hi"}])

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["session", *argv, "--store", store_url])
        return run_session_command(args, None, stdout=out, stderr=err), out.getvalue(), err.getvalue()

    code, out, _ = run("list")
    assert code == 0 and sid in out and session_key(sid) not in out
    code, out, _ = run("export", sid, "--raw")
    assert code == 0 and '"hi"' in out
    code, out, _ = run("export", session_key(sid), "--raw")  # the key, as seen in a file name, works too
    assert code == 0 and '"hi"' in out
    code, _, err = run("show", "bob@example.com")
    assert code == 1 and "'bob@example.com'" in err
    code, out, _ = run("rm", sid)
    assert code == 0 and sid in out
    with open_store(store_url) as store:
        assert store.list_sessions() == []


def test_report_and_replay_take_and_show_the_original_id(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As `ctxlife session` does: the id the app used (or the store's key) names the session.
    from ctxlife.cli import main

    sid = "Zoë/客户-42"
    cfg = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url})
    with ctxlife.Session(sid, cfg, context_window=8000) as session:
        session.prepare({"role": "user", "content": "hello"})
        session.record_reply("hi")
    page = tmp_path / "report.html"
    for typed in (sid, session_key(sid)):
        assert main(["report", typed, "-o", str(page), "--store", store_url]) == 0
        assert f"ctxlife session report: {html.escape(sid)}" in page.read_text(encoding="utf-8")
        capsys.readouterr()
        assert main(["replay", "--session", typed, "--store", store_url]) == 0
        assert f"Session {sid!r}" in capsys.readouterr().out
