"""What ``ctxlife session list|export`` print, run in this process through ``ctxlife.cli.main`` (mutation
scope ``cli-session``: tests that run the command in a subprocess run unmutated code)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.sessions import Snapshot, open_store, session_key

MESSAGES = [{"role": "user", "content": "Où est la commande 17 ? 👋"}, {"role": "assistant", "content": "Allée 4."}]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'sessions'}"


def test_export_prints_the_snapshot_as_indented_utf8_json(url: str, capsys: Any) -> None:
    with open_store(url) as store:
        store.append("u42", MESSAGES)
        store.save_snapshot(Snapshot(session_id="u42", messages=MESSAGES, raw_length=2, updated_at=1.7e9, meta={}))
        doc = store.load_snapshot("u42").to_dict()
    assert main(["session", "export", "u42", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    assert json.loads(out)["messages"] == MESSAGES


def test_export_raw_all_and_calls(url: str, capsys: Any) -> None:
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"]})
    with ctxlife.Session("u42", settings, context_window=8000) as session:
        session.messages(MESSAGES[0])
        session.messages(MESSAGES[1], {"role": "user", "content": "Merci."})
    assert main(["session", "export", "u42", "--store", url, "--raw"]) == 0
    assert json.loads(capsys.readouterr().out) == [*MESSAGES, {"role": "user", "content": "Merci."}]
    assert main(["session", "export", "u42", "--store", url, "--all"]) == 0
    log = json.loads(capsys.readouterr().out)
    assert [(d["seq"], d["view"], d["op"]) for d in log] == [(1, "", "add"), (2, "", "add"), (3, "", "add")]
    assert all(set(d) == {"seq", "view", "op", "at", "message"} for d in log)
    assert main(["session", "export", "u42", "--store", url, "--calls"]) == 0
    calls = json.loads(capsys.readouterr().out)
    assert [c["call"] for c in calls] == [1, 2] and all(c["view"] == "" for c in calls)
    assert set(calls[0]) == {
        "call",
        "n",
        "view",
        "at",
        "head",
        "tokens",
        "window",
        "budget",
        "model",
        "actions",
        "failures",
        "slots",
        "messages",
    }
    assert calls[1]["messages"] == [*MESSAGES, {"role": "user", "content": "Merci."}]
    assert calls[1]["window"] == 8000 and calls[1]["tokens"]


def test_export_without_a_snapshot_says_to_use_raw(url: str, capsys: Any) -> None:
    with open_store(url) as store:
        store.append("u42", MESSAGES)
    assert main(["session", "export", "u42", "--store", url]) == 1
    assert capsys.readouterr().err == "error: session 'u42' has no snapshot yet, only raw history; use --raw\n"
    assert main(["session", "export", "nobody", "--store", url]) == 1
    assert main(["session", "export", "nobody", "--store", url, "--calls"]) == 1
    assert main(["session", "export", "nobody", "--store", url, "--raw"]) == 1


def test_list_shows_ids_counts_and_snapshot_times(url: str, capsys: Any) -> None:
    assert main(["session", "list", "--store", url]) == 0
    assert capsys.readouterr().out.strip() == f"No sessions in {url}"
    with open_store(url) as store:
        key = session_key("slack:C01:17.5")  # a LangGraph thread id, as stored
        store.append(key, MESSAGES)
        store.save_snapshot(Snapshot(session_id=key, messages=MESSAGES, raw_length=2, updated_at=1.7e9, meta={}))
    assert main(["session", "list", "--store", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "".join(out.split()).startswith(f"Sessionsin{url}┏")  # the title (rich wraps it to the table's width)
    header = next(line for line in lines if "Session" in line and "Raw messages" in line)
    assert [c.strip() for c in header.split("┃")[1:4]] == ["Session", "Raw messages", "Last snapshot"]
    row = next(line for line in lines if "slack:C01:17.5" in line)
    assert [c.strip() for c in row.split("│")[1:4]] == ["slack:C01:17.5", "2", "2023-11-14T22:13:20+00:00"]
