"""The background fold of ``llm_summary`` (issue 39), with a summary model the test holds and releases.

The model blocks until the test answers it (or makes it fail), and the test waits for the summary
thread to end before the next call: no sleeps, so what each compaction puts in is decided by the
test, not by the machine's load. The conversation is benchmarks/tool_heavy.py's (a 4,000-token
window, compactions every few calls). What a user sees: the list handed back before each call (the
summary message in it), what the model was sent, the compactions' reports and the error events.
"""

from __future__ import annotations

import json
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.config import settings_from_dict
from ctxlife.facts import FACT_LIST_HEADER
from ctxlife.host import Host
from ctxlife.messages import validate
from ctxlife.tokens import TokenCounter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tool_heavy  # noqa: E402 - the scenario test_compaction_pace.py and the real-model benchmark use

CODE = re.compile(r"RS\d{3}X")
FLIGHT = re.compile(r"HAT\d{3}")  # in a turn's tool result and reply only (a summary names codes)
SYSTEM = {"role": "system", "content": "You are an airline agent."}
WAIT = 30.0  # seconds: only bounds a failing test (a model never asked, a thread that never ends)


class Raw(str):
    """A model reply given as is (others get the newest reservation code of the prompt appended: a fact of
    the span, so the reply is used)."""


class HeldModel:
    """A summary model that records what it is sent and answers only when the test says what to answer
    (:meth:`answer`), or at once when ``held`` is False."""

    def __init__(self, held: bool = True) -> None:
        self.held = held
        self.prompts: list[str] = []  # each call's messages, as JSON
        self._answers: queue.Queue[Any] = queue.Queue()
        self._asked = threading.Semaphore(0)
        self.closed = False

    def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        prompt = json.dumps(messages, ensure_ascii=False)
        self.prompts.append(prompt)
        self._asked.release()
        answer = self._answers.get(timeout=WAIT) if self.held and not self.closed else None
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Raw):
            return str(answer)
        codes = CODE.findall(prompt)
        return f"{answer or 'Goal: check reservations.'} Last checked: {max(codes) if codes else 'none'}."

    def wait_asked(self, times: int = 1) -> None:
        """Wait until the model has been asked ``times`` more times."""
        for _ in range(times):
            assert self._asked.acquire(timeout=WAIT), f"the model was not asked (asked {len(self.prompts)} times)"

    def answer_next(self, text: str | BaseException | None = None) -> None:
        """The answer of the model's next call, given now (a summary that asks the model twice: the answer
        to its second call is given before the test waits for the thread)."""
        self._answers.put(text)

    def answer(self, text: str | BaseException | None = None) -> None:
        """Let the call the model is in answer ``text`` (see :class:`Raw`), and wait until the summary thread
        has handed it over."""
        self._answers.put(text)
        finish_summary_threads()

    def close(self) -> None:
        self.closed = True
        for _ in range(8):
            self._answers.put(None)


def summary_threads() -> list[threading.Thread]:
    """The background summaries running now."""
    return [t for t in threading.enumerate() if t.name == "ctxlife-background-summary" and t.is_alive()]


def finish_summary_threads() -> None:
    """Wait until no background summary thread is running (each ends once its model call returned)."""
    for thread in threading.enumerate():
        if thread.name == "ctxlife-background-summary":
            thread.join(WAIT)
            assert not thread.is_alive(), "a background summary did not finish"


@pytest.fixture
def held() -> Iterator[Any]:
    made: list[HeldModel] = []

    def make(**kwargs: Any) -> HeldModel:
        made.append(HeldModel(**kwargs))
        return made[-1]

    yield make
    for model in made:
        model.close()  # no summary thread outlives its test
    finish_summary_threads()


