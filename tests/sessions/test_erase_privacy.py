"""Erase for privacy (issue 38): the list stays valid, and the erased text is gone from every copy.

On the file, SQLite and Redis stores. Erasing part of a tool call/result unit erases the whole unit
(the call and its results), so restore and ``Session.prepare`` never send an orphan tool result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.messages import validate
from ctxlife.sessions import open_store
from ctxlife.testing import assistant, tool_call, tool_result, user

WINDOW = 100_000
SECRET = "DE89370400440532013000"
# Session with snapshot_restore warns that task_end is not called: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")


def settings(url: str, *strategies: str, **tables: Any) -> Any:
    return settings_from_dict({"strategies": ["snapshot_restore", *strategies], "store": url, **tables})


def tool_turn(session: ctxlife.Session) -> None:
    """A conversation with a tool call whose arguments hold the secret, then more turns."""
    session.prepare(user("Hello, I need to pay my landlord."))
    session.record_reply("Sure, which account?")
    session.prepare(user("Use my usual account."))
    call = tool_call("pay", {"iban": SECRET, "amount": 900}, call_id="call_pay")
    session.record_reply(assistant(None, [call]))
    session.prepare(tool_result("call_pay", '{"status": "paid"}'))
    session.record_reply("Paid 900 to your landlord.")


@pytest.mark.parametrize("how", ["match", "call", "result"])
def test_erasing_part_of_a_tool_unit_erases_the_whole_unit(store_url: str, how: str) -> None:
    cfg = settings(store_url)
    with ctxlife.Session("pay", cfg, system="sys", context_window=WINDOW) as session:
        tool_turn(session)
        records = session.records()
        call_seq = next(r.seq for r in records if r.message.get("tool_calls"))
        result_seq = next(r.seq for r in records if r.message.get("role") == "tool")
        if how == "match":
            erased = session.erase_matching(SECRET)  # the value is only in the call's arguments
        else:
            erased = session.erase(call_seq if how == "call" else result_seq)
        assert erased == [call_seq, result_seq]
        items = session.get_items()
        assert validate(items) == [] and SECRET not in json.dumps(items)
        sent = session.prepare(user("Thanks!"))
        assert validate(sent) == []
    with ctxlife.Session("pay", cfg, system="sys", context_window=WINDOW) as again:  # a restart
        sent = again.prepare(user("What did we do today?"))
    assert validate(sent) == [], validate(sent)
    contents = [m.get("content") for m in sent]
    # The rest of the conversation is restored (not dropped for an orphan tool result).
    assert contents == [
        "sys",
        "Hello, I need to pay my landlord.",
        "Sure, which account?",
        "Use my usual account.",
        "Paid 900 to your landlord.",
        "Thanks!",
        "What did we do today?",
    ]
    assert not any(m.get("role") == "tool" or m.get("tool_calls") for m in sent)


def test_erase_leaves_other_units_alone(store_url: str) -> None:
    with open_store(store_url) as store:
        store.append(
            "two",
            [
                user("look both up"),
                assistant(None, [tool_call("a", {"x": SECRET}, "c1")]),
                tool_result("c1", "A"),
                assistant(None, [tool_call("b", {"x": 2}, "c2")]),
                tool_result("c2", "B"),
                assistant("done"),
            ],
        )
        assert store.erase_matching("two", SECRET) == [2, 3]
        left = [r.message for r in store.current("two")]
    assert validate(left) == []
    assert [m.get("content") for m in left] == ["look both up", None, "B", "done"]
