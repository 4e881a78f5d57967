"""Per-call overhead and scaling: ctxlife vs LangChain on the same histories, same tokenizer.

Histories are prefixes of one long synthetic agent session (:func:`synthetic.synthetic_session`:
native tool calls, JSON tool results of realistic size), cut right before a model call. Times
are medians of repeated ``time.perf_counter`` measurements in this process; the encoding is
loaded before any timing.

*First call*: a fresh manager (fresh :class:`ctxlife.Host`, fresh LangChain counter) sees the
whole history once. *Steady state*: the agent loop goes on, one new message per call. Two ways
to hand the history over are measured, because they are how the two libraries are used:

* **full history**: every call gets the whole history (a new list holding the same message
  objects plus the new one), the manager returns the context to send. This is how
  ``trim_messages`` is documented (the graph state keeps everything) and it is also a valid way
  to call ``ctxlife.manage()``; it is the like-for-like comparison;
* **in place**: the list the manager edited is the one the loop keeps (``ctxlife.manage()`` and
  ``wrap()`` edit the framework's live list; ``SummarizationMiddleware`` rewrites the state).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench_methods import Middleware, ctxlife_settings, langchain_token_counter

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import role
from synthetic import synthetic_session

WINDOW = 128_000  # a gpt-4o-sized window; the threshold (0.4) is 51,200 tokens
HUGE = 10**9  # a window no history reaches: ctxlife has nothing to do
LENGTHS = [10, 100, 1_000, 10_000]

NO_ACTION = {"strategies": ["truncate_last_n"], "threshold": 0.4, "truncate_last_n": {"only_above_threshold": True}}

_SESSION: list[dict[str, Any]] | None = None


def session() -> list[dict[str, Any]]:
    global _SESSION
    if _SESSION is None:
        _SESSION = synthetic_session(6_000)  # ~12,000 messages
    return _SESSION


def history(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first ~n messages, cut right before a model call, and the messages that follow."""
    messages = session()
    cut = n
    while cut < len(messages) and role(messages[cut]) != "assistant":
        cut += 1
    return messages[:cut], messages[cut:]


