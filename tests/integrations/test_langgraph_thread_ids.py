"""LangGraph thread ids as applications write them (``slack:C01:...``, e-mail addresses, paths, spaces,
non-ASCII) are sessions: recorded and restored by CtxlifeMiddleware on every store, shown by
``ctxlife session list`` as they were written."""

from __future__ import annotations

import io
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents", reason="the LangChain adapter needs pip install 'ctxlife[langchain]'")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402

from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations.langchain import CtxlifeMiddleware  # noqa: E402
from ctxlife.sessions import open_store, original_session_id  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fake_chat import ScriptedChatModel  # noqa: E402

THREAD_IDS = ["slack:C01ABCDEF:1700000000.123456", "alice@example.com", "org/acme/support 7", "Zoë ☕ 会話"]


@pytest.fixture(params=["file", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'sessions'}"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    return f"{request.getfixturevalue('redis_url')}?prefix=test-{uuid.uuid4().hex[:12]}:"


def test_thread_ids_with_any_characters_record_and_restore(store_url: str) -> None:
    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url})
    for n, thread_id in enumerate(THREAD_IDS):
        thread = {"configurable": {"thread_id": thread_id}}
        model = ScriptedChatModel(script=[f"Noted: order ORD-{n}."])
        agent = create_agent(model, [], middleware=[CtxlifeMiddleware(config)])
        agent.invoke({"messages": [HumanMessage(f"My order is ORD-{n}.")]}, thread)

        # A restart: a new middleware (new host) and agent; the caller sends only the new question.
        model2 = ScriptedChatModel(script=[f"Your order is ORD-{n}."])
        agent2 = create_agent(model2, [], middleware=[CtxlifeMiddleware(config)])
        agent2.invoke({"messages": [HumanMessage("What was my order?")]}, thread)
        assert [m.content for m in model2.calls[0]] == [
            f"My order is ORD-{n}.",
            f"Noted: order ORD-{n}.",
            "What was my order?",
        ]

    with open_store(store_url) as store:
        assert sorted(original_session_id(i.session_id) for i in store.list_sessions()) == sorted(THREAD_IDS)

    from ctxlife.cli import build_parser
    from ctxlife.cli.session import run_session_command

    out = io.StringIO()
    args = build_parser().parse_args(["session", "list", "--store", store_url])
    assert run_session_command(args, None, stdout=out, stderr=io.StringIO()) == 0
    listing = out.getvalue()
    # rich may wrap a long id in its column: look for each id's words.
    for thread_id in THREAD_IDS:
        assert all(part in listing for part in thread_id.split()), thread_id


def test_an_explicit_session_id_with_any_characters_works_too(tmp_path: Path) -> None:
    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    agent = create_agent(
        ScriptedChatModel(script=["ok"]), [], middleware=[CtxlifeMiddleware(config, session_id="bob@example.com")]
    )
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "ignored"}})
    with open_store(f"file://{tmp_path}") as store:
        assert [original_session_id(i.session_id) for i in store.list_sessions()] == ["bob@example.com"]


def test_an_empty_thread_id_fails_the_call_instead_of_recording_nothing(tmp_path: Path) -> None:
    from ctxlife.errors import SessionIdError

    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    agent = create_agent(ScriptedChatModel(script=["ok"]), [], middleware=[CtxlifeMiddleware(config)])
    with pytest.raises(SessionIdError):
        agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": ""}})
