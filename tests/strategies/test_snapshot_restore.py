"""snapshot_restore: exact restore across restarts, raw history exactly once, on every store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.errors import SessionIdError
from ctxlife.events import redact_url
from ctxlife.host import Host
from ctxlife.sessions import open_store
from ctxlife.testing import assistant, system, tool_call, tool_result, user

WORKER = Path(__file__).with_name("session_worker.py")


STORE_KINDS = ["file", "sqlite", "redis", "postgres"]


def url_of(kind, request, tmp_path):
    """A store URL of ``kind`` private to this test (Redis: a key prefix on the run's server; Postgres: a schema)."""
    if kind == "file":
        return f"file://{tmp_path / 'sessions'}"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    if kind == "postgres":  # a schema of the test's own on the run's server
        return f"{request.getfixturevalue('postgres_url')}?schema=t{abs(hash(str(tmp_path))) % 10**8}"
    base = request.getfixturevalue("redis_url")
    return f"{base}?prefix=t{abs(hash(str(tmp_path))) % 10**8}:"


@pytest.fixture(params=STORE_KINDS)
def store_url(request, tmp_path):
    return url_of(request.param, request, tmp_path)


def canonical(messages):
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def settings(store_url, *strategies, **tables):
    names = ["snapshot_restore", *strategies]
    return settings_from_dict({"strategies": names, "store": store_url, **tables})


def test_manage_session_restores_exactly_in_a_new_host(store_url):
    cfg = settings(store_url)
    host = Host(cfg, context_window=100_000, session_id="u42")
    call = tool_call("lookup", {"item": "NO6JO3"}, call_id="call_1")
    messages = [system("You are XiaoPaw. 你好"), user("Where is order NO6JO3? 🙂")]
    host.manage(messages)
    messages += [assistant(None, [call]), tool_result("call_1", '{"status": "shipped", "eta": "2024-05-15"}')]
    host.manage(messages)
    messages.append(assistant("Order NO6JO3 shipped; ETA 2024-05-15."))
    messages.append(user("And the weight?"))
    host.manage(messages)
    host.close()

    store = open_store(store_url)
    raw = [r.message for r in store.read_records("u42")]
    assert raw == messages[1:]  # every non-system message exactly once, although the list was seen 3 times
    assert store.load_snapshot("u42") is None  # no compaction, no task end yet: the raw tail carries it
    store.close()

    restarted = Host(cfg, context_window=100_000, session_id="u42")
    fresh = [system("You are XiaoPaw. 你好"), user("Thanks! One more: cancel it.")]
    report = restarted.manage(fresh)
    assert canonical(fresh) == canonical([messages[0], *messages[1:], user("Thanks! One more: cancel it.")])
    assert report.actions[0].what == "restored" and report.actions[0].details == {"messages": 5, "from_raw_tail": 5}
    restarted.close()


def test_compaction_saves_a_snapshot_and_the_raw_history_keeps_what_was_cut(store_url):
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": False, "always": True})
    host = Host(cfg, context_window=100_000, session_id="s1")
    messages = [system("sys")]
    for i in range(4):
        messages += [user(f"q{i}")]
        host.manage(messages)
        messages += [assistant(f"a{i}")]
    host.close()
    store = open_store(store_url)
    raw = [r.message for r in store.read_records("s1")]
    assert [m["content"] for m in raw] == ["q0", "a0", "q1", "a1", "q2", "a2", "q3"]
    snapshot = store.load_snapshot("s1")
    assert [m["content"] for m in snapshot.messages] == ["sys", "q3"]  # the truncated working context
    assert snapshot.raw_length == 7
    store.close()

    # After a restart: the saved context plus what the raw history gained after it.
    restarted = Host(cfg, context_window=100_000, session_id="s1")
    fresh = [system("sys v2"), user("q4")]
    restarted.manage(fresh)
    assert [m["content"] for m in fresh] == ["sys v2", "q4"]  # truncate_last_n keeps the last round only
    restarted.close()
    store = open_store(store_url)
    assert [m["content"] for m in [r.message for r in store.read_records("s1")]][-1] == "q4"
    store.close()


def test_current_system_message_wins_over_the_saved_one(store_url):
    cfg = settings(store_url)
    store = open_store(store_url)
    from ctxlife.sessions import Snapshot

    store.save_snapshot(
        Snapshot(session_id="s2", messages=[system("old prompt"), user("hi"), assistant("hello")], raw_length=2)
    )
    store.append("s2", [user("hi"), assistant("hello")])
    store.close()
    messages = [system("new prompt"), user("again")]
    ctxlife.manage(messages, config=cfg, context_window=10_000, session_id="s2")
    assert messages == [system("new prompt"), user("hi"), assistant("hello"), user("again")]


def test_unsafe_session_ids_are_refused_before_anything_is_written(tmp_path):
    cfg = settings(f"file://{tmp_path / 'sessions'}")
    for bad in ["", "x" * 200]:
        with pytest.raises(SessionIdError):
            ctxlife.manage([user("u")], config=cfg, context_window=1000, session_id=bad)
    assert not (tmp_path / "sessions").exists()
    # Other strings are mapped to safe keys (ctxlife.sessions.session_key): files inside the folder only.
    for odd in ["../escape", "a/b", ".."]:
        ctxlife.manage([user("u")], config=cfg, context_window=1000, session_id=odd)
    assert not (tmp_path / "escape_raw.jsonl").exists()
    assert {p.name for p in tmp_path.iterdir()} == {"sessions"}
    # (the store's own mark secret beside them, made after the first write)
    assert all(p.name.startswith("_-") for p in (tmp_path / "sessions").iterdir() if p.name != ".ctxlife_mark_key")


@pytest.mark.e2e
@pytest.mark.slow
def test_crew_session_restores_exactly_in_a_new_process(request, tmp_path):
    # One process runs the crew on each store in turn (CrewAI is imported once, not once per store).
    urls = [url_of(kind, request, tmp_path) for kind in STORE_KINDS]

    def run(out, *turns):
        done = subprocess.run(
            [sys.executable, str(WORKER), json.dumps(urls), "chat7", str(out), *turns],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(out.read_text())

    run(tmp_path / "p1.json", "How many A0?", "And how many A1?")
    saved = {}
    for store_url in urls:
        store = open_store(store_url)
        views = {r.view for r in store.read_records("chat7")}
        assert len(views) == 1, store_url  # one agent on one task: one view (its role and task)
        saved[store_url] = store.load_snapshot("chat7", views.pop())
        raw = [r.message for r in store.read_records("chat7")]
        store.close()
        assert saved[store_url] is not None and saved[store_url].raw_length == len(raw), store_url
        # Two turns of [task, tool step, analyse prompt, final answer]: nothing lost, nothing twice.
        assert [m["role"] for m in raw] == ["user", "assistant", "user", "assistant"] * 2, store_url
        assert raw[3]["content"] == "Answer 0: A0 has 12 units.", store_url

    calls = run(tmp_path / "p2.json", "What did I ask first?")
    for store_url in urls:
        first = calls[store_url][0]
        new_user = first[-1]
        assert new_user["role"] == "user" and "What did I ask first?" in new_user["content"]
        # Exactly the saved conversation plus the new user message, under the current system
        # message (the same prompt text here; CrewAI marks its live copy with a cache breakpoint).
        snapshot = saved[store_url]
        assert first[0]["role"] == "system" and first[0]["content"] == snapshot.messages[0]["content"], store_url
        assert canonical(first[1:]) == canonical([*snapshot.messages[1:], new_user]), store_url
        assert any("How many A0?" in (m.get("content") or "") for m in first), store_url


# -- one store, owned by the host ------------------------------------------------------------------


def test_the_host_opens_the_top_level_store_and_every_strategy_uses_it(store_url, tmp_path):
    cfg = settings_from_dict(
        {
            "strategies": ["tool_output"],
            "store": store_url,
            "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path / "out")},
        }
    )
    host = Host(cfg, context_window=100_000, session_id="owned")
    # (the store's url never shows a password: the test server's postgres URL has one)
    assert host.store is not None and host.store.url.split("?")[0] == redact_url(store_url).split("?")[0]
    ctx = ctxlife.ToolCallContext(tool_name="dump", tool_input={}, result="word " * 2000, raw_result=None)
    host.after_tool_call(ctx)
    assert ctx.actions[0].details["saved_in"] == "session"  # a blob of the session, in the one store
    assert not (tmp_path / "out").exists()
    host.close()


def test_without_a_store_setting_only_strategies_that_keep_sessions_open_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Host(settings_from_dict({"strategies": ["truncate_last_n"]}), context_window=1000).store is None
    host = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=1000)
    assert host.store is not None and host.store.url == f"file://{tmp_path / 'workspace' / 'sessions'}"
    host.close()
    assert not (tmp_path / "workspace").exists()  # opening creates nothing


def test_ctxlife_store_environment_variable_names_the_store(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("CTXLIFE_STORE", url)
    cfg = settings_from_dict({"strategies": ["snapshot_restore"]})
    assert cfg.store_url() == url
    messages = [system("sys"), user("hi")]
    ctxlife.manage(messages, config=cfg, context_window=1000, session_id="env")
    with open_store(url) as store:
        assert [r.message for r in store.read_records("env")] == [user("hi")]


def test_relative_store_paths_resolve_against_the_config_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for line, expected in [
        ('store = "file://state/sessions"', f"file://{folder / 'state' / 'sessions'}"),
        ('store = "sqlite:///state/s.db?busy_timeout=2"', f"sqlite:///{folder / 'state' / 's.db'}?busy_timeout=2"),
        ('store = "file:///abs/sessions"', "file:///abs/sessions"),
    ]:
        path = folder / "ctxlife.toml"
        path.write_text(f'strategies = ["snapshot_restore"]\n{line}\n')
        assert load_settings(path).store_url() == expected
    path.write_text('strategies = ["snapshot_restore"]\nstore = "file://state/sessions"\n')
    ctxlife.manage([system("s"), user("u")], config=path, context_window=1000, session_id="rel")
    assert (folder / "state" / "sessions" / "rel_raw.jsonl").exists()
    assert not (elsewhere / "state").exists()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_ctxlife_check_and_session_list_create_nothing(tmp_path, monkeypatch, kind, capsys):
    from ctxlife.cli import main

    monkeypatch.chdir(tmp_path)
    url = "file://data/sessions" if kind == "file" else "sqlite:///data/sessions.db"
    (tmp_path / "ctxlife.toml").write_text(
        f'strategies = ["snapshot_restore", "llm_summary", "tool_output", "recall"]\nstore = "{url}"\n'
    )
    assert main(["check", "ctxlife.toml"]) == 0
    assert main(["session", "list"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "data").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctxlife.toml"]
