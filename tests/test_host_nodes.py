"""The host's tool, task and text-filter nodes: what a strategy is handed (node, session, view, window,
model's counter, its own state), what a call reports (tokens before and after, failures), and what is
rolled back when a strategy breaks the node's contract. The privacy filter's text is what leaves the store.
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import HookContext, TaskContext, ToolCallContext
from ctxlife.errors import InvalidMessagesError
from ctxlife.host import Host

NONE = settings_from_dict({"strategies": []})


class Seen:
    """Notes what every node hands it; counts its calls in its own per-session state."""

    def __init__(self):
        self.seen: list[dict] = []

    def _note(self, ctx, **extra):
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1
        self.seen.append(
            {
                "node": ctx.node,
                "session_id": ctx.session_id,
                "view": ctx.view,
                "context_window": ctx.context_window,
                "tokens": ctx.tokens,
                "store": ctx.store,
                "calls": ctx.state["calls"],
                **extra,
            }
        )

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx):
        self._note(ctx)

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx):
        self._note(ctx)

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx):
        self._note(ctx)

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx):
        self._note(ctx)


def test_tool_and_task_nodes_hand_strategies_the_call_s_session_window_model_and_own_state():
    seen = Seen()
    host = Host(NONE, session_id="default-session", plugins=[seen])
    tool = ToolCallContext(tool_name="t", tool_input={"a": 1})
    host.before_tool_call(tool, session_id="s1", model="gpt-4", context_window=5000)
    tool.result = "out"
    host.after_tool_call(tool, session_id="s1", model="gpt-4", context_window=5000)
    host.task_start(TaskContext(task_name="t", view="agent-a"), session_id="s1", model="gpt-4", context_window=5000)
    host.task_end(TaskContext(task_name="t", view="agent-a"), session_id="s1", model="gpt-4", context_window=5000)
    host.after_tool_call(ToolCallContext(tool_name="t", result="x"))  # the host's own session
    assert [s["node"] for s in seen.seen] == [
        "before_tool_call",
        "after_tool_call",
        "task_start",
        "task_end",
        "after_tool_call",
    ]
    for s in seen.seen[:4]:
        assert s["session_id"] == "s1" and s["context_window"] == 5000 and s["tokens"] is host.counter("gpt-4")
    assert [s["view"] for s in seen.seen[:4]] == ["", "", "agent-a", "agent-a"]
    # the strategy's state is the session's: four calls in s1, the first in the host's session
    assert [s["calls"] for s in seen.seen] == [1, 2, 3, 4, 1]
    assert seen.seen[4]["session_id"] == "default-session" and seen.seen[4]["tokens"] is host.counter(None)


def test_tool_and_task_reports_count_the_text_before_and_after_the_strategies():
    class Shorten:
        @ctxlife.hookimpl
        def ctxlife_after_tool_call(self, ctx):
            ctx.result = "short"

        @ctxlife.hookimpl
        def ctxlife_task_start(self, ctx):
            ctx.context_text = "short"

        @ctxlife.hookimpl
        def ctxlife_task_end(self, ctx):
            ctx.output = "short"

    host = Host(NONE, context_window=1000, plugins=[Shorten()])
    long = " ".join(f"word{i}" for i in range(200))
    counter = host.counter()
    after = host.after_tool_call(ToolCallContext(tool_name="t", result=long))
    start = host.task_start(TaskContext(task_name="t", context_text=long, output="not this one"))
    end = host.task_end(TaskContext(task_name="t", context_text="not this one", output=long))
    for report, node in ((after, "after_tool_call"), (start, "task_start"), (end, "task_end")):
        assert report.node == node
        assert report.tokens_before == counter.count_text(long) and report.tokens_after == counter.count_text("short")
        assert report.context_window == 1000 and not report.failures


@pytest.mark.parametrize(
    "node, attr, make",
    [
        ("task_start", "context_text", lambda: TaskContext(task_name="t", context_text="given")),
        ("task_end", "output", lambda: TaskContext(task_name="t", output="given")),
    ],
)
def test_a_task_strategy_that_breaks_the_text_is_rolled_back_and_named(node, attr, make):
    class NotText:
        name = "not_text"

        def _set(self, ctx):
            setattr(ctx, attr, 42)

    class Raiser:
        name = "raiser"

        def _set(self, ctx):
            setattr(ctx, attr, "half-done")
            raise RuntimeError("broke")

    class Appender:
        def _set(self, ctx):
            setattr(ctx, attr, getattr(ctx, attr) + "+ok")

    for cls in (NotText, Raiser, Appender):  # the same method under the node's hook name
        setattr(cls, f"ctxlife_{node}", ctxlife.hookimpl(lambda self, ctx: self._set(ctx)))
    host = Host(NONE, context_window=1000, plugins=[NotText(), Raiser(), Appender()])
    ctx = make()
    report = getattr(host, node)(ctx)
    assert getattr(ctx, attr) == "given+ok"
    assert [(f.strategy, f.node) for f in report.failures] == [("not_text", node), ("raiser", node)]
    assert report.failures[0].error == f"set ctx.{attr} to a int; it must be a string"
    assert report.failures[1].error == "RuntimeError: broke"


def test_a_task_end_without_output_is_no_failure_of_the_strategies_that_leave_it():
    seen = Seen()
    report = Host(NONE, plugins=[seen]).task_end(TaskContext(task_name="t"))
    assert report.failures == [] and seen.seen[0]["node"] == "task_end"


def test_a_tool_strategy_that_sets_a_result_not_text_is_named_with_its_type():
    class Bad:
        name = "bad"

        @ctxlife.hookimpl
        def ctxlife_before_tool_call(self, ctx):
            ctx.result = ["a", "list"]

    ctx = ToolCallContext(tool_name="t", tool_input={"a": 1})
    report = Host(NONE, plugins=[Bad()]).before_tool_call(ctx)
    assert ctx.result is None and ctx.skipped_by is None
    assert report.failures[0].error == "set ctx.result to a list; it must be a string"


def test_async_nodes_pass_the_session_and_window_on():
    seen = Seen()
    host = Host(NONE, plugins=[seen])

    async def run():
        tool = ToolCallContext(tool_name="t", result="r")
        await host.aafter_tool_call(tool, session_id="s2", context_window=3000)
        await host.atask_start(TaskContext(task_name="t"), session_id="s2", context_window=3000)
        await host.atask_end(TaskContext(task_name="t", output="o"), session_id="s2", context_window=3000)

    asyncio.run(run())
    assert [(s["node"], s["session_id"], s["context_window"]) for s in seen.seen] == [
        ("after_tool_call", "s2", 3000),
        ("task_start", "s2", 3000),
        ("task_end", "s2", 3000),
    ]


# -- the privacy filter -------------------------------------------------------------------------


class Redact:
    """Replaces a secret, and notes what each call was handed."""

    def __init__(self, secret="SECRET-1"):
        self.secret = secret
        self.seen: list[dict] = []

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx):
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1
        self.seen.append(
            {
                "text": ctx.text,
                "where": ctx.where,
                "session_id": ctx.session_id,
                "view": ctx.view,
                "node": ctx.node,
                "store": ctx.store,
                "calls": ctx.state["calls"],
            }
        )
        ctx.text = ctx.text.replace(self.secret, "[redacted]")


def test_filter_text_hands_the_filter_the_text_its_path_session_view_and_store(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    redact = Redact()
    host = Host(settings, session_id="host-session", plugins=[redact])
    assert host.filter_text("pay SECRET-1 now", where="recall", session_id="s1", view="agent") == "pay [redacted] now"
    assert host.filter_text("SECRET-1", where="show") == "[redacted]"
    assert host.filter_text("again SECRET-1", where="search", session_id="s1") == "again [redacted]"
    assert redact.seen[0] == {
        "text": "pay SECRET-1 now",
        "where": "recall",
        "session_id": "s1",
        "view": "agent",
        "node": "filter_text",
        "store": host.store,
        "calls": 1,
    }
    assert host.store is not None
    assert [(s["session_id"], s["view"], s["calls"]) for s in redact.seen[1:]] == [
        ("host-session", "", 1),
        ("s1", "", 2),  # the filter's state is the session's
    ]
    assert host.filter_text("", where="show") == "" and len(redact.seen) == 3  # nothing to filter


def test_filter_text_without_a_filter_returns_the_text_as_it_is():
    host = Host(NONE)
    assert host.filter_text("SECRET-1", where="show") == "SECRET-1"


def test_a_broken_filter_is_rolled_back_and_the_next_one_still_redacts():
    class NotText:
        name = "not_text"

        @ctxlife.hookimpl
        def ctxlife_filter_text(self, ctx):
            ctx.text = 7

    class Raiser:
        name = "raiser"

        @ctxlife.hookimpl
        def ctxlife_filter_text(self, ctx):
            ctx.text = "garbled"
            raise RuntimeError("filter down")

    host = Host(NONE, plugins=[NotText(), Raiser(), Redact()])
    with capture_logs() as logs:
        assert host.filter_text("card SECRET-1", where="export") == "card [redacted]"
    problems = [(e["event"], e["strategy"], e.get("problem") or e.get("error")) for e in logs if "strategy" in e]
    assert problems == [
        ("ctxlife.invalid_sequence", "not_text", "set ctx.text to a int, not a str"),
        ("ctxlife.strategy_failed", "raiser", "RuntimeError: filter down"),
    ]
    assert all(e["node"] == "filter_text" for e in logs if "strategy" in e)


def test_a_strategy_s_context_filters_text_for_its_own_session_and_view():
    class Quoter:
        """A strategy showing the model stored text: it passes it through the filter."""

        @ctxlife.hookimpl
        def ctxlife_task_start(self, ctx):
            ctx.context_text = ctx.filter_text(ctx.context_text, "recall")

    redact = Redact()
    host = Host(NONE, plugins=[Quoter(), redact])
    ctx = TaskContext(task_name="t", context_text="earlier: SECRET-1", view="agent-b")
    host.task_start(ctx, session_id="s3")
    assert ctx.context_text == "earlier: [redacted]"
    assert (redact.seen[0]["where"], redact.seen[0]["session_id"], redact.seen[0]["view"]) == (
        "recall",
        "s3",
        "agent-b",
    )
    # a context no host dispatched has no filter: the text as it is
    assert HookContext().filter_text("SECRET-1", "recall") == "SECRET-1"


# -- a reply recorded from an SDK object -----------------------------------------------------------


class SdkMessage:
    """What an SDK's reply object looks like to ctxlife: fields, some None, and model_dump()."""

    def __init__(self, **fields):
        self.fields = fields

    def model_dump(self, *, exclude_none=False):
        return {k: v for k, v in self.fields.items() if not (exclude_none and v is None)}


