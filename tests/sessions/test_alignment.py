"""Sessions as a data model (issue 11): exactly-once recording by alignment, restore by alignment.

One test per reported failure, on the file, SQLite and Redis stores; real processes where the
failure involves a restart or a second worker.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.sessions import RawRecord, SessionStore, Snapshot, open_store
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from delegating_store import DelegatingStore

WINDOW = 100_000


def settings(url: str, *strategies: str, **tables: Any) -> Any:
    return settings_from_dict({"strategies": ["snapshot_restore", *strategies], "store": url, **tables})


def contents(records: list[RawRecord] | list[dict[str, Any]]) -> list[Any]:
    return [(r.message if isinstance(r, RawRecord) else r).get("content") for r in records]


def canon(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def rebuilt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as a stateless caller sends it: rebuilt from JSON (new dicts every call)."""
    return json.loads(json.dumps(messages))


# -- a second restore duplicates the conversation ---------------------------------------------------


def test_a_new_host_leaves_a_list_that_already_holds_the_conversation_alone(store_url: str) -> None:
    cfg = settings(store_url)
    first = Host(cfg, context_window=WINDOW, session_id="dup")
    conversation = [system("sys"), user("q0")]
    first.manage(conversation)
    conversation += [assistant("a0"), user("q1")]
    first.manage(conversation)
    first.close()

    # A second host (more than 32 sessions, a Settings built per request, an edited config file)
    # gets the caller's list, which holds the conversation: it must send it as it is.
    again = Host(cfg, context_window=WINDOW, session_id="dup")
    conversation += [assistant("a1"), user("q2")]
    sent = rebuilt(conversation)
    report = again.manage(sent)
    assert contents(sent) == ["sys", "q0", "a0", "q1", "a1", "q2"]
    assert "restored" not in [a.what for a in report.actions]
    again.close()
    with open_store(store_url) as store:
        assert contents(store.read_records("dup")) == ["q0", "a0", "q1", "a1", "q2"]


def test_a_fresh_list_gets_the_snapshot_the_raw_tail_and_the_current_user_message(store_url: str) -> None:
    cfg = settings(store_url)
    host = Host(cfg, context_window=WINDOW, session_id="fresh")
    messages = [system("sys"), user("q0")]
    host.manage(messages)
    messages += [assistant("a0"), user("q1")]
    host.manage(messages)
    host.close()
    restarted = Host(cfg, context_window=WINDOW, session_id="fresh")
    fresh = [system("sys"), user("q2")]
    restarted.manage(fresh)
    assert contents(fresh) == ["sys", "q0", "a0", "q1", "q2"]
    restarted.close()
    with open_store(store_url) as store:
        assert contents(store.read_records("fresh")) == ["q0", "a0", "q1", "q2"]


# -- stateless callers re-record everything --------------------------------------------------------


def test_a_caller_that_rebuilds_its_list_every_call_records_each_message_once(store_url: str) -> None:
    cfg = settings(store_url)
    history: list[dict[str, Any]] = [system("sys")]
    turns = [user("q0"), assistant("ok"), user("q1"), assistant("ok"), user("ok"), assistant("ok"), user("q3")]
    for message in turns:
        history.append(message)
        if message["role"] == "user":
            ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="stateless")
            ctxlife.manage(rebuilt(history), config=cfg, context_window=WINDOW, session_id="stateless")  # a retry
    with open_store(store_url) as store:
        records = store.read_records("stateless")
    # 7 messages, 7 records: the equal "ok" replies at different places stay distinct records.
    assert contents(records) == ["q0", "ok", "q1", "ok", "ok", "ok", "q3"]
    assert [r.seq for r in records] == list(range(1, 8))


def test_steady_state_recording_reads_nothing_from_the_store(store_url: str) -> None:
    """The tail is kept in memory: a stateless caller's calls cost no store read once the view is known."""
    from ctxlife.sessions.recording import recorder_for

    with open_store(store_url) as store:
        reads = CountingStore(store)
        recorder = recorder_for(reads)
        history: list[dict[str, Any]] = []
        for i in range(60):
            history += [user(f"q{i}"), assistant(f"a{i}")]
            recorder.record("steady", rebuilt(history))
        assert reads.calls["read_records"] <= 1 and reads.calls["head"] <= 1
        assert store.head("steady") == 120


