"""snapshot_restore at a restart, beyond the plain case: what a restarted app's model is sent for a compacted
session (the saved system prompt, the summary, the counts reported), lists that share part of the recorded
conversation or another view's, a restored conversation the provider would refuse, what a failed restore keeps
from being saved, what a restart reads, and the snapshot a task end saves."""

from __future__ import annotations

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import TaskContext
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.messages import is_summary
from ctxlife.messages.inserted import summary_message
from ctxlife.sessions.file import FileStore

pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # most hosts here never end a task


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


def S(text):
    return {"role": "system", "content": text}


def _host(store, *strategies, plugins=(), **tables):
    settings = settings_from_dict({"strategies": ["snapshot_restore", *strategies], **tables})
    host = Host(settings, context_window=100_000, session_id="s", plugins=list(plugins))
    host.store = store  # the store the strategy reads and writes (the host's one store)
    return host


def _restore_actions(report):
    return [(a.what, a.details) for a in report.actions if a.strategy == "snapshot_restore"]


def _contents(messages):
    return [m["content"] for m in messages]


def _conversation(path, view="", turns=2):
    """A first process: ``turns`` questions and answers recorded in ``view`` (no snapshot: nothing changed)."""
    host = _host(FileStore(path))
    live = [S("sys")]
    for i in range(turns):
        live.append(U(f"{view}q{i}"))
        host.before_llm_call(live, view=view)
        live.append(A(f"{view}a{i}"))
    host.record_reply(live, view=view)
    host.close()


# -- a compacted session: the saved prompt and summary, the counts reported ----------------------------------------


def _compacted(path):
    """A first process whose last call compacted (an extractive summary, no model): the snapshot covers every
    record, so a restart puts back the snapshot's messages and nothing from the raw tail."""
    host = Host(
        settings_from_dict(
            {
                "strategies": ["snapshot_restore", "llm_summary"],
                "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 0},
            }
        ),
        context_window=2000,
        session_id="s",
    )
    host.store = FileStore(path)
    live = [S("You are the stock clerk.")]
    for i in range(10):
        live.append(U(f"Question {i}: " + "word " * 60 + f"item R{i:04d}"))
        report = host.manage(live)
        if i == 9:
            assert "compacted" in [a.what for a in report.actions]  # (the set-up compacts on this call)
        live.append(A(f"Answer {i}: " + "stock " * 60))
    host.close()  # the last answer is never recorded: the snapshot holds the whole raw history
    with FileStore(path) as store:
        snapshot = store.load_snapshot("s")
        head = len(store.read_records("s"))
    assert snapshot is not None and snapshot.raw_length == head
    return snapshot.messages


def test_a_compacted_session_restarted_without_a_system_prompt_gets_the_saved_one_and_the_summary_once(tmp_path):
    saved = _compacted(tmp_path)
    assert saved[0] == S("You are the stock clerk.") and is_summary(saved[1])  # the snapshot: prompt, summary, ...
    assert sum(is_summary(m) for m in saved) == 1
    host = _host(FileStore(tmp_path))
    live = [U("Question 10: anything left?")]  # the restarted app sends no system prompt
    report = host.before_llm_call(live)
    assert _contents(live) == [*_contents(saved), "Question 10: anything left?"]
    assert sum(is_summary(m) for m in live) == 1 and is_summary(live[1])
    # everything put back came from the snapshot (none from the raw tail): the report says so
    assert _restore_actions(report) == [("restored", {"messages": len(saved) - 1, "from_raw_tail": 0})]
    host.close()


def test_a_restart_reports_how_many_messages_came_from_the_snapshot_and_how_many_from_the_raw_tail(tmp_path):
    saved = _compacted(tmp_path)
    with FileStore(tmp_path) as store:  # another process recorded two messages after the snapshot
        store.append("s", [A("Answer 9: done"), U("Question 10: and R0003?")])
    host = _host(FileStore(tmp_path))
    live = [S("You are the stock clerk."), U("Question 11: thanks")]
    report = host.before_llm_call(live)
    assert _contents(live) == [
        *_contents(saved),
        "Answer 9: done",
        "Question 10: and R0003?",
        "Question 11: thanks",
    ]
    assert _restore_actions(report) == [("restored", {"messages": len(saved) + 1, "from_raw_tail": 2})]
    host.close()