def test_a_reply_object_is_recorded_as_the_api_takes_it_back(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    [plain] = ctxlife.record_reply("done", config=settings, session_id="r1")
    [dumped] = ctxlife.record_reply(
        SdkMessage(content="from the SDK", tool_calls=None, refusal=None), config=settings, session_id="r1"
    )
    [own_role] = ctxlife.record_reply(SdkMessage(role="user", content="hi"), config=settings, session_id="r1")
    assert plain.message == {"role": "assistant", "content": "done"}
    assert dumped.message == {"content": "from the SDK", "role": "assistant"}  # no None fields, a role
    assert own_role.message == {"role": "user", "content": "hi"}  # its own role kept
    # A role no later call could send (Gemini's "model") is refused, nothing recorded.
    with pytest.raises(InvalidMessagesError, match="Google Gemini"):
        ctxlife.record_reply(SdkMessage(role="model", content="hi"), config=settings, session_id="r1")
    from ctxlife.sessions import open_store, session_key

    with open_store(settings.store) as store:
        assert len(store.read_records(session_key("r1"))) == 3


def test_a_reply_that_is_no_message_is_refused_with_its_type(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})

    class Odd:
        def model_dump(self, *, exclude_none=False):
            return ["not", "a", "dict"]

    for reply, name in ((42, "int"), (Odd(), "Odd")):
        with pytest.raises(InvalidMessagesError, match=f"cannot record a reply of type {name}: pass the reply text"):
            ctxlife.record_reply(reply, config=settings, session_id="r2")


