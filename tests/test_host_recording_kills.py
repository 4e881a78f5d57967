"""What the host leaves in the store around a model call (scope host-api, host_recording.py): the snapshot saved
after a strategy cut the list (what it holds, what the report says, what a restart in a new host then sends), the
list a cut leaves told to the recorder (the caller's next list is not taken for a deletion: nothing lost), a
snapshot that must wait for the raw history, a snapshot or call record whose write fails (said, the call goes
on), in the default view and in a named one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.host_report import Report, StrategyFailure
from ctxlife.messages import strip_inserted_marks
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.keeper import keeper_for

pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # these hosts never end a task

VIEWS = pytest.mark.parametrize("view", ["", "agent-b"])
# truncate_last_n keeps the first question and the latest round on every call: from the third turn on, every
# call cuts the list in its middle (a cut at its front the recorder would never take for a deletion)
CUT = {"truncate_last_n": {"rounds": 1, "pin_first_user": True, "always": True}}


def S(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def U(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def A(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _host(store: FileStore, *strategies: str, plugins: tuple[Any, ...] = (), **tables: Any) -> Host:
    settings = settings_from_dict({"strategies": ["snapshot_restore", *strategies], **tables})
    host = Host(settings, context_window=100_000, session_id="s", plugins=list(plugins))
    host.store = store  # the one store the host and its strategies read and write
    return host


def _texts(messages: Any) -> list[str]:
    return [strip_inserted_marks(str(m["content"])) for m in messages]


def _snapshot_actions(report: Report) -> list[tuple[str, str, str, dict[str, Any]]]:
    return [(a.strategy, a.node, a.what, a.details) for a in report.actions if a.strategy == "snapshot_restore"]


def _converse(host: Host, view: str, turns: int) -> tuple[list[dict[str, Any]], Report]:
    """``turns`` questions and answers, the caller's list managed in place (as a caller writes it back)."""
    live = [S("sys")]
    report = None
    for i in range(turns):
        live.append(U(f"q{i}"))
        report = host.before_llm_call(live, view=view)
        live.append(A(f"a{i}"))
    assert report is not None
    return live, report


@VIEWS
def test_a_cut_list_is_saved_as_the_views_snapshot_and_a_new_host_sends_it_on(tmp_path: Path, view: str) -> None:
    host = _host(FileStore(tmp_path), "truncate_last_n", **CUT)
    live, report = _converse(host, view, 4)
    sent = live[:-1]  # the list the last call sent (its answer came after)
    assert _texts(sent) == ["sys", "q0", "q3"]  # (the precondition: the call cut the list)
    assert _snapshot_actions(report) == [
        ("snapshot_restore", "before_llm_call", "snapshot_saved", {"messages": 3, "raw_length": 7})
    ]
    host.record_reply(live, view=view)
    host.close()

    with FileStore(tmp_path) as store:
        snapshot = store.load_snapshot("s", view)
        assert snapshot is not None and _texts(snapshot.messages) == ["sys", "q0", "q3"]
        assert snapshot.raw_length == 7  # q0 a0 q1 a1 q2 a2 q3: what the snapshot reflects
        # nothing lost: the raw history holds every message, none recorded as the caller's deletion
        records = store.read_records("s", view=view)
        assert [(r.op, r.message["content"]) for r in records] == [
            ("add", t) for t in ["q0", "a0", "q1", "a1", "q2", "a2", "q3", "a3"]
        ]
        other = "agent-b" if view == "" else ""
        assert store.load_snapshot("s", other) is None and store.read_records("s", view=other) == []

    later = _host(FileStore(tmp_path))
    fresh = [S("sys"), U("new")]
    restored = later.before_llm_call(fresh, view=view)
    assert [(w, d) for _, _, w, d in _snapshot_actions(restored)] == [("restored", {"messages": 3, "from_raw_tail": 1})]
    assert _texts(fresh) == ["sys", "q0", "q3", "a3", "new"]  # the snapshot, the raw tail after it, the new turn
    later.close()


