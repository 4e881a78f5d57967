"""snapshot_restore keeps each view's own run state: a second run in the same process restores every view's
conversation on that view's first call (not only on the run's first call), and a restore that failed for
one view keeps that view's good snapshot while another view restores and saves as usual."""

from __future__ import annotations

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.contexts import TaskContext
from ctxlife.host import Host
from ctxlife.sessions.file import FileStore

pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # these hosts end no task


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


def S(text):
    return {"role": "system", "content": text}


def _host(store, plugins=()):
    host = Host(
        settings_from_dict({"strategies": ["snapshot_restore"]}),
        context_window=100_000,
        session_id="s",
        plugins=list(plugins),
    )
    host.store = store
    return host


def _contents(messages):
    return [m["content"] for m in messages]


def test_a_second_run_restores_each_views_conversation_on_that_views_first_call(tmp_path):
    host = _host(FileStore(tmp_path))
    host.start_run(new_lists=True)
    for view in ("agent-a", "agent-b"):  # two agents, one after the other, as a crew's tasks
        live = [S("sys"), U(f"{view}: first question")]
        host.before_llm_call(live, view=view)
        host.record_reply([*live, A(f"{view}: first answer")], view=view)
    host.start_run(new_lists=True)  # the same crew kicked off again: every list built anew
    sent = {}
    for view in ("agent-a", "agent-b"):
        live = [S("sys"), U(f"{view}: second question")]
        host.before_llm_call(live, view=view)  # agent-b's first call of the run is not the run's first call
        sent[view] = _contents(live)
    host.close()
    for view in ("agent-a", "agent-b"):
        assert sent[view] == ["sys", f"{view}: first question", f"{view}: first answer", f"{view}: second question"]


class Bang:
    """Edits the system prompt on every call: the list changes, so the host saves a snapshot of it."""

    def ctxlife_before_llm_call(self, ctx):
        ctx.messages[0] = S(ctx.messages[0]["content"].rstrip("!") + "!")


def test_a_restore_that_failed_for_one_view_keeps_that_views_snapshot_while_another_view_restores(tmp_path):
    from ctxlife import hookimpl

    Bang.ctxlife_before_llm_call = hookimpl(Bang.ctxlife_before_llm_call)
    first = _host(FileStore(tmp_path), plugins=[Bang()])
    for view in ("agent-a", "agent-b"):
        live = [S("sys"), U(f"{view}: what is in stock?")]
        first.before_llm_call(live, view=view)
        first.record_reply([*live, A(f"{view}: R0001.")], view=view)
    first.close()
    with FileStore(tmp_path) as store:
        good = store.load_snapshot("s", view="agent-a")
        assert good is not None and _contents(good.messages)[:2] == ["sys!", "agent-a: what is in stock?"]
        store.append("s", [{"content": "no role here"}], view="agent-a")  # a record that is no message
    host = _host(FileStore(tmp_path), plugins=[Bang()])
    failed = host.before_llm_call([S("sys"), U("agent-a: and now?")], view="agent-a").failures
    assert [f.error.split(":")[0] for f in failed] == ["BadSessionError"]  # (the set-up: a's restore fails)
    live_b = [S("sys"), U("agent-b: and now?")]
    assert host.before_llm_call(live_b, view="agent-b").failures == []
    assert _contents(live_b)[1:3] == ["agent-b: what is in stock?", "agent-b: R0001."]  # b restored
    end = TaskContext(task_name="t", output="done", messages=[S("sys!"), U("agent-a: and now?"), A("done")])
    end.view = "agent-a"
    host.task_end(end)
    host.close()
    assert [(a.what, a.details) for a in end.actions if a.strategy == "snapshot_restore"] == [
        ("skipped", {"reason": "restore_failed"})
    ]
    with FileStore(tmp_path) as store:
        kept = store.load_snapshot("s", view="agent-a")
    assert kept is not None and kept.messages == good.messages and kept.raw_length == good.raw_length
