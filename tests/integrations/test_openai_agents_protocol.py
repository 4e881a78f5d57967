"""What the OpenAI Agents SDK gets from an AgentsSession, call by call: the items it reads back, what the
input filter hands the model, what is stored, and when the session warns.

The SDK's calls are made here one at a time (``get_items``, ``add_items``, ``input_filter``, ``pop_item``),
as ``Runner.run`` makes them, so each case (a list that starts inside the history, an item repeated, an
item the SDK rewrote) is set up exactly; tests/integrations/test_openai_agents.py runs the Runner itself.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.errors import MissingDependencyError  # noqa: E402
from ctxlife.integrations.openai_agents import ITEMS_KEY, AgentsSession, from_messages, to_messages  # noqa: E402
from ctxlife.messages import is_summary  # noqa: E402

AGENT = Agent(name="clerk")
BRIEF = "Answer briefly."


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str, **extra: Any) -> dict[str, Any]:
    """An assistant message item as the SDK stores a model's answer."""
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], **extra}


def call(call_id: str, code: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": f'{{"code": "{code}"}}'}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "one lookup"}]}


def chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != ITEMS_KEY} for m in messages]


def session_in(tmp_path: Any, session_id: str = "s", **options: Any) -> AgentsSession:
    settings = settings_from_dict({"store": f"file://{tmp_path / 'sessions'}", "strategies": ["truncate_last_n"]})
    return AgentsSession(session_id, settings, context_window=100_000, **options)


async def model_input(session: AgentsSession, items: list[dict[str, Any]], instructions: str | None = BRIEF) -> Any:
    """What the input filter hands the model for one call of the SDK with ``items``."""
    data = CallModelData(model_data=ModelInputData(input=items, instructions=instructions), agent=AGENT, context=None)
    return await session.input_filter(data)


async def stored(session: AgentsSession) -> list[dict[str, Any]]:
    """The items the view's raw history holds, in order."""
    return from_messages([r.message for r in (await session.session()).records()])


async def recorded(session: AgentsSession, *items: dict[str, Any]) -> None:
    """A conversation the SDK saved (its model calls went through the filter), then read as a run starts."""
    await session.get_items()
    await model_input(session, list(items))
    await session.add_items(list(items))
    await session.get_items()


# -- Responses items <-> chat messages ---------------------------------------------------------------


