"""Security: session ids cannot escape, files are private, logs carry no contents, Redis auth and
TLS work, configs are data.

Each test tries to break one promise with hostile input; docs/reliability.md lists what the user gets.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reliability_gen import REPO, SECRET, Checks, Driver, canon, examples, scripts, system_prompts

import ctxlife
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.contexts import TaskContext, ToolCallContext
from ctxlife.errors import ConfigError, SessionIdError, StoreError, UnknownStrategyError
from ctxlife.host import Host
from ctxlife.messages import is_summary
from ctxlife.sessions import Snapshot, open_store, session_key, validate_session_id
from ctxlife.summarizers import register_summarizer, unregister_summarizer

# -- 1. session ids ------------------------------------------------------------------------------------

BAD_IDS: list[Any] = [
    "",
    " ",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "a/../../b",
    "/etc/passwd",
    "/tmp/x",
    "a/b",
    "a\\b",
    "C:\\Windows\\x",
    "\\\\server\\share",
    "~root",
    "$HOME",
    "a\x00b",
    "a\nb",
    "a\rb",
    "a\tb",
    "a b",
    "a\u202eb",  # right-to-left override
    "a\u200bb",  # zero-width space
    "．．／x",  # fullwidth dots and solidus
    "a／b",
    "a\u2215b",  # division slash
    "a\u2044b",  # fraction slash
    "ａｂｃ",  # fullwidth letters
    "e\u0301",  # combining accent
    "İ",
    "\ud800",  # lone surrogate
    ".hidden",
    "a..b",
    "%2e%2e%2f",
    "a%00",
    "a:b",  # the Redis key separator
    "{a}",  # a Redis Cluster hash tag
    "a}:raw",
    "*",
    "a?",
    "a[b]",
    "x" * 129,
    "x" * 100_000,
    b"abc",
    42,
    ("a",),
]
GOOD_IDS = ["a", "A" * 128, "-", "_", "0", "a.b", "a-b_c.d", "x.", "con", "nul", "u42.chat_1"]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _id(value: Any) -> str:
    return repr(value)[:30]


@pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # manage() with snapshot_restore, for mapped ids
@pytest.mark.parametrize("bad", BAD_IDS, ids=_id)
def test_unsafe_session_ids_are_refused_everywhere(bad, tmp_path):
    store_url = f"file://{tmp_path / 'sessions'}"
    settings = settings_from_dict({"strategies": ["snapshot_restore", "llm_summary"], "store": store_url})
    messages = [{"role": "user", "content": "hi"}]
    # manage() takes any string an application passes: mapped to a safe key (session_key), or refused.
    key = None
    try:
        ctxlife.manage(messages, config=settings, context_window=4000, session_id=bad)
    except SessionIdError as exc:
        text = str(exc)
        assert text.startswith("session id ") and (
            "letters, digits" in text or "pass the id as a string" in text or "limit is 128" in text
        )
        assert len(text) < 600, "the error repeats a huge id"
    else:
        key = session_key(bad)
        assert key != bad and validate_session_id(key) == key
    with pytest.raises(SessionIdError):
        Host(settings, context_window=4000, session_id=bad)
    if isinstance(bad, str) and "\x00" not in bad and "\ud800" not in bad:
        with pytest.raises(SessionIdError):  # the config's default session, from a file
            config = tmp_path / "ctxlife.toml"
            config.write_text(f"strategies = []\nsession_id = {json.dumps(bad)}\n", encoding="utf-8")
            Host(load_settings(config), context_window=4000)
    for url in (store_url, f"sqlite:///{tmp_path / 'db' / 's.db'}"):
        with open_store(url) as store:
            for call in (
                lambda: store.load_snapshot(bad),
                lambda: store.save_snapshot(Snapshot(session_id=bad, messages=[], raw_length=0)),
                lambda: store.append(bad, [{"role": "user", "content": "x"}]),
                lambda: [r.message for r in store.read_records(bad)],
                lambda: store.head(bad),
                lambda: store.delete(bad),
                lambda: store.lock(bad).__enter__(),
                lambda: store.put_blob(bad, "k", "v"),
                lambda: store.get_blob(bad, "k"),
                lambda: store.put_blob("ok", bad, "v"),  # blob keys follow the same rule
                lambda: store.get_blob("ok", bad),
            ):
                with pytest.raises(SessionIdError):
                    call()
    made = tree(tmp_path) - {"ctxlife.toml", "db", "db/s.db", "db/s.db-wal", "db/s.db-shm"}
    if key is not None:  # only the mapped key's own files, inside the store's folder (and the store's mark secret)
        made = {
            p
            for p in made
            if p not in ("sessions", "sessions/.ctxlife_mark_key") and not p.startswith(f"sessions/{key}")
        }
    assert made == set(), f"files created for an unsafe id: {sorted(made)}"


@pytest.mark.parametrize("bad", [["a"], {"id": "a"}], ids=_id)
def test_unhashable_session_id_gets_a_clear_error(bad):
    with pytest.raises(SessionIdError):
        ctxlife.manage(
            [{"role": "user", "content": "hi"}],
            config=settings_from_dict({"strategies": []}),
            context_window=4000,
            session_id=bad,
        )


@pytest.mark.parametrize("env_value", ["../escape", "a/b", "x" * 200])
def test_unsafe_session_id_from_the_environment(env_value, monkeypatch, tmp_path):
    monkeypatch.setenv("CTXLIFE_SESSION_ID", env_value)
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    with pytest.raises(SessionIdError):
        ctxlife.manage([{"role": "user", "content": "hi"}], config=settings, context_window=4000)
    assert tree(tmp_path) == set()


@pytest.mark.e2e
@pytest.mark.imports("crewai")
@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a\x00b", "x" * 500, "a:b"], ids=_id)
def test_wrap_refuses_unsafe_session_ids_and_leaves_the_crew_untouched(bad, tmp_path):
    from crewai import Agent, Crew, Task

    from ctxlife.integrations.crewai import host_of
    from ctxlife.testing import scripted_llm

    agent = Agent(role="clerk", goal="g", backstory="b", llm=scripted_llm([]), verbose=False)
    crew = Crew(agents=[agent], tasks=[Task(description="d", expected_output="o", agent=agent)], verbose=False)
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    with pytest.raises(SessionIdError):
        ctxlife.wrap(crew, settings, session_id=bad)
    assert host_of(crew) is None and "kickoff" not in vars(crew)
    assert tree(tmp_path) == set()


@pytest.mark.parametrize("good", GOOD_IDS, ids=_id)
def test_safe_ids_stay_inside_the_session_folder(good, tmp_path):
    folder = tmp_path / "sessions"
    settings = settings_from_dict(
        {
            "strategies": ["tool_output", "llm_summary", "snapshot_restore"],
            "tool_output": {"max_tokens": 100},
            "store": f"file://{folder}",
        }
    )
    host = Host(settings, context_window=600, session_id=good)
    ctx = ToolCallContext(tool_name="search", tool_input={}, result="row " * 2000, raw_result="row " * 2000)
    host.after_tool_call(ctx)
    messages = [{"role": "system", "content": "s"}] + [
        {"role": r, "content": f"{r} {i} " * 40} for i in range(12) for r in ("user", "assistant")
    ]
    host.manage(messages)
    host.close()
    files = [p for p in tmp_path.rglob("*")]
    assert files, "nothing was written"
    for p in files:
        assert p.resolve().is_relative_to(folder.resolve()), f"{p} is outside the session folder"


@examples(300)
@given(sid=st.one_of(st.text(max_size=140), st.text(st.sampled_from("./\\:{}*?[]~$-_aZ09\x00\n é．／"), max_size=12)))
def test_any_string_is_refused_or_stays_inside_the_folder(sid):
    """Hypothesis over arbitrary strings: either a SessionIdError, or every path stays in the folder."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "sessions"
        store = open_store(f"file://{folder}")
        try:
            store.append(sid, [{"role": "user", "content": "x"}])
            store.save_snapshot(Snapshot(session_id=sid, messages=[], raw_length=1))
            store.put_blob(sid, "k", "v")
        except SessionIdError:
            assert tree(root) == set()
            return
        finally:
            store.close()
        for p in root.rglob("*"):
            assert p.resolve().is_relative_to(folder.resolve())
            assert p == folder or p.relative_to(folder).parts[0].startswith(sid)