class CountingStore(DelegatingStore):
    """A real store that counts the calls made to it."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.calls: dict[str, int] = {"read_records": 0, "head": 0, "append": 0}

    def read_records(self, *args: Any, **kwargs: Any) -> list[RawRecord]:
        self.calls["read_records"] += 1
        return self.inner.read_records(*args, **kwargs)

    def head(self, session_id: str) -> int:
        self.calls["head"] += 1
        return self.inner.head(session_id)

    def append(self, *args: Any, **kwargs: Any) -> list[RawRecord]:
        self.calls["append"] += 1
        return self.inner.append(*args, **kwargs)

    def close(self) -> None:
        pass


# -- a rolled-back restore overwrites the good snapshot; parallel tool calls ------------------------


def test_parallel_tool_results_in_completion_order_restore_without_rollback(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 5, "always": True})
    host = Host(cfg, context_window=WINDOW, session_id="par")
    calls = [tool_call("lookup", {"item": "A"}, call_id="c1"), tool_call("lookup", {"item": "B"}, call_id="c2")]
    messages = [system("sys"), user("look up A and B")]
    host.manage(messages)
    # Results in completion order: c2 answered before c1 (providers pair them by tool_call_id).
    messages += [assistant(None, calls), tool_result("c2", "B: 3"), tool_result("c1", "A: 5"), assistant("A 5, B 3")]
    messages.append(user("thanks"))
    host.manage(messages)
    host.close()

    restarted = Host(cfg, context_window=WINDOW, session_id="par")
    fresh = [system("sys"), user("and C?")]
    report = restarted.manage(fresh)
    assert report.failures == []
    assert [a.what for a in report.actions if a.strategy == "snapshot_restore"][0] == "restored"
    assert [m.get("tool_call_id") for m in fresh if m["role"] == "tool"] == ["c2", "c1"]
    assert contents(fresh)[-1] == "and C?"
    restarted.close()


def test_a_failed_restore_never_writes_a_snapshot(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "always": True})
    good = Snapshot(session_id="keep", messages=[system("sys"), user("q0"), assistant("a0")], raw_length=2)
    with open_store(store_url) as store:
        store.append("keep", [user("q0"), assistant("a0"), {"note": "not a message"}])
        store.save_snapshot(good)
    host = Host(cfg, context_window=WINDOW, session_id="keep")
    fresh = [system("sys"), user("q1")]
    report = host.manage(fresh)
    assert [f.strategy for f in report.failures] == ["snapshot_restore"]
    assert "raw record 3 is not a message" in report.failures[0].error
    assert fresh == [system("sys"), user("q1")]  # left alone, nothing injected
    fresh += [assistant("a1"), user("q2")]
    host.manage(fresh)  # truncate_last_n compacts: a snapshot would be saved after a good restore
    host.task_end(ctxlife.TaskContext(messages=[*fresh, assistant("a2")], output="a2"))
    host.close()
    with open_store(store_url) as store:
        kept = store.load_snapshot("keep")
        assert kept is not None and canon(kept.messages) == canon(good.messages)
        # Recording went on all the same.
        assert contents(store.read_records("keep"))[-4:] == ["q1", "a1", "q2", "a2"]


# -- a restore injects records that are not messages -------------------------------------------------


def test_a_record_without_a_role_is_never_put_into_the_models_list(store_url: str) -> None:
    with open_store(store_url) as store:
        store.append("norole", [user("q0"), {"content": "no role here"}, assistant("a0")])
    with structlog.testing.capture_logs() as events:
        messages = [system("sys"), user("q1")]
        ctxlife.manage(messages, config=settings(store_url), context_window=WINDOW, session_id="norole")
    assert messages == [system("sys"), user("q1")]
    failed = [e for e in events if e["event"] == "ctxlife.restore_failed"]
    assert failed and "norole" in failed[0]["error"] and "raw record 2" in failed[0]["error"]
    assert "'role'" in failed[0]["error"]


# -- one bad message stops all recording --------------------------------------------------------------


def test_a_message_that_is_not_json_is_quarantined_and_recording_and_snapshots_go_on(store_url: str) -> None:
    cfg = settings(store_url, "truncate_last_n", truncate_last_n={"rounds": 1, "always": True})
    host = Host(cfg, context_window=WINDOW, session_id="bad")
    nan_call = tool_call("measure", {"x": math.nan}, call_id="n1")
    nan_call["function"]["arguments"] = {"x": math.nan}  # a framework that keeps arguments as a dict
    messages: list[dict[str, Any]] = [system("sys"), user("q0")]
    # (before_llm_call, as a framework adapter calls it: manage() refuses bytes content up front)
    with structlog.testing.capture_logs() as events:
        host.before_llm_call(messages)
        messages += [assistant(None, [nan_call]), tool_result("n1", "ok"), assistant("a0")]
        messages += [{"role": "user", "content": b"raw bytes"}]
        host.before_llm_call(messages)
        messages += [assistant("a1"), user("q2")]
        host.before_llm_call(messages)
    host.close()
    quarantined = [e for e in events if e["event"] == "ctxlife.session_record_quarantined"]
    assert {e["seq"] for e in quarantined} == {2, 5}
    with open_store(store_url) as store:
        records = store.read_records("bad")
        assert len(records) == 7 and contents(records)[-3:] == ["raw bytes", "a1", "q2"]
        assert records[1].quarantined and records[4].quarantined
        snapshot = store.load_snapshot("bad")
        assert snapshot is not None and snapshot.raw_length == 7
        assert contents(snapshot.messages)[-1] == "q2"
    # Passing the same list again records nothing twice (the safe form aligns with the original).
    again = Host(cfg, context_window=WINDOW, session_id="bad")
    again.before_llm_call(messages)
    again.close()
    with open_store(store_url) as store:
        assert store.head("bad") == 7


# -- the last reply of a process under manage() ---------------------------------------------------------

LAST_REPLY = r"""
import json, sys
import ctxlife
from ctxlife.config import settings_from_dict
url, turn = sys.argv[1], sys.argv[2]
cfg = settings_from_dict({"strategies": ["snapshot_restore"], "store": url})
host = ctxlife.Host(cfg, context_window=100000, session_id="last")
messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q" + turn}]
host.manage(messages)
reply = {"role": "assistant", "content": "a" + turn}   # the model's answer; then the process exits
host.record_reply(reply)
print(json.dumps(messages))
host.close()
"""


def test_the_last_reply_of_a_process_is_recorded_and_restored(store_url: str, spawn: Any) -> None:
    sent = []
    for turn in ("0", "1"):
        proc = spawn(LAST_REPLY, store_url, turn)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        sent.append(json.loads(out.strip().splitlines()[-1]))
    # The second process saw the first one's reply: no two user turns in a row.
    assert contents(sent[1]) == ["sys", "q0", "a0", "q1"]
    with open_store(store_url) as store:
        assert contents(store.read_records("last")) == ["q0", "a0", "q1", "a1"]


def test_record_reply_of_a_list_is_idempotent(store_url: str) -> None:
    host = Host(settings(store_url), context_window=WINDOW, session_id="rr")
    messages = [system("sys"), user("q0")]
    host.manage(messages)
    messages.append(assistant("a0"))
    assert contents(host.record_reply(messages)) == ["a0"]
    assert host.record_reply(rebuilt(messages)) == []
    messages.append(user("q1"))
    host.manage(messages)
    host.close()
    with open_store(store_url) as store:
        assert contents(store.read_records("rr")) == ["q0", "a0", "q1"]


# -- an invalid complete last line of _raw.jsonl ----------------------------------------------------------


@pytest.mark.parametrize("garbage", ["\n", "[1,2]\n", "{not json}\n"])
def test_an_invalid_last_line_is_cut_and_later_records_stay_readable(tmp_path: Path, garbage: str) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    cfg = settings(url)
    messages = [system("sys"), user("q0")]
    ctxlife.manage(messages, config=cfg, context_window=WINDOW, session_id="torn")
    with (tmp_path / "sessions" / "torn_raw.jsonl").open("a", encoding="utf-8") as f:
        f.write(garbage)
    ctxlife.api.clear_hosts()  # a new process
    messages += [assistant("a0"), user("q1")]
    ctxlife.manage(messages, config=cfg, context_window=WINDOW, session_id="torn")
    with open_store(url) as store:
        records = store.read_records("torn")  # strict: every line readable (session export works)
    assert contents(records) == ["q0", "a0", "q1"] and [r.seq for r in records] == [1, 2, 3]


# -- several threads, several workers on one session ------------------------------------------------------


def test_threads_sharing_a_host_record_each_message_once(store_url: str) -> None:
    cfg = settings(store_url)
    host = Host(cfg, context_window=WINDOW, session_id="threads")
    errors: list[BaseException] = []

    def agent(name: str) -> None:
        try:
            messages = [system("sys"), user(f"{name}: q0")]
            for i in range(8):
                host.before_llm_call(messages, view=name)
                messages += [assistant(f"{name}: a{i}"), user(f"{name}: q{i + 1}")]
            host.record_reply(messages, view=name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=agent, args=(f"t{n}",)) for n in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    host.close()
    assert errors == []
    with open_store(store_url) as store:
        records = store.read_records("threads")
        assert len(records) == 3 * 17
        for n in range(3):
            mine = store.read_records("threads", view=f"t{n}")
            expected = [f"t{n}: q0"] + [x for i in range(8) for x in (f"t{n}: a{i}", f"t{n}: q{i + 1}")]
            assert contents(mine) == expected


def test_threads_of_one_view_with_their_own_lists_record_each_message_once(store_url: str) -> None:
    host = Host(settings(store_url), context_window=WINDOW, session_id="shared")
    lists = {name: [system("sys"), user(f"{name} q0")] for name in ("x", "y")}
    for i in range(6):
        for name, messages in lists.items():
            host.manage(messages)
            messages += [assistant(f"{name} a{i}"), user(f"{name} q{i + 1}")]
    host.close()
    with open_store(store_url) as store:
        got = contents(store.read_records("shared"))
    # Each list up to its last call (the last reply and question were never passed): once each.
    assert sorted(got) == sorted(c for m in lists.values() for c in contents(m)[1:-2])


def test_writers_in_other_views_never_make_a_recorder_retry_forever(store_url: str) -> None:
    from ctxlife.sessions.recording import Recorder

    with open_store(store_url) as one, open_store(store_url) as two:
        a, b = Recorder(one), Recorder(two)  # two workers, each with its own memory
        mine: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for i in range(5):
            mine.append(user(f"a{i}"))
            theirs.append(user(f"b{i}"))
            assert contents(a.record("views", rebuilt(mine), view="A")) == [f"a{i}"]
            assert contents(b.record("views", rebuilt(theirs), view="B")) == [f"b{i}"]
        assert one.head("views") == 10
        assert contents(one.read_records("views", view="A")) == [f"a{i}" for i in range(5)]


WORKER = r"""
import json, sys
import ctxlife
from ctxlife.config import settings_from_dict
url = sys.argv[1]
cfg = settings_from_dict({"strategies": ["snapshot_restore", "truncate_last_n"], "store": url,
                          "truncate_last_n": {"rounds": 2, "always": True}})
