"""The OpenAI Agents SDK adapter: ``Runner.run(session=AgentsSession(...))`` with a scripted offline model.

Issue 22: ``ctxlife.AsyncSession`` under ``Runner.run(session=...)`` stored the conversation but never
compacted or recalled, and the Responses items it stored made ``Session.prepare()`` fail.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import warnings
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool  # noqa: E402
from openai.types.responses import (  # noqa: E402
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations.openai_agents import ITEMS_KEY, AgentsSession, from_messages, to_messages  # noqa: E402
from ctxlife.messages import is_recall_block, is_summary, validate  # noqa: E402
from ctxlife.tokens import TokenCounter  # noqa: E402

WINDOW = 2500
FACT = "locker code 7Q-4471-ZEBRA"
INSTRUCTIONS = "You are a warehouse clerk. Answer briefly."


class ScriptedModel(Model):
    """An offline model: a tool call for each new question, then an answer with a reasoning item."""

    def __init__(self) -> None:
        self.inputs: list[tuple[str | None, list[dict[str, Any]]]] = []
        self.n = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self.reply(system_instructions, input), usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        output = self.reply(system_instructions, input)
        response = Response(
            id=f"resp_{self.n}",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(response=response, sequence_number=0, type="response.completed")

    def reply(self, system_instructions: Any, input: Any) -> list[Any]:
        items = [dict(i) for i in input] if isinstance(input, list) else [{"role": "user", "content": input}]
        self.inputs.append((system_instructions, items))
        self.n += 1
        n = self.n
        if items[-1].get("type") == "function_call_output":
            return [
                ResponseReasoningItem(
                    id=f"rs_{n}", summary=[Summary(text=f"plan {n}", type="summary_text")], type="reasoning"
                ),
                ResponseOutputMessage(
                    id=f"msg_{n}",
                    content=[
                        ResponseOutputText(
                            text=f"Answer {n}: " + "the shelf is fine " * 12, type="output_text", annotations=[]
                        )
                    ],
                    role="assistant",
                    status="completed",
                    type="message",
                ),
            ]
        return [
            ResponseFunctionToolCall(
                arguments=json.dumps({"code": f"R{n:04d}"}),
                call_id=f"call_{n}",
                name="lookup",
                type="function_call",
                id=f"fc_{n}",
            )
        ]


@function_tool
def lookup(code: str) -> str:
    """Look up a stock record by its code."""
    return f"record {code}: aisle 4, " + "pallet stacked and counted " * 10


def config(store_url: str) -> Any:
    return settings_from_dict(
        {
            "store": store_url,
            "strategies": ["llm_summary", "recall"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 200, "min_gain_tokens": 20},
        }
    )


def question(turn: int) -> str:
    if turn == 5:  # not the first message (pinned), and no "remember" (the summary keeps such requests)
        return f"By the way, my {FACT}. Then check the next stock item."
    return f"Question {turn}: check the stock of the next item and tell me the aisle " + "please " * 8


def fits(instructions: str | None, items: list[dict[str, Any]]) -> int:
    """Tokens of one model call's input as ctxlife counts a chat request (instructions included)."""
    messages = ([{"role": "system", "content": instructions}] if instructions else []) + to_messages(items)
    return TokenCounter().count_messages([{k: v for k, v in m.items() if k != ITEMS_KEY} for m in messages])


async def converse(session: AgentsSession, model: ScriptedModel, turns: range) -> list[Any]:
    agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=model, tools=[lookup])
    run_config = session.run_config(RunConfig(tracing_disabled=True))
    results = []
    for turn in turns:
        results.append(await Runner.run(agent, question(turn), session=session, run_config=run_config))
    return results


def text(item: dict[str, Any]) -> str:
    content = item.get("content")
    return content if isinstance(content, str) else json.dumps(content)


