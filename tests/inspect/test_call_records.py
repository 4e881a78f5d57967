"""Call records (issue 37): the report, ``session show --context`` and ``replay --session`` show what the
model was sent at each call, not a re-run with another summarizer; a session without them says SIMULATED."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.api import clear_hosts
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.replay import replay_session
from ctxlife.sessions import open_store
from ctxlife.sessions.calls import sent_calls

SID = "calls-u7"
WINDOW = 1500


class Agent:
    """The agent's model, faked: keeps a copy of every list it is sent."""

    def __init__(self) -> None:
        self.received: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.received.append(copy.deepcopy(messages))
        return f"Reply {len(self.received)}: the ticket is open. " + "We checked the payment logs. " * 6


class Summarizer:
    """The caller's own summary model, faked: text no built-in summarizer would write."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        self.calls += 1
        # and the newest ticket of its span: a summary that carries none of its span's facts is not used
        tickets = re.findall(r"TCK-\d+", json.dumps(messages))
        last = f" Last: {tickets[-1]}." if tickets else ""
        return f"ZEBRA-LEDGER-{self.calls}: the user asked about refunds and tickets.{last}"


def _config(store_url: str, strategies: list[str]) -> dict[str, Any]:
    return {
        "strategies": strategies,
        "context_window": WINDOW,
        "threshold": 0.5,
        "store": store_url,
        "bootstrap": {"text": "Working rules: answer briefly."},
        "llm_summary": {"summarizer": "llm", "min_gain_tokens": 50, "max_summary_tokens": 200},
    }


def _turn(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Ticket TCK-{7000 + i}: refund of ORD-{52000 + i}? " + "Details. " * 25}


def _config_file(tmp_path: Path, store_url: str) -> Path:
    # The CLI's config: the extractive summarizer, so a simulation could not write the caller's summaries.
    path = tmp_path / "ctxlife.toml"
    path.write_text(
        f'strategies = ["bootstrap", "llm_summary"]\ncontext_window = {WINDOW}\nthreshold = 0.5\n'
        f'store = "{store_url}"\n[llm_summary]\nsummarizer = "extractive"\nmin_gain_tokens = 50\n'
        '[bootstrap]\ntext = "Working rules: answer briefly."\n',
        encoding="utf-8",
    )
    return path


def _check_shown(store_url: str, tmp_path: Path, agent: Agent, compacted_at: list[int], capsys: Any) -> None:
    """Every way of looking at the session shows, call by call, exactly what the agent's model received."""
    config = _config_file(tmp_path, store_url)
    with open_store(store_url) as store:
        result = replay_session(settings_from_dict(_config(store_url, ["bootstrap"]), source="t"), store, SID)
    assert result.source == "recorded"
    assert [f.composition.messages for f in result.frames] == agent.received
    assert [i + 1 for i, f in enumerate(result.frames) if f.summary is not None] == compacted_at
    assert all("ZEBRA-LEDGER" in str(f.summary) for f in result.frames if f.summary is not None)

    assert main(["replay", "--session", SID, "--config", str(config), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "recorded"
    assert [c["messages"] for c in data["calls"]] == agent.received

    assert main(["session", "show", SID, "--context", "--json", "--config", str(config)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "recorded" and data["messages"] == agent.received[-1]

    page_path = tmp_path / "report.html"
    assert main(["report", SID, "-o", str(page_path), "--config", str(config)]) == 0
    assert f"{len(agent.received)} recorded calls" in capsys.readouterr().out
    page = page_path.read_text(encoding="utf-8")
    assert '<p class="mode recorded">' in page and "SIMULATED" not in page
    assert "ZEBRA-LEDGER-1" in page
    for n in compacted_at:
        assert f'class="marker marker-compaction" data-call="{n - 1}"' in page

    # The same session simulated on purpose: the extractive summarizer, and the page says so.
    assert main(["report", SID, "-o", str(page_path), "--config", str(config), "--simulate"]) == 0
    capsys.readouterr()
    page = page_path.read_text(encoding="utf-8")
    assert '<p class="mode simulated">SIMULATED on purpose' in page
    assert '<p class="mode recorded">' not in page


def test_session_summarized_by_the_callers_model(store_url: str, tmp_path: Path, capsys: Any) -> None:
    settings = settings_from_dict(_config(store_url, ["bootstrap", "llm_summary"]), source="t")
    agent, summarizer = Agent(), Summarizer()
    compacted_at = []
    with ctxlife.Session(SID, settings, system="You are a support clerk.", summary_model=summarizer) as session:
        for i in range(14):
            sent = session.messages(_turn(i))
            assert session.last_report is not None
            if any(a.what == "compacted" for a in session.last_report.actions):
                compacted_at.append(i + 1)
            session.record_reply(agent(sent))
    assert summarizer.calls >= 2 and len(compacted_at) >= 2
    _check_shown(store_url, tmp_path, agent, compacted_at, capsys)


def test_manage_summarized_by_the_callers_model(store_url: str, tmp_path: Path, capsys: Any) -> None:
    settings = settings_from_dict(
        {**_config(store_url, ["snapshot_restore", "bootstrap", "llm_summary"]), "session_id": SID}, source="t"
    )
    agent, summarizer = Agent(), Summarizer()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a support clerk."}]
    compacted_at = []
    try:
        for i in range(14):
            history.append(_turn(i))
            report = ctxlife.manage(history, config=settings, summary_model=summarizer)
            if any(a.what == "compacted" for a in report.actions):
                compacted_at.append(i + 1)
            history.append({"role": "assistant", "content": agent(history)})
    finally:
        clear_hosts()
    assert summarizer.calls >= 2 and len(compacted_at) >= 2
    _check_shown(store_url, tmp_path, agent, compacted_at, capsys)


def test_a_session_without_call_records_is_shown_simulated(store_url: str, tmp_path: Path, capsys: Any) -> None:
    with open_store(store_url) as store:  # as ctxlife wrote sessions before call records existed
        store.append(
            SID, [_turn(i) if k == 0 else {"role": "assistant", "content": "ok"} for i in range(8) for k in (0, 1)]
        )
        assert sent_calls(store, SID) == []
    config = _config_file(tmp_path, store_url)
    assert main(["replay", "--session", SID, "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED because this session has no call records" in out and "as recorded" not in out
    assert main(["session", "show", SID, "--context", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED because this session has no call records" in out
    page_path = tmp_path / "report.html"
    assert main(["report", SID, "-o", str(page_path), "--config", str(config)]) == 0
    assert "simulated calls" in capsys.readouterr().out
    page = page_path.read_text(encoding="utf-8")
    assert '<p class="mode simulated">SIMULATED because this session has no call records' in page


@pytest.fixture(autouse=True)
def _no_shared_hosts() -> Any:
    yield
    clear_hosts()


def test_calls_before_call_records_existed_are_said_to_be_missing(store_url: str, tmp_path: Path, capsys: Any) -> None:
    with open_store(store_url) as store:  # four turns recorded by a ctxlife without call records
        store.append(SID, [m for i in range(4) for m in (_turn(i), {"role": "assistant", "content": f"ok {i}"})])
    settings = settings_from_dict(_config(store_url, ["bootstrap"]), source="t")
    agent = Agent()
    with ctxlife.Session(SID, settings) as session:
        for i in range(4, 7):
            session.record_reply(agent(session.messages(_turn(i))))
    with open_store(store_url) as store:
        result = replay_session(settings, store, SID)
    assert result.source == "recorded"
    assert [f.composition.messages for f in result.frames] == agent.received
    assert "4 earlier call(s) have no call record" in result.note
    config = _config_file(tmp_path, store_url)
    assert main(["session", "show", SID, "--config", str(config)]) == 0
    assert "Recorded calls" in (out := capsys.readouterr().out) and "3 (what each call sent" in out