class Agent:
    """benchmarks/tool_heavy.py's conversation, one model call at a time through one host (two calls per
    turn: after the user message, and after the tool call and its result)."""

    def __init__(self, model: Any, turns: int = 40, timeout_seconds: float | None = None, **options: Any) -> None:
        config: dict[str, Any] = {"strategies": ["llm_summary"], "llm_summary": options}
        if timeout_seconds is not None:
            config["model"] = {"timeout_seconds": timeout_seconds}
        settings = settings_from_dict(config)
        self.host = Host(settings, context_window=tool_heavy.WINDOW, summary_model=model)
        self.messages: list[dict[str, Any]] = [dict(SYSTEM)]
        self.steps = [
            step for turn in tool_heavy.conversation(turns) for step in ((turn[:1], []), (turn[1:3], turn[3:]))
        ]
        self.at = 0

    def call(self) -> dict[str, Any] | None:
        """One model call: the details of its compaction, if it compacted."""
        before, after = self.steps[self.at]
        self.at += 1
        self.messages += before
        report = self.host.manage(self.messages)
        assert report.failures == [] and validate(self.messages) == []
        self.messages += after
        compacted = [a.details for a in report.actions if a.what == "compacted"]
        return compacted[0] if compacted else None

    def until_compacted(self) -> dict[str, Any]:
        """Calls until one compacts: that compaction's details."""
        while self.at < len(self.steps):
            details = self.call()
            if details is not None:
                return details
        raise AssertionError("no compaction in the rest of the conversation")

    def summary(self) -> str:
        """The text of the summary message in the list (the one ctxlife put in)."""
        texts = [str(m["content"]) for m in self.messages[1:] if m["role"] == "system"]
        assert len(texts) == 1, texts
        return texts[0]

    def kept_flights(self) -> set[str]:
        """The flights of the turns still in the list verbatim (tool results and replies)."""
        return {f for m in self.messages if m["role"] != "system" for f in FLIGHT.findall(str(m["content"]))}


def flights_in(text: str) -> set[str]:
    return set(FLIGHT.findall(text))


def prose_of(summary: str) -> str:
    """A summary's text before its "Key facts" list (what the model or the notes wrote)."""
    return summary.split(FACT_LIST_HEADER, 1)[0]


def gone_flights(agent: Agent) -> set[str]:
    """The flights of the turns handed to the agent so far that are no longer in its list verbatim."""
    seen = {f for before, after in agent.steps[: agent.at] for m in before + after for f in FLIGHT.findall(str(m))}
    return seen - agent.kept_flights()


def test_the_model_reads_each_evicted_span_once_in_the_background_and_its_summary_is_put_in_later(held):
    model = held()
    agent = Agent(model, background=True)
    first = agent.until_compacted()
    # The first compaction cannot wait for the model: extractive notes of everything it evicted.
    assert first["summarizer"] == "extractive" and first["reason"] == "summary_not_ready"
    assert first["model_read_messages"] == 0 and first["extractive_messages"] == first["evicted_messages"]
    # The model is asked at once, about the span just evicted (turns gone from the list).
    model.wait_asked()
    span = flights_in(model.prompts[0])
    assert span and not span & agent.kept_flights()
    # in half the model's share of the summary budget: 600 tokens x 0.7 (prose) x 0.5 (the running summary)
    assert "Write the updated summary in at most 210 tokens." in model.prompts[0]
    # with the span's facts to keep (its codes among them), and no previous summary yet
    facts = model.prompts[0].split("Facts to keep exactly as written:", 1)[1]
    assert CODE.findall(facts) and "Previous summary:" not in model.prompts[0]
    # One summary at a time: while it is pending, later compactions put in notes and never ask again.
    second = agent.until_compacted()
    assert second["summarizer"] == "extractive" and second["model_read_messages"] == 0
    assert second["extractive_messages"] == first["evicted_messages"] + second["evicted_messages"]
    assert len(model.prompts) == 1
    model.answer("MODEL-RUNNING-SUMMARY one.")
    # The next call takes the finished summary and starts the next one, over what was evicted since,
    # folding the running summary in (the model reads no message twice).
    assert agent.call() is None
    model.wait_asked()
    assert "MODEL-RUNNING-SUMMARY one." in model.prompts[1]
    later = flights_in(model.prompts[1])
    assert later and not later & span
    third = agent.until_compacted()
    # The next compaction puts in the model's summary, and notes of the messages it has not read.
    assert third["summarizer"] == "agent_llm" and "reason" not in third and "fallback_from" not in third
    assert third["model_read_messages"] == first["evicted_messages"]
    assert third["extractive_messages"] == second["evicted_messages"] + third["evicted_messages"]
    assert "MODEL-RUNNING-SUMMARY one." in agent.summary()
    model.answer("MODEL-RUNNING-SUMMARY two.")
    fourth = agent.until_compacted()
    assert fourth["summarizer"] == "agent_llm"
    assert fourth["model_read_messages"] == first["evicted_messages"] + second["evicted_messages"]
    text = agent.summary()
    assert "MODEL-RUNNING-SUMMARY two." in text and "MODEL-RUNNING-SUMMARY one." not in text