# -- what the logs say: an error quoting the node's contents is withheld, log_content shows them --------------

PRIVATE = "the private note 4411-2290-7731 of the customer"


def _failed(logs):
    [event] = [e for e in logs if e["event"] == "ctxlife.strategy_failed"]
    return event["error"]


def _withheld(error):
    return error.startswith("ValueError: (message of") and "withheld" in error and "4411-2290" not in error


class Quoting:
    """Raises an error quoting a text it was handed (as a provider error echoing its input does)."""

    name = "quoting"

    def __init__(self, pick, change=None):
        self.pick, self.change = pick, change

    def _run(self, ctx):
        quoted = self.pick(ctx)
        if self.change is not None:
            self.change(ctx)
        raise ValueError(f"cannot use {quoted!s}")


def _host(*plugins, log_content=False):
    return Host(settings_from_dict({"strategies": [], "log_content": log_content}), plugins=list(plugins))


def _plugin(node, pick, change=None):
    class Plugin(Quoting):
        pass

    setattr(Plugin, f"ctxlife_{node}", ctxlife.hookimpl(lambda self, ctx: self._run(ctx)))
    return Plugin(pick, change)


@pytest.mark.parametrize(
    "node, call, pick, change",
    [
        # a tool's input value, its result, its raw result, its result before the strategy changed it
        (
            "before_tool_call",
            lambda h: h.before_tool_call(ToolCallContext(tool_name="t", tool_input={"note": PRIVATE})),
            lambda ctx: ctx.tool_input["note"],
            None,
        ),
        (
            "after_tool_call",
            lambda h: h.after_tool_call(ToolCallContext(tool_name="t", result=PRIVATE)),
            lambda ctx: ctx.result,
            None,
        ),
        (
            "after_tool_call",
            lambda h: h.after_tool_call(ToolCallContext(tool_name="t", result="capped", raw_result=PRIVATE)),
            lambda ctx: ctx.raw_result,
            None,
        ),
        (
            "after_tool_call",
            lambda h: h.after_tool_call(ToolCallContext(tool_name="t", result=PRIVATE)),
            lambda ctx: ctx.result,
            lambda ctx: setattr(ctx, "result", "replaced"),
        ),
        # the input as a whole (its repr: long keys, short values), a short value quoted whole
        (
            "before_tool_call",
            lambda h: h.before_tool_call(
                ToolCallContext(tool_name="t", tool_input={"account_holder_full_name": "Ann"})
            ),
            lambda ctx: repr(ctx.tool_input),
            None,
        ),
        (
            "before_tool_call",
            lambda h: h.before_tool_call(ToolCallContext(tool_name="t", tool_input={"pin": "4411-2290"})),
            lambda ctx: "pin " + ctx.tool_input["pin"] + " was refused by the bank",
            None,
        ),
        # a task's context, its output, its description, its messages, its output before the change
        # (at either node: the other text too)
        (
            "task_end",
            lambda h: h.task_end(TaskContext(task_name="t", context_text=PRIVATE, output="o")),
            lambda ctx: ctx.context_text,
            None,
        ),
        (
            "task_start",
            lambda h: h.task_start(TaskContext(task_name="t", context_text="c", output=PRIVATE)),
            lambda ctx: ctx.output,
            None,
        ),
        (
            "task_start",
            lambda h: h.task_start(TaskContext(task_name="t", context_text=PRIVATE)),
            lambda ctx: ctx.context_text,
            None,
        ),
        (
            "task_end",
            lambda h: h.task_end(TaskContext(task_name="t", output=PRIVATE)),
            lambda ctx: ctx.output,
            None,
        ),
        (
            "task_end",
            lambda h: h.task_end(TaskContext(task_name="t", description=PRIVATE, output="o")),
            lambda ctx: ctx.description,
            None,
        ),
        (
            "task_end",
            lambda h: h.task_end(
                TaskContext(task_name="t", output="o", messages=[{"role": "assistant", "content": PRIVATE}])
            ),
            lambda ctx: ctx.messages[0]["content"],
            None,
        ),
        (
            "task_end",
            lambda h: h.task_end(TaskContext(task_name="t", output=PRIVATE)),
            lambda ctx: ctx.output,
            lambda ctx: setattr(ctx, "output", "replaced"),
        ),
        # a message of the list, one the strategy removed before failing
        (
            "before_llm_call",
            lambda h: h.before_llm_call(
                [{"role": "system", "content": "s"}, {"role": "user", "content": PRIVATE}], context_window=1000
            ),
            lambda ctx: ctx.messages[-1]["content"],
            None,
        ),
        (
            "before_llm_call",
            lambda h: h.before_llm_call(
                [{"role": "system", "content": PRIVATE}, {"role": "user", "content": "u"}], context_window=1000
            ),
            lambda ctx: ctx.messages[0]["content"],
            lambda ctx: ctx.messages.__setitem__(0, {"role": "system", "content": "other"}),
        ),
    ],
)
def test_an_error_quoting_what_the_node_holds_is_withheld_from_the_logs(node, call, pick, change):
    host = _host(_plugin(node, pick, change))
    with capture_logs() as logs:
        report = call(host)
    assert [f.strategy for f in report.failures] == ["quoting"]
    assert _withheld(_failed(logs)), _failed(logs)
    with capture_logs() as logs:
        call(_host(_plugin(node, lambda ctx: "nothing private here at all, only words", change)))
    assert _failed(logs) == "ValueError: cannot use nothing private here at all, only words"  # the control