@VIEWS
def test_the_caller_sending_the_cut_list_on_deletes_nothing_it_received(tmp_path: Path, view: str) -> None:
    """The recorder is told the list a call hands back: the caller's next list (the cut one, with its answer
    and a new question) is that list continued, not the caller's deletion of what the strategy cut."""
    host = _host(FileStore(tmp_path), "truncate_last_n", **CUT)
    live, _ = _converse(host, view, 3)
    assert _texts(live) == ["sys", "q0", "q2", "a2"]  # (the precondition: the lists handed back were cut)
    host.close()
    with FileStore(tmp_path) as store:
        records = store.read_records("s", view=view)
        assert [(r.op, r.message["content"]) for r in records] == [("add", t) for t in ["q0", "a0", "q1", "a1", "q2"]]
    # a restart restores the cut list, not one the caller's 'deletions' emptied
    later = _host(FileStore(tmp_path))
    fresh = [S("sys"), U("new")]
    later.before_llm_call(fresh, view=view)
    assert _texts(fresh) == ["sys", "q0", "q2", "new"]
    later.close()


class Racing(FileStore):
    """A file store that runs ``racer`` once, when its mark key is first made (right after the recorder's first
    write, before the call goes on: the moment another thread may write to the same view), and refuses appends
    while ``down``."""

    racer: Any = None
    down = False

    def mark_key(self, *args: Any, **kwargs: Any) -> Any:
        racer, self.racer = self.racer, None
        if racer is not None:
            racer()
        return super().mark_key(*args, **kwargs)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise StoreError("no space left on the test device")
        return super().append(*args, **kwargs)


@VIEWS
def test_a_cut_list_is_not_saved_while_another_threads_messages_wait_for_the_store(tmp_path: Path, view: str) -> None:
    store = Racing(tmp_path)
    host = _host(store, "truncate_last_n", **CUT)
    live = [S("sys"), U("q0"), A("a0"), U("q1"), A("a1"), U("q2")]  # a caller starting ctxlife midway
    failed: list[str] = []

    def another_thread_writes_and_fails() -> None:
        def write() -> None:
            store.down = True
            try:
                keeper_for(store).record_list("s", [*live, A("a2"), U("elsewhere")], view)
            except StoreError as exc:
                failed.append(str(exc))
            finally:
                store.down = False

        worker = threading.Thread(target=write, daemon=True)
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive()

    store.racer = another_thread_writes_and_fails
    report = host.before_llm_call(live, view=view)
    assert failed == ["no space left on the test device"]  # (the precondition: two messages wait)
    assert _texts(live) == ["sys", "q0", "q2"]  # (and this call cut the list)
    assert _snapshot_actions(report) == [
        ("snapshot_restore", "before_llm_call", "skipped", {"reason": "raw_history_pending", "pending": 2})
    ]
    assert report.failures == []
    host.close()
    with FileStore(tmp_path) as plain:
        # no snapshot: a restore would read the waiting messages twice (in it and in the raw tail after it)
        assert plain.load_snapshot("s", view) is None
        assert [r.message["content"] for r in plain.read_records("s", view=view)] == ["q0", "a0", "q1", "a1", "q2"]


class SnapshotDown(FileStore):
    """A file store whose snapshot writes fail while ``down`` (a full disk), quoting the conversation."""

    down = False

    def save_snapshot(self, snapshot: Any) -> None:
        if self.down:
            raise StoreError(f"snapshot of {snapshot.messages[-1]['content']!r}: No space left on device")
        super().save_snapshot(snapshot)


@VIEWS
def test_a_failed_snapshot_write_is_the_strategys_failure_and_the_next_call_saves_it(tmp_path: Path, view: str) -> None:
    store = SnapshotDown(tmp_path)
    host = _host(store, "truncate_last_n", **CUT)
    live, _ = _converse(host, view, 2)
    store.down = True
    live.append(U("my card is 4111 1111 1111 1111, please book it"))
    with capture_logs() as logs:
        report = host.before_llm_call(live, view=view)
    quoted = "'my card is 4111 1111 1111 1111, please book it'"
    failure = f"StoreError: snapshot of {quoted}: No space left on device"
    assert report.failures == [
        StrategyFailure("snapshot_restore", "before_llm_call", failure),
        # (a store failure in the call: its call record is not attempted, said so)
        StrategyFailure(
            "call_record", "before_llm_call", f"skipped: the store failed in this call (snapshot_restore: {failure})"
        ),
    ]
    assert _texts(live) == ["sys", "q0", "my card is 4111 1111 1111 1111, please book it"]  # the call went on, cut
    assert [a for a in _snapshot_actions(report) if a[2] == "snapshot_saved"] == []
    [event] = [e for e in logs if e["event"] == "ctxlife.strategy_failed"]
    assert (event["log_level"], event["strategy"], event["node"], event["error_type"], event["session_id"]) == (
        "error",
        "snapshot_restore",
        "before_llm_call",
        "StoreError",
        "s",
    )
    # logs quote no message: the error's text is withheld, its type and length said
    assert event["error"] == (
        "StoreError: (message of 85 characters withheld: it quotes message content; set log_content = true to see it)"
    )
    assert not event.get("exc_info")
    with FileStore(tmp_path) as plain:
        saved = plain.load_snapshot("s", view)
        assert saved is not None and _texts(saved.messages) == ["sys", "q0", "q1"]  # the call before's

    store.down = False
    live += [A("booked"), U("thanks")]
    again = host.before_llm_call(live, view=view)
    assert [w for _, _, w, _ in _snapshot_actions(again)] == ["snapshot_saved"]
    assert again.failures == []
    host.close()
    with FileStore(tmp_path) as plain:
        saved = plain.load_snapshot("s", view)
        assert saved is not None and _texts(saved.messages) == ["sys", "q0", "thanks"]