def test_the_notes_cover_every_evicted_message_the_model_has_not_read(held):
    model = held()
    agent = Agent(model, background=True)
    agent.until_compacted()
    read_by_model = gone_flights(agent)  # the span the model is asked about at once
    assert read_by_model and read_by_model <= flights_in(prose_of(agent.summary()))
    model.wait_asked()
    # While the model reads, the next compaction's notes hold this span and the one before (unread yet).
    agent.until_compacted()
    unread = gone_flights(agent)
    assert unread > read_by_model and unread <= flights_in(prose_of(agent.summary())), agent.summary()
    model.answer("MODEL-RUNNING-SUMMARY one.")
    assert agent.call() is None  # takes the model's summary
    model.wait_asked()
    # The model's summary, then notes of everything evicted since the span it read (the notes are made
    # again, of all of it, once the model read some).
    agent.until_compacted()
    unread = gone_flights(agent) - read_by_model
    text = prose_of(agent.summary())
    assert "MODEL-RUNNING-SUMMARY one." in text
    assert unread and unread <= flights_in(text), text


def test_the_background_model_reads_a_long_span_condensed_to_max_summary_tokens(held):
    model = held()
    agent = Agent(model, background=True)
    agent.until_compacted()
    model.wait_asked()
    count = TokenCounter(None).count_text
    evicted = [m for before, after in agent.steps[: agent.at] for m in before + after if m not in agent.messages]
    # the span the model is asked about is longer than max_summary_tokens (600): its tool results
    assert count(json.dumps(evicted)) > 900, evicted
    prompt = json.loads(model.prompts[0])[-1]["content"]
    transcript = prompt.split("New messages:", 1)[1].split("Facts to keep exactly as written:", 1)[0]
    assert flights_in(transcript) and count(transcript) <= 600, transcript


def test_a_background_summary_over_its_budget_is_shortened_by_the_model(held):
    model = held()
    agent = Agent(model, background=True)
    agent.until_compacted()
    model.wait_asked()
    # over the running summary's 210 tokens: the model is asked once for a shorter one
    model.answer_next(Raw("MODEL-LONG-SUMMARY " + " ".join(f"detail {i}." for i in range(300)) + " RS001X."))
    model.wait_asked()
    assert "Shorten this summary to at most" in model.prompts[1] and "MODEL-LONG-SUMMARY" in model.prompts[1]
    model.answer("MODEL-SHORTER-SUMMARY.")
    assert agent.call() is None
    details = agent.until_compacted()
    text = agent.summary()
    assert details["summarizer"] == "agent_llm" and "MODEL-SHORTER-SUMMARY." in text
    assert "MODEL-LONG-SUMMARY" not in text


def test_a_summary_made_of_a_list_edited_since_is_never_put_in(held):
    model = held()
    agent = Agent(model, background=True)
    agent.until_compacted()
    model.wait_asked()
    # The caller edits the list while the model reads the span the summary replaced: it drops ctxlife's
    # summary and says what it wants kept itself.
    at = next(i for i, m in enumerate(agent.messages) if i and m["role"] == "system")
    agent.messages[at] = {"role": "user", "content": "Correction: my only reservation is RS900X."}
    model.answer("STALE MODEL SUMMARY of the history before the correction.")
    for _ in range(3):
        details = agent.until_compacted()
        assert "STALE MODEL SUMMARY" not in agent.summary()
        assert details["summarizer"] == "extractive", details
    # The model reads the edited list's spans from scratch: its next prompt folds in no stale summary.
    model.wait_asked()
    assert "STALE MODEL SUMMARY" not in model.prompts[1]
    model.answer("FRESH MODEL SUMMARY.")
    assert agent.until_compacted()["summarizer"] == "agent_llm" and "FRESH MODEL SUMMARY" in agent.summary()


