"""What the host hands on and records where the tests of its nodes did not look (scope ``host``'s
survivors, 2026-12-07): the privacy filter on a whole message (what a restore shows the model), the
bootstrap text of the session and agent asked for, a reply checked against ``message_format``, and a
run building one view's lists anew while another view keeps its own.
"""

from __future__ import annotations

import pytest

import ctxlife
from ctxlife import messages as message_model
from ctxlife.config import settings_from_dict
from ctxlife.errors import InvalidMessagesError
from ctxlife.host import Host
from ctxlife.sessions import open_store, session_key

NONE = settings_from_dict({"strategies": []})


class Redact:
    """A privacy filter: replaces SECRET-1 and notes where and for whom each text was filtered."""

    name = "redact"

    def __init__(self):
        self.seen: list[tuple[str, str | None, str]] = []

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx):
        self.seen.append((ctx.where, ctx.session_id, ctx.view))
        ctx.text = ctx.text.replace("SECRET-1", "[redacted]")


def test_filter_message_redacts_every_text_of_a_message_and_keeps_the_original(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    redact = Redact()
    host = Host(settings, session_id="host-s", plugins=[redact])
    message = {
        "role": "assistant",
        "content": "card SECRET-1",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": '{"card": "SECRET-1"}'}}
        ],
    }
    cleaned = host.filter_message(message, where="restore", session_id="s1", view="agent")
    assert cleaned["content"] == "card [redacted]"
    assert cleaned["tool_calls"][0]["function"]["arguments"] == '{"card": "[redacted]"}'
    assert cleaned["tool_calls"][0]["id"] == "c1"  # ids are no text a model reads
    assert message["content"] == "card SECRET-1"  # the caller's message is not edited
    assert redact.seen[0] == ("restore", "s1", "agent")
    # without a session or view: the host's session and the default view
    host.filter_message({"role": "user", "content": "SECRET-1"}, where="show")
    assert redact.seen[-1] == ("show", "host-s", "")
    plain = {"role": "user", "content": "nothing to hide"}
    assert host.filter_message(plain, where="restore") is plain  # nothing changed: the same dict back
    host.close()


def test_a_filtered_summary_is_still_the_summary_ctxlife_inserted_for_every_worker_on_the_store(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    host = Host(settings, plugins=[Redact()])
    with message_model.MARK_KEYS.marking_with(host.store):
        summary = message_model.mark_inserted({"role": "system", "content": "Summary: card SECRET-1 paid."}, "summary")
    cleaned = host.filter_message(summary, where="restore", session_id="s1")
    assert "SECRET-1" not in cleaned["content"] and "[redacted]" in cleaned["content"]
    # marked anew: a restore still knows it for the summary (kept, compacted again) ...
    assert message_model.inserted_kind(cleaned) == "summary"
    # ... with the store's secret, not this process's: another worker on the store knows it too
    store_key_id = message_model.MARK_KEYS.key_id(host.store.mark_key(create=False))
    assert cleaned["content"].endswith(" -->") and f" {store_key_id}." in cleaned["content"].splitlines()[-1]
    host.close()


def test_filter_message_without_a_filter_hands_the_message_back_as_it_is():
    host = Host(NONE)
    message = {"role": "user", "content": "card SECRET-1"}
    assert host.filter_message(message, where="restore") is message


class Boot:
    """A bootstrap block naming the agent and the session it was rendered for."""

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx):
        ctx.blocks.append(f"You are {ctx.agent_role} in session {ctx.variables['session_id']}.")


def test_bootstrap_text_is_rendered_for_the_session_and_agent_asked_for():
    host = Host(NONE, session_id="host-s", plugins=[Boot()])
    assert host.bootstrap_text(agent_role="clerk", session_id="s1") == "You are clerk in session s1."
    assert host.bootstrap_text(agent_role="clerk", session_id="s2") == "You are clerk in session s2."
    assert host.bootstrap_text(agent_role="clerk") == "You are clerk in session host-s."
    assert host.bootstrap_text(agent_role="auditor", session_id="s1") == "You are auditor in session s1."


def _tool_call_reply() -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "stock", "arguments": "{}"}}],
    }


def test_host_record_reply_refuses_a_reply_in_another_format_than_configured(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}", "message_format": "anthropic"})
    host = Host(settings)
    with pytest.raises(InvalidMessagesError, match="message_format is 'anthropic'"):
        host.record_reply(_tool_call_reply(), session_id="s1")
    with pytest.raises(InvalidMessagesError, match="message_format is 'anthropic'"):
        host.record_reply([{"role": "user", "content": "stock?"}, _tool_call_reply()], session_id="s1")
    assert open_store(settings.store).read_records(session_key("s1")) == []  # nothing written
    host.close()


def test_host_record_reply_under_auto_takes_either_format(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    host = Host(settings)
    [record] = host.record_reply(_tool_call_reply(), session_id="s1")
    assert record.message["tool_calls"][0]["id"] == "c1"
    anthropic = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "stock", "input": {}}]}
    [other] = host.record_reply(anthropic, session_id="s2")
    assert other.message == anthropic
    host.close()


@pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")
def test_new_lists_of_one_view_leave_the_other_views_lists_as_kept(tmp_path):
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    host = Host(settings, context_window=1000)
    task, reply = (
        {"role": "user", "content": "Check the stock of R0001."},
        {"role": "assistant", "content": "In stock."},
    )

    def call(view):
        host.before_llm_call([task], session_id="s", view=view)
        host.record_reply([task, reply], session_id="s", view=view)

    def tasks(view):
        records = open_store(settings.store).read_records(session_key("s"))
        return [r.message for r in records if r.view == view and r.message.get("role") == "user"]

    for view in ("a", "b"):
        call(view)
    host.new_lists("s", view="a")  # view a's next list is built from scratch: the same task is a new turn
    for view in ("a", "b"):
        call(view)
    assert tasks("a") == [task, task]
    assert tasks("b") == [task]  # the same list again in a kept view: an edit, not a new turn
    host.close()


def test_new_lists_without_a_store_or_a_session_does_nothing(tmp_path):
    Host(NONE).new_lists("s")  # no store: nothing to tell
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    host = Host(settings)
    host.new_lists()  # no session named, none by default
    assert host.record_reply({"role": "assistant", "content": "ok"}) == []
    host.close()


def test_a_host_without_a_store_opens_the_configured_default_when_a_reply_is_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default store, file://workspace/sessions, is relative to the working folder
    host = Host(NONE)
    assert host.store is None  # no store named and no strategy keeping sessions: none opened yet
    [record] = host.record_reply({"role": "assistant", "content": "ok"}, session_id="s1")
    assert host.store is not None and host.open_store() is host.store  # opened once, then kept
    assert open_store("file://workspace/sessions").read_records(session_key("s1")) == [record]
    host.close()