def test_an_error_quoting_the_agent_s_goal_or_backstory_is_withheld():
    goal, backstory = PRIVATE, "a backstory of 9931-0042-5567 to keep private"
    for pick in (lambda ctx: ctx.goal, lambda ctx: ctx.backstory, lambda ctx: ctx.blocks[0]):

        class First:
            @ctxlife.hookimpl
            def ctxlife_bootstrap(self, ctx):
                ctx.blocks.append("a block of 5521-8830-1147 the agent must know")

        host = _host(First(), _plugin("bootstrap", pick))
        with capture_logs() as logs:
            host.bootstrap_text(agent_role="clerk", goal=goal, backstory=backstory)
        error = _failed(logs)
        assert error.startswith("ValueError: (message of") and "withheld" in error, error


def _content(logs, node):
    return [e["content"] for e in logs if e["event"] == "ctxlife.node" and e["node"] == node]


def test_log_content_shows_the_text_each_node_was_about():
    class Blocks:
        @ctxlife.hookimpl
        def ctxlife_bootstrap(self, ctx):
            ctx.blocks += ["first block", "second block"]

    host = _host(Blocks(), log_content=True)
    with capture_logs() as logs:
        host.before_llm_call(
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "older"},
                {"role": "user", "content": "last"},
            ],
            context_window=1000,
        )
        host.after_tool_call(ToolCallContext(tool_name="t", result="the tool's output"))
        host.task_start(TaskContext(task_name="t", context_text="given context", output="not yet"))
        host.task_end(TaskContext(task_name="t", context_text="given context", output="the answer"))
    assert _content(logs, "before_llm_call") == ["last"]
    assert _content(logs, "after_tool_call") == ["the tool's output"]
    assert _content(logs, "task_start") == ["given context"]
    assert _content(logs, "task_end") == ["the answer"]
    assert _content(logs, "bootstrap") == ["first block\n\nsecond block"]  # the model call's bootstrap