def test_a_system_summary_the_caller_sends_on_a_restart_would_follow_the_conversation_so_the_list_is_left_alone(
    tmp_path,
):
    # Whatever the caller's list holds besides its system prompt follows the restored conversation, ctxlife's
    # summary too: as a system message there it makes a list the provider refuses, so the restore is not made.
    _conversation(tmp_path)
    host = _host(FileStore(tmp_path))
    carried = summary_message([S("sys")], "the user asked about q0 and q1 earlier")
    assert is_summary(carried) and carried["role"] == "system"
    live = [S("sys"), carried, U("new question")]
    report = host.before_llm_call(live)
    assert live == [S("sys"), carried, U("new question")]  # sent as the caller made it, the summary once
    [failure] = report.failures
    assert failure.error == (
        "BadSessionError: session 's' view '': the restored conversation is not a valid message list "
        "(message 5: system_after_conversation: system message after the conversation started)"
    )  # message 5: the summary after sys, q0, a0, q1, a1 (not also before them)
    host.close()


# -- lists that share part of the conversation, or another view's ---------------------------------------------------


def test_a_list_holding_the_conversations_end_after_a_message_of_its_own_is_left_alone(tmp_path):
    _conversation(tmp_path, view="agent-a")
    _conversation(tmp_path, view="")  # the default view has a conversation of its own
    host = _host(FileStore(tmp_path))
    live = [S("sys"), U("a note of the app's"), U("agent-aq1"), A("agent-aa1"), U("next")]
    report = host.before_llm_call(live, view="agent-a")
    assert _restore_actions(report) == [("skipped", {"reason": "list_holds_conversation"})]
    assert _contents(live) == ["sys", "a note of the app's", "agent-aq1", "agent-aa1", "next"]
    host.close()


def test_a_list_sharing_only_the_last_answer_of_a_longer_conversation_is_restored(tmp_path):
    _conversation(tmp_path)
    host = _host(FileStore(tmp_path))
    live = [S("sys"), A("a1"), U("new question")]  # a fresh list carrying the last answer over
    report = host.before_llm_call(live)
    assert _restore_actions(report) == [("restored", {"messages": 4, "from_raw_tail": 4})]
    # the conversation first, then the caller's list as it sent it
    assert _contents(live) == ["sys", "q0", "a0", "q1", "a1", "a1", "new question"]
    host.close()


def test_a_list_holding_the_last_answer_and_one_the_compaction_evicted_is_left_alone(tmp_path):
    # Two messages of the raw history, the newest record last: the caller's own (differently trimmed) list of
    # this conversation, although the older message is no longer in the saved context.
    host = _host(
        FileStore(tmp_path), "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": False, "always": True}
    )
    live = [S("sys")]
    for i in range(4):
        live.append(U(f"q{i}"))
        host.before_llm_call(live)
        live.append(A(f"a{i}"))
    host.record_reply(live)
    host.close()
    with FileStore(tmp_path) as store:
        store.append("s", [U("q4"), A("a4")])  # another process's turn after the snapshot
        assert _contents(store.load_snapshot("s").messages) == ["sys", "q3"]  # (a2 was evicted)
    later = _host(FileStore(tmp_path))
    mine = [S("sys"), A("a2"), A("a4"), U("new")]
    report = later.before_llm_call(mine)
    assert _restore_actions(report) == [("skipped", {"reason": "list_holds_conversation"})]
    assert _contents(mine) == ["sys", "a2", "a4", "new"]
    later.close()


def test_a_list_handed_another_views_conversation_is_restored_with_its_own(tmp_path):
    _conversation(tmp_path, view="agent-a")
    _conversation(tmp_path, view="")  # written last: the newest records of the session
    host = _host(FileStore(tmp_path))
    live = [S("sys"), U("q0"), A("a0"), U("q1"), A("a1"), U("agent a, take over")]  # a hand-off
    report = host.before_llm_call(live, view="agent-a")
    assert _restore_actions(report) == [("restored", {"messages": 4, "from_raw_tail": 4})]
    assert _contents(live) == [
        "sys",
        "agent-aq0",
        "agent-aa0",
        "agent-aq1",
        "agent-aa1",
        "q0",
        "a0",
        "q1",
        "a1",
        "agent a, take over",
    ]
    host.close()