def test_redis_keys_never_leave_the_prefix(redis_server):
    import redis

    server = redis_server()
    client = redis.Redis(port=server.port)
    client.set("unrelated:key", "keep")
    store = open_store(server.url(query="prefix=app1:"))
    try:
        for good in GOOD_IDS:
            store.append(good, [{"role": "user", "content": "x"}])
            store.save_snapshot(Snapshot(session_id=good, messages=[], raw_length=1))
            store.put_blob(good, "k", "v")
            with store.lock(good):
                pass
        for bad in BAD_IDS:
            with pytest.raises(SessionIdError):
                store.append(bad, [{"role": "user", "content": "x"}])
        keys = sorted(k.decode() for k in client.scan_iter(count=1000))
        ours = [k for k in keys if k != "unrelated:key"]
        assert ours and all(re.fullmatch(r"app1:\{[A-Za-z0-9._-]+\}:(ctx|raw|blobs)", k) for k in ours), ours
        assert {s.session_id for s in store.list_sessions()} == set(GOOD_IDS)
        assert client.get("unrelated:key") == b"keep"
        for good in GOOD_IDS:
            store.delete(good)
        assert sorted(k.decode() for k in client.scan_iter()) == ["unrelated:key"]
    finally:
        store.close()
        client.close()


def test_planted_symlinks_are_never_followed(tmp_path):
    """Another user (or a bug) plants symlinks named like session files: reads and appends refuse,
    snapshot and blob writes replace the link, the target is never touched."""
    folder = tmp_path / "sessions"
    folder.mkdir(mode=0o700)
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    for name in ("s1_raw.jsonl", "s1_ctx.json"):
        (folder / name).symlink_to(target)
    store = open_store(f"file://{folder}")
    with pytest.raises(StoreError, match="Too many levels of symbolic links"):
        store.append("s1", [{"role": "user", "content": "evil"}])
    with pytest.raises(StoreError):
        store.load_snapshot("s1")
    store.save_snapshot(Snapshot(session_id="s1", messages=[], raw_length=0))
    assert not (folder / "s1_ctx.json").is_symlink()
    (folder / "s1_blobs").mkdir(mode=0o700)
    (folder / "s1_blobs" / "k").symlink_to(target)
    with pytest.raises(StoreError):
        store.get_blob("s1", "k")
    assert target.read_text() == "precious"
    store.close()


