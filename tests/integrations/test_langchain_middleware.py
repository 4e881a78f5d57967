"""CtxlifeMiddleware around one tool call (nodes 3 and 4): what the strategies see, what the tool and the
agent get back. The middleware's own wrap_tool_call/awrap_tool_call, called as LangGraph's ToolNode calls
them, with real LangChain messages and a real strategy (test_langchain.py runs whole agents).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="the LangChain adapter needs pip install 'ctxlife[langchain]'")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.prebuilt.tool_node import ToolCallRequest  # noqa: E402
from langgraph.types import Command  # noqa: E402

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations import langchain as langchain_adapter  # noqa: E402
from ctxlife.integrations.langchain import CtxlifeMiddleware, _model_facts, _text  # noqa: E402
from ctxlife.sessions import session_key  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fake_chat import ScriptedChatModel, call  # noqa: E402

RULES = "RULES: answer in one line."


class Desk:
    """A strategy: answers ``cached`` without the tool, corrects ``lookup``'s input, tags every result."""

    def __init__(self) -> None:
        self.before: list[tuple[str, dict[str, Any], str | None]] = []
        self.after: list[dict[str, Any]] = []

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: Any) -> None:
        self.before.append((ctx.tool_name, dict(ctx.tool_input), ctx.session_id))
        if ctx.tool_name == "cached":
            ctx.result = "from the desk"
        if ctx.tool_name == "lookup":
            ctx.tool_input["item"] = ctx.tool_input["item"].upper()

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        self.after.append(
            {
                "tool": ctx.tool_name,
                "input": dict(ctx.tool_input),
                "result": ctx.result,
                "raw": ctx.raw_result,
                "skipped_by": ctx.skipped_by,
                "session": ctx.session_id,
            }
        )
        if ctx.tool_name == "lookup":
            ctx.result = f"[seen] {ctx.result}"


def middleware(desk: Desk, session_id: str | None = "s-tools") -> CtxlifeMiddleware:
    return CtxlifeMiddleware(settings_from_dict({"strategies": []}), session_id=session_id, plugins=[desk])


def request(name: str, args: Any, call_id: str = "call_1") -> ToolCallRequest:
    return ToolCallRequest(
        tool_call={"name": name, "args": args, "id": call_id, "type": "tool_call"}, tool=None, state={}, runtime=None
    )


class Tool:
    """The handler LangGraph passes: runs the tool for the request it is given."""

    def __init__(self, artifact: Any = None) -> None:
        self.requests: list[ToolCallRequest] = []
        self.artifact = artifact

    def __call__(self, req: ToolCallRequest) -> ToolMessage:
        self.requests.append(req)
        call = req.tool_call
        return ToolMessage(
            content=f"item {call['args'].get('item')} in stock",
            tool_call_id=call["id"],
            name=call.get("name"),
            artifact=self.artifact,
        )


def both(mw: CtxlifeMiddleware, req: ToolCallRequest, tool: Tool) -> list[Any]:
    """wrap_tool_call and awrap_tool_call on the same request (each with a fresh tool record)."""

    async def handler(r: ToolCallRequest) -> Any:
        return tool(r)

    sync = mw.wrap_tool_call(req, tool)
    return [sync, asyncio.run(mw.awrap_tool_call(req, handler))]


def test_a_strategy_answers_a_call_without_the_tool_and_node_4_sees_the_answer():
    desk = Desk()
    tool = Tool()
    for answer in both(middleware(desk), request("cached", {"q": "a"}, "call_7"), tool):
        assert isinstance(answer, ToolMessage)
        assert (answer.content, answer.tool_call_id, answer.name) == ("from the desk", "call_7", "cached")
    assert tool.requests == []  # the tool never ran
    assert desk.after == 2 * [
        {
            "tool": "cached",
            "input": {"q": "a"},
            "result": "from the desk",
            "raw": "from the desk",
            "skipped_by": "Desk",
            "session": "s-tools",
        }
    ]
    assert desk.before == 2 * [("cached", {"q": "a"}, "s-tools")]


def test_an_answered_call_without_an_id_gets_an_empty_id():
    answer = middleware(Desk()).wrap_tool_call(
        ToolCallRequest(tool_call={"name": "cached", "args": {}, "id": None}, tool=None, state={}, runtime=None), Tool()
    )
    assert answer.tool_call_id == ""