host = ctxlife.Host(cfg, context_window=100000, session_id="two")
for line in sys.stdin:               # one request per line: the whole conversation, as JSON
    host.manage(json.loads(line))
    print("done", flush=True)
host.close()
"""


def test_two_workers_on_one_session_record_once_in_order_and_restore_exactly(store_url: str, spawn: Any) -> None:
    workers = [spawn(WORKER, store_url), spawn(WORKER, store_url)]
    conversation: list[dict[str, Any]] = [system("sys")]
    for i in range(9):
        conversation.append(user(f"q{i}"))
        worker = workers[i % 2]  # a load balancer alternates between the two
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(json.dumps(conversation) + "\n")
        worker.stdin.flush()
        assert worker.stdout.readline().strip() == "done", worker.stderr.read() if worker.stderr else ""
        conversation.append(assistant(f"a{i}"))
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait(timeout=60)
        assert worker.returncode == 0
    with open_store(store_url) as store:
        records = store.read_records("two")
        assert contents(records) == contents(conversation[1:-1])  # once each, in order
        snapshot = store.load_snapshot("two")
        assert snapshot is not None and 1 <= snapshot.raw_length <= store.head("two")
        # The snapshot reflects records up to a store sequence number; restoring it gives the
        # worker's compacted context plus every record after it, nothing twice.
        tail = store.read_records("two", snapshot.raw_length)
        restored = [m for m in snapshot.messages if m["role"] != "system"] + [r.message for r in tail]
        assert contents(restored)[-1] == "q8"
        assert len(contents(restored)) == len(set(contents(restored)))