# -- conversion -----------------------------------------------------------------------------------

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Check R1 and R2."},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "two lookups"}]},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Looking both up.", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"code": "R1"}', "id": "fc_1"},
    {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": '{"code": "R2"}', "id": "fc_2"},
    {"type": "function_call_output", "call_id": "c1", "output": "R1: aisle 4"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "R2: aisle 9"}]},
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA"},
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot say more."}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
]


def test_responses_items_become_valid_chat_messages_and_come_back_unchanged():
    messages = to_messages(ITEMS)
    chat = [{k: v for k, v in m.items() if k != ITEMS_KEY} for m in messages]
    assert chat == [
        {"role": "user", "content": "Check R1 and R2."},
        {
            "role": "assistant",
            "content": "Looking both up.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"code": "R1"}'}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"code": "R2"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "R1: aisle 4"},
        {"role": "tool", "tool_call_id": "c2", "content": "R2: aisle 9"},
        {"role": "assistant", "content": "I cannot say more."},
    ]
    assert validate(messages) == []
    assert ITEMS_KEY not in messages[0]  # a plain chat message is stored as it is
    assert from_messages(messages) == ITEMS
    assert from_messages(json.loads(json.dumps(messages))) == ITEMS  # a store's JSON round trip too
    report = ctxlife.manage([{"role": "system", "content": "s"}, *messages], context_window=8000)
    assert report.failures == []


def test_a_message_ctxlife_changed_is_converted_from_its_chat_fields():
    messages = to_messages(ITEMS)
    messages[2] = {**messages[2], "content": "[capped] R1: aisle 4"}  # e.g. tool_output shortened the result
    messages[4] = {**messages[4], "content": "I cannot say more. [redacted]"}
    items = from_messages(messages)
    assert {"type": "function_call_output", "call_id": "c1", "output": "[capped] R1: aisle 4"} in items
    assert {"role": "assistant", "content": "I cannot say more. [redacted]"} in items
    assert not any(i.get("id") == "rs_2" for i in items)  # the reasoning about the old text is dropped
    assert any(i.get("type") == "web_search_call" for i in items)  # what chat cannot show stays


# -- Runner.run end to end -------------------------------------------------------------------------


@pytest.fixture(params=["file", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'sessions'}"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    return f"{request.getfixturevalue('redis_url')}?prefix=agents-{uuid.uuid4().hex[:12]}:"


def test_runner_sessions_are_compacted_recalled_and_recorded_exactly_once(store_url):
    model = ScriptedModel()
    turns = 42

    async def main() -> None:
        session = AgentsSession("agents:u42", config(store_url), context_window=WINDOW)
        try:
            results = await converse(session, model, range(turns))
            # every call's input fits the window, and the conversation was compacted to fit
            sizes = [fits(instructions, items) for instructions, items in model.inputs]
            assert max(sizes) <= WINDOW
            assert len(model.inputs) == 2 * turns
            assert any(is_summary(m) for m in to_messages(model.inputs[-1][1]))
            assert all(instructions and instructions.startswith(INSTRUCTIONS) for instructions, _ in model.inputs)

            # the raw history holds each item exactly once
            stored = await session.session()
            records = stored.records()
            assert len(records) == 4 * turns  # question, tool call, tool result, answer
            recorded_items = from_messages([r.message for r in records])
            keys = [json.dumps(i, sort_keys=True) for i in recorded_items]
            assert len(keys) == len(set(keys))
            expected = [item for r in results for item in r.to_input_list()[-5:]]  # each run's own items
            assert recorded_items == expected

            # the reasoning items of the newest turn come back from get_items as the SDK stored them
            items = await session.get_items()
            assert items[-5:] == results[-1].to_input_list()[-5:]
            assert items[-2]["type"] == "reasoning"
            assert len(items) < len(recorded_items)  # compacted
        finally:
            await session.close()

        # a restart: a new session object continues the conversation; recall brings the old fact back
        again = AgentsSession("agents:u42", config(store_url), context_window=WINDOW)
        try:
            agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=model, tools=[lookup])
            before = len(model.inputs)
            await Runner.run(
                agent,
                "Do you remember my locker code from earlier?",
                session=again,
                run_config=again.run_config(RunConfig(tracing_disabled=True)),
            )
            first = model.inputs[before][1]
            assert any(f"Answer {2 * turns}:" in text(i) for i in first)  # the last answer before the restart
            blocks = [m for m in to_messages(first) if is_recall_block(m)]
            assert blocks and "7Q-4471-ZEBRA" in blocks[0]["content"]
            # its turn was evicted: no message of the conversation itself holds it (the summary and a recall
            # block may quote it: "Question 42: ... tell me ...", whose own words are "42", recalls an old turn
            # that says 42, and that block's room was made by compacting more)
            last = [m for m in to_messages(model.inputs[before - 1][1]) if not is_recall_block(m) and not is_summary(m)]
            assert not any("7Q-4471-ZEBRA" in str(m.get("content")) for m in last)
            assert len((await again.session()).records()) == 4 * turns + 4

            # a plain ctxlife.Session on the same conversation reads the Responses items it holds
            with ctxlife.Session("agents:u42", config(store_url), context_window=WINDOW) as plain:
                listing = plain.prepare({"role": "user", "content": "One more thing."})
                assert listing[-1] == {"role": "user", "content": "One more thing."}
        finally:
            await again.close()

    asyncio.run(main())


def test_streamed_runs_are_recorded_exactly_once_and_managed(tmp_path):
    """Runner.run_streamed saves its input after the first model call (the filter has recorded it by then)."""
    model = ScriptedModel()
    turns = 12

    async def main() -> None:
        session = AgentsSession("streamed", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=model, tools=[lookup])
        run_config = session.run_config(RunConfig(tracing_disabled=True))
        try:
            results = []
            for turn in range(turns):
                result = Runner.run_streamed(agent, question(turn), session=session, run_config=run_config)
                async for _ in result.stream_events():
                    pass
                results.append(result)
            records = (await session.session()).records()
            assert len(records) == 4 * turns
            assert from_messages([r.message for r in records]) == [
                item for r in results for item in r.to_input_list()[-5:]
            ]
            assert max(fits(instructions, items) for instructions, items in model.inputs) <= WINDOW
            assert any(is_summary(m) for m in to_messages(model.inputs[-1][1]))
            # the input the SDK had not saved yet reached the model: each turn's first call ends with its
            # question, its second with the tool's result
            assert [items[-1] for _, items in model.inputs[::2]] == [
                {"role": "user", "content": question(turn)} for turn in range(turns)
            ]
            assert all(items[-1]["type"] == "function_call_output" for _, items in model.inputs[1::2])
        finally:
            await session.close()

    asyncio.run(main())


def test_items_the_filter_recorded_first_are_not_recorded_again_by_add_items(tmp_path):
    """A streamed run saves its input after the first model call: the filter records it, add_items skips it."""
    from agents.run_config import CallModelData, ModelInputData

    async def main() -> None:
        session = AgentsSession("s", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        agent = Agent(name="clerk", instructions=INSTRUCTIONS)
        try:
            assert await session.get_items() == []
            user = {"role": "user", "content": "hello"}
            data = CallModelData(
                model_data=ModelInputData(input=[user], instructions=INSTRUCTIONS), agent=agent, context=None
            )
            managed = await session.input_filter(data)
            assert managed.input == [user] and managed.instructions == INSTRUCTIONS
            await session.add_items([user])  # the SDK saves the input it already sent
            reply = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
            await session.add_items([reply])
            assert await session.get_items() == [user, reply]
            assert await session.pop_item() == reply
            assert await session.get_items(limit=5) == [user]
            await session.clear_session()
            assert await session.get_items() == []
        finally:
            await session.close()

    asyncio.run(main())


def test_pop_item_pops_one_item_of_a_message_that_holds_several(tmp_path):
    async def main() -> None:
        session = AgentsSession("s", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        try:
            assert await session.get_items() == []
            with pytest.warns(ctxlife.CtxlifeWarning, match="input filter"):  # no model call went through it
                await session.add_items(ITEMS[:5])
            assert await session.pop_item() == ITEMS[4]
            assert await session.get_items() == ITEMS[:4]
        finally:
            await session.close()

    asyncio.run(main())


def test_a_run_without_the_input_filter_warns_that_nothing_is_compacted(tmp_path):
    async def main() -> None:
        session = AgentsSession("s", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=ScriptedModel(), tools=[lookup])
        try:
            with pytest.warns(ctxlife.CtxlifeWarning, match=r"run_config=session\.run_config\(\)"):
                await Runner.run(agent, question(0), session=session, run_config=RunConfig(tracing_disabled=True))
            assert len((await session.session()).records()) == 4  # still recorded, exactly once
        finally:
            await session.close()

    asyncio.run(main())


@function_tool(name_override="lookup", needs_approval=True)
def guarded_lookup(code: str) -> str:
    """Look up a stock record by its code (a person approves each call)."""
    return f"record {code}: aisle 4"


def test_runs_resumed_after_a_tool_approval_are_recorded_exactly_once(tmp_path):
    """An interrupted run saves its turn, then the resumed run (from RunState) saves the rest."""
    model = ScriptedModel()

    async def main() -> None:
        session = AgentsSession("approvals", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=model, tools=[guarded_lookup])
        run_config = session.run_config(RunConfig(tracing_disabled=True))
        try:
            for turn in range(3):
                result = await Runner.run(agent, question(turn), session=session, run_config=run_config)
                assert result.interruptions
                state = result.to_state()
                for interruption in result.interruptions:
                    state.approve(interruption)
                result = await Runner.run(agent, state, session=session, run_config=run_config)
                assert not result.interruptions
            items = from_messages([r.message for r in (await session.session()).records()])
            kinds = [i.get("type", "message") for i in items]
            assert kinds == ["message", "function_call", "function_call_output", "reasoning", "message"] * 3
            assert len({json.dumps(i, sort_keys=True) for i in items}) == len(items)
            assert [len(items) for _, items in model.inputs] == [1, 3, 6, 8, 11, 13]  # each call saw it all once
        finally:
            await session.close()

    asyncio.run(main())


def test_a_filter_the_run_config_already_has_runs_after_the_sessions(tmp_path):
    """Theirs (here a coroutine function) gets the managed input: compacted, never over the window."""
    from agents.run_config import CallModelData, ModelInputData

    seen: list[list[Any]] = []

    async def theirs(data: CallModelData[Any]) -> ModelInputData:
        seen.append(list(data.model_data.input))
        return ModelInputData(input=[{"role": "user", "content": "(note)"}, *data.model_data.input], instructions="x")

    model = ScriptedModel()
    turns = 12

    async def main() -> None:
        session = AgentsSession("chained", config(f"file://{tmp_path / 'sessions'}"), context_window=WINDOW)
        agent = Agent(name="clerk", instructions=INSTRUCTIONS, model=model, tools=[lookup])
        try:
            run_config = session.run_config(RunConfig(tracing_disabled=True, call_model_input_filter=theirs))
            with warnings.catch_warnings():
                warnings.simplefilter("error", ctxlife.CtxlifeWarning)  # the session's filter ran
                for turn in range(turns):
                    await Runner.run(agent, question(turn), session=session, run_config=run_config)
            assert len((await session.session()).records()) == 4 * turns  # their extra item is not recorded
        finally:
            await session.close()

    asyncio.run(main())
    assert len(seen) == 2 * turns and seen[0] == [{"role": "user", "content": question(0)}]
    assert any(is_summary(m) for m in to_messages(seen[-1]))
    assert max(fits(INSTRUCTIONS, items) for items in seen) <= WINDOW
    assert [items[1:] for _, items in model.inputs] == seen
    assert all(items[0] == {"role": "user", "content": "(note)"} for _, items in model.inputs)
    assert all(instructions == "x" for instructions, _ in model.inputs)
