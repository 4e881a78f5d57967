"""``ctxlife session list|show|export|rm`` as the main CLI will run it."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pg_sql import pg_sql

from ctxlife.cli.session import add_session_parser, run_session_command
from ctxlife.errors import StoreError
from ctxlife.sessions import Snapshot, open_store

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
        store.append("u42", MESSAGES + [{"role": "assistant", "content": "Salut"}])
        store.save_snapshot(
            Snapshot(
                session_id="u42",
                messages=MESSAGES,
                raw_length=3,
                updated_at=1_700_000_000.0,
                meta={"summary": "User greets [red]politely[/red].", "tasks": []},
            )
        )
        store.append("raw-only", [{"role": "user", "content": "x"}])
    return store_url


def test_list(filled: str) -> None:
    code, out, err = run("session", "list", "--store", filled)
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if "u42" in line or "raw-only" in line]
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
    code, out, err = run("session", "show", "../etc", "--store", filled)  # an id like any other (mapped)
    assert code == 1 and out == "" and "no session '../etc'" in err
    code, out, err = run("session", "show", "../" * 100, "--store", filled)  # too long for a store key
    assert code == 2 and out == ""
    assert err.startswith("error: session id '../")
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
        store.append("in-default", [{"n": 1}])
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
        "from ctxlife.cli.session import add_session_parser, run_session_command\n"
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


# -- the current summary, --config everywhere, rm --older-than/--all, nothing created, ttl ---------

CLI = [sys.executable, "-m", "ctxlife.cli"]
SRC = Path(__file__).resolve().parents[2] / "src"


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``ctxlife`` command in a fresh process (nothing registered in this one helps it)."""
    # the run's PYTHONPATH after the checkout's (the postgres_scheme fixture may put entry points there)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False)


def main_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI's ``main`` in this process, with its output captured."""
    from ctxlife.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def age(url: str, sid: str, seconds: float) -> None:
    """Make session ``sid`` look last written ``seconds`` ago, the way each store keeps that time."""
    then = time.time() - seconds
    if url.startswith("file://"):
        folder = Path(url[len("file://") :].partition("?")[0])
        for path in folder.glob(f"{sid}_*"):
            os.utime(path, (then, then))
    elif url.startswith("sqlite:///"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///") :].partition("?")[0])
        with conn:
            conn.execute("UPDATE ctxlife_sessions SET touched_at = ? WHERE session_id = ?", (then, sid))
        conn.close()
    elif url.startswith("postgres"):  # the store keeps the server's clock
        pg_sql(
            url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - %s WHERE session_id = %s", (seconds, sid)
        )
    else:  # redis knows no write time: a snapshot-only session is as old as its snapshot
        with open_store(url) as store:
            assert store.head(sid) == 0, "age() on redis needs a snapshot-only session"
            snap = store.load_snapshot(sid)
            assert snap is not None
            store.save_snapshot(snap.model_copy(update={"updated_at": then}))


def test_show_prints_the_current_summary_recognised_in_a_fresh_process(store_kind: str, store_url: str) -> None:
    from ctxlife.messages import inserted_meta, summary_message

    convo = [{"role": "system", "content": "rules"}]
    old = summary_message(convo, "the user wants a refund for order 17")
    new = summary_message(convo, "refund for order 17 approved; user asked about shipping")
    messages = [*convo, old, {"role": "user", "content": "ok"}, new, {"role": "user", "content": "and shipping?"}]
    with open_store(store_url) as store:
        store.append("chat", [messages[2], messages[4]])
        store.save_snapshot(
            Snapshot(session_id="chat", messages=messages, raw_length=2, meta={"inserted": inserted_meta(messages)})
        )
    proc = cli("session", "show", "chat", "--store", store_url)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Summary refund for order 17 approved; user asked about shipping" in text  # the newest one, prefix cut
    assert "wants a refund" not in text


def test_show_without_a_summary_says_so_and_shows_every_view(store_url: str) -> None:
    with open_store(store_url) as store:
        store.append("crew", [{"role": "user", "content": "q1"}], view="Researcher.task0")
        store.append(
            "crew", [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}], view="Writer.task1"
        )
        store.save_snapshot(
            Snapshot(session_id="crew", view="Writer.task1", messages=[{"role": "user", "content": "q2"}], raw_length=3)
        )
    code, out, err = run("session", "show", "crew", "--store", store_url)
    assert (code, err) == (0, "")
    text = " ".join(out.split())
    assert "Views Researcher.task0 (1), Writer.task1 (2)" in text
    assert "View Writer.task1" in text and "none (not compacted yet)" in text
    code, out, _ = run("session", "show", "crew", "--view", "Researcher.task0", "--store", store_url)
    assert code == 0 and "Writer" not in out and "Snapshot none" in " ".join(out.split())
    code, out, _ = run("session", "export", "crew", "--view", "Writer.task1", "--store", store_url)
    assert code == 0 and json.loads(out)["view"] == "Writer.task1"


