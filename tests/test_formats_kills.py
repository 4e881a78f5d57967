"""The core's message functions changed since its run of 2026-12-07 (mutate40): what `make mutate`'s survivors
there showed no test asserting.

`clear_format` is what `Session.add`/`edit`/`record_reply` ask (with ``message_format = "auto"``) before
refusing a message clearly in the other format than the conversation's: the format, the first message
that shows it (named in the refusal), and a list mixing the two refused with both positions named.
"""

from __future__ import annotations

import re

import pytest

from ctxlife.errors import InvalidMessagesError
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