# -- a restored conversation the provider would refuse, a caller's list with a problem of its own --------------------


def test_a_restored_conversation_that_would_be_refused_is_not_put_in_and_the_error_says_why(tmp_path):
    with FileStore(tmp_path) as store:  # an outside writer: an Anthropic conversation opening with the assistant
        store.append("s", [A("Welcome back!"), U("hi"), A("hello")])
    host = _host(FileStore(tmp_path), message_format="anthropic")
    live = [U("new question")]
    report = host.before_llm_call(live)
    assert live == [U("new question")]  # left as the caller sent it
    [failure] = report.failures
    assert failure.strategy == "snapshot_restore"
    assert failure.error == (
        "BadSessionError: session 's' view '': the restored conversation is not a valid message list "
        "(message 0: first_message_not_user: an Anthropic conversation must open with a user message)"
    )
    host.close()


def test_a_callers_list_with_a_problem_of_its_own_is_still_restored(tmp_path):
    _conversation(tmp_path)
    host = _host(FileStore(tmp_path))
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    pending = {"role": "assistant", "content": None, "tool_calls": [call]}  # a call never answered
    live = [S("sys"), pending, U("new question")]
    report = host.before_llm_call(live)
    assert report.failures == []
    assert _restore_actions(report) == [("restored", {"messages": 4, "from_raw_tail": 4})]
    assert [m["role"] for m in live] == ["system", "user", "assistant", "user", "assistant", "assistant", "user"]
    assert live[5] is pending or live[5] == pending
    host.close()


# -- what a failed restore keeps from being saved, what a failed append does not redo --------------------------------


class Bang:
    """A strategy that changes every list it is handed (as a compaction does): a snapshot is then due."""

    @ctxlife.hookimpl(trylast=True)
    def ctxlife_before_llm_call(self, ctx):
        ctx.messages[0] = S(ctx.messages[0]["content"] + "!")


def test_after_a_restore_failed_for_good_the_good_snapshot_is_never_saved_over(tmp_path):
    first = _host(FileStore(tmp_path), plugins=[Bang()])
    live = [S("sys"), U("What is in stock?")]
    first.before_llm_call(live)
    first.record_reply([*live, A("R0001 and R0002.")])
    first.close()
    with FileStore(tmp_path) as store:
        good = store.load_snapshot("s")
        assert good is not None and _contents(good.messages) == ["sys!", "What is in stock?"]
        store.append("s", [{"content": "no role here"}])  # a record that is no message: the restore fails
    host = _host(FileStore(tmp_path), plugins=[Bang()])
    live = [S("sys"), U("And now?")]
    failures = []
    for question in ("Again?", "Once more?"):
        failures += host.before_llm_call(live).failures
        live += [A("..."), U(question)]
    assert [f.error.split(":")[0] for f in failures] == ["BadSessionError"]  # told once, never retried
    end = TaskContext(task_name="t", output="done", messages=[*live, A("done")])
    host.task_end(end)
    assert [(a.what, a.details) for a in end.actions if a.strategy == "snapshot_restore"] == [
        ("skipped", {"reason": "restore_failed"})
    ]
    host.close()
    with FileStore(tmp_path) as store:
        kept = store.load_snapshot("s")
    assert kept is not None and kept.messages == good.messages and kept.raw_length == good.raw_length


class AppendFails(FileStore):
    """A file store whose appends fail while ``down`` (a full disk)."""

    down = False

    def append(self, *args, **kwargs):
        if self.down:
            raise StoreError("no space left on the test device")
        return super().append(*args, **kwargs)