def test_a_changed_input_reaches_the_tool_and_the_changed_result_reaches_the_agent():
    desk = Desk()
    tool = Tool()
    for result in both(middleware(desk), request("lookup", {"item": "r7"}), tool):
        assert isinstance(result, ToolMessage)
        assert result.content == "[seen] item R7 in stock" and result.tool_call_id == "call_1"
    assert [r.tool_call["args"] for r in tool.requests] == 2 * [{"item": "R7"}]
    assert [r.tool_call["id"] for r in tool.requests] == ["call_1", "call_1"]
    assert desk.after == 2 * [
        {
            "tool": "lookup",
            "input": {"item": "R7"},
            "result": "item R7 in stock",
            "raw": "item R7 in stock",
            "skipped_by": None,
            "session": "s-tools",
        }
    ]


def test_an_unchanged_input_passes_the_same_request_and_an_unchanged_result_the_same_message():
    desk = Desk()
    tool = Tool()
    req = request("search", {"item": "r7"})
    results = both(middleware(desk), req, tool)
    assert all(r is req for r in tool.requests)  # not rebuilt: the tool gets LangGraph's own request
    assert [r.content for r in results] == 2 * ["item r7 in stock"]
    assert desk.after[0]["result"] == "item r7 in stock" and desk.after[0]["tool"] == "search"


def test_node_4_gets_the_tools_artifact_as_the_raw_result():
    desk = Desk()
    artifact = {"rows": [1, 2, 3]}
    both(middleware(desk), request("search", {"item": "x"}), Tool(artifact=artifact))
    assert [a["raw"] for a in desk.after] == [artifact, artifact]
    assert desk.after[0]["result"] == "item x in stock"


def test_arguments_that_are_not_a_dict_are_seen_as_none():
    desk = Desk()
    both(middleware(desk), request("search", "not a dict"), Tool())
    assert [b[1] for b in desk.before] == [{}, {}]
    assert [a["input"] for a in desk.after] == [{}, {}]


def test_a_call_without_a_name_is_seen_with_an_empty_name():
    desk = Desk()
    mw = middleware(desk)
    tool = Tool()
    mw.wrap_tool_call(
        ToolCallRequest(tool_call={"args": {"item": "x"}, "id": "c"}, tool=None, state={}, runtime=None), tool
    )
    assert desk.before[0][0] == "" and desk.after[0]["tool"] == ""


def test_a_command_from_the_tool_passes_untouched():
    desk = Desk()
    command = Command(update={"messages": []})
    assert middleware(desk).wrap_tool_call(request("search", {}), lambda r: command) is command
    assert desk.after == []


def test_text_of_content_blocks():
    assert _text("plain") == "plain"
    assert _text(["a", {"type": "text", "text": "b"}, {"type": "image"}, 7]) == "a\nb\n"
    assert _text(None) == "" and _text(12) == "12"


def test_after_agent_hands_back_a_reshaped_output_in_place():
    class Shout:
        @ctxlife.hookimpl
        def ctxlife_task_end(self, ctx: Any) -> None:
            if ctx.output is not None:
                ctx.output = ctx.output.upper()

    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), session_id="s-end", plugins=[Shout()])
    last = AIMessage("all done", id="ai-1")
    update = mw.after_agent({"messages": [last]}, None)
    assert update is not None
    (replaced,) = update["messages"]
    assert (replaced.content, replaced.id) == ("ALL DONE", "ai-1")
    assert asyncio.run(mw.aafter_agent({"messages": [AIMessage("ok", id="ai-2")]}, None))["messages"][0].content == "OK"
    assert mw.after_agent({"messages": [AIMessage("SAME", id="ai-3")]}, None) is None


# -- the model's name and window, ctxlife's own summary calls ----------------------------------------


class Facts:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def test_the_model_name_and_window_come_from_the_chat_models_own_fields():
    assert _model_facts(Facts(model_name="a", model="b", model_id="c")) == ("a", None)
    assert _model_facts(Facts(model_name="", model="b", model_id="c")) == ("b", None)
    assert _model_facts(Facts(model_name=5, model_id="c")) == ("c", None)
    assert _model_facts(Facts(profile={"max_input_tokens": 1000})) == (None, 1000)
    assert _model_facts(Facts(model="m", profile={"max_input_tokens": 1})) == ("m", 1)
    for profile in ({"max_input_tokens": 0}, {"max_input_tokens": "1000"}, {}, [("max_input_tokens", 9)]):
        assert _model_facts(Facts(profile=profile)) == (None, None)
    assert _model_facts(object()) == (None, None)