def test_tool_output_workspace_writer_does_not_follow_planted_symlinks(tmp_path):
    import threading

    from ctxlife_strategies import tool_output

    store_dir = tmp_path / "tool_outputs"
    store_dir.mkdir(mode=0o700)
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    text = "row " * 3000
    ref = "to_" + __import__("hashlib").sha256(text.encode()).hexdigest()[:16]
    (store_dir / f".{ref}.txt.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(target)
    host = Host(
        settings_from_dict(
            {"strategies": ["tool_output"], "tool_output": {"max_tokens": 100, "store_dir": str(store_dir)}}
        ),
        context_window=8000,
    )
    ctx = ToolCallContext(tool_name="search", tool_input={}, result=text, raw_result=text)
    host.after_tool_call(ctx)
    assert tool_output.RECALL_TOOL in ctx.result
    assert target.read_text() == "precious"


# -- 2. file modes --------------------------------------------------------------------------------------


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): oct(stat.S_IMODE(p.lstat().st_mode)) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o002], ids=lambda m: f"umask{m:03o}")
def test_session_files_are_owner_only_whatever_the_umask(mask, tmp_path):
    folder = tmp_path / "deep" / "sessions"
    settings = settings_from_dict(
        {
            "strategies": ["tool_output", "task_scope", "llm_summary", "snapshot_restore"],
            "tool_output": {"max_tokens": 100},
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
            "store": f"file://{folder}",
        }
    )
    with umask(mask):
        host = Host(settings, context_window=1000, session_id="private")
        driver = Driver(host, Checks(), session_id="private", system=[{"role": "system", "content": "s"}])
        from reliability_gen import Call, Native, User

        driver.play(
            [
                User("q " * 50),
                Native([Call("search", {}, "call_0", "row " * 3000)]),
                User("again " * 200),
                Native([Call("lookup", {}, "call_1", "x " * 300)]),
            ]
        )
        host.task_end(
            TaskContext(task_name="t", output="done " * 400, messages=[dict(m) for m in driver.live]),
            session_id="private",
        )
        host.close()
    found = modes(tmp_path / "deep")
    assert (
        "sessions/private_raw.jsonl" in found
        and "sessions/private_ctx.json" in found
        and "sessions/private_blobs" in found
    )
    assert any(k.startswith("sessions/private_blobs/") for k in found)
    for path, mode in found.items():
        is_dir = (tmp_path / "deep" / path).is_dir()
        assert mode == ("0o700" if is_dir else "0o600"), f"{path} has mode {mode}"


