"""CtxlifeMiddleware on real LangChain v1 agents (create_agent), with a scripted chat model that calls tools.

Everything runs on LangChain's own message types and LangGraph's state; nothing is mocked but the
model's replies.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="the LangChain adapter needs pip install 'ctxlife[langchain]'")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations.langchain import CtxlifeMiddleware, to_openai_messages  # noqa: E402
from ctxlife.messages import is_summary, validate  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fake_chat import ScriptedChatModel, call  # noqa: E402

RULES = "RULES: answer in one line."


def lookup_tool(executions: list[str] | None = None, size: int = 400) -> Any:
    @tool
    def lookup(item: str) -> str:
        """Look up an item in the inventory."""
        if executions is not None:
            executions.append(item)
        half = "stock data " * (size // 2)
        return f"item {item}: {half}MID-{item} {half}END-OF-{item}"

    return lookup


def lookup_script(turns: int) -> list[Any]:
    script: list[Any] = []
    for i in range(turns):
        script += [call("lookup", {"item": f"R{i:04d}"}, f"call_{i}"), f"R{i:04d} is in stock."]
    return script


def reports_of(middleware: CtxlifeMiddleware, node: str = "before_llm_call") -> list[ctxlife.Report]:
    found: list[ctxlife.Report] = []
    middleware.host.listeners.append(lambda r: found.append(r) if r.node == node else None)
    return found


def run_turns(agent: Any, turns: int, config: dict[str, Any] | None = None, first: int = 0) -> dict[str, Any]:
    """The natural loop: the graph state is the history; each turn adds one user message."""
    state: dict[str, Any] = {"messages": []}
    for i in range(first, first + turns):
        state = agent.invoke({"messages": [*state["messages"], HumanMessage(f"Please check R{i:04d}.")]}, config)
    return state


def summary_settings(**extra: Any) -> ctxlife.Settings:
    return settings_from_dict(
        {
            "strategies": ["bootstrap", "llm_summary"],
            "bootstrap": {"text": RULES},
            "llm_summary": {"summarizer": "extractive", "keep_rounds": 1, "min_gain_tokens": 50},
            **extra,
        }
    )


def test_compaction_is_written_back_into_the_agent_state_and_not_redone_on_every_call():
    model = ScriptedChatModel(script=lookup_script(8), window=2000)
    middleware = CtxlifeMiddleware(summary_settings())
    reports = reports_of(middleware)
    agent = create_agent(model, [lookup_tool(size=60)], system_prompt="You are a clerk.", middleware=[middleware])
    state = run_turns(agent, 8)

    compacted_at = [i for i, r in enumerate(reports) if "llm_summary" in r.acted]
    assert len(reports) == len(model.calls) == 16
    # Compacted when the context crossed the line, then the next call started from the compacted
    # state (without the write-back the natural loop compacts on every call above the line).
    assert 1 <= len(compacted_at) <= 3
    followed = [k for k in compacted_at if k + 1 < len(reports)]  # the last call may compact too
    assert followed
    for k in followed:
        assert reports[k + 1].tokens_before < reports[k].tokens_before
        assert "llm_summary" not in reports[k + 1].acted
    # What the model received is the state: the system prompt (with the bootstrap text once) + the state's
    # messages at that call; the final state starts with the running summary, in LangChain's own types.
    for sent in model.calls:
        assert isinstance(sent[0], SystemMessage) and sent[0].content.count(RULES) == 1
        assert sent[0].content.startswith("You are a clerk.")
        assert validate(to_openai_messages(sent)) == []
    final = state["messages"]
    assert all(isinstance(m, (HumanMessage, AIMessage, ToolMessage, SystemMessage)) for m in final)
    assert any(is_summary(d) for d in to_openai_messages(final))
    assert len(final) < 8 * 4
    # The last call saw exactly the state it was built from: the latest question and its tool result.
    last = model.calls[-1]
    assert last[-1].content.endswith("END-OF-R0007") and last[-3].content == "Please check R0007."


def test_a_call_without_changes_sends_the_state_as_it_is_and_keeps_message_ids():
    model = ScriptedChatModel(script=lookup_script(1), window=128_000)
    middleware = CtxlifeMiddleware(
        settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}})
    )
    agent = create_agent(model, [lookup_tool(size=5)], system_prompt="You are a clerk.", middleware=[middleware])
    first = agent.invoke({"messages": [HumanMessage("Please check R0000.", id="h-1")]})
    assert [m.id for m in first["messages"]][0] == "h-1"
    assert [type(m) for m in first["messages"]] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert model.calls[0][0].content == "You are a clerk."  # no bootstrap configured: the prompt as given


def test_tool_output_caps_results_and_the_recall_tool_reads_them_back(tmp_path):
    def recall_from_context(messages: list[BaseMessage]) -> AIMessage:
        refs = re.findall(r"to_[0-9a-f]{16}", "\n".join(str(m.content) for m in messages))
        return call("ctxlife_recall", {"ref": refs[-1], "start": "0", "query": "MID-R0001"}, "call_recall")

    model = ScriptedChatModel(
        script=[call("lookup", {"item": "R0001"}, "call_1"), recall_from_context, "R0001 is in stock."], window=8000
    )
    executions: list[str] = []
    config = settings_from_dict(
        {"strategies": ["tool_output"], "tool_output": {"max_tokens": 200, "store_dir": str(tmp_path / "outputs")}}
    )
    middleware = CtxlifeMiddleware(config)
    assert [t.name for t in middleware.tools] == ["ctxlife_recall"]
    agent = create_agent(model, [lookup_tool(executions, size=800)], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Please check R0001.")]})

    assert executions == ["R0001"]
    capped = state["messages"][2]
    assert isinstance(capped, ToolMessage) and "ctxlife_recall" in capped.content and "MID-R0001" not in capped.content
    counter = ctxlife.TokenCounter()
    assert counter.count_text(capped.content) <= 200
    recalled = state["messages"][4]
    assert isinstance(recalled, ToolMessage) and recalled.name == "ctxlife_recall" and "MID-R0001" in recalled.content
    assert "MID-R0001" in model.calls[2][-1].content  # the model read the elided middle back


def test_a_strategy_can_answer_a_tool_call_without_running_the_tool():
    model = ScriptedChatModel(
        script=[call("lookup", {"item": "R0001"}, "c1"), call("lookup", {"item": "R0001"}, "c2"), "R0001 is in stock."]
    )
    executions: list[str] = []
    middleware = CtxlifeMiddleware(
        settings_from_dict({"strategies": ["tool_cache"], "tool_cache": {"tools": ["lookup"]}})
    )
    agent = create_agent(model, [lookup_tool(executions, size=5)], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Check R0001 twice.")]}, {"configurable": {"thread_id": "t-cache"}})
    assert executions == ["R0001"]  # the second identical call came from the cache (node 3)
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 2 and tool_messages[1].content.endswith(tool_messages[0].content)
    assert tool_messages[1].content.startswith("[cached result")
    assert validate(to_openai_messages(state["messages"])) == []


def test_sessions_restore_in_a_new_agent_and_the_thread_id_is_the_session(tmp_path):
    store = f"file://{tmp_path / 'sessions'}"
    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": store})
    model = ScriptedChatModel(script=["Noted: your order is ORD-4242.", "Your order is ORD-4242."])
    agent = create_agent(model, [], middleware=[CtxlifeMiddleware(config)])
    agent.invoke({"messages": [HumanMessage("My order is ORD-4242.")]}, {"configurable": {"thread_id": "u42"}})

    # A restart: a new middleware (new host), a new agent, and a caller that sends only the new question.
    model2 = ScriptedChatModel(script=["Your order is ORD-4242."])
    agent2 = create_agent(model2, [], middleware=[CtxlifeMiddleware(config)])
    state = agent2.invoke({"messages": [HumanMessage("What was my order?")]}, {"configurable": {"thread_id": "u42"}})
    sent = [m.content for m in model2.calls[0]]
    assert (
        "My order is ORD-4242." in sent
        and "Noted: your order is ORD-4242." in sent
        and sent[-1] == "What was my order?"
    )
    assert [m.content for m in state["messages"]][:2] == ["My order is ORD-4242.", "Noted: your order is ORD-4242."]
    # Another thread is another session: nothing restored there.
    model3 = ScriptedChatModel(script=["Hello."])
    agent3 = create_agent(model3, [], middleware=[CtxlifeMiddleware(config)])
    agent3.invoke({"messages": [HumanMessage("Hi")]}, {"configurable": {"thread_id": "someone-else"}})
    assert [m.content for m in model3.calls[0]] == ["Hi"]
    assert {p.name for p in (tmp_path / "sessions").iterdir()} >= {"u42_raw.jsonl", "someone-else_raw.jsonl"}


def test_precedence_explicit_window_beats_config_beats_the_model_profile(monkeypatch):
    def window_used(middleware: CtxlifeMiddleware) -> int:
        reports = reports_of(middleware)
        agent = create_agent(ScriptedChatModel(script=["ok"], window=5000), [], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("hi")]})
        return reports[0].context_window

    assert window_used(CtxlifeMiddleware(settings_from_dict({"strategies": []}))) == 5000  # the model's profile
    assert window_used(CtxlifeMiddleware(settings_from_dict({"strategies": [], "context_window": 7000}))) == 7000
    monkeypatch.setenv("CTXLIFE_CONTEXT_WINDOW", "6000")
    assert window_used(CtxlifeMiddleware(settings_from_dict({"strategies": [], "context_window": 7000}))) == 6000
    assert window_used(CtxlifeMiddleware(settings_from_dict({"strategies": []}), context_window=9000)) == 9000


def test_explicit_session_beats_the_thread_id(tmp_path):
    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    middleware = CtxlifeMiddleware(config, session_id="explicit")
    agent = create_agent(ScriptedChatModel(script=["ok"]), [], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "from-thread"}})
    assert (tmp_path / "explicit_raw.jsonl").is_file() and not (tmp_path / "from-thread_raw.jsonl").exists()


def test_async_agents_in_concurrent_sessions_never_block_the_event_loop(loop_witness):
    """ainvoke: an LLM summary runs in a worker thread while the loop keeps running (each summary
    returns only once the loop ran a callback meanwhile: tests/conftest.py LoopWitness)."""
    model = ScriptedChatModel(script=[], default="Done.", window=3000, on_summary=loop_witness.wait_for_the_loop)
    settings = settings_from_dict(
        {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "llm", "keep_rounds": 1, "min_gain_tokens": 20}}
    )
    middleware = CtxlifeMiddleware(settings)
    reports = reports_of(middleware)
    agent = create_agent(model, [], middleware=[middleware])
    long_turn = "Here is the log: " + "line of log data " * 120

    async def session(name: str) -> dict[str, Any]:
        state: dict[str, Any] = {"messages": []}
        for turn in range(4):
            state = await agent.ainvoke(
                {"messages": [*state["messages"], HumanMessage(f"{name} turn {turn}. {long_turn}")]},
                {"configurable": {"thread_id": name}},
            )
        return state

    async def main() -> list[dict[str, Any]]:
        return list(await asyncio.gather(session("alice"), session("bob")))

    states = loop_witness.run(main)
    assert len(model.summary_calls) >= 2  # both sessions summarized with the model
    assert loop_witness.blocked == 0 and loop_witness.served == len(model.summary_calls)
    assert {r.session_id for r in reports} == {"alice", "bob"}
    for state, name in zip(states, ("alice", "bob"), strict=True):
        texts = [str(m.content) for m in state["messages"]]
        assert any(name in t for t in texts) and not any(
            ("bob" if name == "alice" else "alice") + " turn" in t for t in texts
        )
        assert any(is_summary(d) for d in to_openai_messages(state["messages"]))


def test_without_langchain_the_import_error_names_the_extra(tmp_path):
    import subprocess

    code = (
        "import sys; sys.modules['langchain'] = None\n"
        "try:\n    import ctxlife.integrations.langchain\nexcept ImportError as e:\n"
        "    import ctxlife; print(isinstance(e, ctxlife.CtxlifeError), e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("True ") and "pip install 'ctxlife[langchain]'" in out


def test_sessions_with_a_checkpointer_are_not_restored_twice(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path}"})
    model = ScriptedChatModel(script=["a1", "a2", "a3"])
    agent = create_agent(model, [], middleware=[CtxlifeMiddleware(config)], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    for question in ("q1", "q2", "q3"):
        state = agent.invoke({"messages": [HumanMessage(question)]}, thread)
    assert [m.content for m in state["messages"]] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert [m.content for m in model.calls[-1]] == ["q1", "a1", "q2", "a2", "q3"]
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}") as store:
        (session,) = [info.session_id for info in store.list_sessions()]
        recorded = [record.message["content"] for record in store.read_records(session)]
    assert recorded[:5] == ["q1", "a1", "q2", "a2", "q3"] and len(recorded) == len(set(recorded))  # each once