def test_ctxlifes_own_summary_call_goes_to_the_chat_model_as_langchain_messages_and_is_marked():
    seen: list[tuple[list[str], bool]] = []

    class Chat:
        def __init__(self, reply: Any) -> None:
            self.reply = reply

        def invoke(self, messages: Any) -> Any:
            seen.append(([type(m).__name__ for m in messages], langchain_adapter._own_call.get()))
            return self.reply

    ask = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "the text"}]
    assert langchain_adapter._completion(Chat(AIMessage("Goal: summary.")))(ask, 100) == "Goal: summary."
    assert langchain_adapter._completion(Chat("a plain string"))(ask, 100) == "a plain string"
    assert seen == 2 * [(["SystemMessage", "HumanMessage"], True)]
    assert langchain_adapter._own_call.get() is False  # reset after the call


def test_a_strategys_tool_is_offered_with_its_name_description_and_arguments():
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": ["tool_output"]}))
    (spec,) = mw.host.provided_tools()
    (offered,) = mw.tools
    assert (offered.name, offered.description) == (spec.name, spec.description)
    assert set(offered.args_schema.model_json_schema()["properties"]) == set(spec.parameters)
    arguments = {name: "nothing-stored" for name in spec.parameters}
    assert offered.invoke(arguments) == spec.function(**arguments)


def test_a_changed_list_is_written_back_with_the_models_reply():
    rewrite = [HumanMessage("kept", id="h1")]
    reply = AIMessage("hi", id="a1")
    extended = langchain_adapter._Prepared(request=None, rewrite=rewrite, report=None).finish(reply)
    assert extended.model_response.result == [reply]
    update = extended.command.update["messages"]
    assert update[0].id == REMOVE_ALL_MESSAGES and update[1:] == [*rewrite, reply]
    assert langchain_adapter._Prepared(request=None, rewrite=None, report=None).finish(reply) is reply


# -- whole runs: the system prompt, the bootstrap, the task's output ------------------------------


class Ends:
    """Records what node 6 gets."""

    def __init__(self) -> None:
        self.ends: list[tuple[Any, list[dict[str, Any]]]] = []

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: Any) -> None:
        self.ends.append((ctx.output, [dict(m) for m in ctx.messages]))


def test_node_6_gets_the_last_reply_and_the_list_of_the_last_model_call():
    ends = Ends()
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), session_id="s-end", plugins=[ends])
    model = ScriptedChatModel(script=["first answer"])
    agent = create_agent(model, [], system_prompt="RULES: be brief.", middleware=[mw])
    agent.invoke({"messages": [HumanMessage("q1")]})
    ((output, messages),) = ends.ends
    assert output == "first answer"
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "RULES: be brief."),
        ("user", "q1"),
        ("assistant", "first answer"),
    ]
    mw.after_agent({"messages": [HumanMessage("q"), AIMessage("one"), AIMessage("two")]}, None)
    mw.after_agent({"messages": [HumanMessage("q"), ToolMessage("t", tool_call_id="c")]}, None)
    mw.after_agent({"messages": []}, None)
    assert [e[0] for e in ends.ends[1:]] == ["two", None, None]
    assert ends.ends[1][1][0] == {"role": "user", "content": "q"}  # no prompt is left from the run before


def test_the_bootstrap_text_goes_to_the_model_as_the_system_prompt_and_the_state_is_kept():
    model = ScriptedChatModel(script=["ok"])
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": RULES}}))
    agent = create_agent(model, [], middleware=[mw])
    asked = HumanMessage("q1", id="h1")
    state = agent.invoke({"messages": [asked]}, {"configurable": {"thread_id": "t-boot"}})
    (received,) = model.calls
    assert isinstance(received[0], SystemMessage) and RULES in received[0].content
    assert [type(m).__name__ for m in received] == ["SystemMessage", "HumanMessage"]
    # the prompt is not written into the state: the state is the user's message and the reply
    assert [(type(m).__name__, m.id) for m in state["messages"]][:1] == [("HumanMessage", "h1")]
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])


