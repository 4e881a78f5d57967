"""snapshot_restore when the restore fails: the list is left as the caller sent it, the failure is told
(an error event naming the session, the view, the error, whether it is retried), a store that cannot be
read is tried again on the next calls (a few times), a record that is no message is never retried, and no
snapshot is written for the view until a restore succeeds."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.sessions.file import FileStore

pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # task_end is never called here
HINT = (
    "the list was left as the caller sent it; no snapshot is written for this view until a restore succeeds "
    "(fix or remove the record named, e.g. with `ctxlife session export`)"
)


class Unreadable(FileStore):
    """A file store whose reads fail while ``down`` (a store that cannot be reached)."""

    down = False

    def read_records(self, *args, **kwargs):
        if self.down:
            raise StoreError("the store cannot be read (test outage)")
        return super().read_records(*args, **kwargs)


def _host(store, session="s"):
    host = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=4000, session_id=session)
    host.store = store  # the store the strategy reads and writes (the host's one store)
    return host


def _failed(logs):
    return [e for e in logs if e["event"] == "ctxlife.restore_failed"]


def _first_process(store, session="s"):
    host = _host(store, session)
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "What is in stock?"}]
    host.manage(live)
    host.record_reply([*live, {"role": "assistant", "content": "R0001 and R0002."}])
    host.close()


def test_a_record_that_is_no_message_fails_the_restore_for_good(tmp_path):
    _first_process(FileStore(tmp_path))
    with FileStore(tmp_path) as store:
        store.append("s", [{"content": "no role here"}], view="")
    host = _host(FileStore(tmp_path))
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "And now?"}]
    with capture_logs() as logs:
        report = host.manage(live)
    assert live == [{"role": "system", "content": "sys"}, {"role": "user", "content": "And now?"}]  # left alone
    [failure] = report.failures
    assert failure.strategy == "snapshot_restore" and failure.error.startswith("BadSessionError: session 's' view ''")
    [event] = _failed(logs)
    assert event["strategy"] == "snapshot_restore" and event["session_id"] == "s" and event["view"] == ""
    assert event["error"] == failure.error and event["retried"] is False and event["hint"] == HINT
    assert event["log_level"] == "error"
    with capture_logs() as logs:
        for question in ("Again?", "Once more?"):
            live += [{"role": "assistant", "content": "..."}, {"role": "user", "content": question}]
            assert host.manage(live).failures == []
    assert _failed(logs) == []  # not tried again
    assert host.store.load_snapshot("s") is None or all(
        m.get("content") != "And now?" for m in host.store.load_snapshot("s").messages
    )
    host.close()


def test_a_store_that_cannot_be_read_is_tried_again_on_the_next_calls(tmp_path):
    _first_process(FileStore(tmp_path))
    store = Unreadable(tmp_path)
    host = _host(store)
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Anything new?"}]
    store.down = True
    with capture_logs() as logs:
        first = host.manage(live)
    assert live == [{"role": "system", "content": "sys"}, {"role": "user", "content": "Anything new?"}]
    assert [f.strategy for f in first.failures] == ["snapshot_restore"]
    [event] = _failed(logs)
    assert event["retried"] is True and event["error"] == "StoreError: the store cannot be read (test outage)"
    store.down = False
    live += [{"role": "assistant", "content": "Not yet."}, {"role": "user", "content": "And now?"}]
    second = host.manage(live)  # the store is back: the restore is made now
    assert second.failures == []
    assert "restored" in [a.what for a in second.actions if a.strategy == "snapshot_restore"]
    assert [m["content"] for m in live[:3]] == ["sys", "What is in stock?", "R0001 and R0002."]
    host.close()


def test_an_outage_is_retried_a_few_times_then_given_up(tmp_path):
    _first_process(FileStore(tmp_path))
    store = Unreadable(tmp_path)
    host = _host(store)
    store.down = True
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q0"}]
    retried = []
    for i in range(1, 5):
        with capture_logs() as logs:
            host.manage(live)
        retried += [e["retried"] for e in _failed(logs)]
        live += [{"role": "assistant", "content": f"a{i}"}, {"role": "user", "content": f"q{i}"}]
    # three attempts, the third one told as the last; then no more tries while the host lives
    assert retried == [True, True, False]
    store.down = False
    with capture_logs() as logs:
        report = host.manage(live)
    assert _failed(logs) == [] and "restored" not in [a.what for a in report.actions]
    host.close()


# -- what a restart puts back (views, the saved prompt, redaction) --------------------------------------------


def _contents(messages):
    return [(m["role"], m["content"]) for m in messages]


def test_a_restart_restores_each_view_from_its_own_conversation(tmp_path):
    first = _host(FileStore(tmp_path))
    for view, question in (("agent-a", "A's question"), ("", "the default view's question")):
        live = [{"role": "system", "content": "sys"}, {"role": "user", "content": question}]
        first.before_llm_call(live, view=view)
        first.record_reply([*live, {"role": "assistant", "content": f"answer to {question}"}], view=view)
    first.close()
    second = _host(FileStore(tmp_path))
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "A again"}]
    report = second.before_llm_call(live, view="agent-a")
    assert [(a.what, a.details) for a in report.actions if a.strategy == "snapshot_restore"] == [
        ("restored", {"messages": 2, "from_raw_tail": 2})  # (no snapshot: both from the raw history)
    ]
    assert _contents(live) == [
        ("system", "sys"),
        ("user", "A's question"),
        ("assistant", "answer to A's question"),
        ("user", "A again"),
    ]
    with FileStore(tmp_path) as store:  # the call recorded the new message in its view
        assert [r.message["content"] for r in store.read_records("s", view="agent-a")][-1] == "A again"
    second.record_reply([*live, {"role": "assistant", "content": "A's second answer"}], view="agent-a")
    other = [{"role": "system", "content": "sys"}, {"role": "user", "content": "the default view again"}]
    second.before_llm_call(other)  # the other view's first call in this process restores it too
    assert [m["content"] for m in other] == [
        "sys",
        "the default view's question",
        "answer to the default view's question",
        "the default view again",
    ]
    second.close()
    with FileStore(tmp_path) as store:
        in_a = [r.message["content"] for r in store.read_records("s", view="agent-a")]
        in_default = [r.message["content"] for r in store.read_records("s", view="")]
    assert in_a == ["A's question", "answer to A's question", "A again", "A's second answer"]
    assert in_default == [
        "the default view's question",
        "answer to the default view's question",
        "the default view again",
    ]


def test_a_list_that_already_holds_the_conversation_is_not_restored_again(tmp_path):
    _first_process(FileStore(tmp_path))
    host = _host(FileStore(tmp_path))
    live = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "What is in stock?"},
        {"role": "assistant", "content": "R0001 and R0002."},
        {"role": "user", "content": "And now?"},
    ]
    report = host.manage(live)
    assert len(live) == 4
    assert [(a.what, a.details) for a in report.actions if a.strategy == "snapshot_restore"] == [
        ("skipped", {"reason": "list_holds_conversation"})
    ]
    host.close()


def test_what_a_restore_puts_back_goes_through_the_privacy_filter_as_restore(tmp_path):
    import ctxlife

    seen = []

    class Redact:
        @ctxlife.hookimpl
        def ctxlife_filter_text(self, ctx):
            seen.append(ctx.where)
            ctx.text = ctx.text.replace("R0001", "[id]")

    _first_process(FileStore(tmp_path))
    host = Host(
        settings_from_dict({"strategies": ["snapshot_restore"]}),
        context_window=4000,
        session_id="s",
        plugins=[Redact()],
    )
    host.store = FileStore(tmp_path)
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "And now?"}]
    host.manage(live)
    assert _contents(live)[2] == ("assistant", "[id] and R0002.") and set(seen) == {"restore"}
    host.close()


def test_no_snapshot_is_written_until_a_restore_succeeds_and_retries_count_anew_after_one(tmp_path):
    import ctxlife

    class Edit:
        """A strategy that changes every list it is handed (as a compaction does): a snapshot is then due."""

        @ctxlife.hookimpl(trylast=True)
        def ctxlife_before_llm_call(self, ctx):
            ctx.messages[0] = {"role": "system", "content": ctx.messages[0]["content"] + "!"}

    _first_process(FileStore(tmp_path))
    store = Unreadable(tmp_path)
    host = Host(
        settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=4000, session_id="s", plugins=[Edit()]
    )
    host.store = store
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"}]
    store.down = True
    host.manage(live)
    store.down = False
    assert store.load_snapshot("s") is None  # the unrestored list is not saved over the conversation
    live += [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    assert "restored" in [a.what for a in host.manage(live).actions]
    snapshot = store.load_snapshot("s")
    assert snapshot is not None and snapshot.messages[1]["content"] == "What is in stock?"  # saved again
    retried = []
    store.down = True
    for i in range(3):
        host.start_run("s")  # a new run restores again
        live += [{"role": "assistant", "content": f"b{i}"}, {"role": "user", "content": f"r{i}"}]
        with capture_logs() as logs:
            host.manage(live)
        retried += [e["retried"] for e in _failed(logs)]
    assert retried == [True, True, False]  # three tries again: the count began anew after the success
    host.close()


def test_without_a_session_it_warns_once_and_without_a_store_it_says_it_skipped():
    host = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=4000)
    host.store = None  # (no store: a host whose store could not be opened)
    with capture_logs() as logs:
        for _ in range(2):
            host.manage([{"role": "user", "content": "hi"}])
    warned = [e for e in logs if e["event"] == "ctxlife.no_session"]
    assert warned == [
        {
            "event": "ctxlife.no_session",
            "log_level": "warning",
            "strategy": "snapshot_restore",
            "hint": "pass session_id= to wrap()/manage() or set session_id in the config",
        }
    ]
    report = host.before_llm_call([{"role": "user", "content": "hi"}], session_id="s")
    assert [(a.strategy, a.what, a.details) for a in report.actions] == [
        ("snapshot_restore", "skipped", {"reason": "no_store"})
    ]


class AppendFails(FileStore):
    """A file store whose appends fail while ``down`` (a full disk)."""

    down = False

    def append(self, *args, **kwargs):
        if self.down:
            raise StoreError("no space left on the test device")
        return super().append(*args, **kwargs)


def test_a_restore_whose_recording_failed_is_made_again_on_the_next_call(tmp_path):
    _first_process(FileStore(tmp_path))
    store = AppendFails(tmp_path)
    host = _host(store)
    live = [{"role": "system", "content": "sys"}, {"role": "user", "content": "And now?"}]
    store.down = True
    report = host.manage(live)
    assert report.failures[0].strategy == "snapshot_restore" and "no space left" in report.failures[0].error
    assert [m["content"] for m in live] == ["sys", "And now?"]  # the call's edit rolled back
    store.down = False
    report = host.manage(live)
    assert "restored" in [a.what for a in report.actions]
    assert [m["content"] for m in live] == ["sys", "What is in stock?", "R0001 and R0002.", "And now?"]
    host.close()
