"""What ``ctxlife session list|export`` print, run in this process through ``ctxlife.cli.main`` (mutation
scope ``cli-session``: tests that run the command in a subprocess run unmutated code)."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.cli import build_parser, main
from ctxlife.cli.session import run_session_command
from ctxlife.config import settings_from_dict
from ctxlife.messages import inserted_meta, summary_message
from ctxlife.sessions import Snapshot, open_store, session_key

MESSAGES = [{"role": "user", "content": "Où est la commande 17 ? 👋"}, {"role": "assistant", "content": "Allée 4."}]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _doc(store: Any, sid: str) -> dict[str, Any]:
    snapshot = store.load_snapshot(sid)
    assert snapshot is not None
    return dict(snapshot.to_dict())


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'sessions'}"


def test_export_prints_the_snapshot_as_indented_utf8_json(url: str, capsys: Any) -> None:
    with open_store(url) as store:
        store.append("u42", MESSAGES)
        store.save_snapshot(Snapshot(session_id="u42", messages=MESSAGES, raw_length=2, updated_at=1.7e9, meta={}))
        doc = _doc(store, "u42")
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


def test_errors_name_a_session_by_the_id_the_app_gave(url: str, capsys: Any) -> None:
    # The commands take the app's id ('Zoë/42') and map it to its store key; their messages showed the key.
    with open_store(url) as store:
        store.append(session_key("Zoë/42"), MESSAGES)
    assert main(["session", "export", "Zoë/42", "--store", url]) == 1
    assert capsys.readouterr().err == "error: session 'Zoë/42' has no snapshot yet, only raw history; use --raw\n"
    assert main(["session", "search", "Zoë/42", "zebra", "--store", url]) == 0
    assert capsys.readouterr().out == "Nothing in session 'Zoë/42' matches \"zebra\".\n"
    for command in (["show", "Zoë/43"], ["search", "Zoë/43", "zebra"]):
        assert main(["session", *command, "--store", url]) == 1
        assert "session 'Zoë/43' in" in capsys.readouterr().err


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


# -- show -------------------------------------------------------------------------------------------


def _lines(out: str) -> list[str]:
    return [line.rstrip() for line in out.splitlines()]


def _cells(out: str) -> list[tuple[str, ...]]:
    """``show``'s rows as (label, value) pairs."""
    return [tuple(re.split(r"\s{2,}", line, maxsplit=1)) for line in _lines(out)]


def _summarised(url: str) -> None:
    """Session u42: a snapshot with a summary and two meta keys (default view), one raw message in view b."""
    with open_store(url) as store:
        store.append("u42", MESSAGES)
        store.append("u42", [{"role": "user", "content": "in b"}], view="b")
        msgs = [summary_message(MESSAGES, "the user asked for order 17"), *MESSAGES]
        meta = {"inserted": inserted_meta(msgs), "zeta": 1, "alpha": 2}
        store.save_snapshot(Snapshot(session_id="u42", messages=msgs, raw_length=2, updated_at=1.7e9, meta=meta))


def test_show_prints_each_views_counts_summary_and_meta_keys(url: str, capsys: Any) -> None:
    _summarised(url)
    assert main(["session", "show", "u42", "--store", url]) == 0
    rows = _lines(capsys.readouterr().out)
    tokens = next(r for r in rows if r.startswith("Context tokens"))
    assert tokens.split()[-1].isdigit()  # the count (its value is the tokenizer's)
    assert [r for r in rows if r is not tokens] == [
        "Session            u42",
        f"Store              {url}",
        "Raw messages       3",
        "Recorded calls     none (--context and ctxlife report simulate this session)",
        "Views              (default) (2), b (1)",
        "Context messages   3",
        "Snapshot covers    up to raw message 2",
        "Last update        2023-11-14T22:13:20+00:00",
        "Format version     2",
        "Summary            the user asked for order 17",
        "Meta keys          alpha, zeta",
        "",
        "View               b",
        "View raw messages  1",
        "Snapshot           none",
    ]
    assert main(["session", "show", "u42", "--store", url, "--view", "b"]) == 0
    assert _lines(capsys.readouterr().out)[3:] == [
        "Recorded calls     none (--context and ctxlife report simulate this session)",
        "",
        "View               b",
        "View raw messages  1",
        "Snapshot           none",
    ]
    assert main(["session", "show", "u42", "--store", url, "--view", "c"]) == 0  # a view with nothing: says so
    assert _lines(capsys.readouterr().out)[-3:] == [
        "View               c",
        "View raw messages  0",
        "Snapshot           none",
    ]


