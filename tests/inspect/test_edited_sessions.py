"""Edited sessions (the event log): inspection, replay and report see the conversation as it stands now."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from inspect_sessions import CODE_NAME, HOSTILE, SESSION, fingerprint_store

import ctxlife
from ctxlife.inspection import next_context
from ctxlife.replay import replay_session
from ctxlife.report import render_html

if not hasattr(ctxlife.Session, "edit"):  # pragma: no cover - before the session event log (issue 20)
    pytest.skip("needs Session.edit/remove/erase (the session event log)", allow_module_level=True)

NEW_NAME = "REDWING-12"


@pytest.fixture
def edited(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored session with the code name corrected, the hostile turn removed and its reply erased."""
    with ctxlife.Session(SESSION, stored["settings"]) as session:
        records = session.records()
        said = next(r for r in records if r.message.get("role") == "user" and CODE_NAME in str(r.message["content"]))
        session.edit(said.seq, {"role": "user", "content": f"Project falcon's release code name is {NEW_NAME}."})
        hostile = [r.seq for r in records if HOSTILE in str(r.message.get("content"))]
        assert len(hostile) == 2
        session.remove(hostile[0])
        session.erase(hostile[1])
    return stored


def test_edits_reach_the_next_context_and_the_replay(edited: dict[str, Any], store_url: str, store) -> None:
    before = fingerprint_store(store_url)
    call = next_context(edited["settings"], store, SESSION, ask="What is falcon's release code name?")
    # simulated: the conversation as it stands now (the recorded calls show what was sent before the edits)
    result = replay_session(
        edited["settings"], store, SESSION, ask="What is falcon's release code name?", simulate=True
    )
    page = render_html(result)
    assert fingerprint_store(store_url) == before
    # The replay sends the conversation as it stands: the edited turn, never the superseded or removed ones.
    sent = json.dumps([f.composition.messages for f in result.frames])
    assert NEW_NAME in sent
    assert "window.__pwned" not in sent and "window.__pwned" not in page
    superseded = f"Project falcon's release code name is {CODE_NAME}; please remember it"
    assert not any(superseded in str(m["content"]) for f in result.frames for m in f.composition.messages)
    assert html.escape(superseded) not in page
    # The next call restores the edited conversation (the removed turn and the erased reply are gone from it).
    texts = " ".join(p.text for p in call.composition.parts if p.kind in ("recent", "recall"))
    assert "window.__pwned" not in texts
