"""End to end with a real CrewAI crew: after several compactions and a restart, the agent answers
a question about an early turn from recalled history (and could not without recall)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlife.messages import RECALL_PREFIX, SUMMARY_PREFIX
from ctxlife.sessions import open_store


# The calls were made in a worker process: ctxlife registers what it inserts per process (so a user
# message cannot pose as one), and here only the visible prefixes tell them apart.
def is_summary(message: dict) -> bool:
    return str(message.get("content") or "").startswith(SUMMARY_PREFIX)


def is_recall_block(message: dict) -> bool:
    return str(message.get("content") or "").startswith(RECALL_PREFIX)


WORKER = Path(__file__).with_name("crew_worker.py")

TOPICS = [
    "the garden",
    "my commute",
    "a podcast about bridges",
    "weekend plans",
    "a new recipe",
    "the weather",
    "a board game night",
    "my cousin's wedding",
    "learning the ukulele",
    "a documentary about bees",
    "repainting the kitchen",
    "a long walk by the river",
]


def run(store: str, out: Path, *turns: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(WORKER), store, "crew-chat", str(out), *turns], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.e2e
def test_the_agent_answers_about_an_early_turn_after_compactions_and_a_restart(tmp_path):
    store = f"file://{tmp_path / 'sessions'}"
    turns = ["Hello!", "Quick note: the spare key is hidden under the ceramic frog by the back door."]
    turns += [f"Let's chat about {topic}. Nothing special, just the usual routine and small talk." for topic in TOPICS]
    first = run(store, tmp_path / "p1.json", *turns)
    compactions = sum(1 for call in first["calls"] if any(is_summary(m) for m in call))
    assert compactions >= 2, "the setup should compact several times"

    second = run(store, tmp_path / "p2.json", "Where did I say the spare key is hidden?")
    sent = second["calls"][-1]
    assert second["outputs"][-1] == "You said the spare key is hidden under the ceramic frog by the back door."
    # It came back through the recall block, not because the turn was still in the context.
    holding = [m for m in sent if "ceramic frog" in str(m.get("content"))]
    assert holding and all(is_recall_block(m) for m in holding)
    with open_store(store) as s:
        raw = [r.message for r in s.read_records("crew-chat")]
        records = s.read_records("crew-chat")
        (view,) = {r.view for r in records}  # the agent's lane
        current = [r.message for r in s.current("crew-chat", view)]
    assert not any(is_recall_block(m) for m in raw)
    # Compaction is not deletion (issue 37): no record removes what a compaction evicted, and every
    # turn of both processes is in the raw history.
    assert [r.op for r in records if r.op == "remove"] == []
    said = [str(m.get("content")) for m in current if m.get("role") == "user"]
    assert all(any(turn in text for text in said) for turn in [*turns, "Where did I say the spare key is hidden?"])