def test_show_with_a_counter_and_its_label_and_a_broken_counter(url: str) -> None:
    _summarised(url)
    args = build_parser().parse_args(["session", "show", "u42", "--store", url, "--view", ""])
    out = io.StringIO()
    assert run_session_command(args, None, count_tokens=len, token_encoding="o200k", stdout=out) == 0
    rows = _cells(out.getvalue())
    assert ("Context tokens (o200k)", "3") in rows and ("View", "(default)") in rows
    assert ("View raw messages", "2") in rows
    assert not any(r[0] == "Views" for r in rows)  # one view asked for: no list of views

    def broken(messages: list[dict[str, Any]]) -> int:
        raise ValueError("no tokenizer")

    args = build_parser().parse_args(["session", "show", "u42", "--store", url])
    out = io.StringIO()
    assert run_session_command(args, None, count_tokens=broken, stdout=out) == 0
    rows = _cells(out.getvalue())
    assert ("Context tokens", "unavailable (ValueError: no tokenizer)") in rows
    assert ("Summary", "the user asked for order 17") in rows  # the rest is still shown


def test_show_a_snapshot_only_session_its_meta_summary_and_recorded_calls(url: str, capsys: Any) -> None:
    with open_store(url) as store:  # a snapshot without raw history; the summary a strategy kept in meta
        meta = {"summary": {"topic": "commande 17 é"}}
        store.save_snapshot(Snapshot(session_id="s1", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta=meta))
        store.save_snapshot(Snapshot(session_id="s2", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta={}))
    assert main(["session", "show", "s1", "--store", url]) == 0
    rows = _cells(capsys.readouterr().out)
    assert ("Raw messages", "0") in rows and ("Context messages", "2") in rows
    assert ("Summary", '{"topic": "commande 17 é"}') in rows
    assert not any(r[0] in ("Views", "View", "Meta keys") for r in rows)
    assert main(["session", "show", "s2", "--store", url]) == 0
    assert ("Summary", "none (not compacted yet)") in _cells(capsys.readouterr().out)
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"]})
    with ctxlife.Session("u42", settings, context_window=8000) as session:
        session.messages(MESSAGES[0])
        session.messages(MESSAGES[1], {"role": "user", "content": "Merci."})
    assert main(["session", "show", "u42", "--store", url]) == 0
    rows = _cells(capsys.readouterr().out)
    assert ("Recorded calls", "2 (what each call sent: --context, export --calls, ctxlife report)") in rows
    assert main(["session", "show", "nobody", "--store", url]) == 1
    assert capsys.readouterr().err == (
        f"error: no session 'nobody' in {url}; `ctxlife session list` shows the sessions\n"
    )


# -- show --context ---------------------------------------------------------------------------------


def _called(url: str) -> None:
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"]})
    long = {"role": "assistant", "content": "x" * 200}
    with ctxlife.Session("u42", settings, context_window=8000) as session:
        session.messages({"role": "user", "content": "Où   est\nla commande 17 ?"})
        session.messages(long, {"role": "user", "content": "Merci."})


def _table_rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]