def test_a_tool_call_straight_after_the_question_is_an_assistant_message_of_its_own():
    items = [user("Where is R1?"), call("c1", "R1"), output("c1", "aisle 4")]
    messages = to_messages(items)
    assert chat(messages) == [
        user("Where is R1?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"code": "R1"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "aisle 4"},
    ]
    assert from_messages(messages) == items


def test_tool_calls_after_a_plain_assistant_message_join_it():
    items = [user("Where is R1?"), {"role": "assistant", "content": "Looking."}, call("c1", "R1")]
    messages = to_messages(items)
    assert len(messages) == 2
    assert chat(messages)[1]["content"] == "Looking." and chat(messages)[1]["tool_calls"][0]["id"] == "c1"
    assert from_messages(messages) == items


def test_content_parts_are_joined_line_by_line_and_come_back_as_parts():
    parts = {"role": "user", "content": [{"type": "input_text", "text": "first"}, "second"]}
    answer = said("one", content=[{"type": "output_text", "text": "one"}, {"type": "output_text", "text": "two"}])
    messages = to_messages([parts, answer])
    assert chat(messages) == [user("first\nsecond"), {"role": "assistant", "content": "one\ntwo"}]
    assert from_messages(messages) == [parts, answer]  # a role-only item with parts is not a plain chat message


def test_items_chat_cannot_show_ride_with_a_message_or_stand_alone():
    before_question = to_messages([REASONING, user("hi")])
    assert chat(before_question) == [user("hi")]
    assert from_messages(before_question) == [REASONING, user("hi")]
    unknown = {"payload": 1}  # neither a type nor a role
    assert from_messages(to_messages([user("hi"), unknown])) == [user("hi"), unknown]
    alone = to_messages([REASONING])
    assert chat(alone) == [{"role": "assistant", "content": ""}]
    assert from_messages(alone) == [REASONING]


def test_fields_an_item_lacks_become_empty_strings_and_other_values_text():
    messages = to_messages(
        [
            {"type": "message", "content": [{"type": "input_text", "text": "no role"}]},
            {"type": "function_call"},
            {"type": "function_call_output"},
            {"type": "function_call_output", "call_id": "c9", "output": 42},
        ]
    )
    assert chat(messages) == [
        user("no role"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "", "type": "function", "function": {"name": "", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "", "content": ""},
        {"role": "tool", "tool_call_id": "c9", "content": "42"},
    ]


def test_messages_ctxlife_wrote_become_items_from_their_chat_fields():
    lookup = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    as_call = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    assert from_messages([{"role": "assistant", "content": None, "tool_calls": [lookup]}]) == [as_call]
    assert from_messages([{"role": "assistant", "content": "Checking.", "tool_calls": [lookup]}]) == [
        {"role": "assistant", "content": "Checking."},
        as_call,
    ]
    assert from_messages([{"role": "assistant", "content": "", "tool_calls": [{}]}]) == [
        {"type": "function_call", "call_id": "", "name": "", "arguments": ""}
    ]
    assert from_messages([{"role": "assistant", "content": ""}]) == []  # nothing left to send
    assert from_messages([user("")]) == [user("")]
    assert from_messages([{"role": "tool", "tool_call_id": "c1", "content": "aisle 4"}]) == [output("c1", "aisle 4")]
    assert from_messages([{"role": "tool", "content": "aisle 4"}]) == [output("", "aisle 4")]
    assert from_messages([{"role": "function", "content": "legacy"}]) == [user("legacy")]  # a role the SDK takes
    # items that are not a list of items (a hand-edited record): the chat fields say what it is
    assert from_messages([{**user("hi"), ITEMS_KEY: ["not an item"]}]) == [user("hi")]


# -- the session: what is read back, sent and stored ---------------------------------------------


def test_get_items_with_a_limit_returns_the_latest_items(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, user("a"), said("b"), user("c"))
            assert await session.get_items(limit=1) == [user("c")]
            assert await session.get_items(limit=2) == [said("b"), user("c")]
            assert await session.get_items(limit=0) == []
            assert await session.get_items() == [user("a"), said("b"), user("c")]

    asyncio.run(main())


def test_the_filter_sends_and_records_what_the_sdk_has_not_saved_whatever_ids_it_rewrote(tmp_path):
    """The SDK may drop or rewrite an item's id, status and provider data, add its own ``_`` keys, and
    order the keys differently between saving an item and sending it again: it is the same item."""
    answer = said("aisle 4", id="msg_1", status="completed", _agents_turn=1)

    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, user("Where is R1?"), answer)
            resent = dict(reversed(list(said("aisle 4", provider_data={"model": "m"}, _agents_turn=2).items())))
            sent = await model_input(session, [user("Where is R1?"), resent, user("And R2?")])
            assert sent.input == [
                user("Where is R1?"),
                said("aisle 4", id="msg_1", status="completed"),
                user("And R2?"),
            ]
            assert sent.instructions == BRIEF
            assert await stored(session) == [user("Where is R1?"), answer, user("And R2?")]

    asyncio.run(main())


def test_the_filter_finds_the_new_input_after_a_one_item_history(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, user("hi"))
            assert (await model_input(session, [user("hi"), user("Where is R1?")])).input == [
                user("hi"),
                user("Where is R1?"),
            ]
            assert await stored(session) == [user("hi"), user("Where is R1?")]

    asyncio.run(main())


def test_new_input_that_repeats_the_newest_stored_item_is_sent_and_recorded(tmp_path):
    """The newest stored item ("ok") comes again at the end: the place whose earlier items agree is where
    the stored conversation ends."""
    history = [user("Check R1."), said("Done."), user("ok")]

    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, *history)
            sent = await model_input(session, [*history, user("And R2?"), user("ok")])
            assert sent.input == [*history, user("And R2?"), user("ok")]
            assert await stored(session) == [*history, user("And R2?"), user("ok")]

    asyncio.run(main())