@pytest.mark.parametrize("mask", [0o000, 0o022])
def test_sqlite_and_tool_output_workspace_are_owner_only(mask, tmp_path):
    with umask(mask):
        store = open_store(f"sqlite:///{tmp_path / 'db' / 'nested' / 'sessions.db'}")
        store.append("s", [{"role": "user", "content": "x"}])
        store.save_snapshot(Snapshot(session_id="s", messages=[], raw_length=1))
        found = modes(tmp_path / "db")
        store.close()
        host = Host(
            settings_from_dict(
                {
                    "strategies": ["tool_output"],
                    "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path / "ws" / "out")},
                }
            ),
            context_window=8000,
        )
        ctx = ToolCallContext(tool_name="search", tool_input={}, result="row " * 3000, raw_result="row " * 3000)
        host.after_tool_call(ctx)
    assert found and all(m == ("0o700" if (tmp_path / "db" / p).is_dir() else "0o600") for p, m in found.items()), found
    outputs = modes(tmp_path / "ws" / "out")
    assert outputs and all(m == "0o600" for m in outputs.values()), outputs
    assert oct(stat.S_IMODE((tmp_path / "ws" / "out").stat().st_mode)) == "0o700"


# -- 3. log events carry counts and names, not contents ---------------------------------------------------


def _everything_with_secrets(tmp_path: Path, *, log_content: bool = False) -> Any:
    return settings_from_dict(
        {
            "strategies": ["bootstrap", "tool_cache", "tool_output", "task_scope", "llm_summary", "snapshot_restore"],
            "log_content": log_content,
            "bootstrap": {"text": f"Profile: the user's PIN is {SECRET}-pin."},
            "tool_cache": {"tools": ["lookup"]},
            "tool_output": {"max_tokens": 100},
            "task_scope": {"max_tokens": 60},
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 100, "min_gain_tokens": 10},
            "store": f"file://{tmp_path / 'sessions'}",
        }
    )


def _secret_session(host: Host, session: str) -> None:
    """A session with the secret everywhere: prompts, turns, tool args and results, outputs; plus
    a cache hit, capped results, compactions, a failing summarizer, and task nodes."""
    from reliability_gen import Call, Chat, Native, React, User

    secret_rows = json.dumps([{"card": f"{SECRET}-{i}", "note": "x" * 40} for i in range(200)])
    script = [
        User(f"My password is {SECRET}-user. Find order ORD-1."),
        Native(
            [
                Call("lookup", {"q": f"{SECRET}-arg"}, "call_0", secret_rows),
                Call("search", {"q": 1}, "call_1", f"{SECRET} " * 400),
            ]
        ),
        React(Call("lookup", {"q": f"{SECRET}-arg"}, "call_2", secret_rows), f"thinking about {SECRET}"),
        Chat(f"The secret is {SECRET}-assistant."),
        User(f"again {SECRET} " * 60),
        Native([Call("lookup", {"q": "other"}, "call_0", f"{SECRET}-result " * 300)]),
        Chat(f"done {SECRET}"),
    ]
    host.task_start(TaskContext(task_name="t1", context_text=f"earlier output {SECRET} " * 80), session_id=session)
    driver = Driver(
        host, Checks(), session_id=session, system=[{"role": "system", "content": f"system {SECRET}-system"}]
    )
    driver.play(script)
    host.task_end(
        TaskContext(task_name="t1", output=f"final {SECRET} " * 50, messages=[dict(m) for m in driver.live]),
        session_id=session,
    )


