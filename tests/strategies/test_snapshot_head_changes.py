"""snapshot_restore saves every change a strategy makes to the list, whatever its hook order.

The snapshot is saved by the host once every strategy of a call ran (``Keeper.settle``): recall's
room-making (a trylast hook, like snapshot_restore's save was) and a third party's hook registered
after snapshot_restore are saved like a compaction, so a restart restores exactly what the app last
sent. Calls that change nothing (or only the recall block) write no snapshot.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife import sessions
from ctxlife.config import read_toml, settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.host import Host
from ctxlife.messages import is_recall_block
from ctxlife.session import Session
from ctxlife.sessions import open_store
from delegating_store import DelegatingStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from reliability_gen import Probe  # noqa: E402 - the reliability suite's probe (right after the restore)

REPO = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "You are a friendly companion."}
FACT = "Quick note: the spare key is hidden under the ceramic frog by the back door."
QUESTION = "Do you remember where the spare key is hidden? I forgot what I told you earlier."
TOPICS = [
    "garden",
    "weather",
    "bicycles",
    "cooking",
    "trains",
    "music",
    "chess",
    "rivers",
    "bread",
    "kites",
    "owls",
    "tea",
]


def chat() -> list[tuple[str, str]]:
    """(user, assistant) turns: small talk with the fact in the second turn, then a question about it."""
    turns = []
    for i, topic in enumerate(TOPICS):
        said = f"Let us talk about {topic} today, topic {i}; I like {topic} a lot and have many thoughts on {topic}"
        said += " and related things."
        turns.append(
            (
                f"{FACT} {said}" if i == 1 else said,
                f"Sure, {topic} is a pleasant subject; tell me more about {topic} and what you enjoy about it.",
            )
        )
    return [*turns, (QUESTION, "")]


def demo_settings(tmp_path: Path) -> Any:
    """configs/demo.toml (bootstrap, snapshot_restore, tool_output, llm_summary, recall) on a SQLite store."""
    data = copy.deepcopy(read_toml(REPO / "configs" / "demo.toml"))
    data["store"] = f"sqlite:///{tmp_path / 'sessions.db'}"
    data["tool_output"]["store_dir"] = str(tmp_path / "tool_outputs")
    return settings_from_dict(data, source=str(REPO / "configs" / "demo.toml"))


def play(host: Host, turns: list[tuple[str, str]], live: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """The app's loop: it keeps the list each call hands back; returns each call's actions."""
    actions = []
    for said, reply in turns:
        live.append({"role": "user", "content": said})
        report = host.manage(live)
        assert report.failures == []
        actions.append([(a.strategy, a.what) for a in report.actions])
        if reply:
            live.append({"role": "assistant", "content": reply})
    return actions


def restored(settings: Any, window: int, session: str) -> list[dict[str, Any]]:
    """What a new host's first call restores before the new user message (seen right after the restore:
    the other strategies may then compact it, as in any call)."""
    probe = Probe()
    host = Host(settings, context_window=window, session_id=session, plugins=[probe])
    try:
        fresh = [SYSTEM, {"role": "user", "content": "Back again."}]
        report = host.manage(fresh)
        assert ("snapshot_restore", "restored") in [(a.strategy, a.what) for a in report.actions]
        assert probe.seen[0][-1] == {"role": "user", "content": "Back again."}
        return probe.seen[0][:-1]
    finally:
        host.close()


def sent_without_block(live: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in live if not is_recall_block(m)]


def test_the_room_recall_makes_is_saved_so_a_restart_restores_what_the_app_last_sent(tmp_path):
    settings = demo_settings(tmp_path)
    host = Host(settings, context_window=1500, session_id="room")
    live = [dict(SYSTEM)]
    try:
        actions = play(host, chat(), live)
    finally:
        host.close()
    assert ("llm_summary", "compacted") in [a for call in actions for a in call]
    assert ("recall", "made_room") in actions[-1]  # the last call dropped recorded rounds to make room
    assert restored(settings, 1500, "room") == sent_without_block(live)
    assert ("snapshot_restore", "snapshot_saved") in actions[-1]


class DropOldestRound:
    """A third party's strategy: it drops the oldest round after the first (the first user message
    stays: the task) whenever the list is longer than 6 -- a head change no compaction strategy made."""

    name = "drop_oldest"
    once = False

    def __init__(self) -> None:
        self.dropped = 0

    def drop(self, ctx: Any) -> None:
        messages = ctx.messages
        if len(messages) > 6 and not (self.once and self.dropped):
            del messages[3:5]  # [system, first user, its reply, (user, reply) <- dropped, ...]
            self.dropped += 1
            ctx.record("dropped", messages=2)


class PlainDrop(DropOldestRound):
    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self.drop(ctx)


class LastDrop(DropOldestRound):
    @ctxlife.hookimpl(trylast=True)
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self.drop(ctx)


@pytest.mark.parametrize("plugin", [PlainDrop, LastDrop], ids=["plain", "trylast"])
def test_a_third_party_plugin_that_drops_head_messages_is_saved_too(tmp_path, plugin):
    # Registered after snapshot_restore (plugins come after the config's strategies), trylast or not.
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{tmp_path / 's'}"})
    host = Host(settings, context_window=100_000, session_id="third", plugins=[plugin()])
    live = [dict(SYSTEM)]
    try:
        actions = play(host, [(f"Message {i} about {t}.", f"Reply {i} on {t}.") for i, t in enumerate(TOPICS)], live)
    finally:
        host.close()
    assert sum(("drop_oldest", "dropped") in call for call in actions) >= 5
    assert restored(settings, 100_000, "third") == live[:-1]  # (the last reply is recorded by the next call)
    assert ("snapshot_restore", "snapshot_saved") in actions[-1]


class DropOnce(DropOldestRound):
    """Drops the oldest round once: one head change, then a steady conversation."""

    once = True

    @ctxlife.hookimpl(trylast=True)
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self.drop(ctx)


def test_steady_calls_do_not_rewrite_the_snapshot_and_the_restore_stays_exact(tmp_path):
    """100 calls after one head change: no snapshot write (the recall block changes nothing saved);
    the one snapshot and the raw tail after it restore the list exactly."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    settings = settings_from_dict({"strategies": ["snapshot_restore", "recall"], "store": url})
    host = Host(settings, context_window=100_000, session_id="steady", plugins=[DropOnce()])
    live = [dict(SYSTEM)]
    try:
        first = play(host, [("Hello.", "Hi."), (FACT, "Noted."), ("How are you?", "Fine."), ("Good.", "Yes.")], live)
        assert ("snapshot_restore", "snapshot_saved") in first[-1]
        with open_store(url) as store:
            saved = store.load_snapshot("steady")
        # Questions about the dropped fact bring a recall block; the rest is small talk.
        steady = [(QUESTION if i % 3 == 0 else f"Small talk {i}.", f"Answer {i}.") for i in range(100)]
        actions = play(host, steady, live)
    finally:
        host.close()
    assert ("recall", "recalled") in [a for call in actions for a in call]
    assert [a for call in actions for a in call if a[0] == "snapshot_restore"] == []
    with open_store(url) as store:
        assert store.load_snapshot("steady") == saved  # not written again
    assert restored(settings, 100_000, "steady") == sent_without_block(live)[:-1]