def test_when_earlier_items_disagree_the_newest_stored_item_still_marks_the_end(tmp_path):
    history = [user("Check R1."), said("Done."), user("ok")]

    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, *history)
            sent = await model_input(session, [user("Check R1, please."), user("ok"), user("And R2?")])
            assert sent.input == [*history, user("And R2?")]  # the stored conversation, with what is new
            assert await stored(session) == [*history, user("And R2?")]

    asyncio.run(main())


def test_a_list_that_does_not_continue_the_stored_conversation_adds_nothing(tmp_path):
    history = [user("Check R1."), said("Done.")]

    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, *history)
            assert (await model_input(session, [user("unrelated")])).input == history
            assert await stored(session) == history

    asyncio.run(main())


def test_a_call_with_no_input_and_no_instructions_sends_nothing(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await session.get_items()
            sent = await model_input(session, [], instructions=None)
            assert sent.input == [] and sent.instructions is None

    asyncio.run(main())


def test_without_instructions_a_summary_stays_in_the_input(tmp_path):
    """An agent with no instructions: the summary a compaction puts first is sent as an input item, not
    taken for the instructions."""
    settings = settings_from_dict(
        {
            "store": f"file://{tmp_path / 'sessions'}",
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 60, "min_gain_tokens": 20},
        }
    )
    turns = [
        item
        for n in range(12)
        for item in (user(f"Question {n} about pallet {n}: " + "where? " * 20), said(f"Aisle {n}."))
    ]

    async def main() -> None:
        async with AgentsSession("s", settings, context_window=800) as session:
            await session.get_items()
            await session.add_items(turns)
            await session.get_items()
            sent = await model_input(session, [*turns, user("And the last one?")], instructions=None)
            assert sent.instructions is None
            assert is_summary(to_messages(sent.input)[0])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctxlife.CtxlifeWarning)  # the turns were saved without a model call
        asyncio.run(main())


