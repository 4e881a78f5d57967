"""A hand-written LangGraph loop managed by ctxlife (the recipe of docs/integrations.md).

The rule that makes it work: the managed list is the new history. After ctxlife edits the
list (a compaction, a restore), write it back into the graph state, so the next call starts
from it; otherwise every call starts again from the full history and is compacted again.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

import ctxlife
from ctxlife.integrations.langchain import from_openai_messages, to_openai_messages


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph(
    model: BaseChatModel, tools: list[BaseTool], host: ctxlife.Host, system_prompt: str, write_back: bool = True
) -> Any:
    """A model node and a tool node, with ctxlife at nodes 2 (model) and 3/4 (tools)."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools) if tools else model

    def call_model(state: State) -> dict[str, Any]:
        history = to_openai_messages(state["messages"])
        messages = [{"role": "system", "content": system_prompt}, *history]
        host.before_llm_call(messages)  # node 2 (and the bootstrap), in place
        reply = bound.invoke(from_openai_messages(messages))
        if write_back and messages[1:] != history:  # compacted or restored: that is the history now
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *from_openai_messages(messages[1:]), reply]}
        return {"messages": [reply]}

    def call_tools(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        results = []
        for call in last.tool_calls if isinstance(last, AIMessage) else []:
            ctx = ctxlife.ToolCallContext(tool_name=call["name"], tool_input=dict(call["args"]))
            host.before_tool_call(ctx)  # node 3: a strategy may answer without the tool
            if ctx.result is None:
                ctx.result = str(by_name[call["name"]].invoke(ctx.tool_input))
            host.after_tool_call(ctx)  # node 4: what the model sees of the result
            results.append(ToolMessage(content=ctx.result, tool_call_id=call["id"], name=call["name"]))
        return {"messages": results}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", call_model)
    graph.add_node("tools", call_tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()