class RefusingSnapshots(DelegatingStore):
    """A real SQLite store whose snapshot writes fail while ``refusing`` is set (a full disk)."""

    refusing = False

    def save_snapshot(self, snapshot: Any) -> None:
        if RefusingSnapshots.refusing:
            raise StoreError("the disk is full (snapshot refused)")
        super().save_snapshot(snapshot)


def test_a_snapshot_save_that_failed_is_made_on_the_next_call_that_changes_nothing(tmp_path):
    inner = f"sqlite:///{tmp_path / 'sessions.db'}"
    with sessions.REGISTRY.registered("refusing", lambda url: RefusingSnapshots(sessions.open_store(inner))):
        settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": "refusing://x"})
        host = Host(settings, context_window=100_000, session_id="due", plugins=[DropOnce()])
        live = [dict(SYSTEM)]
        try:
            play(host, [("Hello.", "Hi."), (FACT, "Noted."), ("How are you?", "Fine.")], live)
            RefusingSnapshots.refusing = True
            live.append({"role": "user", "content": "Good."})
            report = host.manage(live)  # the head change (DropOnce) whose snapshot cannot be written
            # reported as snapshot_restore's failure (the call record after it is skipped: the store failed)
            assert ("snapshot_restore", "StoreError") in [(f.strategy, f.error.split(":")[0]) for f in report.failures]
            live.append({"role": "assistant", "content": "Yes."})
            RefusingSnapshots.refusing = False
            actions = play(host, [("Small talk.", "Sure.")], live)  # changes nothing: the due save is made
            assert ("snapshot_restore", "snapshot_saved") in actions[0]
        finally:
            RefusingSnapshots.refusing = False
            host.close()
        assert restored(settings, 100_000, "due") == live[:-1]


def test_a_session_saves_a_change_once_and_steady_calls_do_not_rewrite_it(tmp_path):
    """ctxlife.Session saves its own snapshot: the bootstrap text in its system prompt (applied on
    every call) and the recall block are no change of the conversation."""
    settings = demo_settings(tmp_path)
    with Session(
        "calm", settings, system="You are a friendly companion.", context_window=100_000, plugins=[DropOnce()]
    ) as session:
        for i, said in enumerate(["Hello.", FACT, "How are you?", "Good."]):
            sent = session.messages({"role": "user", "content": said})
            session.record_reply({"role": "assistant", "content": f"Answer {i}."})
        assert FACT not in [m["content"] for m in sent]  # dropped once (a head change), and saved
        saved = session.store.load_snapshot("calm")
        assert saved is not None
        blocks = 0
        for i in range(30):
            sent = session.messages({"role": "user", "content": QUESTION if i % 3 == 0 else f"Small talk {i}."})
            blocks += any(is_recall_block(m) for m in sent)
            session.record_reply({"role": "assistant", "content": f"Reply {i}."})
        assert blocks  # recall brought the dropped fact back (a block: no change of the conversation)
        assert session.store.load_snapshot("calm") == saved  # not written again
    with Session("calm", settings, context_window=100_000) as again:
        assert again.get_items() == [*sent_without_block(sent)[1:], {"role": "assistant", "content": "Reply 29."}]