def test_events_never_carry_message_contents(tmp_path, events):
    class Leaky:  # fails with a content-free message, as a well-behaved summarizer does
        def summarize(self, request: Any) -> str:
            raise TimeoutError("model timed out")

    register_summarizer("flaky-model", lambda **kw: Leaky(), replace=True)
    try:
        host = Host(_everything_with_secrets(tmp_path), context_window=1200, session_id="sec")
        _secret_session(host, "sec")
        host.close()
        failing = Host(
            settings_from_dict(
                {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "flaky-model", "min_gain_tokens": 0}}
            ),
            context_window=600,
            session_id="sec2",
        )
        messages = [
            {"role": "user", "content": f"{SECRET} " * 100},
            {"role": "assistant", "content": f"{SECRET} " * 100},
        ] * 3
        failing.manage(messages)
    finally:
        unregister_summarizer("flaky-model")
    names = {e["event"] for e in events}
    assert {"ctxlife.node", "ctxlife.summary_failed"} <= names, names
    leaked = [e for e in events if SECRET in repr(e)]
    assert leaked == [], f"{len(leaked)} event(s) carry message contents, e.g. {leaked[0]['event']}"
    acted = {(a["strategy"], a["what"]) for e in events if e["event"] == "ctxlife.node" for a in e.get("actions", [])}
    expected = {
        ("tool_output", "capped"),
        ("tool_cache", "hit"),
        ("llm_summary", "compacted"),
        ("task_scope", "carried"),
        ("snapshot_restore", "snapshot_saved"),
        ("bootstrap", "injected"),
    }
    assert expected <= acted, f"the run did not exercise {expected - acted}"


def test_log_content_true_puts_contents_into_node_events_only(tmp_path, events):
    host = Host(_everything_with_secrets(tmp_path, log_content=True), context_window=1200, session_id="sec-on")
    _secret_session(host, "sec-on")
    host.close()
    with_content = [e for e in events if SECRET in repr(e)]
    assert with_content, "log_content = true shows no content"
    assert {e["event"] for e in with_content} == {"ctxlife.node"}
    assert all(len(e["content"]) <= 2000 + 40 for e in with_content if e.get("content"))


_STDLIB_CHILD = textwrap.dedent(
    """
    import logging, sys
    sys.path.insert(0, sys.argv[2])
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    from pathlib import Path
    from ctxlife.host import Host
    from test_security import _everything_with_secrets, _secret_session
    host = Host(_everything_with_secrets(Path(sys.argv[1])), context_window=1200, session_id="sec")
    _secret_session(host, "sec")
    host.close()
    print("done")
    """
)


