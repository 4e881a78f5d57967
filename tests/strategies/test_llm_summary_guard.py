"""llm_summary's cut (issue 44, mutation scope `guard`): what a compaction evicts, keeps and puts in.

Each test checks the list the model is sent after a compaction: the system prompt stays once and is
never summarized, a one-call recall block is neither kept nor summarized, the first user message is
pinned, the question being worked on and the latest user message stay, the kept tail is whole rounds,
and a model summarizer is asked in the foreground.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import is_inserted, is_summary, mark_inserted, validate
from ctxlife.summarizers import register_summarizer, unregister_summarizer
from ctxlife.testing import assistant, system, tool_call, tool_result, user

sys.path.insert(0, str(Path(__file__).parent))
from strategy_helpers import split_model_keys  # noqa: E402

WINDOW = 4000
SYSTEM = system("You are an airline agent. Follow the policy.")


def settings(**options: Any) -> Any:
    options, table = split_model_keys({"summarizer": "extractive", **options})
    options.pop("api", None)
    return settings_from_dict({"strategies": ["llm_summary"], "llm_summary": options, "model": table})


def rounds(n: int, words: int = 100) -> list[dict[str, Any]]:
    """``n`` rounds of a tool-calling conversation (4 messages each), without a system prompt."""
    messages: list[dict[str, Any]] = []
    for r in range(n):
        code = f"RS{r:03d}X"
        messages.append(user(f"Please check reservation {code}; I paid ${100 + r}.50."))
        call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
        messages.append(assistant(None, [call]))
        messages.append(tool_result(call["id"], json.dumps({"reservation_id": code, "notes": "ok " * words})))
        messages.append(assistant(f"Reservation {code} is confirmed."))
    return messages


def step(r: int, words: int) -> list[dict[str, Any]]:
    """Tool step ``r`` of a loop without user turns: reservation RS0rrX fetched, a result of ``words`` words."""
    call = tool_call("get_reservation_details", {"reservation_id": f"RS{r:03d}X"}, call_id=f"c{r}")
    return [assistant(None, [call]), tool_result(call["id"], json.dumps({"id": f"RS{r:03d}X", "notes": "ok " * words}))]


def compacted(messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """Manage ``messages`` in place with llm_summary; the compaction's details."""
    host = Host(settings(**options), context_window=WINDOW)
    report = host.manage(messages)
    action = next((a for a in report.actions if a.what == "compacted"), None)
    assert action is not None, report.actions  # the precondition: a compaction happened
    assert validate(messages) == []
    return dict(action.details)