def test_an_append_that_fails_in_the_middle_of_a_run_does_not_restore_again(tmp_path):
    _conversation(tmp_path)
    store = AppendFails(tmp_path)
    host = _host(store)
    live = [S("sys"), U("new question")]
    assert [w for w, _ in _restore_actions(host.before_llm_call(live))] == ["restored"]
    live += [A("an answer"), U("a second question")]
    store.down = True
    failed = host.before_llm_call(live)
    assert "snapshot_restore" in [f.strategy for f in failed.failures]
    store.down = False
    live += [A("another answer"), U("a third question")]
    report = host.before_llm_call(live)
    assert report.failures == [] and _restore_actions(report) == []  # no restore: the run had one
    host.close()
    with FileStore(tmp_path) as store:
        assert _contents(r.message for r in store.read_records("s")) == [
            "q0",
            "a0",
            "q1",
            "a1",
            "new question",
            "an answer",
            "a second question",
            "another answer",
            "a third question",
        ]


def test_a_restart_whose_list_held_the_conversation_is_not_restored_again_after_a_failed_append(tmp_path):
    _conversation(tmp_path)
    store = AppendFails(tmp_path)
    host = _host(store)
    live = [S("sys"), U("q0"), A("a0"), U("q1"), A("a1"), U("new question")]  # the app kept its list
    store.down = True
    failed = host.before_llm_call(live)  # (a failed strategy's actions are not reported: it was rolled back)
    assert "snapshot_restore" in [f.strategy for f in failed.failures]  # the append failed
    assert _contents(live) == ["sys", "q0", "a0", "q1", "a1", "new question"]  # nothing was put back
    store.down = False
    report = host.before_llm_call(live)  # the same list again: what waited is written now
    assert report.failures == [] and _restore_actions(report) == []  # nothing restored, nothing looked at again
    host.close()
    with FileStore(tmp_path) as store:
        assert _contents(r.message for r in store.read_records("s")) == ["q0", "a0", "q1", "a1", "new question"]


# -- what a restart reads ------------------------------------------------------------------------------------------