def test_log_content_cuts_a_long_text_and_says_how_much_is_left():
    from ctxlife.host_report import CONTENT_LIMIT

    host = _host(log_content=True)
    with capture_logs() as logs:
        host.after_tool_call(ToolCallContext(tool_name="t", result="a" * CONTENT_LIMIT))
        host.after_tool_call(ToolCallContext(tool_name="t", result="b" * (CONTENT_LIMIT + 7)))
    assert _content(logs, "after_tool_call") == [
        "a" * CONTENT_LIMIT,
        "b" * CONTENT_LIMIT + "... [7 more characters]",
    ]


def test_a_task_s_view_is_checked_like_any_view():
    host = Host(NONE, plugins=[Seen()])
    for node in (host.task_start, host.task_end):
        with pytest.raises(ctxlife.CtxlifeError, match="view"):
            node(TaskContext(task_name="t", view="../other-session"))


def test_async_model_call_passes_the_session_and_window_on():
    seen: list[tuple] = []

    class Note:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            seen.append((ctx.session_id, ctx.context_window))

    host = Host(NONE, plugins=[Note()])
    asyncio.run(host.abefore_llm_call([{"role": "user", "content": "hi"}], session_id="s4", context_window=3000))
    assert seen == [("s4", 3000)]


def test_a_new_run_starts_the_call_count_of_its_session_again():
    calls: list[tuple] = []

    class Note:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            calls.append((ctx.session_id, ctx.call_index, ctx.first_call_of_run))

    host = Host(NONE, context_window=1000, session_id="host-s", plugins=[Note()])
    for session in ("a", "a", "host-s"):
        host.before_llm_call([{"role": "user", "content": "hi"}], session_id=session)
    host.start_run("a")
    host.before_llm_call([{"role": "user", "content": "hi"}], session_id="a")
    host.before_llm_call([{"role": "user", "content": "hi"}])
    host.start_run()
    host.before_llm_call([{"role": "user", "content": "hi"}])
    assert calls == [
        ("a", 0, True),
        ("a", 1, False),
        ("host-s", 0, True),
        ("a", 0, True),  # the run started again: its first call
        ("host-s", 1, False),  # another session's count goes on
        ("host-s", 0, True),
    ]


def _stores(tmp_path):
    return (
        settings_from_dict({"strategies": [], "store": f"file://{tmp_path / 'a'}"}),
        settings_from_dict({"strategies": [], "store": f"file://{tmp_path / 'b'}"}),
    )