def test_with_log_content_the_failed_snapshots_event_quotes_the_error(tmp_path: Path) -> None:
    store = SnapshotDown(tmp_path)
    host = _host(store, "truncate_last_n", log_content=True, **CUT)
    live, _ = _converse(host, "", 2)
    store.down = True
    live.append(U("my card is 4111 1111 1111 1111, please book it"))
    with capture_logs() as logs:
        host.before_llm_call(live)
    [event] = [e for e in logs if e["event"] == "ctxlife.strategy_failed"]
    assert "4111 1111 1111 1111" in event["error"]
    host.close()


class CallsDown(FileStore):
    """A file store whose call-record writes fail (a full disk); every other write works."""

    def append_call(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        raise OSError(28, "No space left on device")


@VIEWS
def test_a_failed_call_record_write_is_reported_with_its_node_and_view_and_the_call_goes_on(
    tmp_path: Path, view: str
) -> None:
    host = _host(CallsDown(tmp_path))
    live = [S("sys"), U("hello")]
    with capture_logs() as logs:
        report = host.before_llm_call(live, view=view)
    assert _texts(live) == ["sys", "hello"]
    assert report.failures == [
        StrategyFailure("call_record", "before_llm_call", "OSError: [Errno 28] No space left on device")
    ]
    [event] = [e for e in logs if e["event"] == "ctxlife.call_record_failed"]
    assert (event["log_level"], event["session_id"], event["view"], event["error"]) == (
        "error",
        "s",
        view,
        "OSError: [Errno 28] No space left on device",
    )
    host.close()
    with FileStore(tmp_path) as plain:
        assert [r.message["content"] for r in plain.read_records("s", view=view)] == ["hello"]  # the call recorded


def test_manage_through_a_shared_host_saves_what_it_cut_for_the_next_process(tmp_path: Path) -> None:
    """The same through ``ctxlife.manage``: a second process (a new host) restores what the last call sent."""
    config = settings_from_dict(
        {"strategies": ["snapshot_restore", "truncate_last_n"], "store": f"file://{tmp_path}", **CUT}
    )
    ctxlife.api.clear_hosts()
    try:
        live = [S("sys")]
        for i in range(3):
            live.append(U(f"q{i}"))
            ctxlife.manage(live, config=config, context_window=100_000, session_id="u1")
            live.append(A(f"a{i}"))
    finally:
        ctxlife.api.clear_hosts()
    with FileStore(tmp_path) as store:
        saved = store.load_snapshot("u1")
        assert saved is not None and _texts(saved.messages) == ["sys", "q0", "q2"]
    fresh = [S("sys"), U("new")]
    restart = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    ctxlife.api.clear_hosts()
    try:
        ctxlife.manage(fresh, config=restart, context_window=100_000, session_id="u1")
    finally:
        ctxlife.api.clear_hosts()
    assert _texts(fresh) == ["sys", "q0", "q2", "new"]  # the cut list; a2 was never recorded (no record_reply)


@VIEWS
def test_a_message_the_caller_deletes_from_the_cut_list_is_removed_and_nothing_else(tmp_path: Path, view: str) -> None:
    host = _host(FileStore(tmp_path), "truncate_last_n", **CUT)
    live, _ = _converse(host, view, 3)
    assert _texts(live) == ["sys", "q0", "q2", "a2"]  # (the precondition: the list handed back was cut)
    del live[2]  # the caller drops q2 from its conversation
    live.append(U("q3"))
    host.before_llm_call(live, view=view)
    host.close()
    with FileStore(tmp_path) as store:
        records = store.read_records("s", view=view)
        assert [(r.op, r.message.get("content")) for r in records if r.seq > 5] == [
            ("remove", None),
            ("add", "a2"),
            ("add", "q3"),
        ]
        assert [r.slot for r in records if r.op == "remove"] == [5]  # q2's slot: a0, q1 and a1 stay


class SnapshotRaises(FileStore):
    """A file store whose snapshot writes raise ``error`` (quoting no message)."""

    error: Exception = OSError(28, "No space left on device")

    def save_snapshot(self, snapshot: Any) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "traceback"),
    [(OSError(28, "No space left on device"), True), (StoreError("file store: snapshot: disk full"), False)],
)
def test_a_failed_snapshot_writes_traceback_is_logged_only_for_an_unexpected_error(
    tmp_path: Path, error: Exception, traceback: bool
) -> None:
    """An error of ctxlife's own (a StoreError says all in its message) is logged without its traceback; any
    other exception with it, when its message quotes no message of the conversation."""
    store = SnapshotRaises(tmp_path)
    store.error = error
    host = _host(store, "truncate_last_n", **CUT)
    with capture_logs() as logs:
        live, report = _converse(host, "", 3)
    host.close()
    assert [f.strategy for f in report.failures][:1] == ["snapshot_restore"]  # (the precondition: a cut, failed)
    events = [e for e in logs if e["event"] == "ctxlife.strategy_failed"]
    assert events and all(e["error"] == f"{type(error).__name__}: {error}" for e in events)  # (quoting nothing)
    assert [e["exc_info"] for e in events] == [traceback] * len(events)


