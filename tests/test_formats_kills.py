"""The core's message functions changed since its run of 2026-12-07 (mutate40): what `make mutate`'s survivors
there showed no test asserting (docs/mutation/core-pairing.md).

`clear_format` is what `Session.add`/`edit`/`record_reply` ask (with ``message_format = "auto"``) before
refusing a message clearly in the other format than the conversation's: the format, the first message
that shows it (named in the refusal), and a list mixing the two refused with both positions named.
"""

from __future__ import annotations

import re

import pytest

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages import mark_inserted, plain_role, same_messages
from ctxlife.messages.formats import ANTHROPIC, OPENAI, clear_format
from ctxlife.testing import assistant, system, tool_call, tool_result, user

USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}


def test_plain_text_is_in_no_clear_format():
    assert clear_format([]) == (None, -1)
    assert clear_format([system("s"), user("u"), assistant("a")]) == (None, -1)


def test_the_format_is_named_with_the_first_message_that_shows_it():
    call = assistant(None, [tool_call("f", call_id="call_1")])
    assert clear_format([user("u"), call, tool_result("call_1", "r")]) == (OPENAI, 1)
    assert clear_format([user("u"), assistant("a"), tool_result("call_1", "r")]) == (OPENAI, 2)  # a tool role
    assert clear_format([user("u"), assistant("a"), USE]) == (ANTHROPIC, 2)


def test_a_list_mixing_the_formats_is_refused_naming_both_positions_of_messages():
    call = assistant(None, [tool_call("f", call_id="call_1")])
    with pytest.raises(InvalidMessagesError) as raised:
        clear_format([user("u"), call, tool_result("call_1", "r"), user("v"), USE])
    assert re.match(
        r"messages\[4\] is an Anthropic Messages message but messages\[1\] is an OpenAI chat one", str(raised.value)
    )


def test_plain_role_is_the_role_of_a_text_or_empty_message_and_none_for_any_other():
    # The fast path of passes over a long history: a caller takes the role as the message's class only when
    # this answers one; None sends it to the full checks (is_inserted, has_calls).
    assert plain_role(user("hi")) == "user"
    assert plain_role(assistant(None, [tool_call("f")])) == "assistant"  # no content: its calls are asked next
    assert plain_role({"role": "tool", "tool_call_id": "c", "content": "ends like a mark -->"}) is None
    assert plain_role(mark_inserted(user("History summary: before"), "summary")) is None
    assert plain_role(USE) is None  # blocks to look into
    assert plain_role({"role": "user", "content": {"text": "a dict"}}) is None
    assert plain_role({"content": "no role"}) is None
    assert plain_role("not a dict") is None


def test_a_list_is_the_same_messages_as_itself():
    messages = [user("u"), assistant("a")]
    assert same_messages(messages, messages) is True
    assert same_messages(tuple(messages), tuple(messages)) is True
    assert same_messages(messages, list(messages)) is True
    assert same_messages(messages, [user("u"), assistant("b")]) is False