def test_a_reply_goes_to_the_store_session_and_view_it_is_recorded_for(tmp_path):
    from ctxlife.sessions import open_store, session_key

    a, b = _stores(tmp_path)
    ctxlife.manage([{"role": "user", "content": "hi"}], config=a, session_id="s", context_window=8000)
    ctxlife.record_reply("to a's agent view", config=a, session_id="s", view="agent")  # the host manage() made
    ctxlife.record_reply("to b", config=b, session_id="s")  # another config: its own store
    ctxlife.record_reply("to b's agent view", config=b, session_id="s", view="agent")
    in_a = [(r.view, r.message["content"]) for r in open_store(a.store).read_records(session_key("s"))]
    in_b = [(r.view, r.message["content"]) for r in open_store(b.store).read_records(session_key("s"))]
    assert in_a == [("agent", "to a's agent view")]  # (manage() without strategies records nothing)
    assert in_b == [("", "to b"), ("agent", "to b's agent view")]


def test_a_host_records_a_reply_in_the_session_and_view_it_is_given(tmp_path):
    from ctxlife.sessions import open_store, session_key

    a, _ = _stores(tmp_path)
    host = Host(a, session_id="host-s")
    host.record_reply({"role": "assistant", "content": "one"}, session_id="other", view="agent")
    host.record_reply({"role": "assistant", "content": "two"})
    host.record_reply([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], view="agent")
    store = open_store(a.store)
    assert [(r.view, r.message["content"]) for r in store.read_records(session_key("other"))] == [("agent", "one")]
    assert [(r.view, r.message["content"]) for r in store.read_records(session_key("host-s"), view="agent")] == [
        ("agent", "q"),
        ("agent", "a"),
    ]
    with pytest.raises(ctxlife.CtxlifeError, match="record_reply takes a message dict or a list of them, got str"):
        host.record_reply("a text")  # type: ignore[arg-type]
    assert [r.message["content"] for r in store.read_records(session_key("host-s"), view="")] == ["two"]
    host.close()


def test_the_first_amanage_of_a_process_starts_its_worker_pool(monkeypatch):
    import ctxlife.api

    monkeypatch.setattr(ctxlife.api, "_executor", None)  # as in a fresh process
    messages = [{"role": "user", "content": "hi"}]
    report = asyncio.run(ctxlife.amanage(messages, config=NONE, context_window=1000))
    assert report.node == "before_llm_call" and ctxlife.api._executor is not None


@pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")
def test_a_run_building_its_lists_anew_records_a_repeated_task_again(tmp_path):
    from ctxlife.sessions import open_store, session_key

    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    host = Host(settings, context_window=1000, session_id="host-s")
    task, reply = (
        {"role": "user", "content": "Check the stock of R0001."},
        {"role": "assistant", "content": "In stock."},
    )
    more = {"role": "user", "content": "And R0002?"}

    def run(messages, **start):
        host.start_run("s", **start)
        host.before_llm_call(messages, session_id="s")
        host.record_reply([*messages, reply], session_id="s")

    def contents():
        return [r.message["content"] for r in open_store(settings.store).read_records(session_key("s"))]

    run([task])
    run([task, reply, more])  # a caller keeping its conversation: only what is new
    assert contents() == ["Check the stock of R0001.", "In stock.", "And R0002?", "In stock."]
    run([task], new_lists=True)  # a kickoff building its lists from scratch: the same task is a new turn
    assert contents() == ["Check the stock of R0001.", "In stock.", "And R0002?", "In stock."] + [
        "Check the stock of R0001.",
        "In stock.",
    ]
    host.close()


def test_log_content_of_a_call_on_an_empty_list_is_no_content():
    host = _host(log_content=True)
    with capture_logs() as logs:
        report = host.before_llm_call([], context_window=1000)
    assert report.failures == [] and _content(logs, "before_llm_call") == [None]


def test_implements_says_whether_any_strategy_acts_at_a_hook():
    assert Host(NONE, plugins=[Redact()]).implements("ctxlife_filter_text") is True
    assert Host(NONE).implements("ctxlife_filter_text") is False


def test_a_reply_given_as_a_message_dict_is_recorded_as_it_is(tmp_path):
    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    message = {"role": "assistant", "content": "as a dict", "name": "clerk"}
    [record] = ctxlife.record_reply(message, config=settings, session_id="d1")
    assert record.message == message