def _gone(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of ``before`` that are no longer in ``after`` (by identity)."""
    kept = {id(m) for m in after}
    return [m for m in before if id(m) not in kept]


def test_the_system_prompt_stays_once_and_is_not_counted_as_evicted() -> None:
    original = [SYSTEM, *rounds(12)]
    messages = list(original)
    details = compacted(messages)
    assert messages[0] is SYSTEM and sum(m is SYSTEM for m in messages) == 1
    assert is_summary(messages[1])
    assert details["evicted_messages"] == len(_gone(original, messages))


def test_a_conversation_opening_with_the_user_pins_it_and_evicts_the_rest() -> None:
    original = rounds(12)  # no system prompt: the first user message is the list's first
    messages = list(original)
    details = compacted(messages)
    assert is_summary(messages[0]) and messages[1] is original[0]
    assert details["evicted_messages"] == len(_gone(original, messages))


def test_a_one_call_recall_block_is_neither_kept_nor_summarized() -> None:
    """What ctxlife inserted for one call only (a recall block, before the latest question) is not
    part of the conversation: a compaction neither keeps it nor summarizes it."""
    recall = mark_inserted(
        {"role": "user", "content": "Earlier in this conversation: the refund code RFX-4417."}, "recall"
    )
    original = [SYSTEM, *rounds(12)]
    original.insert(len(original) - 4, recall)  # before the latest round's question
    messages = list(original)
    details = compacted(messages)
    assert all(m is not recall and not (is_inserted(m) and not is_summary(m)) for m in messages)
    assert "RFX-4417" not in messages[1]["content"]
    assert details["evicted_messages"] == len(_gone(original, messages)) - 1  # the block is not evicted


def test_the_kept_tail_is_the_last_rounds_whole() -> None:
    """keep_rounds = 2 with room for them: the list is the system prompt, the summary, the pinned
    first question and the last two rounds, each from its question on."""
    original = [SYSTEM, *rounds(12)]
    messages = list(original)
    compacted(messages, keep_rounds=2)
    assert messages[3:] == original[-8:] and len(messages) == 3 + 8
    assert messages[3]["role"] == "user"


def test_the_question_being_worked_on_and_the_latest_user_message_stay_when_their_steps_are_summarized() -> None:
    """One question answered by a long tool loop with a framework's repeated prompt after some steps:
    the question (the user message that does not repeat) and the latest prompt stay verbatim, though
    steps before and after them are summarized."""
    question = user("Check reservations RS000X to RS015X and tell me which are refundable.")
    messages: list[dict[str, Any]] = [SYSTEM, user("Hi"), assistant("Hello! How can I help?"), question]
    prompts = []
    for r in range(16):
        messages += step(r, 120)
        if r < 9:
            prompts.append(user("Analyze the tool result and continue."))
            messages.append(prompts[-1])
    original = list(messages)
    details = compacted(messages)
    assert details["evicted_messages"] == len(_gone(original, messages)) > 0
    assert messages.index(question) == 3  # after the system prompt, the summary and the pinned "Hi"
    assert any(m is prompts[-1] for m in messages)  # the latest user message
    assert original.index(prompts[-1]) < original.index(messages[5])  # whose following steps were cut


def test_a_conversation_without_a_user_message_is_compacted() -> None:
    """An agent run from its system prompt alone (no user turn): its tool steps are compacted."""
    messages: list[dict[str, Any]] = [SYSTEM]
    for r in range(10):
        messages += step(r, 150)
    original = list(messages)
    details = compacted(messages)
    assert details["evicted_messages"] == len(_gone(original, messages)) > 0 and is_summary(messages[1])


def test_a_model_summarizer_writes_the_summary_of_a_foreground_compaction() -> None:
    """Not in the background: the configured summarizer is asked and its text put in."""

    class Canned:
        def summarize(self, request: Any) -> str:
            return "CANNED: the user checked reservations RS000X to RS007X; all confirmed."

    register_summarizer("canned_guard", lambda **_: Canned())
    try:
        messages = [SYSTEM, *rounds(12)]
        details = compacted(messages, summarizer="canned_guard")
    finally:
        unregister_summarizer("canned_guard")
    assert details["summarizer"] == "canned_guard"
    assert "CANNED: the user checked reservations" in messages[1]["content"]


def test_three_rounds_are_compacted_down_to_the_last_two() -> None:
    """The fewest rounds with a round to evict: one cut possible, at the last two rounds."""
    original = [SYSTEM, *rounds(3, words=40)]
    original[3] = tool_result("call_0", json.dumps({"reservation_id": "RS000X", "notes": "ok " * 3000}))
    messages = list(original)
    details = compacted(messages)
    assert messages[3:] == original[-8:] and details["evicted_messages"] == len(_gone(original, messages))


def test_with_one_round_kept_the_latest_question_is_not_sent_twice() -> None:
    original = [SYSTEM, *rounds(12, words=200)]  # room for one round only: the cut is at the latest question
    messages = list(original)
    compacted(messages, keep_rounds=1)
    assert len({id(m) for m in messages}) == len(messages)
    assert messages[3:] == original[-4:]


def test_over_the_window_the_rounds_that_fit_the_target_stay() -> None:
    """Over the window because of an old huge tool result: the recent rounds that fit the target
    are kept (the cut is not pushed to the latest unit)."""
    call = tool_call("read_log", {"path": "/var/log/app.log"}, call_id="c1")
    log = "\n".join(f"2026-12-06 10:{i % 60:02d}:00 INFO request {i} served in 12 ms by {i % 7}" for i in range(190))
    messages = [
        SYSTEM,
        user("Read the app log and tell me if anything failed."),
        assistant(None, [call]),
        tool_result("c1", log),
        assistant("Nothing failed."),
        user("Which worker served the most?"),
        assistant("Worker 3."),
        user("And the fewest?"),
        assistant("Worker 6."),
        user("Thanks. Anything else I should know?"),
    ]
    original = list(messages)
    host = Host(settings(), context_window=WINDOW)
    assert host.counter().count_messages(messages) > WINDOW  # the precondition: over the window itself
    compacted(messages)
    assert messages[-5:] == original[-5:]  # the last two rounds (from "And the fewest?") and the question
    assert all(m.get("content") != log for m in messages)


def test_under_the_window_a_loop_of_large_steps_is_cut_down_to_the_latest_step() -> None:
    """Over the threshold, under the window: one request whose recent tool steps alone are over the
    target; the cut goes down to the latest step (not the one before)."""
    messages: list[dict[str, Any]] = [SYSTEM, user("Check reservations RS000X to RS004X.")]
    for r in range(5):
        messages += step(r, 600)
    host = Host(settings(), context_window=WINDOW)
    size = host.counter().count_messages(messages)
    assert 0.8 * WINDOW < size < WINDOW  # the precondition: over the threshold only
    last = messages[-2:]
    compacted(messages)
    assert [m for m in messages if m.get("role") == "tool"] == [last[1]] and messages[-2:] == last


def test_a_question_right_after_the_pinned_first_message_stays_when_the_steps_after_it_are_cut() -> None:
    """Two user messages in a row, then a loop of large tool steps: the second (the question being
    worked on) sits right after the pinned first one, and stays when the cut goes past it."""
    question = user("Which of RS000X to RS004X are refundable?")
    messages: list[dict[str, Any]] = [SYSTEM, user("Hi, I am Ana Lopez."), question]
    for r in range(5):
        messages += step(r, 600)
    original = list(messages)
    details = compacted(messages)
    assert details["evicted_messages"] > 0 and original[3] not in messages  # the precondition: steps after it cut
    assert [m for m in messages if m.get("role") == "user"] == [original[1], question]


def test_a_list_with_nothing_to_evict_is_left_and_says_so() -> None:
    """Over the threshold with only the pinned first question: nothing can be summarized."""
    messages = [SYSTEM, user("Please read this: " + "the order 4411 shipped by DHL; " * 500)]
    host = Host(settings(), context_window=WINDOW)
    report = host.manage(messages)
    skipped = [a for a in report.actions if a.what == "skipped"]
    assert [(a.strategy, a.details.get("reason")) for a in skipped] == [("llm_summary", "nothing_to_evict")]


def test_a_list_whose_only_evictable_message_is_the_kept_question_is_left_and_says_so() -> None:
    """Over the threshold: the pinned first message, the question right after it and one long answer.
    The only cut leaves the answer and would evict the question, which always stays: nothing to evict."""
    messages = [SYSTEM, user("Hi, I am Ana Lopez."), user("Summarize our refund policy for me.")]
    messages.append(assistant("Refunds are allowed within 24 hours of booking; " * 310))
    original = list(messages)
    host = Host(settings(), context_window=WINDOW)
    size = host.counter().count_messages(messages)
    assert 0.8 * WINDOW < size < WINDOW  # the precondition: over the threshold only
    report = host.manage(messages)
    skipped = [(a.strategy, a.what, a.details.get("reason")) for a in report.actions if a.strategy == "llm_summary"]
    assert skipped == [("llm_summary", "skipped", "nothing_to_evict")]
    assert messages == original


def test_the_last_message_counts_toward_what_the_kept_tail_costs() -> None:
    """A long final answer: the last round alone is over the room the target leaves, so its tool
    step is summarized and the latest question and the answer stay."""
    original = [SYSTEM, *rounds(12)]
    original[-1] = assistant("Reservation RS011X is confirmed. " + "Details follow. " * 120)
    messages = list(original)
    compacted(messages)
    assert messages[-1] is original[-1] and any(m is original[-4] for m in messages)  # answer and question
    assert all(m is not original[-2] for m in messages)  # the last round's tool result was summarized


def _loop(sizes: list[int]) -> list[dict[str, Any]]:
    """One request answered by tool steps whose results hold ``sizes`` words."""
    messages: list[dict[str, Any]] = [SYSTEM, user("Check the reservations one by one.")]
    for r, words in enumerate(sizes):
        messages += step(r, words)
    return messages


def test_over_the_window_with_no_cut_fitting_only_the_latest_step_stays() -> None:
    messages = _loop([1200] * 6)
    last = messages[-2:]
    host = Host(settings(min_gain_tokens=100_000), context_window=WINDOW)
    assert host.counter().count_messages(messages) > WINDOW  # the precondition: over the window itself
    compacted(messages, min_gain_tokens=100_000)
    assert [m for m in messages if m.get("role") == "tool"] == [last[1]] and messages[-2:] == last


def test_when_the_recent_steps_are_over_the_target_the_most_that_fit_stay() -> None:
    """Small recent steps after large ones: the cut goes below keep_units, but only as far as needed
    (the last two small steps fit the target and stay)."""
    messages = _loop([900, 900, 900, 80, 80])
    last_four = messages[-4:]
    host = Host(settings(), context_window=WINDOW)
    assert host.counter().count_messages(messages) < WINDOW  # the precondition: under the window
    compacted(messages)
    assert messages[-4:] == last_four and sum(m.get("role") == "tool" for m in messages) == 2


def test_below_the_threshold_nothing_is_done_nor_recorded() -> None:
    host = Host(settings(), context_window=WINDOW)
    messages = [SYSTEM, *rounds(2)]
    assert host.manage(messages).actions == []


def test_a_compaction_that_cannot_get_under_the_threshold_waits_for_real_growth() -> None:
    """What must stay (the pinned first question) fills most of the window: after one compaction the
    next calls skip until the context grew by half the threshold-target gap (no churn)."""
    host = Host(settings(), context_window=WINDOW)
    messages = [SYSTEM, user("Here is the whole contract: " + "clause 7 applies to order 4411; " * 330)]
    messages += rounds(6)
    first = host.manage(messages)
    assert [a.what for a in first.actions if a.strategy == "llm_summary"] == ["compacted"]
    assert first.tokens_after > 0.8 * WINDOW  # the precondition: still over the threshold
    messages += [user("And parcel 1003?")]
    second = host.manage(messages)
    assert [(a.what, a.details) for a in second.actions] == [
        ("skipped", {"reason": "backing_off", "tokens": second.tokens_before})
    ]
    assert second.failures == []
    # Real growth is half the threshold-target gap of the window (more than min_gain_tokens here).
    gap = int((host.settings.threshold - 0.25) * WINDOW / 2)
    assert gap > 200
    counter = host.counter()

    def grown_by(tokens: int) -> dict[str, Any]:
        words = ["parcel 1003 was delivered to the depot;"]
        while counter.count_messages([*messages, assistant(" ".join(words))]) < first.tokens_after + tokens:
            words.append("parcel 1003 was delivered to the depot;")
        return assistant(" ".join(words[:-1]))

    messages.append(grown_by(gap - 60))
    assert [a.details.get("reason") for a in host.manage(messages).actions] == ["backing_off"]
    messages.pop()
    messages.append(grown_by(gap + 60))  # past the gap: a compaction is tried again
    assert [a.details.get("reason") for a in host.manage(messages).actions] != ["backing_off"]


def test_in_the_background_mode_a_compaction_never_waits_for_the_model() -> None:
    """background = true: the compaction at the threshold puts in extractive notes at once; the
    configured summarizer's text comes in later compactions."""

    class Canned:
        def summarize(self, request: Any) -> str:
            return "CANNED: the user checked reservations; all confirmed."

    register_summarizer("canned_background", lambda **_: Canned())
    try:
        messages = [SYSTEM, *rounds(12)]
        details = compacted(messages, summarizer="canned_background", background=True)
    finally:
        unregister_summarizer("canned_background")
    assert "CANNED" not in messages[1]["content"] and details["reason"] == "summary_not_ready"


def test_the_message_after_the_question_is_summarized_when_its_steps_are() -> None:
    """The plan the agent wrote right after the question (its booking reference) goes into the
    summary with the steps around it: the question stays, nothing else is lost."""
    question = user("Check reservations RS000X to RS015X and tell me which are refundable.")
    plan = assistant("I will check each reservation under booking reference BKR-55127 now.")
    messages: list[dict[str, Any]] = [SYSTEM, user("Hi"), assistant("Hello! How can I help?"), question, plan]
    messages += _loop([120] * 16)[2:]
    original = list(messages)
    details = compacted(messages)
    assert plan in _gone(original, messages) and question in messages
    assert details["evicted_messages"] == len(_gone(original, messages))
    assert "BKR-55127" in messages[1]["content"]


class _LockOnceBroken:
    """A session store whose lock fails once with an unexpected error (not a StoreError)."""

    def __init__(self) -> None:
        self.broken = True

    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float = 10.0) -> Any:
        from contextlib import nullcontext

        if self.broken:
            self.broken = False
            raise RuntimeError("the lock service answered nonsense")
        return nullcontext()