def test_stdlib_logging_at_debug_shows_no_contents(tmp_path):
    """Without structlog configured, events go to the stdlib logger 'ctxlife': nothing secret at DEBUG."""
    child = subprocess.run(
        [sys.executable, "-c", _STDLIB_CHILD, str(tmp_path), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert "ctxlife" in child.stderr and "event='ctxlife.node'" in child.stderr
    assert SECRET not in child.stderr and SECRET not in child.stdout.replace("done", "")


def test_exception_texts_that_quote_contents_are_not_logged(tmp_path, events):
    from pydantic import BaseModel

    class Reply(BaseModel):
        summary: int

    class Validating:
        def summarize(self, request: Any) -> str:
            Reply.model_validate({"summary": request.messages[0]["content"]})  # raises, quoting the input
            return "unreachable"

    register_summarizer("validating", lambda **kw: Validating(), replace=True)
    try:
        host = Host(
            settings_from_dict(
                {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "validating", "min_gain_tokens": 0}}
            ),
            context_window=600,
        )
        messages = [
            {"role": "user", "content": f"{SECRET} " * 60},
            {"role": "assistant", "content": f"{SECRET} ok " * 30},
        ] * 3
        host.manage(messages)
    finally:
        unregister_summarizer("validating")
    assert any(e["event"] == "ctxlife.summary_failed" for e in events)
    assert not [e for e in events if SECRET in repr(e)]


def test_strategy_exceptions_that_quote_contents_are_withheld_and_others_kept(events):
    """Bug 8 at every node: a strategy whose exception echoes a message, a tool argument or a tool
    result is logged as its type and length, without a traceback; other errors keep their text."""
    from pydantic import BaseModel

    class Reply(BaseModel):
        n: int

    class Echoing:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            Reply.model_validate({"n": ctx.messages[-1]["content"]})

        @ctxlife.hookimpl
        def ctxlife_before_tool_call(self, ctx):
            raise ValueError(f"bad input {ctx.tool_input}")

        @ctxlife.hookimpl
        def ctxlife_after_tool_call(self, ctx):
            raise ValueError(f"cannot parse {ctx.result[:80]}")

    class Plain:
        @ctxlife.hookimpl
        def ctxlife_task_end(self, ctx):
            raise RuntimeError("the store at /var/lib/ctxlife is down (Connection refused)")

    host = Host(settings_from_dict({"strategies": []}), context_window=8000, plugins=[Echoing(), Plain()])
    report = host.manage([{"role": "user", "content": f"my card is {SECRET} please book"}])
    assert report.failures and SECRET in report.failures[0].error  # the caller's own report keeps it
    host.before_tool_call(ToolCallContext(tool_name="pay", tool_input={"card": SECRET}))
    host.after_tool_call(ToolCallContext(tool_name="pay", tool_input={}, result=f"charged card {SECRET} for $12.00 ok"))
    host.task_end(TaskContext(task_name="t", output="done"))
    failed = [e for e in events if e["event"] == "ctxlife.strategy_failed"]
    assert len(failed) == 4
    assert not [e for e in events if SECRET in repr(e)]
    withheld = [e for e in failed if "withheld" in e["error"]]
    assert {e["error_type"] for e in withheld} == {"ValidationError", "ValueError"} and len(withheld) == 3
    assert all(e["exc_info"] is False for e in withheld)  # a traceback would carry the same text
    plain = next(e for e in failed if e["node"] == "task_end")
    assert plain["error"] == "RuntimeError: the store at /var/lib/ctxlife is down (Connection refused)"


def test_log_content_true_keeps_exception_texts(events):
    class Echoing:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            raise ValueError(f"cannot handle {ctx.messages[-1]['content']}")

    settings = settings_from_dict({"strategies": [], "log_content": True})
    Host(settings, context_window=8000, plugins=[Echoing()]).manage(
        [{"role": "user", "content": f"my card is {SECRET} please"}]
    )
    assert any(SECRET in e.get("error", "") for e in events if e["event"] == "ctxlife.strategy_failed")


# -- 4. Redis with a password and over TLS --------------------------------------------------------------

PASSWORD = "p@ss:w/rd?&#S3"
QUOTED = "p%40ss%3Aw%2Frd%3F%26%23S3"


def _redis_session(url: str, tmp_path: Path, session: str) -> None:
    """A managed session through ``url``, then an exact restore in a new host."""
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary", "snapshot_restore"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
            "store": url,
        }
    )
    host = Host(settings, context_window=1000, session_id=session)
    driver = Driver(host, Checks(), session_id=session, system=[{"role": "system", "content": "s"}])
    from reliability_gen import Call, Native, User

    driver.play(
        [
            User(f"turn {i} " * 30) if i % 2 == 0 else Native([Call("lookup", {"i": i}, "call_0", "row " * 150)])
            for i in range(12)
        ]
    )
    driver.check_raw_history(host.store)
    saved = list(driver.live)
    assert any(is_summary(m) for m in saved)  # the restore below reads a snapshot holding a summary
    host.close()
    # The new host's window holds the whole restored list: a restore that compacted would compare nothing.
    again = Host(settings, context_window=100_000, session_id=session)
    live = [{"role": "system", "content": "s"}, {"role": "user", "content": "after restart"}]
    report = again.manage(live)
    assert report.failures == [] and [a.what for a in report.actions] == ["restored"]
    assert canon(live[1:-1]) == canon(saved[1:]) and live[-1]["content"] == "after restart"
    again.close()


def test_redis_with_a_password(redis_server, tmp_path, events, capsys):
    server = redis_server("--requirepass", PASSWORD)
    _redis_session(server.url(password=QUOTED, query="prefix=pw:"), tmp_path, "auth")
    with pytest.raises(StoreError) as wrong:
        open_store(server.url(password="wrong%21pass"))
    assert "invalid username-password pair" in str(wrong.value) or "WRONGPASS" in str(wrong.value)
    assert (
        "wrong%21pass" not in str(wrong.value) and "wrong!pass" not in str(wrong.value) and ":***@" in str(wrong.value)
    )
    with pytest.raises(
        StoreError, match="HELLO must be called with the client already authenticated|Authentication required|NOAUTH"
    ):
        open_store(server.url())
    store = open_store(server.url(password=QUOTED))
    assert PASSWORD not in repr(store) and QUOTED not in store.url and ":***@" in store.url
    store.close()
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxlife.cli",
            "session",
            "list",
            "--store",
            server.url(password=QUOTED, query="prefix=pw:"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert "auth" in cli.stdout
    assert QUOTED not in cli.stdout + cli.stderr and PASSWORD not in cli.stdout + cli.stderr
    everything = repr(events) + capsys.readouterr().out
    assert QUOTED not in everything and PASSWORD not in everything


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: cannot make a certificate for the TLS test")
    out: dict[str, Path] = {}
    for name, cn in (("server", "127.0.0.1"), ("client", "ctxlife-client")):
        key, cert = tmp_path / f"{name}.key", tmp_path / f"{name}.crt"
        done = subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-subj",
                f"/CN={cn}",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"openssl could not make a self-signed certificate: {done.stderr[-300:]}")
        out[f"{name}_key"], out[f"{name}_cert"] = key, cert
    return out