class Starts(Desk):
    """Desk, and what node 5 gets."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[tuple[str, str | None, str | None]] = []
        self.firsts: list[bool] = []

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self.firsts.append(ctx.first_call_of_run)

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: Any) -> None:
        self.starts.append((ctx.description, ctx.context_text, ctx.session_id))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_runs_hooks_see_the_thread_ids_session_and_the_latest_ask(mode):
    from langchain_core.tools import tool

    @tool
    def search(item: str) -> str:
        """Search the inventory."""
        return f"item {item} in stock"

    desk = Starts()
    model = ScriptedChatModel(script=[call("search", {"item": "x"}, "c1"), "done", "again"])
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), plugins=[desk])
    agent = create_agent(model, [search], middleware=[mw])
    ask = {"messages": [HumanMessage("an old ask"), AIMessage("ok"), HumanMessage("the latest ask")]}
    config = {"configurable": {"thread_id": "t-hooks"}}
    state = agent.invoke(ask, config) if mode == "sync" else asyncio.run(agent.ainvoke(ask, config))
    key = session_key("t-hooks")
    assert desk.starts == [("the latest ask", "", key)]
    assert desk.before == [("search", {"item": "x"}, key)]
    assert [(a["tool"], a["session"]) for a in desk.after] == [("search", key)]
    assert state["messages"][-1].content == "done"
    again = {"messages": [*state["messages"], HumanMessage("once more")]}
    agent.invoke(again, config) if mode == "sync" else asyncio.run(agent.ainvoke(again, config))
    assert desk.firsts == [True, False, True]  # each run of the thread's session starts anew
    agent.invoke({"messages": [AIMessage("no ask")]})  # no thread id: no session; no human message: no description
    assert desk.starts[-1] == ("", "", None)


def test_an_empty_answer_from_a_strategy_is_an_empty_tool_message():
    class Blank:
        @ctxlife.hookimpl
        def ctxlife_before_tool_call(self, ctx: Any) -> None:
            ctx.result = ""

    tool = Tool()
    answer = CtxlifeMiddleware(settings_from_dict({"strategies": []}), plugins=[Blank()]).wrap_tool_call(
        request("search", {}), tool
    )
    assert answer.content == "" and tool.requests == []


def test_a_summary_chat_model_writes_the_summaries_and_the_agents_model_none():
    from langchain_core.tools import tool

    @tool
    def lookup(item: str) -> str:
        """Look up an item."""
        return f"item {item}: " + "stock data " * 60

    script: list[Any] = []
    for i in range(8):
        script += [call("lookup", {"item": f"R{i:04d}"}, f"call_{i}"), f"R{i:04d} is in stock."]
    model = ScriptedChatModel(script=script, window=2000)
    summarizer = ScriptedChatModel(summary="Goal: lookups. Facts: R0000 to R0007 in stock, by the summary model.")
    settings = settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"keep_rounds": 1}})
    mw = CtxlifeMiddleware(settings, summary_model=summarizer)
    agent = create_agent(model, [lookup], system_prompt="You are a clerk.", middleware=[mw])
    state: dict[str, Any] = {"messages": []}
    for i in range(8):
        state = agent.invoke({"messages": [*state["messages"], HumanMessage(f"Please check R{i:04d}.")]})
    assert summarizer.summary_calls and not model.summary_calls
    assert any("by the summary model" in _text(m.content) for sent in model.calls for m in sent)


def test_the_model_argument_names_the_tokenizers_model_and_a_summary_function_is_taken_as_it_is():
    def summarize(messages: list[dict[str, Any]], max_tokens: int) -> str:
        return "Goal: a summary."

    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), model="gpt-4o-mini", summary_model=summarize)
    assert mw.host.model == "gpt-4o-mini"
    assert CtxlifeMiddleware(settings_from_dict({"strategies": []})).host.model is None


# -- what prepare() hands on: the system prompt, the state's own system message, the model's name -----


class Seen(AgentMiddleware):
    """A middleware after ctxlife's: records the request each model call reaches it with."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str | None, list[Any]]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.requests.append((request.system_prompt, list(request.messages)))
        return handler(request)


def _rounds(n: int) -> list[Any]:
    words = "word " * 30
    return [
        m
        for i in range(n)
        for m in (HumanMessage(f"question {i} {words}", id=f"h{i}"), AIMessage(f"answer {i} {words}", id=f"a{i}"))
    ]


TRUNCATE = {"strategies": ["truncate_last_n"], "truncate_last_n": {"rounds": 1}}