def test_a_call_after_a_failed_compaction_is_compacted_normally() -> None:
    """A compaction that raised (its edit is discarded by the host) leaves no broken state behind."""
    host = Host(settings(), context_window=WINDOW, session_id="s1")
    host.store = _LockOnceBroken()  # type: ignore[assignment]
    messages = [SYSTEM, *rounds(12)]
    first = host.manage(messages)
    assert first.failures  # the precondition: the first compaction failed
    messages += [user("And parcel 1003?")]
    second = host.manage(messages)
    assert second.failures == [] and [a.what for a in second.actions] == ["compacted"]


def test_a_session_without_a_store_compacts_without_a_lock(tmp_path: Path) -> None:
    host = Host(settings(), context_window=WINDOW, session_id="s1")
    assert host.store is None
    messages = [SYSTEM, *rounds(12)]
    report = host.manage(messages)
    assert report.failures == [] and [a.what for a in report.actions] == ["compacted"]


def test_a_stored_session_compacts_under_its_lock(tmp_path: Path) -> None:
    data = {
        "strategies": ["llm_summary"],
        "store": f"file://{tmp_path / 'sessions'}",
        "llm_summary": {"summarizer": "extractive"},
    }
    host = Host(settings_from_dict(data), context_window=WINDOW, session_id="s1")
    try:
        messages = [SYSTEM, *rounds(12)]
        report = host.manage(messages)
    finally:
        host.close()
    assert report.failures == [] and [a.what for a in report.actions] == ["compacted"]