def test_show_context_prints_the_recorded_call_part_by_part(url: str, capsys: Any) -> None:
    _called(url)
    assert main(["session", "show", "u42", "--store", url, "--context"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert (
        flat.startswith(f"Call 2 of session 'u42' in {url}, as recorded: 3 messages, ")
        and "of a 8,000 window (threshold line 3,200); call 2 of 2 as recorded" in flat
    )
    lines = _lines(out)
    header = next(line for line in lines if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["#", "part", "role", "tokens", "text"]
    rows = _table_rows(lines)
    assert [r[:3] for r in rows if r[0]] == [
        ["0", "recent", "user"],
        ["1", "recent", "assistant"],
        ["2", "recent", "user"],
    ]
    assert rows[0][4] == "Où est la commande 17 ?"  # white space folded
    assert rows[1][4] + rows[2][4] == "x" * 157 + "..."  # cut at 160
    assert rows[1][3].isdigit() and rows[0][3].isdigit()
    cells = next(line for line in lines if line.startswith("│ 0 │")).split("│")
    assert cells[4] == f"{rows[0][3]:>7} " and cells[5].startswith(" Où est")  # tokens right-aligned, text left
    totals = next(line for line in lines if line.startswith("Tokens by part:"))
    total = sum(int(r[3]) for r in rows if r[0])
    kinds = f"system 0, bootstrap 0, summary 0, recall 0, recent {total}"
    assert totals == f"Tokens by part: {kinds}; reply priming 3; total {total + 3}"
    assert main(["session", "show", "u42", "--store", url, "--context", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["source"], doc["call"], doc["session_id"], doc["context_window"]) == ("recorded", 2, "u42", 8000)


def test_show_context_simulates_the_next_call_with_ask(url: str, capsys: Any) -> None:
    _called(url)
    assert main(["session", "show", "u42", "--store", url, "--context", "--ask", "and now?", "--window", "9000"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert flat.startswith("SIMULATED because the question has not been asked yet (--ask)")
    assert (
        f"Next call of session 'u42' in {url} (config built-in defaults): 4 messages, " in flat
        and "of a 9,000 window (threshold line 3,600); restored 4 record(s) (no snapshot)" in flat
    )
    assert "with the question: and now?" in _lines(out)
    assert _table_rows(_lines(out))[-1][:3] == ["3", "recent", "user"]
    assert main(["session", "show", "u42", "--store", url, "--ask", "and now?", "--json"]) == 2
    assert capsys.readouterr().err.endswith("--ask, --json go with --context (the next call's list): add --context\n")
    for flag in (["--window", "9"], ["--model", "gpt-4o"], ["--simulate"]):
        assert main(["session", "show", "u42", "--store", url, *flag]) == 2
        assert f"{flag[0]} go with --context" in capsys.readouterr().err


# -- export's JSON bytes ----------------------------------------------------------------------------


def test_export_writes_utf8_whatever_the_terminals_encoding(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(url) as store:
        store.save_snapshot(Snapshot(session_id="u42", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta={}))
        odd = [{"role": "user", "content": "a\ud800b é"}]  # a lone surrogate: not encodable as UTF-8
        store.save_snapshot(Snapshot(session_id="odd", messages=odd, raw_length=0, updated_at=1.7e9, meta={}))
        docs = {sid: _doc(store, sid) for sid in ("u42", "odd")}
    for sid, expected in (
        ("u42", json.dumps(docs["u42"], ensure_ascii=False, indent=2) + "\n"),
        ("odd", json.dumps(docs["odd"], ensure_ascii=True, indent=2) + "\n"),  # \u escapes: the same JSON value
    ):
        raw = io.BytesIO()
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))  # a C-locale terminal
        assert main(["session", "export", sid, "--store", url]) == 0
        assert raw.getvalue() == expected.encode("utf-8")
        assert json.loads(raw.getvalue()) == docs[sid]


# -- rm, erase, ids typed as keys, the recall index -------------------------------------------------


def _three(tmp_path: Path, url: str) -> Path:
    """Sessions new, old (written in 2023) and a@b.com; a config with a recall index folder holding an index
    file for each; returns the index folder."""
    index = tmp_path / "index"
    index.mkdir()
    (tmp_path / "ctxlife.toml").write_text(
        f'store = "{url}"\nstrategies = ["recall"]\n[recall]\nindex_dir = "{index}"\n'
    )
    with open_store(url) as store:
        for sid in ("new", "old", session_key("a@b.com")):
            store.append(sid, MESSAGES)
            (index / f"{sid}.sqlite").write_text("")
        folder = Path(url.removeprefix("file://"))
        for path in folder.rglob("*"):
            if path.name.startswith("old"):
                os.utime(path, (1.7e9, 1.7e9))
    return index


def _indexed(index: Path) -> list[str]:
    return sorted(p.name.removesuffix(".sqlite") for p in index.iterdir())


def test_rm_older_than_deletes_the_idle_sessions_and_their_index(
    tmp_path: Path, url: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _three(tmp_path, url)
    monkeypatch.chdir(tmp_path)
    key = session_key("a@b.com")
    assert main(["session", "rm", "--older-than", "30d", "--dry-run"]) == 0
    assert capsys.readouterr().out == f"would delete session 'old'\nwould delete 1 session(s) from {url}\n"
    assert _indexed(index) == sorted(["new", "old", key])
    assert main(["session", "rm", "--older-than", "30d"]) == 0
    assert capsys.readouterr().out == f"deleted session 'old'\ndeleted 1 session(s) from {url}\n"
    with open_store(url) as store:
        assert sorted(i.session_id for i in store.list_sessions()) == sorted(["new", key])
    assert _indexed(index) == sorted(["new", key])
    assert main(["session", "rm", "--older-than", "soon"]) == 2
    assert capsys.readouterr().err.startswith("error: --older-than: ")


def test_rm_one_all_and_dry_run(tmp_path: Path, url: str, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    index = _three(tmp_path, url)
    monkeypatch.chdir(tmp_path)
    key = session_key("a@b.com")
    assert main(["session", "rm"]) == 2
    assert capsys.readouterr().err == (
        "error: session rm takes one of: a session ID, --older-than DURATION, or --all (with --yes)\n"
    )
    assert main(["session", "rm", "a@b.com", "--dry-run"]) == 0
    assert capsys.readouterr().out == f"would delete session 'a@b.com' from {url}\n"
    assert main(["session", "rm", "nobody", "--dry-run"]) == 1
    assert (
        capsys.readouterr().err == f"error: no session 'nobody' in {url}; `ctxlife session list` shows the sessions\n"
    )
    assert main(["session", "rm", "--all"]) == 2
    assert capsys.readouterr().err == (
        f"error: --all would delete 3 session(s) from {url}; add --yes to delete them (or --dry-run to list them)\n"
    )
    assert main(["session", "rm", "--all", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"would delete 3 session(s) from {url}"
    assert _indexed(index) == sorted(["new", "old", key])
    assert main(["session", "rm", "a@b.com"]) == 0  # the id as the app passed it
    assert capsys.readouterr().out == f"deleted session 'a@b.com' from {url}\n"
    assert _indexed(index) == ["new", "old"]  # only its index
    assert main(["session", "rm", "a@b.com"]) == 1
    with open_store(url) as store:  # a session with a snapshot and no raw history is found too
        store.save_snapshot(Snapshot(session_id="snap", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta={}))
    assert main(["session", "rm", "snap", "--dry-run"]) == 0
    capsys.readouterr()
    assert main(["session", "rm", "--all", "--yes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:-1]) == ["deleted session 'new'", "deleted session 'old'", "deleted session 'snap'"]
    assert out[-1] == f"deleted 3 session(s) from {url}"
    assert _indexed(index) == []


def test_a_key_typed_as_stored_names_its_session_unless_a_session_has_that_id(
    tmp_path: Path, url: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _three(tmp_path, url)
    monkeypatch.chdir(tmp_path)
    key = str(session_key("a@b.com"))
    assert key == "_-a_40b_2Ecom"
    assert main(["session", "show", key]) == 0  # a file name copied from the store
    assert ("Session", "a@b.com") in _cells(capsys.readouterr().out)
    with open_store(url) as store:  # now a session whose id is that key
        store.append(session_key(str(key)), [{"role": "user", "content": "other"}])
    assert main(["session", "show", key]) == 0
    assert ("Session", key) in _cells(capsys.readouterr().out)
    assert main(["session", "erase", key, "--seq", "1"]) == 0
    assert capsys.readouterr().out == f"erased 1 message(s) of session {key}: 1\n"
    with open_store(url) as store:
        assert store.read_records(session_key(key))[0].erased and store.head(key) == 2
        assert not any(r.erased for r in store.read_records(key))  # a@b.com's messages are left alone
    assert _indexed(index) == sorted(["new", "old", key])  # the erased session had no index here; the rest kept


def test_erase_drops_only_its_sessions_index(
    tmp_path: Path, url: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _three(tmp_path, url)
    monkeypatch.chdir(tmp_path)
    assert main(["session", "erase", "new", "--match", "Allée"]) == 0
    assert capsys.readouterr().out == "erased 1 message(s) of session new: 2\n"
    assert _indexed(index) == sorted(["old", session_key("a@b.com")])
    assert main(["session", "erase", "old", "--match", "nothing like it"]) == 0
    assert capsys.readouterr().out == "erased 0 message(s) of session old: -\n"
    assert main(["session", "erase", "old", "--match", "("]) == 2
    assert capsys.readouterr().err.startswith("error: --match '(' is not a regular expression: ")
    assert main(["session", "erase", "nobody", "--seq", "1"]) == 1


def test_show_context_json_a_view_and_the_simulated_note(url: str, capsys: Any) -> None:
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"]})
    long = "y" * 160  # exactly 160 characters: shown whole
    with ctxlife.Session("u42", settings, context_window=8000, view="b") as session:
        session.messages({"role": "user", "content": "Où est la commande 17 ?"})
        session.messages({"role": "assistant", "content": long}, {"role": "user", "content": "Merci."})
    assert main(["session", "show", "u42", "--store", url, "--view", "b", "--context"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert f"Call 2 of session 'u42' view 'b' in {url}, as recorded: 3 messages" in flat
    rows = _table_rows(_lines(out))
    assert rows[1][4] + rows[2][4] == long and rows[3][4] == "Merci."
    assert main(["session", "show", "u42", "--store", url, "--view", "b", "--context", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n  "source": "recorded",\n') and out.endswith("}\n")  # indented by 2
    assert "Où est la commande 17 ?" in out  # UTF-8, not \u escapes
    assert '"Merci."' in out and json.loads(out)["view"] == "b"
    with open_store(url) as store:  # no call records: the next call, simulated, says so
        store.append("plain", [{"role": "user", "content": "Où est la commande 17 ?"}])
    assert main(["session", "show", "plain", "--store", url, "--context", "--window", "8000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED because ") and "restored 1 record(s) (no snapshot)" in " ".join(out.split())
    assert main(["session", "show", "plain", "--store", url, "--context", "--json", "--window", "8000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] != "recorded" and doc["note"].startswith("SIMULATED because ")
    assert "Où est" in json.dumps(doc, ensure_ascii=False)


def test_show_a_view_only_session_and_a_one_message_rm_dry_run(url: str, capsys: Any) -> None:
    with open_store(url) as store:  # a multi-agent session: nothing in the default view
        store.append("m", [{"role": "user", "content": "in b"}], view="b")
        store.save_snapshot(Snapshot(session_id="s1", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta={}))
    assert main(["session", "show", "m", "--store", url]) == 0
    rows = _cells(capsys.readouterr().out)
    assert ("Views", "b (1)") in rows and ("View", "b") in rows and ("View", "(default)") not in rows
    assert [r for r in rows if r[0] == "Snapshot"] == [("Snapshot", "none")]  # b's; no row for the unused default
    assert main(["session", "show", "s1", "--store", url, "--view", ""]) == 0  # no raw history at all
    assert ("View raw messages", "0") in _cells(capsys.readouterr().out)
    assert main(["session", "rm", "m", "--store", url, "--dry-run"]) == 0  # one raw message, no snapshot
    assert capsys.readouterr().out == f"would delete session 'm' from {url}\n"


def test_list_right_aligns_the_counts_and_prints_a_url_as_it_is(tmp_path: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / '[bold]x[/bold]'}"
    assert main(["session", "list", "--store", url]) == 0
    assert capsys.readouterr().out == f"No sessions in {url}\n"  # not read as rich markup
    with open_store(url) as store:
        store.append("u42", MESSAGES)
    assert main(["session", "list", "--store", url]) == 0
    row = next(line for line in _lines(capsys.readouterr().out) if "u42" in line)
    assert row.split("│")[2] == "            2 "  # under "Raw messages", right-aligned


def test_erase_then_export_all_shows_what_was_erased_and_the_removals(url: str, capsys: Any) -> None:
    with open_store(url) as store:
        store.append("u42", [*MESSAGES, {"role": "user", "content": "Merci."}])
    assert main(["session", "erase", "u42", "--seq", "1", "2", "--store", url]) == 0
    assert capsys.readouterr().out == "erased 2 message(s) of session u42: 1 2\n"
    assert main(["session", "export", "u42", "--all", "--store", url]) == 0
    log = json.loads(capsys.readouterr().out)
    assert [(d["seq"], d["op"], d.get("target"), d.get("erased", False)) for d in log] == [
        (1, "add", None, True),
        (2, "add", None, True),
        (3, "add", None, False),
        (4, "remove", 1, False),
        (5, "remove", 2, False),
    ]
    assert all(isinstance(d["at"], float) for d in log)
    assert log[2]["message"] == {"role": "user", "content": "Merci."} and log[3]["message"] == {}
    assert "Où est" not in json.dumps(log, ensure_ascii=False)


def test_export_a_views_snapshot_and_calls(url: str, capsys: Any) -> None:
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"]})
    with ctxlife.Session("u42", settings, context_window=8000, view="b") as session:
        session.messages(MESSAGES[0])
    assert main(["session", "export", "u42", "--store", url, "--calls", "--view", "b"]) == 0
    calls = json.loads(capsys.readouterr().out)
    assert [(c["call"], c["view"], c["messages"]) for c in calls] == [(1, "b", [MESSAGES[0]])]
    assert main(["session", "export", "u42", "--store", url, "--calls"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # the default view made no call
    with open_store(url) as store:
        snap = Snapshot(session_id="u42", view="b", messages=[MESSAGES[0]], raw_length=1, updated_at=1.7e9, meta={})
        store.save_snapshot(snap)
    assert main(["session", "export", "u42", "--store", url, "--view", "b"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["view"] == "b" and doc["messages"] == [MESSAGES[0]]
    assert main(["session", "export", "u42", "--store", url]) == 1  # the default view has no snapshot
    capsys.readouterr()


def test_show_context_names_the_strategies_that_acted_and_cuts_text_over_160(url: str, capsys: Any) -> None:
    settings = settings_from_dict({"store": url, "strategies": ["truncate_last_n"], "truncate_last_n": {"rounds": 1}})
    with ctxlife.Session("u42", settings, context_window=60) as session:
        for i in range(3):
            session.messages({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"})
        session.messages({"role": "user", "content": "z" * 161})
    assert main(["session", "show", "u42", "--store", url, "--context"]) == 0
    out = capsys.readouterr().out
    assert "Strategies: truncate_last_n:truncated" in _lines(out)
    cut = "".join(r[4] for r in _table_rows(_lines(out)) if r[4].startswith("z") or r[4].endswith("..."))
    assert cut == "z" * 157 + "..."


def test_list_summary_text_calls_per_view_and_an_unknown_command(url: str, capsys: Any) -> None:
    with open_store(url) as store:
        store.append("raw-only", MESSAGES)  # no snapshot: no snapshot time
        meta = {"summary": "the user asked for order 17"}  # a summary kept as text in meta: shown as it is
        store.save_snapshot(Snapshot(session_id="s3", messages=MESSAGES, raw_length=0, updated_at=1.7e9, meta=meta))
    assert main(["session", "list", "--store", url]) == 0
    row = next(line for line in _lines(capsys.readouterr().out) if "raw-only" in line)
    assert [c.strip() for c in row.split("│")[1:4]] == ["raw-only", "2", "-"]
    assert main(["session", "show", "s3", "--store", url]) == 0
    assert ("Summary", "the user asked for order 17") in _cells(capsys.readouterr().out)
    _called(url)  # calls in the default view only
    assert main(["session", "show", "u42", "--store", url, "--view", "b"]) == 0
    rows = _cells(capsys.readouterr().out)
    assert ("Recorded calls", "none (--context and ctxlife report simulate this session)") in rows
    err = io.StringIO()
    assert run_session_command(argparse.Namespace(session_command="nope"), url, stderr=err) == 2
    assert (
        err.getvalue() == "error: unknown session command 'nope'; use one of: list, show, export, erase, rm, search\n"
    )


class _Noted(ctxlife.Strategy):
    """Records a "skipped" note and an action at every call: --context lists only the action."""

    name = "noted"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        ctx.record("skipped", reason="nothing to do")
        ctx.record("looked")


class _Kaput(ctxlife.Strategy):
    name = "kaput"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        raise ValueError("kaput at the table")


def _rounds(n: int) -> list[dict[str, Any]]:
    return [
        m for i in range(n) for m in ({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"})
    ]


def test_show_context_simulated_names_the_actions_what_was_left_out_and_the_failures(
    tmp_path: Path, url: str, capsys: Any, install_strategy: Any
) -> None:
    install_strategy(_Noted)
    install_strategy(_Kaput)
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        f'store = "{url}"\nstrategies = ["truncate_last_n", "noted", "kaput"]\n[truncate_last_n]\nrounds = 1\n'
    )
    with open_store(url) as store:
        store.append("u42", _rounds(4))  # no call records: the next call is simulated
    assert main(["session", "show", "u42", "--config", str(config), "--context", "--window", "60", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the precondition: the call truncates, and the strategy raised (its edit rolled back, the call went on)
    assert doc["restored"]["from_records"] == 8 and len(doc["parts"]) == 3
    assert [a["what"] for a in doc["actions"]] == ["truncated", "skipped", "looked"]
    assert doc["failures"] == [
        {"strategy": "kaput", "node": "before_llm_call", "error": "ValueError: kaput at the table"}
    ]
    assert main(["session", "show", "u42", "--config", str(config), "--context", "--window", "60"]) == 0
    lines = _lines(capsys.readouterr().out)
    assert lines[-3:] == [
        "Strategies: truncate_last_n:truncated, noted:looked",  # not noted:skipped
        "Left out of this call by the strategies: 5 message(s)",  # 8 restored, 3 sent
        "FAILED: kaput at before_llm_call: ValueError: kaput at the table",
    ]


def test_show_context_simulated_says_what_came_from_the_snapshot_and_the_records_after_it(
    url: str, capsys: Any
) -> None:
    messages = _rounds(3)
    with open_store(url) as store:
        store.append("u42", messages[:4])
        store.save_snapshot(Snapshot(session_id="u42", messages=messages[2:4], raw_length=4, updated_at=1.7e9))
        store.append("u42", messages[4:])
    assert main(["session", "show", "u42", "--store", url, "--context", "--window", "8000"]) == 0
    out = capsys.readouterr().out
    assert [r[4] for r in _table_rows(_lines(out))] == ["q1", "a1", "q2", "a2"]  # the snapshot's 2, then the records
    assert "; restored 2 message(s) from the snapshot (covers raw message 4) + 2 record(s) after it" in " ".join(
        out.split()
    )
