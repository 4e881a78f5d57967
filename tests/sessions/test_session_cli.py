"""``ctxlife session list|show|export|rm`` as the main CLI will run it."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxlife.sessions import Snapshot, open_store
from ctxlife.sessions.cli import add_session_parser, run_session_command

MESSAGES = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "Bonjour 👋 [bold]not markup[/bold]"},
]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ctxlife")
    sub = parser.add_subparsers(dest="command")
    add_session_parser(sub)
    return parser.parse_args(list(argv))


def run(*argv: str, default: str | None = None, **kw: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_session_command(parse(*argv), default, stdout=out, stderr=err, **kw)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def filled(store_url: str) -> str:
    with open_store(store_url) as store:
        store.append_raw("u42", MESSAGES + [{"role": "assistant", "content": "Salut"}])
        store.save_snapshot(
            Snapshot(
                session_id="u42",
                messages=MESSAGES,
                raw_length=3,
                updated_at=1_700_000_000.0,
                meta={"summary": "User greets [red]politely[/red].", "tasks": []},
            )
        )
        store.append_raw("raw-only", [{"role": "user", "content": "x"}])
    return store_url


def test_list(filled: str) -> None:
    code, out, err = run("session", "list", "--store", filled)
    assert (code, err) == (0, "")
    lines = [l for l in out.splitlines() if "u42" in l or "raw-only" in l]
    assert len(lines) == 2
    assert "3" in lines[1] and "2023-11-1" in lines[1]  # count and the snapshot's date
    assert "1" in lines[0] and "-" in lines[0]


def test_list_empty(store_url: str) -> None:
    code, out, _ = run("session", "list", "--store", store_url)
    assert code == 0 and "No sessions in" in out


def test_show(filled: str) -> None:
    counted: list[int] = []

    def counter(messages: list[dict[str, Any]]) -> int:
        counted.append(len(messages))
        return 1234

    code, out, err = run(
        "session", "show", "u42", "--store", filled, count_tokens=counter, token_encoding="cl100k_base"
    )
    assert (code, err) == (0, "")
    assert counted == [2]
    assert "Raw messages" in out and "3" in out
    assert "Context messages" in out
    assert "Context tokens (cl100k_base)" in out and "1234" in out
    assert "User greets [red]politely[/red]." in out  # shown literally, not as rich markup
    assert "2023-11-1" in out
    assert "tasks" in out


def test_show_without_counter_or_snapshot(filled: str) -> None:
    code, out, _ = run("session", "show", "raw-only", "--store", filled)
    assert code == 0
    assert "tokens" not in out.lower()
    assert "none" in out


def test_show_survives_a_broken_counter(filled: str) -> None:
    def broken(messages: list[dict[str, Any]]) -> int:
        raise RuntimeError("no encoding")

    code, out, _ = run("session", "show", "u42", "--store", filled, count_tokens=broken)
    assert code == 0 and "unavailable" in out and "no encoding" in out


def test_export(filled: str) -> None:
    code, out, _ = run("session", "export", "u42", "--store", filled)
    assert code == 0
    doc = json.loads(out)
    with open_store(filled) as store:
        assert doc == store.load_snapshot("u42").to_dict()  # type: ignore[union-attr]
    code, out, _ = run("session", "export", "u42", "--raw", "--store", filled)
    assert code == 0
    assert json.loads(out) == MESSAGES + [{"role": "assistant", "content": "Salut"}]


def test_export_errors(filled: str) -> None:
    code, out, err = run("session", "export", "raw-only", "--store", filled)
    assert code == 1 and out == "" and "--raw" in err
    code, out, err = run("session", "export", "ghost", "--store", filled)
    assert code == 1 and out == "" and "no session 'ghost'" in err
    code, out, err = run("session", "export", "ghost", "--raw", "--store", filled)
    assert code == 1 and "no session 'ghost'" in err


def test_rm(filled: str) -> None:
    code, out, _ = run("session", "rm", "u42", "--store", filled)
    assert code == 0 and "deleted session 'u42'" in out
    code, _, err = run("session", "rm", "u42", "--store", filled)
    assert code == 1 and "no session 'u42'" in err
    with open_store(filled) as store:
        assert [i.session_id for i in store.list_sessions()] == ["raw-only"]


@pytest.mark.parametrize("store_kind", ["file"])
def test_bad_input_is_exit_2_with_a_clear_message(filled: str) -> None:
    code, out, err = run("session", "show", "../etc", "--store", filled)
    assert code == 2 and out == ""
    assert err.startswith("error: session id '../etc'")
    code, _, err = run("session", "list", "--store", "nope://x")
    assert code == 2 and "unknown session store scheme 'nope'" in err
    code, _, err = run("session", "list", "--store", "sqlite:///:memory:")
    assert code == 2 and "database file path" in err


@pytest.mark.parametrize("store_kind", ["file"])
def test_store_url_defaults(filled: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run("session", "list", default=filled)  # the config's store
    assert code == 0 and "u42" in out
    monkeypatch.chdir(tmp_path)
    with open_store("file://workspace/sessions") as store:
        store.append_raw("in-default", [{"n": 1}])
    code, out, _ = run("session", "list")  # neither: the documented default
    assert code == 0 and "in-default" in out


def test_parser_requires_a_subcommand() -> None:
    with pytest.raises(SystemExit) as info:
        parse("session")
    assert info.value.code == 2


@pytest.mark.parametrize("store_kind", ["file"])
def test_export_writes_utf8_json_to_a_real_stdout(filled: str) -> None:
    code = (
        "import argparse, sys\n"
        "from ctxlife.sessions.cli import add_session_parser, run_session_command\n"
        "p = argparse.ArgumentParser(); add_session_parser(p.add_subparsers(dest='command'))\n"
        "sys.exit(run_session_command(p.parse_args(sys.argv[1:]), None))\n"
    )
    env = dict(
        os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"), PYTHONIOENCODING="ascii", LC_ALL="C"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "session", "export", "u42", "--raw", "--store", filled],
        capture_output=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.decode("utf-8"))[1]["content"] == MESSAGES[1]["content"]
    assert "👋".encode() in proc.stdout
