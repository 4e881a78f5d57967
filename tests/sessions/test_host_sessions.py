"""One host shared by many sessions (the LangChain middleware's, one per process): per-session locking
and the bound on what it keeps.

A slow summary blocks only its own conversation: calls for one session run one at a time, calls for
different sessions at once. Past its bound, a host drops the state of its least recently used idle
session (its own, its strategies', the recorder's views of it); that session's next call reads the
store and behaves exactly as a fresh host would.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import ctxlife
from ctxlife import api, host_sessions
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.host_report import Report
from ctxlife.messages import strip_inserted_marks
from ctxlife.sessions import open_store
from ctxlife.sessions.recording import recorder_for
from ctxlife.testing import assistant, system, user

WINDOW = 4000
WAIT = 60  # seconds a test waits for something that happens at once unless the code is broken


def rounds(who: str, start: int, count: int) -> list[dict[str, Any]]:
    """Rounds of ``who``'s conversation, each naming a code the summary keeps."""
    out: list[dict[str, Any]] = []
    for r in range(start, start + count):
        out.append(user(f"{who}: please check reservation {who[:2].upper()}{r:03d}X; " + "details " * 40))
        out.append(assistant(f"{who}: reservation {who[:2].upper()}{r:03d}X is confirmed. " + "notes " * 40))
    return out


def keeping(text: str, prompt: list[dict[str, Any]]) -> str:
    """A model's summary: ``text`` and the newest reservation code of its prompt (a summary that carries
    none of its span's facts is not used)."""
    codes = re.findall(r"[A-Z]{2}\d{3}X", json.dumps(prompt))
    return f"{text} Last: {max(codes)}." if codes else text


class GatedModel:
    """A summary model ``(messages, max_tokens) -> str`` that waits for ``release`` when it summarizes
    alpha's conversation, and logs when each summary starts and ends."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.alpha_started = threading.Event()
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        who = "alpha" if any("alpha:" in str(m.get("content")) for m in messages) else "beta"
        with self._lock:
            self.log.append(("start", who))
        if who == "alpha":
            self.alpha_started.set()
            self.release.wait(WAIT)
        with self._lock:
            self.log.append(("end", who))
        return keeping(f"Goal: {who}'s reservations were checked and confirmed.", messages)


def wait_until(condition: Callable[[], bool]) -> None:
    """Wait for a condition another thread makes true (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.005)


def compacted_by(report: Report) -> str | None:
    action = next((a for a in report.actions if a.what in ("compacted", "truncated")), None)
    return None if action is None else f"{action.what} by {action.details.get('summarizer')}"


def test_a_slow_summary_blocks_only_its_own_session() -> None:
    model = GatedModel()
    settings = settings_from_dict({"strategies": ["llm_summary"], "model": {"timeout_seconds": WAIT}})
    host = Host(settings, context_window=WINDOW, summary_model=model)
    reports: dict[str, Report] = {}

    def call(name: str, session: str, messages: list[dict[str, Any]]) -> threading.Thread:
        def run() -> None:
            reports[name] = host.before_llm_call(messages, session_id=session)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    first = call("alpha 1", "alpha", [system("You are an airline agent."), *rounds("alpha", 0, 20)])
    assert model.alpha_started.wait(WAIT)  # alpha's summary is running, and waits
    second = call("alpha 2", "alpha", [system("You are an airline agent."), *rounds("alpha", 0, 24)])
    wait_until(lambda: host._table.sessions["alpha"].users == 2)  # alpha's second call waits for the first
    beta = call("beta", "beta", [system("You are an airline agent."), *rounds("beta", 0, 20)])
    beta.join(WAIT)
    assert not beta.is_alive()  # beta's call, summary included, finished while alpha's summary waits
    assert compacted_by(reports["beta"]) == "compacted by agent_llm"  # with the model, not a fallback
    assert first.is_alive() and second.is_alive()
    assert model.log == [("start", "alpha"), ("start", "beta"), ("end", "beta")]

    model.release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert not first.is_alive() and not second.is_alive()
    alpha = [event for event in model.log if event[1] == "alpha"]
    assert alpha == [("start", "alpha"), ("end", "alpha")] * 2  # one alpha call after the other
    assert compacted_by(reports["alpha 1"]) == compacted_by(reports["alpha 2"]) == "compacted by agent_llm"
    host.close()