class Counting(FileStore):
    """A file store that notes every read of records: (where it started, how many it returned)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = []

    def read_records(self, session_id, after_seq=0, *args, **kwargs):
        records = super().read_records(session_id, after_seq, *args, **kwargs)
        self.reads.append((after_seq, len(records)))
        return records

    def read_slots(self, session_id, after_seq=0, **kwargs):
        slots = super().read_slots(session_id, after_seq, **kwargs)
        self.reads.append((after_seq, len(slots)))
        return slots


@pytest.mark.parametrize("view", ["", "agent-a"])
def test_a_restart_reads_the_views_raw_history_once(tmp_path, view):
    _conversation(tmp_path, view=view, turns=3)
    store = Counting(tmp_path)
    host = _host(store)
    live = [S("sys"), U(f"{view}q0"), A(f"{view}a0"), U(f"{view}q1 (edited)"), A(f"{view}a1")]
    live += [U(f"{view}q2"), A(f"{view}a2"), U("new")]
    assert _restore_actions(host.before_llm_call(live, view=view)) == [
        ("skipped", {"reason": "list_holds_conversation"})
    ]
    assert sum(n for _, n in store.reads) == 6  # each of the view's six records read once, restore and recording
    host.close()
    with FileStore(tmp_path) as plain:  # the edit on the first call after the restart is an edit (q1 replaced)
        records = plain.read_records("s", view=view)
    assert [(r.op, r.target) for r in records[6:]] == [("replace", 3), ("add", None)]


def test_a_restart_of_a_compacted_session_reads_only_the_records_after_the_kept_messages(tmp_path):
    host = _host(
        FileStore(tmp_path), "truncate_last_n", truncate_last_n={"rounds": 1, "pin_first_user": False, "always": True}
    )
    live = [S("sys")]
    for i in range(6):
        live.append(U(f"q{i}"))
        host.before_llm_call(live)
        live.append(A(f"a{i}"))
    host.record_reply(live)
    host.close()
    store = Counting(tmp_path)
    later = _host(store)
    fresh = [S("sys"), U("new")]
    assert _restore_actions(later.before_llm_call(fresh)) == [("restored", {"messages": 2, "from_raw_tail": 1})]
    assert _contents(fresh) == ["sys", "q5", "a5", "new"]
    assert store.reads and all(start >= 10 for start, _ in store.reads)  # never q0 to a4: the kept point on
    later.close()


# -- the snapshot a task end saves ----------------------------------------------------------------------------------


def test_a_task_end_records_the_final_answer_and_saves_the_snapshot_a_restart_restores(tmp_path):
    host = _host(FileStore(tmp_path))
    live = [S("sys"), U("What is in stock?")]
    host.before_llm_call(live, view="agent-a")
    end = TaskContext(task_name="t", output="R0001.", messages=[*live, A("R0001.")], view="agent-a")
    host.task_end(end)
    assert [(a.what, a.details) for a in end.actions if a.strategy == "snapshot_restore"] == [
        ("snapshot_saved", {"messages": 3, "raw_length": 2})
    ]
    host.close()
    with FileStore(tmp_path) as store:
        assert store.load_snapshot("s") is None  # the view's snapshot, not the default view's
        snapshot = store.load_snapshot("s", "agent-a")
        assert snapshot is not None and _contents(snapshot.messages) == ["sys", "What is in stock?", "R0001."]
        assert _contents(r.message for r in store.read_records("s", view="agent-a")) == ["What is in stock?", "R0001."]
    later = _host(FileStore(tmp_path))
    fresh = [S("sys"), U("And R0002?")]
    assert _restore_actions(later.before_llm_call(fresh, view="agent-a")) == [
        ("restored", {"messages": 2, "from_raw_tail": 0})
    ]
    assert _contents(fresh) == ["sys", "What is in stock?", "R0001.", "And R0002?"]
    later.close()


def test_a_task_end_without_a_session_messages_or_store_saves_nothing(tmp_path):
    bare = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=4000)
    end = TaskContext(task_name="t", output="done", messages=[U("hi"), A("done")])
    assert bare.task_end(end).failures == [] and end.actions == []  # no session
    host = _host(FileStore(tmp_path))
    empty = TaskContext(task_name="t", output="done")
    assert host.task_end(empty).failures == [] and empty.actions == []  # no messages
    host.close()
    with FileStore(tmp_path) as store:
        assert store.load_snapshot("s") is None and store.read_records("s") == []
    storeless = _host(None)
    end = TaskContext(task_name="t", output="done", messages=[U("hi"), A("done")])
    assert storeless.task_end(end).failures == [] and end.actions == []


class Racing(FileStore):
    """A file store that runs ``racer`` once, when the store's mark key is first made: right after the first
    write of its recorder, before the caller goes on (the moment another thread may write to the view)."""

    racer = None
    down = False

    def mark_key(self, *args, **kwargs):
        racer, self.racer = self.racer, None
        if racer is not None:
            racer()
        return super().mark_key(*args, **kwargs)

    def append(self, *args, **kwargs):
        if self.down:
            raise StoreError("no space left on the test device")
        return super().append(*args, **kwargs)


def test_a_task_end_saves_no_snapshot_while_another_threads_messages_wait_for_the_store(tmp_path):
    import threading

    from ctxlife.sessions.keeper import keeper_for

    store = Racing(tmp_path)
    host = _host(store)
    final = [S("sys"), U("What is in stock?"), A("R0001.")]
    failed = []

    def another_thread_writes_and_fails():
        def write():
            store.down = True
            try:
                keeper_for(store).record_list("s", [*final, U("And R0002?")], "agent-a")
            except StoreError as exc:
                failed.append(str(exc))
            finally:
                store.down = False

        worker = threading.Thread(target=write)
        worker.start()
        worker.join()

    store.racer = another_thread_writes_and_fails
    end = TaskContext(task_name="t", output="R0001.", messages=final, view="agent-a")
    host.task_end(end)
    assert failed == ["no space left on the test device"]  # (the precondition: "And R0002?" waits)
    assert [(a.what, a.details) for a in end.actions if a.strategy == "snapshot_restore"] == [
        ("skipped", {"reason": "raw_history_pending", "pending": 1})
    ]
    host.close()
    with FileStore(tmp_path) as plain:
        assert plain.load_snapshot("s", "agent-a") is None  # a restore would read the waiting message twice otherwise
        assert _contents(r.message for r in plain.read_records("s", view="agent-a")) == ["What is in stock?", "R0001."]