def test_an_item_holding_a_value_json_cannot_hold_is_still_recorded(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await session.get_items()
            await model_input(session, [user("raw?")])
            await session.add_items(
                [user("raw?"), call("c1", "R1"), {"type": "function_call_output", "call_id": "c1", "output": b"\x00"}]
            )
            assert len(await stored(session)) == 3

    asyncio.run(main())


# -- pop_item -------------------------------------------------------------------------------------


def test_pop_item_takes_one_item_of_a_two_item_message(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, user("Where is R1?"), REASONING, said("aisle 4"))
            assert await session.pop_item() == said("aisle 4")
            assert await session.get_items() == [user("Where is R1?"), REASONING]

    asyncio.run(main())


def test_after_a_pop_the_next_call_continues_from_the_item_before(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            history = [user("Where is R1?"), said("aisle 4"), user("And R2?")]
            await recorded(session, *history, said("aisle 9"))
            assert await session.pop_item() == said("aisle 9")
            sent = await model_input(session, [*history, user("And R3?")])
            assert sent.input == [*history, user("And R3?")]
            assert await stored(session) == [*history, user("And R3?")]

    asyncio.run(main())


def test_a_new_session_object_pops_before_reading_anything(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as first:
            await recorded(first, user("Where is R1?"), said("aisle 4"))
        async with session_in(tmp_path) as again:
            assert await again.pop_item() == said("aisle 4")
            assert await again.get_items() == [user("Where is R1?")]

    asyncio.run(main())


# -- the warning about a run that bypassed the filter ---------------------------------------------


def bypass_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ctxlife.CtxlifeWarning)]


def test_model_output_saved_without_the_filter_warns_once_and_says_the_fix(tmp_path):
    question = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is R1?"}]}

    async def main() -> None:
        async with session_in(tmp_path, "agents:u1") as session:
            await session.get_items()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                await session.add_items([question])  # the input, saved before any model call
                assert bypass_warnings(caught) == []
            await model_input(session, [question])  # a model call through the filter, whose tool call is saved
            await session.add_items([call("c0", "R0")])
            await session.get_items()  # the next run
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                await session.add_items([output("c0", "a tool's result")])  # not the model's output
                assert bypass_warnings(caught) == []
                await session.add_items([call("c1", "R1")])  # the model's: it bypassed the filter
                assert len(bypass_warnings(caught)) == 1
                await session.add_items([said("aisle 4")])
            assert bypass_warnings(caught) == [
                "AgentsSession 'agents:u1': the run's model calls did not go through the session's input filter, "
                "so the conversation is stored but never compacted or recalled; pass "
                "run_config=session.run_config() (or call_model_input_filter=session.input_filter) to Runner.run"
            ]

    asyncio.run(main())


def test_an_answer_saved_without_the_filter_warns_even_before_any_read(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            with pytest.warns(ctxlife.CtxlifeWarning, match="input filter"):
                await session.add_items([said("aisle 4")])

    asyncio.run(main())


def test_a_run_through_the_filter_never_warns(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            with warnings.catch_warnings():
                warnings.simplefilter("error", ctxlife.CtxlifeWarning)
                await session.get_items()
                await model_input(session, [user("Where is R1?")])
                await session.add_items([user("Where is R1?")])
                await session.add_items([call("c1", "R1"), output("c1", "aisle 4")])
                await model_input(session, [user("Where is R1?"), call("c1", "R1"), output("c1", "aisle 4")])
                await session.add_items([said("aisle 4")])

    asyncio.run(main())


# -- set-up and lifetime ---------------------------------------------------------------------------


def test_the_default_view_is_the_one_a_plain_ctxlife_session_reads(tmp_path):
    async def main() -> None:
        async with session_in(tmp_path) as session:
            await recorded(session, user("Where is R1?"))
        async with session_in(tmp_path, view="planner") as planner:
            await recorded(planner, user("Plan the route."))

    asyncio.run(main())
    settings = settings_from_dict({"store": f"file://{tmp_path / 'sessions'}", "strategies": ["truncate_last_n"]})
    with ctxlife.Session("s", settings) as plain:
        assert [r.message for r in plain.records()] == [user("Where is R1?")]
    assert repr(session_in(tmp_path)) == "AgentsSession('s')"
    assert repr(session_in(tmp_path, view="planner")) == "AgentsSession('s', view='planner')"


def test_closing_a_session_never_used_is_fine(tmp_path):
    async def main() -> None:
        session = session_in(tmp_path)
        await session.close()
        async with session_in(tmp_path):
            pass

    asyncio.run(main())


def test_without_the_agents_package_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(MissingDependencyError) as raised:
        session_in(tmp_path)
    assert str(raised.value) == (
        "ctxlife.integrations.openai_agents needs agents, which is not installed: pip install 'ctxlife[agents]' "
        "(the core ctxlife package is framework-neutral; ctxlife.manage() works without it)"
    )


def test_run_config_installs_the_filter_on_a_new_or_given_config(tmp_path):
    session = session_in(tmp_path)
    assert session.run_config().call_model_input_filter == session.input_filter
    given = session.run_config(RunConfig(tracing_disabled=True))
    assert given.call_model_input_filter == session.input_filter and given.tracing_disabled


def test_a_plain_filter_the_run_config_already_has_gets_the_managed_input(tmp_path):
    def theirs(data: CallModelData[Any]) -> ModelInputData:  # not a coroutine function
        return ModelInputData(input=[*data.model_data.input, user("(note)")], instructions=data.model_data.instructions)

    async def main() -> None:
        async with session_in(tmp_path) as session:
            await session.get_items()
            both = session.run_config(RunConfig(call_model_input_filter=theirs)).call_model_input_filter
            data = ModelInputData(input=[user("Where is R1?")], instructions=BRIEF)
            sent = await both(CallModelData(model_data=data, agent=AGENT, context=None))
            assert sent.input == [user("Where is R1?"), user("(note)")] and sent.instructions == BRIEF
            assert await stored(session) == [user("Where is R1?")]

    asyncio.run(main())
