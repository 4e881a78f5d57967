"""llm_summary when its summarizer fails: the extractive summary, then truncation (the previous summary
stays), one error event per compaction, the model left alone after a failure, budgets kept.

Fast on purpose (`make mutate` runs these for every mutant of the fallback path): a scripted model
callable stands in for the summarizer model, which is a dependency here, not the thing under test.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
from strategy_helpers import split_model_keys
from structlog.testing import capture_logs

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import SUMMARY_PREFIX, inserted_text, is_summary, validate
from ctxlife.summarizers import ExtractiveSummarizer, register_summarizer, unregister_summarizer
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from ctxlife_strategies import llm_summary, summary_fold
from ctxlife_strategies.llm_summary import LLMSummary

#: After a model failure the model rests this long, or this many compactions (fixed since issue 43).
REST_SECONDS = LLMSummary.Options.retry_model_after_seconds
REST_COMPACTIONS = LLMSummary.Options.retry_model_after_compactions

WINDOW = 4000
MARKS = 24  # a summary message's tokens besides its text: the "History summary:" prefix and ctxlife's mark line


def rounds(start: int, count: int) -> list[dict[str, Any]]:
    """Rounds of a tool-calling conversation, each with a reservation code the summary should keep."""
    out: list[dict[str, Any]] = []
    for r in range(start, start + count):
        code = f"RS{r:03d}X"
        out.append(user(f"Please check reservation {code} for user mia_li_{3600 + r}; I paid ${100 + r}.50."))
        call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
        out.append(assistant(None, [call]))
        out.append(tool_result(call["id"], json.dumps({"reservation_id": code, "notes": "ok " * 60})))
        out.append(assistant(f"Reservation {code} is confirmed on flight HAT{100 + r}."))
    return out


def conversation(count: int = 12) -> list[dict[str, Any]]:
    return [system("You are an airline agent. Follow the policy."), *rounds(0, count)]


class Model:
    """A scripted summary model ``(messages, max_tokens) -> str``: each call takes the next behaviour
    (the last one repeats); an exception is raised, a callable is called, anything else returned."""

    def __init__(self, *behaviours: Any) -> None:
        self.behaviours = list(behaviours)
        self.calls: list[tuple[list[dict[str, Any]], int]] = []

    def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> Any:
        self.calls.append((messages, max_tokens))
        behaviour = self.behaviours[min(len(self.calls), len(self.behaviours)) - 1]
        if isinstance(behaviour, BaseException):
            raise behaviour
        return behaviour(messages, max_tokens) if callable(behaviour) else behaviour


def host_with(model: Any = None, **options: Any) -> Host:
    options, table = split_model_keys(options)
    settings = settings_from_dict({"strategies": ["llm_summary"], "llm_summary": options, "model": table})
    return Host(settings, context_window=WINDOW, summary_model=model)


def compact(host: Host, messages: list[dict[str, Any]]) -> tuple[Any, Any, list[dict[str, Any]]]:
    """(report, the compaction's action, the summary_failed events) of one managed call."""
    with capture_logs() as logs:
        report = host.manage(messages)
    assert report.failures == []
    action = next((a for a in report.actions if a.what in ("compacted", "truncated")), None)
    return report, action, [e for e in logs if e["event"] == "ctxlife.summary_failed"]


class _Clock:
    """llm_summary's (and its fold's) ``time``, with ``monotonic`` moved on by ``later()``: the model's rest
    (seconds) passes without the test waiting for it. Only those modules' name is replaced; all else is ``time``."""

    def __init__(self) -> None:
        self.offset = 0.0

    def later(self, seconds: float) -> None:
        self.offset += seconds

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(llm_summary, "time", fake)
    # The fold's pace check reads the time the compaction ended (llm_summary's clock): the same clock, or
    # a slow first compaction under load (over FOLD_AFTER_SECONDS) looked faster than the seconds passed.
    monkeypatch.setattr(summary_fold, "time", fake)
    return fake


@pytest.fixture
def broken_extractive():
    """The offline extractive summarizer failing too (registered before the host is made)."""

    class Broken:
        def summarize(self, request: Any) -> str:
            raise ValueError("extractive summarizer broken")

    register_summarizer("extractive", lambda **kw: Broken(), replace=True)
    yield
    register_summarizer("extractive", ExtractiveSummarizer, replace=True)


@pytest.mark.parametrize(
    "reply, error_type",
    [
        (RuntimeError("model down"), "RuntimeError"),
        ("", "SummaryFailed"),
        ("   \n ", "SummaryFailed"),
        (SUMMARY_PREFIX, "SummaryFailed"),  # only the marker: nothing summarized
        (42, "ModelError"),  # not text
    ],
    ids=["error", "empty", "blank", "marker-only", "not-text"],
)
def test_a_failed_model_summary_falls_back_to_the_extractive_summary_with_one_error_event(reply, error_type):
    host = host_with(Model(reply))
    original = conversation()
    messages = list(original)
    report, action, events = compact(host, messages)
    assert action.what == "compacted" and action.details["summarizer"] == "extractive"
    assert action.details["fallback_from"] == "agent_llm"
    assert is_summary(messages[1]) and "RS0" in messages[1]["content"]
    assert messages[0] is original[0] and messages[-8:] == original[-8:] and validate(messages) == []
    assert report.tokens_after < report.tokens_before
    assert len(events) == 1
    event = events[0]
    assert (event["log_level"], event["fallback"], event["summarizer"]) == ("error", "extractive", "agent_llm")
    assert event["error_type"] == error_type and event["evicted_messages"] == action.details["evicted_messages"]


@pytest.mark.parametrize(
    "reply, said",
    [
        ("  ", "returned an empty summary"),
        (f"{SUMMARY_PREFIX}  ", "returned an empty summary"),
        (None, "returned NoneType, not text"),
        (42, "returned int, not text"),
    ],
    ids=["blank", "marker-only", "none", "int"],
)
def test_a_registered_summarizer_answering_nothing_usable_falls_back_too(reply, said):
    class Blank:
        def summarize(self, request: Any) -> Any:
            return reply

    register_summarizer("blank", lambda **kw: Blank(), replace=True)
    try:
        messages = conversation()
        _, action, events = compact(host_with(summarizer="blank"), messages)
    finally:
        unregister_summarizer("blank")
    assert action.details["summarizer"] == "extractive" and action.details["fallback_from"] == "blank"
    assert len(events) == 1 and events[0]["error_type"] == "SummaryFailed"
    assert events[0]["error"] == f"SummaryFailed: summarizer {said}"


def test_a_model_summary_is_used_as_written_with_the_marker_once_and_no_error():
    model = Model(f"{SUMMARY_PREFIX} Goal: check reservations RS000X to RS011X for mia_li.")
    messages = conversation()
    _, action, events = compact(host_with(model), messages)
    assert action.details["summarizer"] == "agent_llm" and "fallback_from" not in action.details
    assert events == [] and len(model.calls) == 1
    body = inserted_text(messages[1]["content"])
    assert body.startswith(f"{SUMMARY_PREFIX} Goal: check reservations") and body.count(SUMMARY_PREFIX) == 1


def test_after_a_model_failure_the_model_is_left_alone_for_a_while(clock):
    model = Model(RuntimeError("model down"), "Goal: check reservations.")
    host = host_with(model)
    messages = conversation()
    compact(host, messages)
    messages += rounds(12, 10)
    clock.later(REST_SECONDS - 1)  # still resting (and the first compaction without it)
    _, action, events = compact(host, messages)
    assert len(model.calls) == 1  # not asked while resting
    assert action.details["summarizer"] == "extractive" and action.details["fallback_from"] == "agent_llm"
    assert len(events) == 1
    assert re.fullmatch(
        r"SummaryFailed: not asked: it failed \d\d:\d\d:\d\d: RuntimeError: model down", events[0]["error"]
    )


def test_once_the_rest_seconds_passed_the_model_is_asked_again_and_used(clock):
    model = Model(RuntimeError("model down"), "Goal: check RS012X on.", "Goal: check RS015X and RS025X on.")
    host = host_with(model)
    messages = conversation()
    _, first, _ = compact(host, messages)
    assert first.details["summarizer"] == "extractive"
    clock.later(REST_SECONDS)  # the first compaction after the failure: only the seconds end the rest
    for start in (12, 22):  # a success after a failure, then another compaction
        messages += rounds(start, 10)
        _, action, events = compact(host, messages)
        assert action.details["summarizer"] == "agent_llm" and events == []
    assert len(model.calls) == 3
    # The running summary: the model is given the previous one to fold the new messages into.
    assert "Goal: check RS012X on." in json.dumps(model.calls[2][0])


def test_a_fast_loop_asks_the_model_again_after_the_rest_compactions(clock):
    # Compactions seconds apart: the rest's seconds alone would leave the model out for the whole run.
    def carrying_a_fact(messages: list[dict[str, Any]], max_tokens: int) -> str:
        return "Goal: check " + max(re.findall(r"RS\d{3}X", json.dumps(messages))) + "."

    assert REST_COMPACTIONS == 3
    model = Model(RuntimeError("model down"), carrying_a_fact)
    host = host_with(model)
    messages = conversation()
    used = []
    for compaction in range(1, 7):
        _, action, _ = compact(host, messages)
        used.append(action.details["summarizer"])
        messages += rounds(12 * compaction, 10)
        clock.later(1)  # a fast loop: six compactions in a few seconds, far within the rest's seconds
    # the failure, 3 compactions without the model, then the model each time (a success ends the rest)
    assert used == ["extractive"] * 4 + ["agent_llm"] * 2
    assert len(model.calls) == 1 + 2


def test_a_model_slower_than_timeout_seconds_is_given_up_and_never_waited_for_twice(clock):
    release = threading.Event()  # the model answers only once the test is done with it
    answered = threading.Event()

    def held(messages: list[dict[str, Any]], max_tokens: int) -> str:
        release.wait(60)  # the cap bounds a failing test only
        answered.set()
        return "Goal: late."

    model = Model(held)
    host = host_with(model, timeout_seconds=0.2)
    threads = set(threading.enumerate())
    try:
        messages = conversation()
        _, action, events = compact(host, messages)
        assert model.calls and not answered.is_set()  # the call returned while the model was still held
        hung = set(threading.enumerate()) - threads
        assert hung and all(t.daemon for t in hung)  # a hung model call never keeps the program from exiting
        assert action.details["summarizer"] == "extractive"
        assert "did not answer within 0.2 s" in events[0]["error"]
        # The hung call still runs: once the model's rest is over, the next compaction does not start
        # another one, nor wait.
        clock.later(REST_SECONDS)
        messages += rounds(12, 10)
        _, action, events = compact(host, messages)
        assert action.what == "compacted" and action.details["summarizer"] == "extractive"
        assert len(model.calls) == 1
        assert events[0]["error"] == "SummaryFailed: the previous summary has not finished yet (it timed out)"
        assert not answered.is_set()
    finally:
        release.set()


def test_when_the_extractive_summary_fails_too_the_span_is_truncated_and_the_previous_summary_stays(
    broken_extractive,
):
    model = Model("Goal: check reservations RS000X to RS011X for mia_li.", RuntimeError("model down"))
    host = host_with(model)
    messages = conversation()
    first_user = messages[1]
    _, action, _ = compact(host, messages)
    assert action.details["summarizer"] == "agent_llm"
    summary = messages[1]
    messages += rounds(12, 10)
    before = list(messages)
    report, action, events = compact(host, messages)
    assert action.what == "truncated"
    assert action.details == {
        "reason": "summary_failed",
        "summarizer": "agent_llm",
        "evicted_messages": action.details["evicted_messages"],
        "error": "RuntimeError",
    }
    evicted = len(before) - len(messages)
    assert action.details["evicted_messages"] == evicted > 0
    # system, the previous summary (kept as it was), the pinned task, then the recent rounds verbatim
    assert messages[:3] == [before[0], summary, first_user] and is_summary(messages[1])
    assert messages[3:] == before[3 + evicted :] and validate(messages) == []
    assert report.tokens_after < report.tokens_before
    assert len(events) == 1
    event = events[0]
    assert (event["fallback"], event["summarizer"], event["error_type"]) == ("truncated", "agent_llm", "RuntimeError")
    assert event["error"] == "RuntimeError: model down | ValueError: extractive summarizer broken"
    assert event["evicted_messages"] == evicted


def test_with_the_extractive_summarizer_configured_a_failure_truncates_with_one_cause(broken_extractive):
    original = conversation()
    messages = list(original)
    report, action, events = compact(host_with(summarizer="extractive"), messages)
    assert action.what == "truncated" and action.details["summarizer"] == "extractive"
    assert action.details["error"] == "ValueError" and not any(is_summary(m) for m in messages)
    assert messages[:2] == original[:2] and messages[-8:] == original[-8:] and validate(messages) == []
    assert [e["error"] for e in events] == ["ValueError: extractive summarizer broken"]


def test_an_over_budget_model_summary_is_condensed_by_the_model_once():
    wordy = "\n".join(f"Line {i}: reservation RS{i:03d}X is confirmed for mia_li_{3600 + i}." for i in range(300))
    short = "Goal: reservations RS000X to RS011X confirmed for mia_li."
    model = Model(wordy, short)
    messages = conversation()
    _, action, events = compact(host_with(model), messages)
    assert action.details["summarizer"] == "agent_llm" and events == []
    assert len(model.calls) == 2
    (_, asked), (prompt, condensed_to) = model.calls
    assert "Shorten this summary" in prompt[-1]["content"] and condensed_to == int(asked * 0.8)
    assert inserted_text(messages[1]["content"]).startswith(f"{SUMMARY_PREFIX} {short}")


@pytest.mark.parametrize("condensed", [RuntimeError("model down"), "Other line: " * 5000], ids=["error", "longer"])
def test_a_summary_the_model_cannot_condense_is_cut_at_a_line_never_discarded(condensed):
    wordy = "\n".join(f"Line {i}: reservation RS{i:03d}X is confirmed for mia_li_{3600 + i}." for i in range(300))
    model = Model(wordy, condensed)
    messages = conversation()
    _, action, events = compact(host_with(model), messages)
    assert action.details["summarizer"] == "agent_llm" and events == [] and len(model.calls) > 1
    assert action.details["summary_tokens"] <= 600 + MARKS
    body = inserted_text(messages[1]["content"]).split("\n")
    assert body[0] == f"{SUMMARY_PREFIX} Line 0: reservation RS000X is confirmed for mia_li_3600."
    assert all(line.startswith("Line ") or "Key facts" in line or line.startswith("- ") for line in body[1:])


def test_the_extractive_fallback_is_never_condensed_by_the_model():
    condensed: list[int] = []

    class Wordy:
        fact_list = True

        def summarize(self, request: Any) -> str:
            return "\n".join(f"Line {i}: reservation RS{i:03d}X." for i in range(300))

        def condense(self, text: str, max_tokens: int) -> str:
            condensed.append(max_tokens)
            return "short"

    register_summarizer("extractive", lambda **kw: Wordy(), replace=True)
    try:
        messages = conversation()
        _, action, events = compact(host_with(Model(RuntimeError("model down"))), messages)
    finally:
        register_summarizer("extractive", ExtractiveSummarizer, replace=True)
    assert action.details["summarizer"] == "extractive" and action.details["summary_tokens"] <= 600 + MARKS
    assert inserted_text(messages[1]["content"]).startswith(f"{SUMMARY_PREFIX} Line 0:") and condensed == []


def test_the_key_facts_the_model_summary_lost_are_appended_within_the_budget():
    model = Model("Goal: the user checks reservations (RS005X).")
    messages = conversation()
    _, action, _ = compact(host_with(model, max_summary_tokens=200), messages)
    body = inserted_text(messages[1]["content"])
    assert body.startswith(f"{SUMMARY_PREFIX} Goal: the user checks reservations (RS005X).\nKey facts:")
    assert "RS000X" in body and action.details["summary_tokens"] <= 200
    # The model was asked for the prose only: 70% of the budget, the key facts take the rest.
    assert model.calls[0][1] == int(200 * 0.7)


def test_a_span_without_facts_gives_the_model_the_whole_budget_and_nothing_is_appended():
    chat = "let us talk about the weather in the valley and how the garden is doing this week. " * 6
    reply = "the garden is doing well and the weather stays mild and calm for now. " * 6
    messages = [system("You are a friendly companion.")]
    for _ in range(14):
        messages += [user(chat), assistant(reply)]
    model = Model("Goal: a calm chat about the garden and the weather.")
    _, action, events = compact(host_with(model, max_summary_tokens=200), messages)
    assert action.details["summarizer"] == "agent_llm" and events == []
    assert (
        inserted_text(messages[1]["content"]) == f"{SUMMARY_PREFIX} Goal: a calm chat about the garden and the weather."
    )
    assert model.calls[0][1] == 200  # no key facts to make room for


def test_a_lone_surrogate_in_a_model_summary_cannot_break_the_request():
    messages = conversation()
    compact(host_with(Model("Goal: check the reservation \ud800 of mia_li.")), messages)
    assert json.dumps(messages, ensure_ascii=False).encode("utf-8")


def test_the_error_event_names_the_strategy_and_session_and_shows_content_only_with_log_content():
    leak = "Please check reservation RS003X for user mia_li_3603"  # a user message's own words
    for log_content in (False, True):
        settings = settings_from_dict({"strategies": ["llm_summary"], "log_content": log_content})
        host = Host(settings, context_window=WINDOW, summary_model=Model(RuntimeError(f"bad prompt: {leak}")))
        _, _, events = compact_in(host, conversation(), session_id="s9")
        assert (events[0]["strategy"], events[0]["session_id"]) == ("llm_summary", "s9")
        assert (leak in events[0]["error"]) is log_content


def compact_in(host: Host, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[Any, Any, list[dict[str, Any]]]:
    with capture_logs() as logs:
        report = host.before_llm_call(messages, **kwargs)
    assert report.failures == []
    action = next((a for a in report.actions if a.what in ("compacted", "truncated")), None)
    return report, action, [e for e in logs if e["event"] == "ctxlife.summary_failed"]


def test_a_summarizer_that_keeps_the_facts_itself_gets_the_whole_budget():
    asked: list[int] = []

    class Keeper:
        fact_list = True

        def summarize(self, request: Any) -> str:
            asked.append(request.max_tokens)
            return "Goal: the user checks reservations."

    register_summarizer("keeper", lambda **kw: Keeper(), replace=True)
    try:
        compact(host_with(summarizer="keeper", max_summary_tokens=200), conversation())
    finally:
        unregister_summarizer("keeper")
    assert asked == [200]


def test_the_key_facts_list_holds_only_what_the_summary_lost():
    model = Model("Goal: the user checks reservation RS000X and others.")
    messages = conversation()
    compact(host_with(model, max_summary_tokens=200), messages)
    body = inserted_text(messages[1]["content"])
    assert body.count("RS000X") == 1 and "RS001X" in body.split("Key facts:")[1]


def test_a_summarizer_without_condense_has_its_long_summary_cut_not_replaced():
    class Plain:
        def summarize(self, request: Any) -> str:
            return "\n".join(f"Line {i}: reservation RS{i:03d}X." for i in range(300))

    register_summarizer("plain", lambda **kw: Plain(), replace=True)
    try:
        messages = conversation()
        _, action, events = compact(host_with(summarizer="plain"), messages)
    finally:
        unregister_summarizer("plain")
    assert action.details["summarizer"] == "plain" and events == []
    assert inserted_text(messages[1]["content"]).startswith(f"{SUMMARY_PREFIX} Line 0:")


def test_while_the_model_rests_its_own_failure_is_named_not_the_fallbacks(broken_extractive):
    host = host_with(Model(RuntimeError("model down")))
    messages = conversation()
    _, action, _ = compact(host, messages)
    assert action.what == "truncated"
    messages += rounds(12, 10)
    _, action, events = compact(host, messages)
    assert action.what == "truncated" and len(events) == 1
    cause = events[0]["error"].split(" | ")[0]
    assert re.fullmatch(r"SummaryFailed: not asked: it failed \d\d:\d\d:\d\d: RuntimeError: model down", cause)


def _one_long_task(fmt: str) -> list[dict[str, Any]]:
    """Two user turns; the first one's many tool steps fill the window (no round can be cut off)."""
    out: list[dict[str, Any]] = [user("Check every reservation of mia_li and tell me which are unpaid.")]
    for r in range(24):
        code, notes = f"RS{r:03d}X", json.dumps({"reservation": f"RS{r:03d}X", "notes": "ok " * 60})
        if fmt == "anthropic":
            use = {"type": "tool_use", "id": f"toolu_{r}", "name": "get_reservation", "input": {"id": code}}
            out.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": f"toolu_{r}", "content": notes}
            out.append({"role": "user", "content": [result]})
        else:
            call = tool_call("get_reservation", {"id": code}, call_id=f"call_{r}")
            out += [assistant(None, [call]), tool_result(call["id"], notes)]
    out += [assistant("All checked."), user("And which of them fly on Friday?")]
    return out


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_a_truncation_inside_a_turn_keeps_the_task_first_and_whole_tool_steps(broken_extractive, fmt):
    """Without a summary the span is cut off inside the one long turn: the task (the first user
    message, never summarized) still opens the list, so an Anthropic conversation opens with a user
    turn, and no tool result is kept without its call."""
    messages = _one_long_task(fmt)
    before = list(messages)
    _, action, _ = compact(host_with(Model(RuntimeError("model down"))), messages)
    assert action.what == "truncated" and validate(messages) == []
    assert messages[0] is before[0] and messages[-1] == before[-1] and 2 < len(messages) < len(before)
    assert messages[1]["role"] == "assistant"  # a tool step's call, never its result alone


def test_a_model_summary_carrying_none_of_the_spans_facts_is_replaced_by_the_extractive_one():
    # Issue 39: "Sure! Here is the summary." replaced a span whose facts were then gone.
    model = Model("Sure! Here is the summary.", "Goal: check RS015X and RS025X on.")
    host = host_with(model)
    messages = conversation()
    _, action, events = compact(host, messages)
    assert action.details["summarizer"] == "extractive" and action.details["fallback_from"] == "agent_llm"
    assert len(events) == 1 and events[0]["error"].startswith(
        "SummaryLacksFacts: the summary carries none of the 38 facts of the span it would replace (amount, code, id)"
    )
    body = inserted_text(messages[1]["content"])
    assert "Sure!" not in body and "RS005X" in body  # the span's facts are kept
    # An unusable reply is not a model failure: the next compaction asks it again, and a summary
    # carrying one of its span's facts is used (the ledger appends the others).
    messages += rounds(12, 20)
    _, action, events = compact(host, messages)
    assert action.details["summarizer"] == "agent_llm" and events == [] and len(model.calls) > 1
    assert "Goal: check RS015X and RS025X on." in messages[1]["content"]