def test_each_call_ends_its_span_tells_every_listener_and_logs_one_node_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a dispatch ends with (host_report.emit_node): the node's span closed with the report's figures, every
    listener handed the report (one that raises is logged, the others still run, the call goes on), and the one
    ``ctxlife.node`` event naming the session and the agent."""
    pytest.importorskip(
        "opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed: pip install 'ctxlife[otel]'"
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxlife.telemetry import Tracer

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)  # (the test session turns the SDK off)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = _host(FileStore(tmp_path), "truncate_last_n", **CUT)
    host.tracer = Tracer(provider.get_tracer("ctxlife"))
    heard: list[Any] = []

    def broken(report: Report) -> None:
        raise ValueError("the dashboard is down")

    host.listeners += [broken, heard.append]
    live = [S("sys"), U("q0"), A("a0"), U("q1"), A("a1"), U("q2")]
    with capture_logs() as logs:
        report = host.before_llm_call(live, agent_role="clerk")
    host.close()
    assert _texts(live) == ["sys", "q0", "q2"]  # (the precondition: a call that cut the list)
    assert [r.node for r in heard] == ["bootstrap", "before_llm_call"]  # (an agent's first call: its bootstrap)
    assert heard[-1] is report
    failed = [e for e in logs if e["event"] == "ctxlife.listener_failed"]
    assert [(e["log_level"], e["listener"], e["error"]) for e in failed] == [
        ("error", repr(broken), "ValueError: the dashboard is down")
    ] * 2
    [node] = [e for e in logs if e["event"] == "ctxlife.node" and e["node"] == "before_llm_call"]
    assert (node["log_level"], node["node"], node["session_id"], node["agent_role"]) == (
        "debug",
        "before_llm_call",
        "s",
        "clerk",
    )
    assert (node["tokens_before"], node["tokens_after"]) == (report.tokens_before, report.tokens_after)
    assert (node["acted"], node["failed"], node["duration_ms"]) == (
        ["truncate_last_n", "snapshot_restore"],
        [],
        round(report.duration_ms, 3),
    )
    assert node["actions"] == [
        {"strategy": "truncate_last_n", "what": "truncated", "removed_messages": 3, "kept_rounds": 1},
        {"strategy": "snapshot_restore", "what": "snapshot_saved", "messages": 3, "raw_length": 5},
    ]
    [span] = [s for s in exporter.get_finished_spans() if s.name == "ctxlife.before_llm_call"]
    attributes = span.attributes or {}
    assert (attributes["ctxlife.tokens.before"], attributes["ctxlife.tokens.after"]) == (
        report.tokens_before,
        report.tokens_after,
    )
    assert report.tokens_after < report.tokens_before