def test_a_system_message_of_the_state_stays_in_the_state_and_no_prompt_is_made_of_it():
    model = ScriptedChatModel(script=["ok"], window=400)
    seen = Seen()
    agent = create_agent(model, [], middleware=[CtxlifeMiddleware(settings_from_dict(TRUNCATE)), seen])
    note = SystemMessage("a note kept in the state", id="s1")
    state = agent.invoke({"messages": [note, *_rounds(4), HumanMessage("last", id="hl")]})
    (received,) = model.calls
    assert [m.id for m in received] == ["s1", "h0", "hl"]  # the precondition: the list was truncated
    # the next middleware gets no system prompt (None, as LangChain's own requests have) and the note
    # among the messages; the state written back keeps it first
    ((prompt, messages),) = seen.requests
    assert prompt is None and [m.id for m in messages] == ["s1", "h0", "hl"]
    assert [m.id for m in state["messages"][:3]] == ["s1", "h0", "hl"]
    assert state["messages"][0].content == "a note kept in the state"


def test_the_agents_system_prompt_reaches_the_model_as_given_when_the_list_is_cut():
    prompt = SystemMessage(content=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}])
    model = ScriptedChatModel(script=["ok"], window=400)
    agent = create_agent(model, [], system_prompt=prompt, middleware=[CtxlifeMiddleware(settings_from_dict(TRUNCATE))])
    agent.invoke({"messages": [*_rounds(4), HumanMessage("last", id="hl")]})
    (received,) = model.calls
    assert [m.id for m in received[1:]] == ["h0", "hl"]  # the precondition: the list was truncated
    assert received[0] == prompt  # its content blocks, the cache mark included, not a copy of its text


def test_the_call_record_names_the_chat_models_model(tmp_path: Path):
    from ctxlife.inspection import sent_calls
    from ctxlife.sessions import open_store

    class Named(ScriptedChatModel):
        model_name: str = "gpt-4o"

    url = f"file://{tmp_path / 'sessions'}"
    mw = CtxlifeMiddleware(settings_from_dict({"store": url, "strategies": ["snapshot_restore"]}))
    assert mw.host.model is None  # no model= argument: the name comes from the chat model
    agent = create_agent(Named(script=["ok"]), [], middleware=[mw])
    agent.invoke({"messages": [HumanMessage("q1")]}, {"configurable": {"thread_id": "t-model"}})
    with open_store(url) as store:
        (recorded,) = sent_calls(store, session_key("t-model"), "")
    assert recorded.doc["model"] == "gpt-4o"


class FirstOnly:
    """Puts a system prompt before the first call of each run only."""

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        if ctx.first_call_of_run:
            ctx.messages.insert(0, {"role": "system", "content": "FIRST CALL ONLY"})


def test_node_6_gets_the_last_calls_list_without_a_prompt_only_an_earlier_call_had():
    from langchain_core.tools import tool

    @tool
    def search(item: str) -> str:
        """Search the inventory."""
        return f"item {item} in stock"

    ends = Ends()
    model = ScriptedChatModel(script=[call("search", {"item": "x"}, "c1"), "done"])
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), session_id="s-first", plugins=[FirstOnly(), ends])
    create_agent(model, [search], middleware=[mw]).invoke({"messages": [HumanMessage("q1")]})
    # the precondition: the first call had the prompt, the second not
    assert [type(m).__name__ for m in model.calls[0]] == ["SystemMessage", "HumanMessage"]
    assert [type(m).__name__ for m in model.calls[1]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    ((output, messages),) = ends.ends
    assert output == "done"
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


def test_a_call_a_strategy_answers_reaches_node_4_with_the_thread_ids_session():
    from langchain_core.tools import tool

    @tool
    def cached(q: str) -> str:
        """Look something up (the desk answers it)."""
        raise AssertionError("the desk answers this call: the tool never runs")

    desk = Desk()
    model = ScriptedChatModel(script=[call("cached", {"q": "a"}, "c1"), "done"])
    mw = CtxlifeMiddleware(settings_from_dict({"strategies": []}), plugins=[desk])
    assert mw.host.session_id is None  # the session is the thread id's, per call
    state = create_agent(model, [cached], middleware=[mw]).invoke(
        {"messages": [HumanMessage("ask")]}, {"configurable": {"thread_id": "t-desk"}}
    )
    assert [m.content for m in state["messages"] if isinstance(m, ToolMessage)] == ["from the desk"]
    assert [(a["tool"], a["skipped_by"], a["session"]) for a in desk.after] == [
        ("cached", "Desk", session_key("t-desk"))
    ]
