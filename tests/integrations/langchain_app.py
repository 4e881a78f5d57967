"""A LangChain agent app run as a real process by the tests: one process's share of a long conversation.

``python langchain_app.py STORE_URL OUT_JSON FIRST LAST [CHECKPOINT_FILE]`` runs turns FIRST..LAST-1
of a clerk agent (create_agent + CtxlifeMiddleware with snapshot_restore, llm_summary and recall, a
small window so it compacts) and writes what happened to OUT_JSON. Without CHECKPOINT_FILE the app
keeps ``result["messages"]`` and appends the next question, as a stateless app does; with it, the
agent has a LangGraph checkpointer (an InMemorySaver whose storage the file carries from process to
process: a checkpointer that outlives the process) and the app sends only the new question.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxlife.config import settings_from_dict
from ctxlife.integrations.langchain import CtxlifeMiddleware, to_openai_messages
from ctxlife.messages import is_recall_block

sys.path.insert(0, str(Path(__file__).parent))
from fake_chat import ScriptedChatModel, call  # noqa: E402

THREAD = "clerk-37"
FACT = "my locker code is PLUM-7731"
LAST_TURN = 29


def question(turn: int) -> str:
    if turn == 2:
        return f"Note this for later: {FACT}."
    if turn == LAST_TURN:
        return "What is my locker code? The PLUM code I gave you earlier."
    return f"Please check R{turn:04d} and tell me its stock level."


@tool
def lookup(item: str) -> str:
    """Look up an item in the inventory."""
    return f"item {item}: " + "stock data " * 30


def load_checkpointer(path: Path) -> InMemorySaver:
    saver = InMemorySaver()
    if path.exists():
        storage, writes, blobs = pickle.loads(path.read_bytes())
        for thread, namespaces in storage.items():
            saver.storage[thread].update(namespaces)
        saver.writes.update(writes)
        saver.blobs.update(blobs)
    return saver


def save_checkpointer(saver: InMemorySaver, path: Path) -> None:
    storage = {thread: dict(namespaces) for thread, namespaces in saver.storage.items()}
    path.write_bytes(pickle.dumps((storage, dict(saver.writes), dict(saver.blobs))))


def main(store: str, out: Path, first: int, last: int, checkpoint: Path | None) -> None:
    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "llm_summary", "recall"],
            "store": store,
            "llm_summary": {"summarizer": "llm", "keep_rounds": 1, "min_gain_tokens": 20},
        }
    )
    script: list[Any] = []
    for turn in range(first, last):
        script += [call("lookup", {"item": f"R{turn:04d}"}, f"call_{turn}"), f"Done with turn {turn}."]
    # The summary model's summary names the items looked up (a summary carrying none of its span's
    # facts is not used), never the locker code: that comes back only through recall.
    summary = "The user asked for lookups of " + ", ".join(f"R{t:04d}" for t in range(last)) + "; all answered."
    model = ScriptedChatModel(script=script, window=1500, summary=summary)
    middleware = CtxlifeMiddleware(settings)
    compactions: list[int] = []
    middleware.host.listeners.append(
        lambda r: compactions.append(1) if r.node == "before_llm_call" and "llm_summary" in r.acted else None
    )
    saver = load_checkpointer(checkpoint) if checkpoint is not None else None
    agent = create_agent(model, [lookup], system_prompt="You are a clerk.", middleware=[middleware], checkpointer=saver)
    config = {"configurable": {"thread_id": THREAD}}
    kept: list[BaseMessage] = []
    for turn in range(first, last):
        ask = HumanMessage(question(turn))
        state = agent.invoke({"messages": [ask] if saver is not None else [*kept, ask]}, config)
        kept = state["messages"]
    if saver is not None and checkpoint is not None:
        save_checkpointer(saver, checkpoint)
    received = [to_openai_messages(sent) for sent in model.calls]
    out.write_text(
        json.dumps(
            {
                "compactions": len(compactions),
                "received": received,
                "recall_blocks": [[m["content"] for m in sent if is_recall_block(m)] for sent in received],
            }
        )
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], Path(args[1]), int(args[2]), int(args[3]), Path(args[4]) if len(args) > 4 else None)