def test_a_summary_under_way_when_the_list_is_replaced_is_dropped_when_it_finishes(held):
    model = held()
    agent = Agent(model, turns=60, background=True)
    agent.until_compacted()
    model.wait_asked()
    # A new conversation in the same view while the model still reads the old one.
    agent.messages[:] = [dict(SYSTEM)]
    agent.until_compacted()
    model.answer("OLD CONVERSATION SUMMARY.")
    details = [agent.until_compacted() for _ in range(2)]
    assert "OLD CONVERSATION SUMMARY" not in json.dumps(agent.messages)
    assert all(d["summarizer"] == "extractive" for d in details), details
    # The model then reads the new conversation's spans (asked once the old summary was dropped).
    model.wait_asked()
    assert "OLD CONVERSATION SUMMARY" not in model.prompts[1]
    model.answer("NEW CONVERSATION SUMMARY.")
    assert agent.until_compacted()["summarizer"] == "agent_llm"
    assert "NEW CONVERSATION SUMMARY" in agent.summary()


def test_a_failed_background_summary_is_reported_once_and_asked_again_at_the_next_call(held, monkeypatch):
    from ctxlife_strategies.llm_summary import LLMSummary

    monkeypatch.setattr(LLMSummary.Options, "retry_model_after_seconds", 0.0)  # no rest: asked at the next call
    model = held()
    agent = Agent(model, background=True)
    first = agent.until_compacted()
    model.wait_asked()
    model.answer(ConnectionError("cannot connect to the summary model"))
    with capture_logs() as logs:
        assert agent.call() is None  # the call that finds the failure: reported, not asked again in it
    assert not summary_threads()  # (a summary started would be waiting for the held model)
    failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert len(failed) == 1 and "cannot connect" in failed[0]["error"], failed
    assert failed[0]["summarizer"] == "agent_llm" and failed[0]["fallback"] == "extractive"
    assert failed[0]["evicted_messages"] == first["evicted_messages"]
    assert len(model.prompts) == 1
    # The next call asks again, about the same messages (the notes still cover them).
    with capture_logs() as logs:
        agent.call()
    model.wait_asked()
    assert flights_in(model.prompts[1]) >= flights_in(model.prompts[0])
    assert not [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    model.answer("MODEL SUMMARY after the failure.")
    details = agent.until_compacted()
    assert details["summarizer"] == "agent_llm" and details["model_read_messages"] >= first["evicted_messages"]
    assert "MODEL SUMMARY after the failure." in agent.summary()


def test_a_failed_background_summary_rests_the_model(held):
    model = held()
    agent = Agent(model, background=True)  # the default rest: retry_model_after_seconds
    agent.until_compacted()
    model.wait_asked()
    model.answer(ConnectionError("cannot connect to the summary model"))
    with capture_logs() as logs:
        agent.until_compacted()
        agent.until_compacted()
    assert len([e for e in logs if e["event"] == "ctxlife.summary_failed"]) == 1
    assert len(model.prompts) == 1  # resting: not asked again


def test_a_reply_without_the_spans_facts_is_reported_and_asked_again_without_rest(held):
    model = held()
    agent = Agent(model, background=True)  # the default rest: only a model that failed rests
    agent.until_compacted()
    model.wait_asked()
    model.answer(Raw("Sure! Here is the summary."))  # none of the span's facts (its codes, names)
    with capture_logs() as logs:
        assert agent.call() is None
    failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert len(failed) == 1 and failed[0]["error_type"] == "SummaryLacksFacts", failed
    agent.call()
    model.wait_asked()  # a useless reply is asked again, with no rest
    model.answer()
    details = agent.until_compacted()
    assert details["summarizer"] == "agent_llm"
    assert "Here is the summary" not in agent.summary()


def test_a_model_far_behind_starts_again_from_the_summary_in_the_list(held, monkeypatch):
    from ctxlife_strategies import summary_fold

    # The evicted messages kept for the model to read are capped (a model down or far behind); a small
    # cap here: over it, the fold starts again from the summary in the list and the newest span.
    monkeypatch.setattr(summary_fold, "_MAX_PENDING_TOKENS", 2_000)
    model = held()
    agent = Agent(model, turns=60, background=True)
    unread = [agent.until_compacted()]
    texts = [prose_of(agent.summary())]
    model.wait_asked()  # and never answers: the model is far behind
    while len(unread) < 8 and not (
        len(unread) > 1 and unread[-1]["extractive_messages"] < unread[-2]["extractive_messages"]
    ):
        unread.append(agent.until_compacted())
        texts.append(prose_of(agent.summary()))
    counts = [(d["evicted_messages"], d["extractive_messages"]) for d in unread]
    # The unread messages grew with each compaction, then fell back to the newest span alone.
    assert unread[-1]["extractive_messages"] == unread[-1]["evicted_messages"] and len(unread) > 2, counts
    assert all(d["summarizer"] == "extractive" for d in unread)
    # ... folded into the summary the list had: it still leads (its first lines), then notes of that span.
    lead = next(line for line in texts[-2].splitlines() if FLIGHT.search(line))
    assert lead in texts[-1] and flights_in(texts[-1]) - flights_in(texts[-2]), texts[-1]
    # The summary the model was reading when it fell behind is dropped when it finishes.
    model.answer("FAR BEHIND SUMMARY.")
    agent.until_compacted()
    assert "FAR BEHIND SUMMARY" not in json.dumps(agent.messages)


class Clock:
    """``time`` as the strategy reads it: ``monotonic`` stands still (the agent's calls take no time) and
    ``perf_counter`` moves by the seconds the model spends on a summary: a model slower than the calls,
    without anyone waiting."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.agent = 0.0  # the seconds the agent's own calls took (the test moves it)

    def monotonic(self) -> float:
        return 1000.0 + self.agent

    def perf_counter(self) -> float:
        return 1000.0 + self.spent

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A :class:`Clock` that llm_summary and its fold read as ``time``."""
    from ctxlife_strategies import llm_summary, summary_fold

    paced = Clock()
    monkeypatch.setattr(llm_summary, "time", paced)
    monkeypatch.setattr(summary_fold, "time", paced)
    return paced


def test_a_foreground_model_slower_than_the_calls_is_waited_for_only_on_the_span_it_reads(clock):
    prompts: list[str] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        prompts.append(json.dumps(messages))
        clock.spent += 5.0  # 5 s per summary
        codes = CODE.findall(prompts[-1])
        return f"Running summary {len(prompts)}: last checked {max(codes)}." if codes else "Running summary."

    agent = Agent(model)
    first = agent.until_compacted()
    # The first compaction waits for a summary of everything (the model's pace is not known yet).
    assert first["summarizer"] == "agent_llm" and "extractive_messages" not in first
    assert len(prompts) == 1 and "Running summary 1" in agent.summary()
    second = agent.until_compacted()
    finish_summary_threads()
    # Slower than the calls: the model reads the older half of the span now (waited for), the newer half
    # goes in as notes and is read after this compaction (the next one waits only for that).
    assert second["summarizer"] == "agent_llm" and second["waited_seconds"] == 5.0  # the model's 5 s
    assert 0 < second["extractive_messages"] < second["evicted_messages"]
    assert second["model_read_messages"] == second["evicted_messages"] - second["extractive_messages"]
    assert "Running summary 2" in agent.summary()
    assert len(prompts) == 3 and "Running summary 2" in prompts[2]  # the newer half, started after it
    third = agent.until_compacted()
    finish_summary_threads()
    assert third["summarizer"] == "agent_llm"
    assert third["model_read_messages"] == second["evicted_messages"] + (
        third["evicted_messages"] - third["extractive_messages"]
    )
    assert "Running summary 4" in agent.summary() and len(prompts) == 5


def test_a_foreground_model_no_slower_than_the_calls_summarizes_everything_each_time(clock):
    prompts: list[str] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        prompts.append(json.dumps(messages))
        clock.spent += 5.0  # 5 s per summary; the calls between two compactions take 5 s too
        return f"Summary {len(prompts)}: last checked {max(CODE.findall(prompts[-1]))}."

    agent = Agent(model)
    compactions = []
    while len(compactions) < 3:
        details = agent.call()
        if details is not None:
            compactions.append(details)
            clock.agent += 5.0
    # Each compaction waits for one summary of everything it evicts (no running summary, no notes).
    assert all(d["summarizer"] == "agent_llm" and "extractive_messages" not in d for d in compactions), compactions
    assert len(prompts) == 3 and "Summary 3" in agent.summary()
    finish_summary_threads()
    assert len(prompts) == 3  # nothing started in the background


def test_a_foreground_model_taking_a_second_is_slower_than_calls_that_take_none(clock):
    from ctxlife_strategies import summary_fold

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        clock.spent += summary_fold.FOLD_AFTER_SECONDS  # a summary that takes 1 s: still waited for whole?
        return f"Summary: last checked {max(CODE.findall(json.dumps(messages)))}."

    agent = Agent(model)
    assert "extractive_messages" not in agent.until_compacted()
    # 1 s is not "a wait no one notices" (under it, always whole): the calls took none, so it folds
    assert "extractive_messages" in agent.until_compacted()
    finish_summary_threads()


def test_a_foreground_compaction_waits_for_the_model_at_most_timeout_seconds(clock):
    hung = threading.Event()  # set at the end: the model's call returns, no thread outlives the test
    calls: list[int] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        calls.append(1)
        if len(calls) > 1:
            hung.wait(WAIT)  # the model hangs from its second call on
        clock.spent += 5.0
        return f"Summary: last checked {max(CODE.findall(json.dumps(messages)))}."

    agent = Agent(model, timeout_seconds=0.5)
    try:
        agent.until_compacted()
        details = agent.until_compacted()  # folds: waits for the model's summary of the older half, in vain
        assert len(calls) == 2 and details["model_read_messages"] == 0
        assert details["extractive_messages"] == details["evicted_messages"]  # notes of all of it
    finally:
        hung.set()
        finish_summary_threads()


def test_a_foreground_model_slower_than_the_calls_that_goes_down_is_reported_once_by_each_compaction(
    monkeypatch, clock
):
    from ctxlife_strategies.llm_summary import LLMSummary

    monkeypatch.setattr(LLMSummary.Options, "retry_model_after_seconds", 0.0)  # no rest: every compaction asks
    down = threading.Event()
    prompts: list[str] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        prompts.append(json.dumps(messages))
        if down.is_set():
            raise ConnectionError("cannot connect to the summary model")
        clock.spent += 5.0
        return f"Summary {len(prompts)}: last checked {max(CODE.findall(prompts[-1]))}."

    agent = Agent(model)
    agent.until_compacted()
    assert "extractive_messages" in agent.until_compacted()  # folding: the model is slower than the calls
    finish_summary_threads()
    down.set()
    for _ in range(3):
        with capture_logs() as logs:
            details = agent.until_compacted()
            finish_summary_threads()
        failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
        assert details["summarizer"] == "extractive" and details["fallback_from"] == "agent_llm", details
        assert "reason" not in details  # the model failed: not "not ready"
        assert len(failed) == 1 and "cannot connect" in failed[0]["error"], failed


def test_a_foreground_fold_whose_model_failed_in_the_same_call_is_not_asked_again_in_it(monkeypatch):
    from ctxlife_strategies import llm_summary, summary_fold
    from ctxlife_strategies.llm_summary import LLMSummary

    monkeypatch.setattr(LLMSummary.Options, "retry_model_after_seconds", 0.0)  # no rest: only the call decides

    asked_third = threading.Event()

    def agent_folding(fail: threading.Event | None) -> tuple[Agent, list[str], dict[str, Any]]:
        """An agent past its second compaction (a fold), the model reading the newer half of its span;
        with ``fail``, that summary fails once ``fail`` is set (and the model is down from then on)."""
        clock = Clock()
        monkeypatch.setattr(llm_summary, "time", clock)
        monkeypatch.setattr(summary_fold, "time", clock)
        prompts: list[str] = []

        def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
            prompts.append(json.dumps(messages))
            if fail is not None and len(prompts) >= 3:
                asked_third.set()
                fail.wait(WAIT)
                raise ConnectionError("cannot connect to the summary model")
            clock.spent += 5.0
            return f"Summary {len(prompts)}: last checked {max(CODE.findall(prompts[-1]))}."

        agent = Agent(model)
        agent.until_compacted()
        second = agent.until_compacted()
        assert "extractive_messages" in second  # folding: the model is slower than the calls
        return agent, prompts, second

    # The call that compacts next (the same list whatever the model answers in the background) ...
    rehearsal, _, _ = agent_folding(None)
    finish_summary_threads()
    rehearsal.until_compacted()
    compacting = rehearsal.at - 1
    # ... is the one that finds the model's summary failed.
    fail = threading.Event()
    agent, prompts, second = agent_folding(fail)
    try:
        while agent.at < compacting:
            assert agent.call() is None
        assert asked_third.wait(WAIT) and len(prompts) == 3  # the newer half of the last span, under way
        fail.set()
        finish_summary_threads()
        with capture_logs() as logs:
            details = agent.call()
    finally:
        fail.set()
        finish_summary_threads()
    failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert details is not None and len(failed) == 1 and "cannot connect" in failed[0]["error"], (details, failed)
    # Reported once, and the model is not asked again in this call: notes of what it did not read
    assert len(prompts) == 3
    assert details["summarizer"] == "extractive" and details["fallback_from"] == "agent_llm", details
    assert "reason" not in details  # the model failed: not "not ready"
    assert details["extractive_messages"] == second["extractive_messages"] + details["evicted_messages"], details


def test_a_foreground_model_that_fails_at_once_is_asked_for_everything_at_each_compaction(monkeypatch, clock):
    from ctxlife_strategies.llm_summary import LLMSummary

    monkeypatch.setattr(LLMSummary.Options, "retry_model_after_seconds", 0.0)  # no rest: every compaction asks
    asked: list[int] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        asked.append(1)
        raise ConnectionError("cannot connect to the summary model")  # at once: its pace is never known

    agent = Agent(model)
    for n in range(1, 4):
        with capture_logs() as logs:
            details = agent.until_compacted()
        # never folding (no pace measured): the extractive summary of everything, one error event each
        assert details["summarizer"] == "extractive" and details["fallback_from"] == "agent_llm", details
        assert "extractive_messages" not in details and len(asked) == n
        assert len([e for e in logs if e["event"] == "ctxlife.summary_failed"]) == 1


def test_a_foreground_model_that_fails_after_a_second_is_slow_and_the_next_compaction_folds(monkeypatch, clock):
    from ctxlife_strategies import summary_fold
    from ctxlife_strategies.llm_summary import LLMSummary

    monkeypatch.setattr(LLMSummary.Options, "retry_model_after_seconds", 0.0)  # no rest: the pace decides
    asked: list[int] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        asked.append(1)
        clock.spent += summary_fold.FOLD_AFTER_SECONDS  # each answer (or failure) takes exactly 1 s
        if len(asked) == 1:
            raise TimeoutError("the summary model timed out")  # a time-out: slow, not down
        return f"Summary {len(asked)}: last checked {max(CODE.findall(json.dumps(messages)))}."

    agent = Agent(model)
    first = agent.until_compacted()
    assert first["summarizer"] == "extractive" and first["fallback_from"] == "agent_llm" and len(asked) == 1
    second = agent.until_compacted()
    finish_summary_threads()
    # The failed call's second is the model's pace: slower than the calls, so this compaction folds
    # (a model failing at once is asked for everything: the test above).
    assert "extractive_messages" in second and second["summarizer"] == "agent_llm", second


def test_background_compaction_without_a_model_summarizes_everything_at_once() -> None:
    agent = Agent(None, background=True)  # no summary model: the extractive summarizer
    details = agent.until_compacted()
    # No running summary and no notes: the extractive summary of the whole span, nothing left to a thread.
    assert details["summarizer"] == "extractive" and "fallback_from" not in details, details
    assert "extractive_messages" not in details and "model_read_messages" not in details, details
    assert not summary_threads()


def test_the_model_is_asked_to_keep_the_facts_of_the_summary_it_folds_in(clock):
    # the clock: the model takes no time, each compaction is one summary of everything
    prompts: list[str] = []

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        prompts.append(str(messages[-1]["content"]))
        return f"Summary {len(prompts)}: the agent checks reservations."  # prose naming no code

    agent = Agent(model)
    agent.until_compacted()
    second = agent.until_compacted()
    assert len(prompts) == 2 and "extractive_messages" not in second
    earlier = set(CODE.findall(prompts[0].split("Facts to keep exactly as written:")[0]))
    span, facts = prompts[1].split("New messages:")[1].split("Facts to keep exactly as written:")
    carried = earlier - set(CODE.findall(span))
    assert carried  # codes of the first span only, which the model's own summary does not name
    # The facts list the model is asked to keep holds them (from the first summary's ledger).
    assert carried & set(CODE.findall(facts)), (carried, facts)


def test_a_restarted_app_folds_from_the_summary_it_finds_in_the_list(held):
    agent = Agent(held(), background=True)
    for _ in range(2):
        agent.until_compacted()
    found = agent.summary()
    first_line = found.splitlines()[1]  # the first line of its text, under ctxlife's header
    assert "RS0" in first_line, found
    # Another process takes the list over (a restart): it knows nothing of the fold that wrote the summary.
    model = held()
    restarted = Agent(model, background=True)
    restarted.messages, restarted.steps, restarted.at = agent.messages, agent.steps, agent.at
    details = restarted.until_compacted()
    assert details["summarizer"] == "extractive" and details["model_read_messages"] == 0
    # the summary it found leads the new one (then notes of the span just evicted) ...
    assert first_line in restarted.summary()
    assert details["extractive_messages"] == details["evicted_messages"]
    # ... and the model folds it into its first summary of the new span
    model.wait_asked()
    assert first_line in model.prompts[0]


def test_a_restarted_app_keeps_a_long_summary_it_finds_to_half_its_budget_and_notes_the_new_span(held):
    agent = Agent(held(), summarizer="extractive")  # a foreground summary filling its budget
    for _ in range(2):
        agent.until_compacted()
    found = prose_of(agent.summary())
    restarted = Agent(held(), background=True)
    restarted.messages, restarted.steps, restarted.at = agent.messages, agent.steps, agent.at
    before = gone_flights(restarted)
    restarted.until_compacted()
    new_span = gone_flights(restarted) - before
    text = prose_of(restarted.summary())
    lines = [line for line in found.splitlines() if FLIGHT.search(line)]
    # the summary found leads, its first lines kept and its last ones cut (half the budget) ...
    assert lines[0] in text and lines[-1] not in text, text
    # ... and the notes of the span just evicted have the rest: every turn of it is in them
    assert new_span and new_span <= flights_in(text), text


def test_a_foreground_model_resting_after_a_failed_fold_names_that_failure(clock):
    # the clock's monotonic time stands still: the model rests until the test ends
    down = threading.Event()

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        if down.is_set():
            raise ConnectionError("cannot connect to the summary model")
        clock.spent += 5.0
        return f"Summary: last checked {max(CODE.findall(json.dumps(messages)))}."

    agent = Agent(model)
    agent.until_compacted()
    down.set()
    with capture_logs() as logs:
        agent.until_compacted()  # folds: the model's summary of the older half fails
        finish_summary_threads()
    assert [e["error_type"] for e in logs if e["event"] == "ctxlife.summary_failed"] == ["ConnectionError"]
    with capture_logs() as logs:
        details = agent.until_compacted()  # resting: not asked, and the event says why
    failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert details["summarizer"] == "extractive" and len(failed) == 1, failed
    assert "not asked: it failed" in failed[0]["error"] and "ConnectionError: cannot connect" in failed[0]["error"]
