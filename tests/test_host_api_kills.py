"""What the host's other half (scope host-api: api.py, contexts.py, host_recording.py) hands a caller: a reply
recorded by ``arecord_reply`` in the session and view asked, a reply list checked on its own reply, and the message
filter a strategy's context applies for its session and view."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife import api
from ctxlife.config import settings_from_dict
from ctxlife.contexts import HookContext, TaskContext
from ctxlife.errors import InvalidMessagesError, StoreError
from ctxlife.host import Host
from ctxlife.sessions import open_store


def recorded(tmp_path: Path, session: str) -> list[tuple[str, str, Any]]:
    with open_store(f"file://{tmp_path}") as store:
        return [(r.view, r.message["role"], r.message.get("content")) for r in store.read_records(session)]


def test_arecord_reply_records_the_reply_in_the_session_and_view_asked(tmp_path: Path) -> None:
    cfg = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})

    async def main() -> list[Any]:
        return await ctxlife.arecord_reply("It shipped.", config=cfg, session_id="u7", view="agent-b", plugins=())

    records = asyncio.run(main())
    assert [r.message for r in records] == [{"role": "assistant", "content": "It shipped."}]
    assert recorded(tmp_path, "u7") == [("agent-b", "assistant", "It shipped.")]


def test_a_reply_list_is_checked_on_its_reply_and_an_empty_one_records_nothing(tmp_path: Path) -> None:
    host = Host(settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"}), session_id="r1")
    first = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    host.record_reply(first)
    assert recorded(tmp_path, "r1") == [("", "user", "q"), ("", "assistant", "a")]  # the precondition
    with pytest.raises(InvalidMessagesError, match=r"^record_reply\[0\] "):
        host.record_reply([*first, {"role": "bot", "content": "b"}])  # its reply, the last, of no known shape
    assert host.record_reply([]) == []
    assert recorded(tmp_path, "r1") == [("", "user", "q"), ("", "assistant", "a")]  # nothing more written
    host.close()


class Redact:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str]] = []

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx: ctxlife.TextContext) -> None:
        self.seen.append((ctx.where, ctx.session_id, ctx.view))
        ctx.text = ctx.text.replace("SECRET-1", "[redacted]")


def test_a_strategys_context_filters_a_message_for_its_own_session_and_view() -> None:
    message = {"role": "tool", "tool_call_id": "c1", "content": "card SECRET-1"}
    filtered: list[dict[str, Any]] = []

    class Quoter:
        """A strategy putting a stored message before the model: it passes it through the filter."""

        @ctxlife.hookimpl
        def ctxlife_task_start(self, ctx: TaskContext) -> None:
            filtered.append(ctx.filter_message(message, "recall"))

    redact = Redact()
    host = Host(settings_from_dict({"strategies": []}), plugins=[Quoter(), redact])
    host.task_start(TaskContext(task_name="t", context_text="", view="agent-b"), session_id="s3")
    assert filtered == [{"role": "tool", "tool_call_id": "c1", "content": "card [redacted]"}]
    assert message["content"] == "card SECRET-1"  # the stored message itself unchanged
    assert redact.seen == [("recall", "s3", "agent-b")]
    # a context no host dispatched has no filter: the message as it is, the same dict
    assert HookContext().filter_message(message, "recall") is message


def test_the_hosts_record_reply_refuses_a_reply_in_another_format_or_of_another_type(tmp_path: Path) -> None:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}
    store = f"file://{tmp_path}"
    host = Host(settings_from_dict({"strategies": [], "store": store, "message_format": "openai"}), session_id="f1")
    for reply in (use, [{"role": "user", "content": "q"}, use]):
        with pytest.raises(InvalidMessagesError) as info:
            host.record_reply(reply)
        assert str(info.value).startswith(
            "record_reply[0] is an Anthropic Messages message but message_format is 'openai'"
        ), str(info.value)
    with pytest.raises(ctxlife.CtxlifeError) as refused:
        host.record_reply("a text")  # type: ignore[arg-type]
    assert str(refused.value) == "record_reply takes a message dict or a list of them, got str"
    assert recorded(tmp_path, "f1") == []
    host.close()
    # With auto (the default) the same reply is taken: the configured format is what refused it.
    auto = Host(settings_from_dict({"strategies": [], "store": store}), session_id="f1")
    auto.record_reply(use)
    assert recorded(tmp_path, "f1") == [("", "assistant", use["content"])]
    auto.close()


# -- the hosts manage() and amanage() share ----------------------------------------------------------------


class Seen:
    """A plugin noting the window each call's host hands it and the caller's context variable."""

    def __init__(self) -> None:
        self.windows: list[int | None] = []
        self.marks: list[str] = []

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        self.windows.append(ctx.context_window)
        self.marks.append(REQUEST.get())


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
NONE = settings_from_dict({"strategies": []})


@pytest.fixture
def no_hosts() -> Iterator[None]:
    api.clear_hosts()
    yield
    api.clear_hosts()


def test_calls_with_other_plugins_get_their_own_host_and_the_window_asked(no_hosts: None) -> None:
    first, second = Seen(), Seen()
    ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window=1234, plugins=[first])
    ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window=1234, plugins=[second])
    assert (first.windows, second.windows) == ([1234], [1234])  # each call ran its own plugin
    assert len(api._hosts) == 2


def test_a_host_that_cannot_be_built_raises_its_error_and_is_not_kept(tmp_path: Path, no_hosts: None) -> None:
    bad = tmp_path / "ctxlife.toml"
    bad.write_text('strategies = ["no_such_strategy"]\n', encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ctxlife.CtxlifeError, match="no_such_strategy"):
            ctxlife.manage([{"role": "user", "content": "hi"}], config=bad)
        assert len(api._hosts) == 0


def test_past_the_cache_size_the_least_recently_used_idle_host_goes(no_hosts: None) -> None:
    for n in range(api._MAX_HOSTS + 1):
        ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window=8000, session_id=f"s{n}")
    sessions = [key[3] for key in api._hosts]
    assert len(sessions) == api._MAX_HOSTS
    assert sessions[0] == "s1" and sessions[-1] == f"s{api._MAX_HOSTS}"  # s0, the oldest, went


def test_amanage_runs_the_call_in_the_callers_context_with_its_summary_model(no_hosts: None) -> None:
    settings = settings_from_dict({"strategies": ["llm_summary"]})
    asked: list[int] = []
    seen = Seen()

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        asked.append(max_tokens)
        codes = re.findall(r"R\d{3}X", json.dumps(messages))
        return f"Goal: the reservations were checked. Last: {max(codes)}."

    rounds: list[dict[str, Any]] = []
    for r in range(20):
        rounds.append({"role": "user", "content": f"please check reservation R{r:03d}X; " + "details " * 40})
        rounds.append({"role": "assistant", "content": f"reservation R{r:03d}X is confirmed. " + "notes " * 40})
    messages = [{"role": "system", "content": "You are an airline agent."}, *rounds]

    async def main() -> ctxlife.Report:
        REQUEST.set("request 7")
        return await ctxlife.amanage(
            messages, config=settings, context_window=4000, session_id="a1", plugins=[seen], summary_model=complete
        )

    report = asyncio.run(main())
    assert asked and any(a.what == "compacted" for a in report.actions)  # summarized with the model given
    assert "reservations were checked" in str(messages[1]["content"])
    assert seen.marks == ["request 7"] and seen.windows == [4000]


def test_arecord_reply_records_in_the_default_view_when_none_is_asked(tmp_path: Path) -> None:
    cfg = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    asyncio.run(ctxlife.arecord_reply("Done.", config=cfg, session_id="u8"))
    assert recorded(tmp_path, "u8") == [("", "assistant", "Done.")]


def test_a_strategys_count_follows_the_list_it_changes(no_hosts: None) -> None:
    counts: list[int] = []

    class Counter:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            counts.append(ctx.count())
            ctx.messages.append({"role": "user", "content": "and one more question about the order " * 5})
            counts.extend([ctx.count(), ctx.count()])

    report = ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window=8000, plugins=[Counter()])
    assert counts[0] == report.tokens_before
    assert counts[1] > counts[0] and counts[2] == counts[1] == report.tokens_after


def test_a_window_that_is_not_a_number_of_tokens_is_refused_before_any_host_is_built(no_hosts: None) -> None:
    with pytest.raises(ctxlife.ConfigError) as info:
        ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window="8000")  # type: ignore[arg-type]
    assert str(info.value) == (
        "context_window must be a positive whole number of tokens, got the text '8000'; "
        "pass the number itself: context_window=8000"
    )
    assert len(api._hosts) == 0


class Notes:
    """A plugin acting at nodes manage() never calls."""

    name = "notes"

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: TaskContext) -> None:
        pass

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        pass


ADAPTERS = (
    "Use a ctxlife.Host and call its node methods from your loop (docs/integrations.md), or an adapter: "
    "ctxlife.wrap(crew) for CrewAI, ctxlife.integrations.langchain.CtxlifeMiddleware for LangChain."
)


def test_manage_warns_once_of_the_nodes_and_tools_it_never_reaches(
    tmp_path: Path, no_hosts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api, "_warned", set())  # (once per process: this test's own)
    recall = settings_from_dict({"strategies": ["recall"], "store": f"file://{tmp_path}"})
    hi = [{"role": "user", "content": "hi"}]
    with pytest.warns(ctxlife.CtxlifeWarning) as caught:
        ctxlife.manage(hi, config=recall, context_window=8000, session_id="a", plugins=[Notes()])
        ctxlife.manage(hi, config=recall, context_window=8000, session_id="b", plugins=[Notes()])  # warned already
        ctxlife.manage(hi, config=NONE, context_window=8000, plugins=[Notes()])  # another set: no tools
    assert [str(w.message) for w in caught if issubclass(w.category, ctxlife.CtxlifeWarning)] == [
        "ctxlife.manage() runs only the before-model-call node (and bootstrap); these strategies also act at "
        "other nodes and do nothing there unless you call them: recall (host.before_tool_call(ctx)); "
        "notes (host.after_tool_call(ctx), host.task_start(ctx)). recall offer tools to the agent: register "
        "host.provided_tools() with your framework. " + ADAPTERS,
        "ctxlife.manage() runs only the before-model-call node (and bootstrap); these strategies also act at "
        "other nodes and do nothing there unless you call them: notes (host.after_tool_call(ctx), "
        "host.task_start(ctx)). " + ADAPTERS,
    ]


class Stores:
    """A plugin noting the store each call's host hands it (its settings' store)."""

    def __init__(self) -> None:
        self.urls: list[str | None] = []

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        self.urls.append(None if ctx.store is None else str(ctx.store.url).rstrip("/").rpartition("/")[2])


def test_manage_builds_a_new_host_when_the_config_file_or_the_environment_changes(
    tmp_path: Path, no_hosts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ctxlife.toml here: config=None is the defaults (and CTXLIFE_ variables)
    monkeypatch.delenv("CTXLIFE_STORE", raising=False)
    cfg = tmp_path / "agent.toml"
    stores = Stores()

    def call(config: Any) -> None:
        ctxlife.manage([{"role": "user", "content": "hi"}], config=config, context_window=8000, plugins=[stores])

    call(None)  # the defaults' host: no store
    cfg.write_text(f'strategies = []\nstore = "file://{tmp_path}/c"\n', encoding="utf-8")
    call(cfg)
    cfg.write_text(f'strategies = []\nstore = "file://{tmp_path}/d"\n', encoding="utf-8")
    os.utime(cfg, ns=(1, 1))  # (another modification time, however fast the two writes)
    call(str(cfg))
    monkeypatch.setenv("CTXLIFE_STORE", f"file://{tmp_path}/e")
    call(None)
    assert stores.urls == [None, "c", "d", "e"]
    with pytest.raises(ctxlife.ConfigError) as info:
        call({"strategies": []})
    assert str(info.value) == (
        "config= takes a path to a TOML file or a ctxlife.Settings, got dict; for a dict, build the settings "
        "once with ctxlife.config.settings_from_dict(...) and pass those"
    )


def test_the_store_is_told_by_its_urls_scheme_and_an_unknown_one_is_refused_naming_the_known(tmp_path: Path) -> None:
    odd = Host(settings_from_dict({"strategies": [], "store": f"file://{tmp_path}/a://b"}), session_id="s")
    assert odd.open_store() is not None  # '://' again in the path: the scheme is what comes before the first
    odd.close()
    with pytest.raises(ctxlife.ConfigError) as info:
        Host(settings_from_dict({"strategies": [], "store": "nosuch://x"}), session_id="s").open_store()
    assert str(info.value) == (
        "setting 'store' (in a dict, key 'store'): unknown session store scheme 'nosuch'; "
        "known schemes: file, postgres, postgresql, redis, rediss, sqlite"
    )


def test_an_action_a_strategy_records_names_its_node(no_hosts: None) -> None:
    class Trimmer:
        name = "trimmer"

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            ctx.record("trimmed", removed=1)

    report = ctxlife.manage([{"role": "user", "content": "hi"}], config=NONE, context_window=8000, plugins=[Trimmer()])
    assert [(a.strategy, a.node, a.what, a.details) for a in report.actions] == [
        ("trimmer", "before_llm_call", "trimmed", {"removed": 1})
    ]


def test_once_a_session_showed_anthropic_blocks_its_plain_lists_are_taken_as_anthropic() -> None:
    formats: list[tuple[str | None, str]] = []

    class Formats:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            formats.append((ctx.session_id, ctx.message_format))

    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    host = Host(NONE, session_id="a", plugins=[Formats()])
    for session, messages in (
        ("a", [{"role": "user", "content": "hi"}]),
        ("a", [{"role": "user", "content": "hi"}, use, result]),
        ("a", [{"role": "user", "content": "plain again"}]),  # remembered: Anthropic
        ("a", [{"role": "user", "content": "hi"}, call, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]),
        ("a", [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]),
        # each OpenAI-only sign alone: a call, a legacy function result, a tool result
        ("a", [{"role": "user", "content": "hi"}, call]),
        ("a", [{"role": "user", "content": "hi"}, {"role": "function", "name": "f", "content": "ok"}]),
        ("a", [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]),
        ("b", [{"role": "user", "content": "plain, another session"}]),
    ):
        host.before_llm_call(messages, context_window=8000, session_id=session)
    assert formats == [
        ("a", "openai"),
        ("a", "anthropic"),
        ("a", "anthropic"),
        ("a", "openai"),
        ("a", "openai"),
        ("a", "openai"),
        ("a", "openai"),
        ("a", "openai"),
        ("b", "openai"),
    ]
    host.close()


def test_a_views_calls_are_recorded_under_that_view_with_what_the_call_did(tmp_path: Path) -> None:
    class Trimmer:
        name = "trimmer"

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            ctx.record("trimmed", removed=1)

    class Raiser:
        name = "raiser"

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            raise RuntimeError("down: the user's words")

    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    host = Host(settings, session_id="s", plugins=[Trimmer(), Raiser()])
    messages = [{"role": "user", "content": "hi"}]
    report = host.before_llm_call(messages, context_window=8000, view="agent-b", model="gpt-4o")
    messages += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    host.before_llm_call(messages, context_window=8000, view="agent-b")
    calls = host.open_store().read_calls("s")
    assert [(c.n, c.view) for c in calls] == [(1, "agent-b"), (2, "agent-b")]
    first = calls[0].doc
    assert (first["tokens"], first["window"], first["budget"], first["model"]) == (
        [report.tokens_before, report.tokens_after],
        8000,
        report.budget,
        "gpt-4o",
    )
    assert first["actions"] == [{"strategy": "trimmer", "what": "trimmed", "removed": 1}]
    assert first["failures"] == [{"strategy": "raiser", "node": "before_llm_call", "error": "RuntimeError"}]
    host.close()


def test_after_a_store_failure_in_the_call_its_call_record_is_skipped_and_said_so(tmp_path: Path) -> None:
    class Flaky:
        name = "flaky"
        calls = 0

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
            Flaky.calls += 1
            if Flaky.calls == 2:
                raise StoreError("file store: append: No space left on device")

    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    host = Host(settings, session_id="s", plugins=[Flaky()])
    messages = [{"role": "user", "content": "hi"}]
    host.before_llm_call(messages, context_window=8000, view="agent-b")
    messages += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    with capture_logs() as logs:
        report = host.before_llm_call(messages, context_window=8000, view="agent-b")
    why = "skipped: the store failed in this call (flaky: StoreError: file store: append: No space left on device)"
    assert [(f.strategy, f.node, f.error) for f in report.failures][-1] == ("call_record", "before_llm_call", why)
    [event] = [e for e in logs if e["event"] == "ctxlife.call_record_skipped"]
    assert (event["log_level"], event["session_id"], event["view"], event["error"]) == ("warning", "s", "agent-b", why)
    assert [c.n for c in host.open_store().read_calls("s")] == [1]  # the first call's record only
    host.close()
