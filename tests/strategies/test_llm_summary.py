"""llm_summary: trigger, target, what is kept, running summary, fact ledger, failure modes."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StrategyOptionsError
from ctxlife.host import Host
from ctxlife.messages import SUMMARY_PREFIX, inserted_text, is_inserted, is_summary, is_system, mark_inserted, validate
from ctxlife.summarizers import register_summarizer, unregister_summarizer
from ctxlife.testing import assistant, react_action, react_final, scripted_llm, system, tool_call, tool_result, user

sys.path.insert(0, str(Path(__file__).parent))
from fake_openai import openai_server, text_reply  # noqa: E402
from strategy_helpers import split_model_keys  # noqa: E402

from ctxlife_strategies.llm_summary import LLMSummary, _partition  # noqa: E402

WINDOW = 4000


def settings(**options):
    options, table = split_model_keys({"summarizer": "extractive", **options})
    options.pop("api", None)  # the route follows base_url (issue 43)
    return settings_from_dict({"strategies": ["llm_summary"], "llm_summary": options, "model": table})


def chat(rounds: int, words: int = 60):
    """A native tool-calling conversation with facts in user turns and tool results."""
    messages = [system("You are an airline agent. Follow the policy.")]
    for r in range(rounds):
        code = f"RS{r:03d}X"
        messages.append(
            user(
                f"Please check reservation {code} for user mia_li_{3600 + r}; "
                f"I paid ${100 + r}.50 on 2024-05-{10 + r % 18:02d}."
            )
        )
        call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
        messages.append(assistant(None, [call]))
        result = {
            "reservation_id": code,
            "flights": [{"flight_number": f"HAT{100 + r}", "date": "2024-05-20"}],
            "notes": "ok " * words,
        }
        messages.append(tool_result(call["id"], json.dumps(result)))
        messages.append(assistant(f"Reservation {code} is confirmed on flight HAT{100 + r}."))
    return messages


def compact(messages, host):
    report = host.manage(messages)
    return report, next((a for a in report.actions if a.what in {"compacted", "truncated"}), None)


def test_no_action_below_the_threshold_and_compaction_above_it_reaches_the_target():
    host = Host(settings(), context_window=WINDOW)
    messages = chat(2)
    assert host.manage(messages).acted == []
    messages = chat(12)
    before = host.counter().count_messages(messages)
    assert before > 0.4 * WINDOW
    report, action = compact(messages, host)
    assert action is not None and action.what == "compacted"
    assert report.tokens_after <= 0.25 * WINDOW + 50  # the target, within one round's granularity
    assert action.details["tokens_before"] == before and action.details["summarizer"] == "extractive"
    assert validate(messages) == []


def test_system_messages_pinned_task_and_last_rounds_stay_verbatim():
    host = Host(settings(keep_rounds=2), context_window=WINDOW)
    original = chat(12)
    messages = list(original)
    compact(messages, host)
    assert messages[0] is original[0]
    assert is_summary(messages[1]) and messages[1]["role"] == "system"
    assert messages[2] is original[1]  # the first user message is pinned
    assert messages[-8:] == original[-8:]  # the last two rounds, whole units, untouched
    assert all(m is o for m, o in zip(messages[-8:], original[-8:], strict=True))


def test_running_summary_folds_the_previous_one_without_nesting_and_keeps_its_facts():
    host = Host(settings(keep_rounds=1), context_window=WINDOW)
    messages = chat(12)
    compact(messages, host)
    first_summary = messages[1]["content"]
    assert "RS001X" in first_summary  # a fact from the first evicted span
    more = chat(24)[49:]  # rounds 12.. of a longer conversation
    messages += more
    report, action = compact(messages, host)
    assert action is not None and action.what == "compacted"
    summaries = [m for m in messages if is_summary(m)]
    assert len(summaries) == 1
    text = summaries[0]["content"]
    assert text.count(SUMMARY_PREFIX) == 1  # no summary inside a summary
    assert "RS001X" in text and "RS012X" in text  # facts of the first summary and of the new span
    assert validate(messages) == []


@pytest.fixture
def seen():
    """The messages each compaction handed to the summarizer ``recording`` (registered for the test)."""
    read: list[list[dict]] = []

    class Recording:
        def summarize(self, request):
            read.append(list(request.messages))
            return "The user checked reservations."

    register_summarizer("recording", lambda **kw: Recording(), replace=True)
    yield read
    unregister_summarizer("recording")


def test_a_long_history_handed_over_at_once_is_read_only_up_to_max_read_tokens(seen: list[list[dict]]):
    """The first compaction of a long list reads the most recent max_read_tokens of the evicted span;
    older messages are dropped unread (neither summarized nor in the key facts). Unbounded, it reads
    them all. A span within the bound is read whole, the same either way."""
    window = 40_000
    original = chat(150)  # about 90k tokens: far over the window
    bounded = Host(settings(summarizer="recording", max_read_tokens=2_000), context_window=window)
    messages = list(original)
    _, action = compact(messages, bounded)
    assert action is not None and action.what == "compacted"
    read = seen[-1]
    assert 0 < len(read) < action.details["evicted_messages"]
    assert action.details["unread_messages"] == action.details["evicted_messages"] - len(read)
    assert bounded.counter().count_messages(read) - 3 <= 2_000
    assert read[-1] is original[original.index(read[-1])]  # the most recent evicted messages
    text = messages[1]["content"]
    last_read = next(m for m in reversed(read) if m["role"] == "user")["content"].split()[3]  # "RS0..X"
    assert "RS001X" not in text and last_read in text  # unread: not even a key fact; read: kept
    assert validate(messages) == []

    unbounded = Host(settings(summarizer="recording", max_read_tokens=None), context_window=window)
    messages = list(original)
    _, action = compact(messages, unbounded)
    assert action.details["unread_messages"] == 0 and len(seen[-1]) == action.details["evicted_messages"]
    assert "RS001X" in messages[1]["content"]  # from the key facts

    small = chat(12)
    for limit in (8_000, None):
        host = Host(settings(summarizer="recording", max_read_tokens=limit), context_window=WINDOW)
        messages = list(small)
        _, action = compact(messages, host)
        assert action.details["unread_messages"] == 0
    assert seen[-1] == seen[-2]


def test_a_usual_compaction_is_read_whole_at_any_window_and_only_a_handover_is_cut(seen: list[list[dict]]):
    """A usual compaction reads its whole span at any window: at 128k it evicts ~19k tokens, more than
    max_read_tokens (8,000), and is read whole. A list of ~1.4x the window handed over at once (a span
    over 1.5 x (threshold - target) x window) is read only up to max_read_tokens."""
    window = 128_000
    host = Host(settings(summarizer="recording"), context_window=window)
    usual = chat(300)  # just over the 40% threshold
    assert host.counter().count_messages(usual) > 0.4 * window
    _, action = compact(list(usual), host)
    assert action is not None and action.what == "compacted"
    assert action.details["unread_messages"] == 0
    assert host.counter().count_messages(seen[-1]) > 8_000  # more than the old fixed bound

    host = Host(settings(summarizer="recording"), context_window=window)
    _, action = compact(list(chat(1_000)), host)
    assert action is not None and action.details["unread_messages"] > 0
    assert 7_000 < host.counter().count_messages(seen[-1]) - 3 <= 8_000


def test_a_handover_at_a_small_window_is_read_up_to_half_the_window(seen: list[list[dict]]):
    """At a window under twice max_read_tokens, a handover is read up to half the window (what one
    summarizer call on a model of that window can take), not max_read_tokens."""
    for window in (8_000, 12_000):
        host = Host(settings(summarizer="recording"), context_window=window)
        _, action = compact(list(chat(150)), host)
        assert action is not None and action.details["unread_messages"] > 0
        assert window // 2 - 1_000 < host.counter().count_messages(seen[-1]) - 3 <= window // 2


def test_the_key_fact_ledger_restores_facts_the_summarizer_dropped():
    class Forgetful:
        def summarize(self, request):
            return "The user asked about some reservations."

    register_summarizer("forgetful", lambda **kw: Forgetful(), replace=True)
    try:
        host = Host(settings(summarizer="forgetful"), context_window=WINDOW)
        messages = chat(12)
        _, action = compact(messages, host)
        text = messages[1]["content"]
        assert "Key facts:" in text
        assert "RS001X" in text and "mia_li_3601" in text  # round 0 is the pinned first user message
        assert action.details["facts_found"] > 10
        assert action.details["facts_kept"] >= action.details["facts_found"] * 0.5
    finally:
        unregister_summarizer("forgetful")


@pytest.mark.parametrize(
    "behaviour, reason",
    [
        ("raise", "RuntimeError"),
        ("hang", "SummaryFailed"),
        ("empty", "SummaryFailed"),
        ("garbage", "SummaryFailed"),
    ],
)
def test_a_failing_summarizer_falls_back_to_the_extractive_summary_with_one_error_event(behaviour, reason):
    release = threading.Event()  # a hanging summarizer answers only once the compaction has returned

    class Bad:
        def summarize(self, request):
            if behaviour == "raise":
                raise RuntimeError("model down")
            if behaviour == "hang":
                release.wait(60)  # the cap bounds a failing test only
                return "late"
            if behaviour == "empty":
                return "   "
            return {"not": "text"}

    register_summarizer("bad", lambda **kw: Bad(), replace=True)
    try:
        host = Host(settings(summarizer="bad", timeout_seconds=0.5), context_window=WINDOW)
        original = chat(12)
        messages = list(original)
        with capture_logs() as logs:
            report, action = compact(messages, host)
        assert action.what == "compacted" and action.details["summarizer"] == "extractive"
        assert action.details["fallback_from"] == "bad"
        assert is_summary(messages[1]) and "RS" in messages[1]["content"]
        assert messages[0] is original[0]
        assert messages[-8:] == original[-8:]
        assert validate(messages) == []
        assert report.tokens_after <= 0.25 * WINDOW + 50
        events = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
        assert len(events) == 1 and events[0]["fallback"] == "extractive" and events[0]["log_level"] == "error"
        assert events[0]["error_type"] == reason
    finally:
        release.set()
        unregister_summarizer("bad")


def test_when_the_extractive_fallback_fails_too_the_span_is_truncated_with_one_event():
    class Bad:
        def summarize(self, request):
            raise RuntimeError("model down")

    register_summarizer("bad", lambda **kw: Bad(), replace=True)
    register_summarizer("extractive", lambda **kw: Bad(), replace=True)
    try:
        host = Host(settings(summarizer="bad"), context_window=WINDOW)
        original = chat(12)
        messages = list(original)
        with capture_logs() as logs:
            report, action = compact(messages, host)
        assert action.what == "truncated" and action.details["error"] == "RuntimeError"
        assert not any(is_summary(m) for m in messages)
        assert messages[-8:] == original[-8:] and validate(messages) == []
        assert report.tokens_after < report.tokens_before
        events = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
        assert len(events) == 1 and events[0]["fallback"] == "truncated"
    finally:
        unregister_summarizer("bad")
        from ctxlife.summarizers import ExtractiveSummarizer

        register_summarizer("extractive", ExtractiveSummarizer, replace=True)


def test_an_over_budget_summary_is_cut_at_a_line_never_discarded():
    class Wordy:
        def summarize(self, request):
            return "\n".join(f"Line {i}: reservation RS{i:03d}X confirmed for mia_li_{3600 + i}." for i in range(400))

    register_summarizer("wordy", lambda **kw: Wordy(), replace=True)
    try:
        host = Host(settings(summarizer="wordy"), context_window=WINDOW)
        messages = chat(12)
        _, action = compact(messages, host)
        assert action.what == "compacted" and action.details["summarizer"] == "wordy"
        assert action.details["summary_tokens"] <= 600
        body = inserted_text(messages[1]["content"]).split("\n")  # without ctxlife's mark line
        assert body[0].startswith(SUMMARY_PREFIX + " Line 0:") and all(
            line.endswith((".", "…")) or "Key facts" in line for line in body
        )
    finally:
        unregister_summarizer("wordy")


def test_a_summary_larger_than_what_it_replaces_is_cut_to_its_budget_not_discarded():
    from ctxlife.summarizers import render_messages

    class Verbose:
        def summarize(self, request):
            text = render_messages(request.messages)
            return text + "\n" + text[: len(text) // 3]  # about 1.3 x what it replaces

    register_summarizer("verbose", lambda **kw: Verbose(), replace=True)
    try:
        host = Host(
            settings(summarizer="verbose", max_summary_tokens=6000, min_gain_tokens=0, keep_rounds=1),
            context_window=WINDOW,
        )
        messages = chat(30)
        report, action = compact(messages, host)
        assert action.what == "compacted" and action.details["summarizer"] == "verbose"
        assert action.details["summary_tokens"] <= 6000 and report.tokens_after < report.tokens_before
        assert messages[1]["content"].startswith(
            SUMMARY_PREFIX + " Assistant called get_reservation_details(reservation_id=RS000X)"
        )
    finally:
        unregister_summarizer("verbose")


def test_small_gains_are_skipped_and_bad_options_are_clear():
    host = Host(settings(min_gain_tokens=100_000), context_window=WINDOW)
    messages = chat(12)
    report = host.manage(messages)
    assert report.acted == [] and report.actions[0].details["reason"] == "small_gain"
    with pytest.raises(StrategyOptionsError, match="option 'target' \\(0.5\\) must be below the threshold \\(0.4\\)"):
        Host(settings(target=0.5), context_window=WINDOW)
    with pytest.raises(StrategyOptionsError, match="strategy 'llm_summary' option 'keep_rounds'"):
        settings(keep_rounds=0)
    with pytest.raises(ctxlife.ConfigError, match="unknown summarizer 'nope'; available: "):
        Host(settings(summarizer="nope"), context_window=WINDOW)


def test_tau_bench_trajectories_stay_valid_and_are_compacted(tau_bench):
    trajectories = tau_bench[:40]
    compactions = found = kept = 0
    for trajectory in trajectories:
        host = Host(settings(), context_window=WINDOW)
        live: list[dict] = []
        full = trajectory["traj"]
        for i, message in enumerate(full):
            live.append(message)
            if i + 1 < len(full) and full[i + 1]["role"] == "assistant" and message["role"] in {"user", "tool"}:
                report = host.manage(live)
                assert validate(live) == [], validate(live)
                compactions += sum(a.what == "compacted" for a in report.actions)
                for action in report.actions:
                    assert action.what != "truncated", action.details  # the extractive summarizer never fails here
                    if action.what == "compacted":
                        assert action.details["summary_tokens"] <= 600
                        found += action.details["facts_found"]
                        kept += action.details["facts_kept"]
    assert compactions >= 20
    assert found > 0 and 0 <= kept <= found  # how much is kept is a benchmark figure (benchmarks/), not a test


@pytest.mark.e2e
@pytest.mark.imports("crewai")
@pytest.mark.slow
def test_real_llm_path_through_crewai_over_http_success_slow_and_failing_servers():
    base = {"summarizer": None, "model": "openai/test-summarizer", "api": "crewai", "timeout_seconds": 20.0}
    with openai_server(text_reply("The user checked reservations RS000X to RS009X; all confirmed.")) as server:
        host = Host(
            settings(**base, model_options={"base_url": server["base_url"], "api_key": "test", "max_retries": 0}),
            context_window=WINDOW,
        )
        messages = chat(12)
        _, action = compact(messages, host)
        assert action.what == "compacted" and action.details["summarizer"] == "model:openai/test-summarizer"
        assert messages[1]["content"].startswith("History summary: The user checked reservations RS000X")
        prompt = server["requests"][0]["messages"]
        assert "RS000X" in prompt[-1]["content"] and prompt[0]["role"] == "system"

    # A model slower than timeout_seconds: its reply is held until the compaction has returned, so a
    # compaction that waited for the model would get the reply and never fall back.
    held = threading.Event()
    late = "The user checked reservations RS000X to RS009X; all confirmed (a late reply)."
    with openai_server(text_reply(late, held=held)) as server:
        slow = {**base, "timeout_seconds": 1.5}
        host = Host(
            settings(**slow, model_options={"base_url": server["base_url"], "api_key": "test", "max_retries": 0}),
            context_window=WINDOW,
        )
        messages = chat(12)
        try:
            _, action = compact(messages, host)
        finally:
            held.set()
        assert len(server["requests"]) == 1  # the model was asked, and given up on
        assert action.details["fallback_from"] == "model:openai/test-summarizer"
        assert "a late reply" not in messages[1]["content"]

    with openai_server(text_reply("internal error", status=500)) as server:
        host = Host(
            settings(**base, model_options={"base_url": server["base_url"], "api_key": "test", "max_retries": 0}),
            context_window=WINDOW,
        )
        messages = chat(12)
        _, action = compact(messages, host)
        assert action.details["summarizer"] == "extractive" and is_summary(messages[1])


CREWAI_SUMMARY_PROMPT = "You are a precise assistant that creates structured summaries"


def _file_crew(llm):
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    @tool("read_file")
    def read_file(name: str) -> str:
        """Read a file from the sandbox."""
        return f"file {name}: " + " ".join(f"row{i}=order ORD-{i:05d} amount ${i}.00" for i in range(120))

    agent = Agent(
        role="Analyst",
        goal="read files",
        backstory="You read files.",
        llm=llm,
        tools=[read_file],
        verbose=False,
        respect_context_window=True,
    )
    task = Task(description="Read files f0.csv to f7.csv and summarize them.", expected_output="a summary", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def _crewai_summarized(llm):
    return any(
        m["role"] == "system" and (m.get("content") or "").startswith(CREWAI_SUMMARY_PROMPT)
        for call in llm.calls
        for m in call
    )


@pytest.mark.e2e
@pytest.mark.imports("crewai")
def test_under_crewai_ctxlife_compacts_before_crewai_would_summarize():
    replies = [react_action("read_file", {"name": f"f{i}.csv"}) for i in range(8)] + [react_final("All files read.")]
    # Control: the same crew unmanaged hits CrewAI's own flatten-everything summarization.
    plain = scripted_llm(replies, context_window=6000)
    _file_crew(plain).kickoff()
    assert _crewai_summarized(plain)

    llm = scripted_llm(replies, context_window=6000)
    crew = _file_crew(llm)
    ctxlife.wrap(crew, settings(keep_rounds=1, min_gain_tokens=50))
    out = crew.kickoff()
    assert out.raw == "All files read." and len(llm.calls) == 9
    assert not _crewai_summarized(llm)
    assert any(is_summary(m) for call in llm.calls for m in call), "the model never received a ctxlife summary"
    counter = ctxlife.TokenCounter("scripted-offline")
    assert max(counter.count_messages(call) for call in llm.calls) < 0.85 * 6000


def test_over_the_window_itself_it_compacts_whatever_the_gain_and_down_to_the_latest_unit():
    # One request answered by a long tool loop: a single round, so only unit cuts are possible.
    # Each tool step is over a quarter of the window: the last keep_units (4) steps alone are over it.
    messages = [system("You are an agent."), user("Check reservations RS000X to RS005X.")]
    for r in range(6):
        call = tool_call("get_reservation_details", {"reservation_id": f"RS{r:03d}X"}, call_id=f"c{r}")
        messages += [
            assistant(None, [call]),
            tool_result(call["id"], json.dumps({"id": f"RS{r:03d}X", "notes": "ok " * 1200})),
        ]
    host = Host(settings(min_gain_tokens=100_000), context_window=WINDOW)
    counter = host.counter()
    steps = LLMSummary.Options.keep_units
    assert counter.count_messages(messages[-2 * steps :]) > WINDOW
    report, action = compact(messages, host)
    assert action is not None and action.what == "compacted"
    assert report.tokens_after < WINDOW and validate(messages) == []
    assert messages[2]["content"] == "Check reservations RS000X to RS005X."  # the request stays
    assert 1 <= sum(m.get("role") == "tool" for m in messages) < steps  # down past keep_units, to the latest


def test_over_the_window_a_short_conversation_with_one_huge_tool_result_is_brought_under_it():
    """Issue 44: no test failed when the guard kept keep_units units over the window (too few to cut
    any: the call stayed at 5,013 tokens in a 4,000-token window). Two rounds, four units."""
    call = tool_call("read_log", {"path": "/var/log/app.log"}, call_id="c1")
    log = "\n".join(f"2026-12-06 10:{i % 60:02d}:00 INFO request {i} served in 12 ms by {i % 7}" for i in range(190))
    messages = [
        system("You are an agent."),
        user("Read the app log and tell me if anything failed."),
        assistant(None, [call]),
        tool_result("c1", log),
        assistant("Nothing failed: every request was served."),
        user("And how many requests were there?"),
    ]
    host = Host(settings(), context_window=WINDOW)
    assert host.counter().count_messages(messages) > WINDOW  # the precondition: over the window itself
    report, action = compact(messages, host)
    assert action is not None and action.what == "compacted"
    assert report.tokens_after <= WINDOW and validate(messages) == []
    assert all(m.get("content") != log for m in messages)  # the huge result went into the summary
    assert messages[-1] == user("And how many requests were there?")  # the question is sent


class _LockedStore:
    """Just enough of a session store for llm_summary's lock: the lock is taken, releasing it fails
    as a store that just went down would (or taking it times out)."""

    def __init__(self, fail_on: str) -> None:
        self.fail_on = fail_on
        self.held = False

    def lock(self, session_id, ttl_seconds=30.0, timeout=10.0):
        from contextlib import contextmanager

        from ctxlife.sessions import LockTimeoutError

        @contextmanager
        def held():
            if self.fail_on == "acquire":
                raise LockTimeoutError(f"session {session_id!r} is locked")
            self.held = True
            yield
            self.held = False
            if self.fail_on == "release":
                raise ctxlife.StoreError("connection lost while releasing the lock")

        return held()


@pytest.mark.parametrize("fail_on", ["release", "acquire"])
def test_a_failed_lock_release_keeps_the_compaction_and_a_held_lock_skips_it(fail_on):
    host = Host(settings(), context_window=WINDOW, session_id="s1")
    store = host.store = _LockedStore(fail_on)
    messages = chat(12)
    with capture_logs() as logs:
        report, action = compact(messages, host)
    if fail_on == "release":
        assert action is not None and action.what == "compacted" and report.failures == []
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["ctxlife.lock_release_failed"]
        assert store.held is False
    else:
        assert action is None and [a.details for a in report.actions] == [{"reason": "session_locked"}]


def _partition_pool() -> list[object]:
    return [
        system("s"),
        {"role": "developer", "content": "d"},
        mark_inserted({"role": "system", "content": "History summary: a"}, "summary"),
        mark_inserted({"role": "user", "content": "History summary: b"}, "summary"),  # (Anthropic lists)
        mark_inserted({"role": "user", "content": "Recalled: c"}, "recall"),
        user("u"),
        user("ends like a mark -->"),
        assistant("a"),
        assistant(None, tool_calls=[tool_call("f", call_id="c1")]),
        tool_result("c1", "r"),
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
        {"role": "function", "name": "f", "content": "x"},
        {"content": "no role"},
    ]


@examples(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(_partition_pool()) - 1), max_size=12))
def test_the_compaction_splits_system_summaries_and_the_rest_as_each_message_is_classified(picks):
    pool = _partition_pool()
    messages = [pool[i] for i in picks]
    system_, previous, rest = _partition(messages)
    assert system_ == [m for m in messages if is_system(m) and not is_summary(m)]
    assert previous == [m for m in messages if is_summary(m)]
    assert rest == [m for m in messages if not is_system(m) and not is_inserted(m)]