class _Lock:
    """A session store's lock as llm_summary takes it: what it was asked, and how it fails."""

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.asked: list[tuple[str, float, float]] = []

    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float = 10.0) -> Any:
        from contextlib import contextmanager

        import ctxlife
        from ctxlife.sessions import LockTimeoutError

        self.asked.append((session_id, ttl_seconds, timeout))
        if self.fail == "timeout":
            raise LockTimeoutError(f"session {session_id!r} is locked")
        if self.fail == "down":
            raise ctxlife.StoreError("connection refused")

        @contextmanager
        def held() -> Any:
            yield
            if self.fail == "release":
                raise ctxlife.StoreError("connection lost while releasing the lock")

        return held()


def _locked_compaction(fail: str) -> tuple[Any, _Lock, list[dict[str, Any]]]:
    from structlog.testing import capture_logs

    host = Host(settings(), context_window=WINDOW, session_id="s1")
    store = host.store = _Lock(fail)  # type: ignore[assignment]
    with capture_logs() as events:
        report = host.manage([SYSTEM, *rounds(12)])
    return report, store, events


def test_the_session_lock_is_held_for_the_models_timeout_and_waited_for_two_seconds() -> None:
    report, store, _ = _locked_compaction("")
    assert [a.what for a in report.actions] == ["compacted"]
    timeout = settings().model.timeout_seconds
    assert store.asked == [("s1", timeout + 30, 2.0)]


def test_a_session_locked_by_another_worker_skips_the_compaction_and_says_why() -> None:
    report, _, _ = _locked_compaction("timeout")
    assert [(a.what, a.details) for a in report.actions] == [("skipped", {"reason": "session_locked"})]


def test_a_store_down_at_the_lock_compacts_anyway_with_a_warning() -> None:
    report, _, events = _locked_compaction("down")
    assert [a.what for a in report.actions] == ["compacted"]
    warned = [e for e in events if e["event"] == "ctxlife.compacting_without_lock"]
    assert [(e["log_level"], e["strategy"], e["session_id"], e["error"]) for e in warned] == [
        ("warning", "llm_summary", "s1", "StoreError")
    ]


def test_a_lock_release_that_fails_names_the_session_in_its_warning() -> None:
    report, _, events = _locked_compaction("release")
    assert [a.what for a in report.actions] == ["compacted"]
    warned = [e for e in events if e["event"] == "ctxlife.lock_release_failed"]
    assert [(e["strategy"], e["session_id"]) for e in warned] == [("llm_summary", "s1")]