def converse(host: Host, session: str, turns: list[list[dict[str, Any]]], caller: list[dict[str, Any]]) -> Report:
    """Each turn: the caller's list grows by the turn's messages and is managed (in place, as a
    caller writes the result back); returns the last report."""
    report = None
    for messages in turns:
        caller += messages
        report = host.before_llm_call(caller, session_id=session)
    assert report is not None
    return report


def unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without ctxlife's mark lines: each store keys its marks with a secret of its own."""
    return [
        {**m, "content": strip_inserted_marks(m["content"])} if isinstance(m.get("content"), str) else m
        for m in messages
    ]


def stored(url: str, session: str) -> tuple[list[tuple[str, Any]], Any]:
    with open_store(url) as store:
        snapshot = store.load_snapshot(session)
        records = [(r.op, r.message) for r in store.read_records(session)]
    return records, None if snapshot is None else (unmarked(snapshot.messages), snapshot.raw_length)


def test_a_session_dropped_from_a_shared_host_behaves_as_a_fresh_host_would(
    make_url: Callable[[str], str], store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_sessions, "SESSIONS", 2)
    config = {"strategies": ["snapshot_restore", "llm_summary"], "llm_summary": {"summarizer": "extractive"}}
    shared_url = make_url(store_kind)
    fresh_url = shared_url.replace("sessions", "fresh-sessions") if store_kind != "redis" else shared_url + "fresh:"
    early = [rounds("alpha", 0, 8), rounds("alpha", 8, 12)]  # the second turn compacts
    later = rounds("alpha", 20, 12)  # compacts again, on top of the first summary and its ledger

    # One host shared with three other sessions: alpha's state is dropped, then alpha goes on.
    shared = Host(settings_from_dict({**config, "store": shared_url}), context_window=WINDOW)
    alpha = [system("You are an airline agent.")]
    converse(shared, "alpha", early, alpha)
    assert shared._table.sessions["alpha"].state  # the strategies keep state for alpha
    for other in ("beta", "gamma", "delta"):
        converse(shared, other, [rounds(other, 0, 2)], [system("You are an airline agent.")])
    assert "alpha" not in shared._table.sessions
    assert not recorder_for(shared.store).known("alpha")
    assert len(shared._table.sessions) <= 2
    report = converse(shared, "alpha", [later], alpha)
    shared.close()

    # The same conversation: a host that ends after the early turns, a fresh one for the later turn.
    first = Host(settings_from_dict({**config, "store": fresh_url}), context_window=WINDOW)
    fresh_alpha = [system("You are an airline agent.")]
    converse(first, "alpha", early, fresh_alpha)
    first.close()
    fresh = Host(settings_from_dict({**config, "store": fresh_url}), context_window=WINDOW)
    fresh_report = converse(fresh, "alpha", [later], fresh_alpha)
    fresh.close()

    assert unmarked(alpha) == unmarked(fresh_alpha)
    assert [(a.strategy, a.what) for a in report.actions] == [(a.strategy, a.what) for a in fresh_report.actions]
    assert ("llm_summary", "compacted") in [(a.strategy, a.what) for a in report.actions]
    assert (report.tokens_before, report.tokens_after) == (fresh_report.tokens_before, fresh_report.tokens_after)
    assert stored(shared_url, "alpha") == stored(fresh_url, "alpha")


def test_manage_with_a_summary_model_made_per_request_keeps_one_host() -> None:
    settings = settings_from_dict({"strategies": ["llm_summary"]})
    asked: list[int] = []

    def model_for(request: int) -> Callable[[list[dict[str, Any]], int], str]:
        def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
            asked.append(request)
            return keeping(f"Goal: request {request}'s reservations were checked.", messages)

        return complete

    api.clear_hosts()
    try:
        for request in range(3):
            messages = [system("You are an airline agent."), *rounds("alpha", 0, 20)]
            report = ctxlife.manage(
                messages, config=settings, context_window=WINDOW, session_id="u1", summary_model=model_for(request)
            )
            assert compacted_by(report) == "compacted by agent_llm"
            assert f"request {request}'s reservations" in str(messages[1]["content"])
        assert asked == [0, 1, 2]  # each call summarized with its own request's model...
        assert len(api._hosts) == 1  # ...on the one host of its config and session
    finally:
        api.clear_hosts()