def timed(
    fn: Callable[[], Any],
    *,
    budget: float = 1.0,
    min_reps: int = 3,
    max_reps: int = 40,
    setup: Callable[[], Any] | None = None,
    teardown: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Median time of ``fn()``; ``setup()``/``teardown()`` run untimed around each repetition."""
    times: list[float] = []
    spent = 0.0
    while len(times) < max_reps and (len(times) < min_reps or spent < budget):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if teardown is not None:
            teardown()
        times.append(dt)
        spent += dt
        if dt > 2 * budget:
            break  # one slow repetition says enough
    return {"median_ms": round(statistics.median(times) * 1000, 4), "reps": len(times)}


# -- one manager per method ------------------------------------------------------------


class Runner:
    """first(history) and step(new_message) for one method; both return the context."""

    label = ""
    modes = ("full history", "in place")

    def first(self, messages: list[dict[str, Any]]) -> Any: ...

    def step_full(self, full: list[dict[str, Any]]) -> Any: ...

    def step_in_place(self, message: dict[str, Any]) -> Any: ...

    def undo_in_place(self, message: Any) -> None:
        """Take the step's new message back out (untimed), so the history stays at its length."""
        live = self.live if hasattr(self, "live") else self.state
        if live and live[-1] is message:
            live.pop()


class CtxlifeRunner(Runner):
    """``Host.manage()``: what ``ctxlife.manage()`` runs once it has found its cached host."""

    def __init__(
        self, label: str, settings: Any, window: int, modes: tuple[str, ...] = ("full history", "in place")
    ) -> None:
        self.label, self.settings, self.window, self.modes = label, settings, window, modes
        self.live: list[dict[str, Any]] = []

    def fresh(self) -> None:
        self.host = Host(self.settings, context_window=self.window)

    def first(self, messages: list[dict[str, Any]]) -> Any:
        self.live = list(messages)
        return self.host.manage(self.live)

    def step_full(self, full: list[dict[str, Any]]) -> Any:
        return self.host.manage(list(full))

    def step_in_place(self, message: dict[str, Any]) -> Any:
        self.live.append(message)
        return self.host.manage(self.live)


class TrimRunner(Runner):
    modes = ("full history",)

    def __init__(self, memoize: bool) -> None:
        self.label = "trim_messages (memoized counter)" if memoize else "trim_messages (tiktoken counter)"
        self.memoize = memoize

    def fresh(self) -> None:
        self.counter = langchain_token_counter(memoize=self.memoize)

    def _trim(self, messages: list[Any]) -> Any:
        from langchain_core.messages import trim_messages

        return trim_messages(
            messages, max_tokens=int(0.4 * WINDOW), token_counter=self.counter, strategy="last", include_system=True
        )

    def first(self, messages: list[Any]) -> Any:
        return self._trim(messages)

    def step_full(self, full: list[Any]) -> Any:
        return self._trim(full)


class MiddlewareRunner(Runner):
    """``SummarizationMiddleware.before_model`` on LangChain messages; the state is rewritten
    after a summary, as the agent graph does."""

    label = "SummarizationMiddleware"
    modes = ("in place",)

    def fresh(self) -> None:
        self.mw = Middleware(WINDOW, system_tokens=0).middleware
        self.state: list[Any] = []

    def _run(self) -> Any:
        update = self.mw.before_model({"messages": self.state}, None)  # type: ignore[arg-type]
        if update:
            self.state = list(update["messages"][1:])
        return self.state

    def first(self, messages: list[Any]) -> Any:
        self.state = [m for m in messages if m.type != "system"]  # create_agent keeps the system prompt apart
        return self._run()

    def step_in_place(self, message: Any) -> Any:
        self.state.append(message)
        return self._run()


def _lc(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages(messages)


def _steady_step(
    runner: Runner, mode: str, full: list[Any], queue: Any
) -> tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]:
    """(step, pick, undo) for one steady-state measurement: ``pick`` takes a new message (untimed),
    ``step`` hands it over with the history and runs the manager, ``undo`` takes it back out."""
    current: list[Any] = []

    def pick() -> None:
        current[:] = [next(queue)]  # a new message each call (new text to count)

    if mode == "full history":

        def step() -> Any:
            full.append(current[0])
            return runner.step_full(full)

        def undo() -> None:
            full.pop()

    else:

        def step() -> Any:
            return runner.step_in_place(current[0])

        def undo() -> None:
            runner.undo_in_place(current[0])

    return step, pick, undo


def overhead(
    lengths: list[int] = LENGTHS, steps: int = 15, skip: dict[tuple[str, int], str] | None = None
) -> dict[str, Any]:
    """Median time per call, per method and history length: first call and steady state."""
    skip = skip or {}
    ctxlife.TokenCounter(None).count_text("warm up")  # load the encoding outside the timings
    runners: list[Runner] = [
        CtxlifeRunner("ctxlife, no action needed", settings_from_dict(NO_ACTION, source="bench (no action)"), HUGE),
        CtxlifeRunner("ctxlife truncate_last_n", ctxlife_settings("ctxlife truncate_last_n"), WINDOW),
        # Handed the full history on every call, llm_summary would compact on every call: it is
        # built to edit the live list in place, so only that mode is measured.
        CtxlifeRunner("ctxlife llm_summary", ctxlife_settings("ctxlife llm_summary"), WINDOW, modes=("in place",)),
        TrimRunner(memoize=False),
        TrimRunner(memoize=True),
        MiddlewareRunner(),
    ]
    rows: list[dict[str, Any]] = []
    for n in lengths:
        base, after = history(n)
        lc_base, lc_after = _lc(base), _lc(after[: steps * 3])
        from ctxlife.tokens import TokenCounter

        tokens = TokenCounter(None).count_messages(base)
        for runner in runners:
            reason = skip.get((runner.label, n))
            if reason:
                rows.append({"method": runner.label, "messages": len(base), "tokens": tokens, "skipped": reason})
                continue
            langchain = isinstance(runner, (TrimRunner, MiddlewareRunner))
            hist, more = (lc_base, lc_after) if langchain else (base, after)
            row: dict[str, Any] = {"method": runner.label, "messages": len(base), "tokens": tokens}
            row["first"] = timed(
                lambda runner=runner, hist=hist: runner.first(hist), setup=runner.fresh, budget=1.0, min_reps=3
            )
            for number, mode in enumerate(runner.modes):
                if number:  # the last timed first call left the first mode in its steady state
                    runner.fresh()
                    runner.first(hist)
                step, pick, undo = _steady_step(runner, mode, list(hist), iter(more))
                row["steady " + mode] = timed(
                    step, setup=pick, teardown=undo, budget=1.0, min_reps=3, max_reps=steps * 3 - 1
                )
            rows.append(row)
    return {"window": WINDOW, "threshold": 0.4, "rows": rows}


# -- scaling: per-call time as one session grows ----------------------------------------


def per_call_growth(calls: int = 1_000, window: int = 32_000, samples: int = 12) -> dict[str, Any]:
    """Time per call at every call of one growing session (in place), and for trim_messages on
    the full history at sampled call indices (it keeps no state, so a sample is exact)."""
    from ctxlife.replay import call_points

    ctxlife.TokenCounter(None).count_text("warm up")
    messages = synthetic_session(calls)
    points = list(call_points(messages))
    series: dict[str, list[tuple[int, float]]] = {}
    configs = {
        "ctxlife llm_summary (in place)": (ctxlife_settings("ctxlife llm_summary"), window),
        "ctxlife, no action needed (in place, list grows)": (
            settings_from_dict(NO_ACTION, source="bench (no action)"),
            HUGE,
        ),
    }
    for label, (settings, w) in configs.items():
        host = Host(settings, context_window=w)
        live: list[dict[str, Any]] = []
        fed = 0
        out = []
        for index, k in enumerate(points):
            live.extend(messages[fed:k])
            fed = k
            t0 = time.perf_counter()
            host.manage(live)
            out.append((index + 1, time.perf_counter() - t0))
        series[label] = out
    # trim_messages keeps no state of its own: sampled call indices are exact. The memoized
    # counter is warmed with everything before the call (its steady state), then timed once.
    from langchain_core.messages import convert_to_messages, trim_messages

    lc = convert_to_messages(messages)
    trim_messages(
        lc[:3], max_tokens=100, token_counter=langchain_token_counter(), strategy="last", include_system=True
    )  # warm up
    sample = sorted({max(1, round(len(points) ** (i / (samples - 1)))) for i in range(samples)})
    for memoize in (True, False):
        out = []
        for index in sample:
            k = points[index - 1]
            counter = langchain_token_counter(memoize=memoize)
            if memoize:
                counter(lc[: k - 1])
            t0 = time.perf_counter()
            trim_messages(
                lc[:k], max_tokens=int(0.4 * window), token_counter=counter, strategy="last", include_system=True
            )
            out.append((index, time.perf_counter() - t0))
        series["trim_messages (memoized counter)" if memoize else "trim_messages (tiktoken counter)"] = out
    return {
        "calls": len(points),
        "window": window,
        "series": {k: [[i, round(s * 1000, 4)] for i, s in v] for k, v in series.items()},
    }


def summarizer_growth(spans: tuple[int, ...] = (50, 100, 200, 400)) -> dict[str, Any]:
    """Time of one extractive summary vs the size of the span it summarizes (llm_summary's first
    compaction on a long history summarizes the whole evicted span)."""
    from ctxlife.facts import extract_facts
    from ctxlife.summarizers import SummaryRequest, get_summarizer
    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    messages = session()
    rows = []
    for n in spans:
        span = messages[1 : n + 1]
        t0 = time.perf_counter()
        facts = extract_facts(span)
        get_summarizer("extractive").summarize(SummaryRequest(span, None, 600, counter.count_text, facts))
        rows.append(
            {
                "messages": n,
                "tokens": counter.count_messages(span),
                "facts": len(facts),
                "ms": round((time.perf_counter() - t0) * 1000, 1),
            }
        )
    return {"rows": rows}
