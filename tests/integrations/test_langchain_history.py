"""Compaction is not deletion, under CtxlifeMiddleware (issue 37).

A LangChain app (tests/integrations/langchain_app.py) talks 30 turns with a clerk agent over two real
processes, with snapshot_restore + llm_summary + recall on a SQLite store and a window small enough
that it compacts every few turns. The middleware writes each compaction back into the agent state;
what it evicted must stay in the raw history (no ``remove`` records), so that after the restart
recall still brings back what the user said at turn 2. Only the user's own removal (a
``RemoveMessage`` through ``update_state``) is a removal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="the LangChain adapter needs pip install 'ctxlife[langchain]'")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import HumanMessage, RemoveMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations.langchain import CtxlifeMiddleware  # noqa: E402
from ctxlife.sessions import open_store  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from fake_chat import ScriptedChatModel  # noqa: E402
from langchain_app import FACT, LAST_TURN, THREAD, question  # noqa: E402


def run_app(store: str, out: Path, first: int, last: int, checkpoint: Path | None) -> dict[str, Any]:
    args = [sys.executable, str(HERE / "langchain_app.py"), store, str(out), str(first), str(last)]
    if checkpoint is not None:
        args.append(str(checkpoint))
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize("checkpointer", [False, True], ids=["app-keeps-the-messages", "langgraph-checkpointer"])
def test_thirty_turns_over_two_processes_remove_nothing_and_recall_finds_turn_2(tmp_path, checkpointer):
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    checkpoint = tmp_path / "checkpoint.pickle" if checkpointer else None
    first = run_app(store, tmp_path / "first.json", 0, 15, checkpoint)
    second = run_app(store, tmp_path / "second.json", 15, LAST_TURN + 1, checkpoint)
    assert first["compactions"] >= 2 and second["compactions"] >= 2  # compacted in both processes

    with open_store(store) as opened:
        records = opened.read_records(THREAD)
        current = [r.message for r in opened.current(THREAD)]
    assert [r.op for r in records if r.op != "add"] == []  # no remove, no replace: nothing was deleted
    users = [m["content"] for m in current if m["role"] == "user"]
    assert users == [question(turn) for turn in range(LAST_TURN + 1)]  # every turn, once, in order
    assert [m["content"] for m in current if m["role"] == "assistant" and m["content"]] == [
        f"Done with turn {turn}." for turn in range(LAST_TURN + 1)
    ]

    # After the restart, the question about turn 2 reaches the model with the fact, brought back by recall
    # (the summary model's summary does not hold it, and turn 2 is long out of the context).
    asked = second["received"][-2]  # the question's first call (the last one follows the tool result)
    assert asked[-1]["content"] == question(LAST_TURN)
    holding = [m["content"] for m in asked if FACT in str(m["content"])]
    assert holding and holding == [block for block in second["recall_blocks"][-2] if FACT in block]

    # ... and the CLI's history search finds it in the raw history.
    found = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxlife.cli",
            "session",
            "search",
            THREAD,
            "locker code PLUM",
            "--store",
            store,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert FACT in found


def test_a_users_remove_message_through_update_state_is_recorded_as_a_removal(tmp_path):
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": store})
    model = ScriptedChatModel(script=["a0", "a1", "a2", "a3", "a4"])
    agent = create_agent(model, [], middleware=[CtxlifeMiddleware(config)], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    for q in ("q0", "q1", "q2"):
        state = agent.invoke({"messages": [HumanMessage(q)]}, thread)
    wrong = next(m for m in state["messages"] if m.content == "a1")
    agent.update_state(thread, {"messages": [RemoveMessage(id=wrong.id)]})
    agent.invoke({"messages": [HumanMessage("q3")]}, thread)

    assert [m.content for m in model.calls[-1]] == ["q0", "a0", "q1", "q2", "a2", "q3"]
    with open_store(store) as opened:
        records = opened.read_records("t1")
        current = [r.message["content"] for r in opened.current("t1")]
    (removal,) = [r for r in records if r.op == "remove"]
    assert next(r for r in records if r.seq == removal.target).message["content"] == "a1"
    assert current == ["q0", "a0", "q1", "q2", "a2", "q3", "a3"]

    # An edit through update_state (the same message id, new content) is a replace of that message.
    q2 = next(m for m in agent.get_state(thread).values["messages"] if m.content == "q2")
    agent.update_state(thread, {"messages": [HumanMessage("q2, corrected", id=q2.id)]})
    agent.invoke({"messages": [HumanMessage("q4")]}, thread)
    with open_store(store) as opened:
        records = opened.read_records("t1")
        current = [r.message["content"] for r in opened.current("t1")]
    (edit,) = [r for r in records if r.op == "replace"]
    assert edit.message["content"] == "q2, corrected"
    assert current == ["q0", "a0", "q1", "q2, corrected", "a2", "q3", "a3", "q4", "a4"]