def _tls_server(redis_server: Any, files: dict[str, Path], *extra: str) -> Any:
    args = [
        "--tls-port",
        "0",
        "--tls-cert-file",
        str(files["server_cert"]),
        "--tls-key-file",
        str(files["server_key"]),
        "--tls-ca-cert-file",
        str(files["client_cert"]),
        *extra,
    ]
    try:
        return redis_server(*args)
    except RuntimeError as exc:
        if "tls" in str(exc).lower() or "FATAL CONFIG" in str(exc):
            pytest.skip(f"this redis-server was built without TLS support: {str(exc)[:300]}")
        raise


def test_redis_over_tls_with_a_password(redis_server, tls_files, tmp_path):
    server = _tls_server(redis_server, tls_files, "--tls-auth-clients", "no", "--requirepass", PASSWORD)
    assert server.tls
    ca = f"ssl_ca_certs={tls_files['server_cert']}"
    _redis_session(server.url(password=QUOTED, query=f"prefix=tls:&{ca}"), tmp_path, "tls-session")
    with pytest.raises(StoreError, match="certificate verify failed"):
        open_store(server.url(password=QUOTED))  # the default: verify against the system CAs
    plain = server.url(password=QUOTED, query="socket_timeout=3").replace("rediss://", "redis://", 1)
    with pytest.raises(StoreError) as info:
        open_store(plain)  # a plain client at a TLS port: an error, not a hang
    assert QUOTED not in str(info.value)


def test_redis_over_mutual_tls(redis_server, tls_files, tmp_path):
    server = _tls_server(redis_server, tls_files, "--tls-auth-clients", "yes")
    query = (
        f"ssl_ca_certs={tls_files['server_cert']}&ssl_certfile={tls_files['client_cert']}"
        f"&ssl_keyfile={tls_files['client_key']}"
    )
    _redis_session(server.url(query=f"prefix=mtls:&{query}"), tmp_path, "mtls-session")
    with pytest.raises(StoreError):
        open_store(
            server.url(query=f"ssl_ca_certs={tls_files['server_cert']}&socket_timeout=3")
        )  # no client certificate


# -- 5. configs are data ------------------------------------------------------------------------------


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def _payloads(tmp_path: Path) -> list[str]:
    m = _marker(tmp_path)
    return [
        f"__import__('os').system('touch {m}')",
        f"$(touch {m})",
        f"`touch {m}`",
        f"{{__import__('os').system('touch {m}')}}",
        "os:system",
        f"; touch {m}",
    ]


def test_config_values_that_look_like_code_are_only_data(tmp_path, monkeypatch):
    marker = _marker(tmp_path)
    monkeypatch.chdir(tmp_path)
    for payload in _payloads(tmp_path):
        quoted = json.dumps(payload)
        attempts = [
            (f"strategies = [{quoted}]\n", UnknownStrategyError),
            (f'strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = {quoted}\n', ConfigError),
            (
                f'strategies = ["snapshot_restore"]\nstore = "{payload.replace(chr(34), "")}://x"\n',
                (ConfigError, StoreError),
            ),
            (f"threshold = {quoted}\n", ConfigError),
            (f"{payload.replace(chr(34), '')} = 1\n", ConfigError),
        ]
        for text, error in attempts:
            config = tmp_path / "ctxlife.toml"
            config.write_text(text, encoding="utf-8")
            with pytest.raises(error):
                Host(load_settings(config), context_window=4000, session_id="c")
            assert not marker.exists(), f"executed: {text!r}"
        (tmp_path / "ctxlife.toml").unlink()
        monkeypatch.setenv("CTXLIFE_THRESHOLD", payload)
        with pytest.raises(ConfigError):
            load_settings(None)
        monkeypatch.delenv("CTXLIFE_THRESHOLD")
        config = tmp_path / "ctxlife.toml"
        config.write_text(
            f'strategies = ["snapshot_restore"]\nstore = {json.dumps("file://" + payload)}\n',
            encoding="utf-8",
        )
        Host(load_settings(config), context_window=4000, session_id="c").manage([{"role": "user", "content": "x"}])
        assert not marker.exists()
    assert not marker.exists()


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("CTXLIFE_THRESHOLD", "__import__('os')")
    with pytest.raises(ConfigError, match="CTXLIFE_THRESHOLD"):
        settings_from_dict({"strategies": []})