@pytest.mark.parametrize("store_kind", ["file"])
@pytest.mark.parametrize(
    "argv",
    [("list",), ("show", "u42"), ("export", "u42", "--raw"), ("search", "u42", "Salut"), ("rm", "u42", "--dry-run")],
)
def test_config_is_accepted_before_and_after_every_subcommand(
    filled: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text(f'strategies = ["snapshot_restore"]\nstore = "{filled}"\n', encoding="utf-8")

    def without_log_lines(result: tuple[int, str, str]) -> tuple[int, str, str]:
        code, out, err = result  # structlog's first-use notes (tokenizer_fallback) may land on stdout
        return code, "".join(line for line in out.splitlines(True) if "[info " not in line), err

    before = without_log_lines(main_cli(capsys, "session", "--config", str(config), *argv))
    after = without_log_lines(main_cli(capsys, "session", *argv, "--config", str(config)))
    assert before == after
    assert before[0] == 0, before[2]
    assert "u42" in before[1] or "Salut" in before[1]


def test_rm_older_than_deletes_only_idle_sessions(store_kind: str, store_url: str) -> None:
    with open_store(store_url) as store:
        for sid in ("fresh", "stale"):
            if store_kind == "redis":  # see age(): redis sessions are as old as their snapshot
                store.save_snapshot(Snapshot(session_id=sid, messages=[{"role": "user", "content": sid}], raw_length=0))
            else:
                store.append(sid, [{"role": "user", "content": sid}])
    age(store_url, "stale", 31 * 86400)
    code, out, err = run("session", "rm", "--older-than", "30d", "--dry-run", "--store", store_url)
    assert (code, err) == (0, "") and "would delete session 'stale'" in out and "fresh" not in out
    with open_store(store_url) as store:
        assert [i.session_id for i in store.list_sessions()] == ["fresh", "stale"]
    code, out, err = run("session", "rm", "--older-than", "30d", "--store", store_url)
    assert (code, err) == (0, "") and "deleted session 'stale'" in out and "deleted 1 session(s)" in out
    with open_store(store_url) as store:
        assert [i.session_id for i in store.list_sessions()] == ["fresh"]
    code, _, err = run("session", "rm", "--older-than", "soon", "--store", store_url)
    assert code == 2 and "'soon' is not a duration" in err


def test_rm_all_needs_yes(filled: str) -> None:
    code, out, err = run("session", "rm", "--all", "--store", filled)
    assert code == 2 and out == "" and "--all would delete 2 session(s)" in err and "--yes" in err
    code, out, _ = run("session", "rm", "--all", "--dry-run", "--store", filled)
    assert code == 0 and "would delete 2 session(s)" in out
    with open_store(filled) as store:
        assert len(store.list_sessions()) == 2
    code, out, _ = run("session", "rm", "--all", "--yes", "--store", filled)
    assert code == 0 and "deleted 2 session(s)" in out
    with open_store(filled) as store:
        assert store.list_sessions() == []


@pytest.mark.parametrize("store_kind", ["file"])
def test_rm_takes_exactly_one_selection(filled: str) -> None:
    for argv in (("rm",), ("rm", "u42", "--all", "--yes"), ("rm", "--older-than", "1d", "--all")):
        code, out, err = run("session", *argv, "--store", filled)
        assert code == 2 and out == "" and "one of: a session ID, --older-than DURATION, or --all" in err


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_reading_commands_and_check_never_create_a_folder_or_database(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = "not-yet/" + ("sessions" if kind == "file" else "sessions.db")  # relative: against the config's folder
    url = f"file://{target}" if kind == "file" else f"sqlite:///{target}"
    config = tmp_path / "ctxlife.toml"
    config.write_text(f'store = "{url}"\nstrategies = ["snapshot_restore"]\n', encoding="utf-8")
    for argv in (
        ("session", "list", "--config", str(config)),
        ("session", "show", "u1", "--config", str(config)),
        ("session", "export", "u1", "--raw", "--config", str(config)),
        ("session", "search", "u1", "anything", "--config", str(config)),
        ("session", "rm", "--older-than", "1d", "--config", str(config)),
        ("check", str(config)),
    ):
        code, _, err = main_cli(capsys, *argv)
        assert code in (0, 1), (argv, err)
        assert not (tmp_path / "not-yet").exists(), argv
    from ctxlife.config import load_settings

    with open_store(load_settings(config).store_url()) as store:  # the first write creates it, there
        store.append("u1", [{"role": "user", "content": "hi"}])
    assert (tmp_path / "not-yet").exists()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_ttl_with_a_unit_hides_and_removes_idle_sessions(kind: str, make_url: Any) -> None:
    url = make_url(kind)
    with open_store(f"{url}?ttl=1d") as store:
        assert store.ttl == 86400
        store.append("idle", [{"role": "user", "content": "old"}])
        store.save_snapshot(Snapshot(session_id="idle", messages=[{"role": "user", "content": "old"}], raw_length=1))
        store.append("busy", [{"role": "user", "content": "new"}])
    age(url, "idle", 2 * 86400)
    with open_store(f"{url}?ttl=1d") as store:
        assert store.load_snapshot("idle") is None and store.read_records("idle") == []  # not restored
        assert [i.session_id for i in store.list_sessions()] == ["busy"]  # not listed, and removed
    with open_store(url) as store:  # the same store without a ttl: the idle session is gone for good
        assert [i.session_id for i in store.list_sessions()] == ["busy"]
    with open_store(f"{url}?ttl=1d") as store:  # a write after expiry starts the session over
        store.append("busy", [{"role": "user", "content": "more"}])
        age(url, "busy", 2 * 86400)
        assert store.append("busy", [{"role": "user", "content": "again"}])[0].seq == 1


def test_durations() -> None:
    from ctxlife.sessions.durations import format_duration, parse_duration

    assert [parse_duration(t) for t in ("30d", "12h", "90m", "45s", "2w", "3600", "1.5h", " 7D ")] == [
        2592000,
        43200,
        5400,
        45,
        1209600,
        3600,
        5400,
        604800,
    ]
    for bad in ("", "d", "-1d", "0", "1y", "1 d 2h", "nan", "inf"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)
    assert format_duration(2592000) == "30d" and format_duration(5400) == "90m" and format_duration(1.5) == "1.5s"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_show_prints_the_summary_llm_summary_wrote_through_a_session(store_url: str) -> None:
    import ctxlife
    from ctxlife.config import settings_from_dict

    cfg = settings_from_dict(
        {
            "store": store_url,
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
        }
    )
    with ctxlife.Session("clerk", cfg, system="You are a clerk.", context_window=1000) as session:
        for i in range(8):
            session.prepare({"role": "user", "content": f"Order {i}: ship {i * 3} boxes of item R{i:04d}. " * 3})
            session.record_reply(f"Noted order {i}.")
        assert session.last_report is not None
    with open_store(store_url) as store:
        snapshot = store.load_snapshot("clerk")
    assert snapshot is not None
    written = [str(m["content"]) for m in snapshot.messages if str(m.get("content")).startswith("History summary:")]
    assert written, "llm_summary did not compact"
    summary = written[-1].removeprefix("History summary:").strip()
    assert "R000" in summary
    proc = cli("session", "show", "clerk", "--store", store_url)  # a fresh process recognises it too
    assert proc.returncode == 0, proc.stderr
    assert " ".join(summary.split())[:60] in " ".join(proc.stdout.split())


def test_redis_ttl_takes_a_duration_too(make_url: Any, redis_client: Any) -> None:
    url = make_url("redis")
    with open_store(f"{url}&ttl=1.5h") as store:  # make_url's redis URL carries ?prefix= already
        assert store.ttl == 5400
        store.append("t", [{"role": "user", "content": "x"}])
        prefix = url.partition("prefix=")[2]
        assert 5390 < redis_client.ttl(f"{prefix}{{t}}:raw") <= 5400
    with pytest.raises(StoreError, match="'soon' is not a duration"):
        open_store(f"{url}&ttl=soon")