def test_a_python_file_given_as_config_is_not_run(tmp_path, monkeypatch):
    marker = _marker(tmp_path)
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "evil_config.py"
    script.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nstrategies = []\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"malformed TOML in .*evil_config\.py: line 1"):
        load_settings(script)
    (tmp_path / "setup.py").write_text(script.read_text(), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[tool.ctxlife]\nstrategies = ["truncate_last_n"]\n',
        encoding="utf-8",
    )
    settings = load_settings(None)
    assert settings.strategies == ["truncate_last_n"]
    cli = subprocess.run(
        [sys.executable, "-m", "ctxlife.cli", "check", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert cli.returncode == 1 and "malformed TOML" in cli.stderr + cli.stdout
    assert not marker.exists()


def test_bootstrap_templates_render_only_the_three_variables():
    text = (
        "{agent_role} {session_id} {agent_role.__class__.__mro__} {session_id!r} {{date}} "
        "${HOME} %(x)s {0} {date:%Y} {__import__}"
    )
    host = Host(
        settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": text}}),
        context_window=4000,
        session_id="s9",
    )
    out = host.bootstrap_text(agent_role="clerk")
    assert out.startswith("clerk s9 {agent_role.__class__.__mro__} {session_id!r} {")
    assert "${HOME} %(x)s {0} {date:%Y} {__import__}" in out


def test_no_eval_exec_pickle_or_shell_in_the_library():
    """A static guard: nothing in ctxlife evaluates, unpickles or shells out (configs stay data)."""
    pattern = re.compile(r"\b(eval|exec)\(|pickle\.loads?|yaml\.load\(|shell=True|os\.system\(|marshal\.loads")
    hits = []
    for root in (REPO / "src" / "ctxlife", REPO / "strategies" / "ctxlife_strategies"):
        for path in root.rglob("*.py"):
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    hits.append(f"{path.relative_to(REPO)}:{lineno}: {line.strip()}")
    assert hits == []


def test_property_sessions_with_secrets_never_log_contents(tmp_path, stats):
    """Generated sessions through the full stack: no event ever contains a planted content marker."""
    from reliability_gen import captured_events

    @examples(12)
    @given(system=system_prompts(), script=scripts(max_turns=4))
    def prop(system, script):
        from reliability_gen import Call, Native, React, User

        marked: list[Any] = []
        for intent in script:  # plant the marker in every content
            if isinstance(intent, User):
                intent = User(f"{SECRET} {intent.content}", intent.cache_breakpoint)
            elif isinstance(intent, Native):
                intent = Native(
                    [Call(c.tool, {**c.args, "s": SECRET}, c.call_id, f"{SECRET} {c.result}") for c in intent.calls],
                    intent.content,
                )
            elif isinstance(intent, React):
                intent = React(
                    Call(intent.call.tool, intent.call.args, intent.call.call_id, f"{SECRET} {intent.call.result}"),
                    SECRET,
                )
            marked.append(intent)
        session = f"p-{uuid.uuid4().hex[:10]}"
        with captured_events() as captured:
            host = Host(_everything_with_secrets(tmp_path), context_window=800, session_id=session)
            driver = Driver(
                host, Checks(), session_id=session, system=[{"role": "system", "content": f"{SECRET}"}] + system
            )
            driver.play(marked)
            host.close()
        assert not [e for e in captured if SECRET in repr(e)]
        stats.example({"no_content_in_events": len(captured)})

    prop()
