"""``llm_summary``: compact the middle of the conversation into a running summary.

When the context passes ``threshold`` × window before a model call, the span between the
system messages and the last ``keep_rounds`` rounds is replaced by one summary message
("History summary: ...") placed right after the system messages, bringing the context down
to about ``target`` × window. The next compaction folds the previous summary and the newly
evicted messages into a new one (a running summary, never nested). Ids, codes, amounts,
dates, emails, URLs and paths found in the evicted span are checked against the summary and
the missing ones appended as a "Key facts" list. If the summarizer fails (raises, times out,
returns nothing, too much, or more than it replaces), the span is truncated instead: the
agent's call proceeds and the messages stay in the raw history when sessions are on.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

import ctxlife
from ctxlife.events import describe_error, emit
from ctxlife.facts import KIND_PRIORITY, Fact, extract_facts, facts_missing_from, format_fact_list
from ctxlife.messages import (
    ANTHROPIC,
    current_turn_index,
    escape_surrogates,
    is_inserted,
    is_summary,
    is_system,
    is_tool_result,
    is_user_turn,
    round_starts,
    split_units,
    summary_message,
    text_of,
)
from ctxlife.summarizers import LLMSummarizer, Summarizer, SummaryRequest, get_summarizer, strip_summary_marker


class SummaryFailed(ctxlife.CtxlifeError):
    """A summarizer failed; the strategy fell back to truncation."""


class LLMSummary(ctxlife.Strategy):
    name = "llm_summary"

    class Options(ctxlife.Options):
        threshold: float | None = Field(
            None, gt=0, le=1, description="Compact above this share of the window (default: the global threshold)."
        )
        target: float = Field(0.25, gt=0, lt=1, description="Share of the window to compact down to.")
        keep_rounds: int = Field(
            2,
            ge=1,
            description="The most recent rounds kept verbatim. When they alone are over the target (one long "
            "agent loop on one request), their older tool steps are summarized too, down to keep_units.",
        )
        keep_units: int = Field(
            4, ge=1, description="The most recent units (a message, or a tool call with its results) never summarized."
        )
        min_gain_tokens: int = Field(200, ge=0, description="Skip a compaction that would save fewer tokens than this.")
        max_summary_tokens: int = Field(600, ge=32, description="Budget of the summary message, key facts included.")
        summarizer: str | None = Field(
            None,
            description='"extractive" (offline), "llm" (the agent\'s own model) or a registered summarizer name. '
            "Default: the agent's model under wrap(), extractive under manage().",
        )
        model: str | None = Field(
            None, description='Summarize with this model instead (any name crewai.LLM accepts, e.g. "gpt-4o-mini").'
        )
        model_options: dict[str, Any] = Field(
            default_factory=dict,
            description="Extra crewai.LLM arguments for `model` (base_url, api_key, temperature, ...).",
        )
        timeout_seconds: float = Field(
            60.0, gt=0, description="Give up on a summary after this long and truncate instead."
        )
        summary_role: Literal["system", "user", "assistant"] = Field(
            "system",
            description="Role of the summary message (some providers accept only one system message). In "
            "Anthropic Messages lists the summary is always a user message (the system prompt is passed apart).",
        )
        pin_first_user: bool = Field(
            True, description="Never summarize the first user message (the task under CrewAI)."
        )
        key_facts: bool = Field(True, description='Append ledger facts the summary lost as a compact "Key facts" list.')
        max_read_tokens: int | None = Field(
            8_000,
            ge=100,
            description="A span far larger than usual (over 1.5 x (threshold - target) x window: a restored "
            "session, a framework handing over thousands of messages at once) is read only up to its most recent "
            "max_read_tokens tokens; older messages are dropped unread, as truncation drops them (their facts are "
            "neither summarized nor listed). A trade-off: it bounds the time of such a first compaction at the cost "
            "of what the unread part held. A usual compaction reads its whole span, at any window. None reads every "
            "message: the time of a first compaction then grows with the span (seconds at 10,000 messages).",
        )
        lock_timeout_seconds: float = Field(
            2.0, ge=0, description="With sessions on: wait this long for the session lock, else skip this compaction."
        )

        @field_validator("target")
        @classmethod
        def _target_below_threshold(cls, target: float, info: ValidationInfo) -> float:
            threshold = info.data.get("threshold")
            if threshold is not None and target >= threshold:
                raise ValueError(f"must be below this table's threshold ({threshold}), got {target}")
            return target

    options: Options

    def __init__(
        self, options: LLMSummary.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        global_threshold = self.settings.threshold
        origin = self.settings.origin
        if self.options.threshold is None and self.options.target >= global_threshold:
            where = f" ({origin(self.name, 'target')}; threshold {origin(None, 'threshold')})"
            raise ctxlife.StrategyOptionsError(
                f"strategy 'llm_summary' option 'target' ({self.options.target}) must be below the threshold "
                f"({global_threshold}){where}; lower target or raise threshold"
            )
        self._fixed: Summarizer | None = None
        if self.options.summarizer not in (None, "llm") and self.options.model is None:
            try:
                self._fixed = self._named(self.options.summarizer)  # unknown names fail at load time
            except ctxlife.ConfigError as exc:
                where = f" ({origin(self.name, 'summarizer')})"
                message = f"strategy 'llm_summary' option 'summarizer'{where}: {exc}"
                raise ctxlife.StrategyOptionsError(message) from None
        self._model_summarizer: Summarizer | None = None
        self._running: Future[str] | None = None  # the summary of the last compaction

    def _read_limit(self, ctx: ctxlife.LLMCallContext, span_tokens: int) -> int | None:
        """How many tokens of an evicted span of ``span_tokens`` the summarizer reads (None: all of it)."""
        limit = self.options.max_read_tokens
        threshold = self.options.threshold or ctx.threshold
        usual_span = (threshold - self.options.target) * ctx.context_window
        if limit is None or span_tokens <= max(limit, 1.5 * usual_span):
            return None  # a usual compaction reads everything: only a handover is cut
        return limit

    # -- choosing the summarizer ----------------------------------------------------------

    def _summarizer(self, ctx: ctxlife.LLMCallContext) -> tuple[str, Summarizer]:
        if self.options.model is not None:
            if self._model_summarizer is None:
                llm_options = {"max_tokens": self.options.max_summary_tokens, **self.options.model_options}
                complete = ctxlife.completion_for_model(
                    self.options.model, timeout=self.options.timeout_seconds, **llm_options
                )
                self._model_summarizer = LLMSummarizer(complete)
            return f"model:{self.options.model}", self._model_summarizer
        if self._fixed is not None:
            return str(self.options.summarizer), self._fixed
        if ctx.complete is not None:
            return "agent_llm", LLMSummarizer(ctx.complete)
        if self.options.summarizer == "llm":
            emit("warning", "ctxlife.summarizer_unavailable", strategy=self.name, wanted="llm", using="extractive")
        self._fixed = self._named("extractive")
        return "extractive", self._fixed

    def _named(self, name: str) -> Summarizer:
        return get_summarizer(name)

    # -- the hook -------------------------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        threshold = self.options.threshold or ctx.threshold
        tokens_before = ctx.count()
        if tokens_before <= threshold * ctx.context_window:
            return
        with ExitStack() as held:
            if ctx.store is not None and ctx.session_id is not None:
                from ctxlife.sessions import LockTimeoutError

                ttl = self.options.timeout_seconds + 30
                try:
                    lock = ctx.store.lock(ctx.session_id, ttl_seconds=ttl, timeout=self.options.lock_timeout_seconds)
                    held.enter_context(_released_with_a_warning(lock, self.name, ctx.session_id))
                except LockTimeoutError:
                    ctx.record("skipped", reason="session_locked")
                    return
                except ctxlife.StoreError as exc:
                    # The store is down: the context must still be kept under the window.
                    emit(
                        "warning",
                        "ctxlife.compacting_without_lock",
                        strategy=self.name,
                        session_id=ctx.session_id,
                        error=type(exc).__name__,
                    )
            self._compact(ctx, tokens_before)

    def _compact(self, ctx: ctxlife.LLMCallContext, tokens_before: int) -> None:
        messages = ctx.messages
        tokens = ctx.tokens
        system = [m for m in messages if is_system(m) and not is_summary(m)]
        previous = [m for m in messages if is_summary(m)]
        # What ctxlife inserted for one call only (a recall block) is neither summarized nor kept.
        rest = [m for m in messages if not is_system(m) and not is_inserted(m)]
        starts = round_starts(rest)  # user turns (not carriers of tool results)
        pinned = [rest[starts[0]]] if self.options.pin_first_user and starts else []
        first = starts[0] + 1 if pinned else 0
        latest_user = starts[-1] if starts else None
        turn = current_turn_index(rest)  # the question being worked on (not a repeated framework prompt)
        # Where the evicted span may end: at a round start, keeping the last keep_rounds rounds;
        # failing that, at a unit boundary inside them, keeping the last keep_units units.
        keep = self.options.keep_rounds
        round_cuts = [c for c in starts if first < c <= starts[-keep]] if len(starts) > keep else []
        # Over the window itself, the call would fail: then only the latest unit is sure to stay.
        overflow = tokens_before > ctx.context_window
        keep_units = 1 if overflow else self.options.keep_units
        unit_starts = [u.start for u in split_units(rest)]
        last_allowed = unit_starts[-keep_units] if len(unit_starts) > keep_units else 0
        floor = round_cuts[-1] if round_cuts else first
        unit_cuts = [c for c in unit_starts if floor < c <= last_allowed and c not in round_cuts]
        cuts = round_cuts + unit_cuts
        if not cuts:
            ctx.record("skipped", reason="nothing_to_evict")
            return

        kept_users = sorted({i for i in (turn, latest_user) if i is not None})

        def tail_for(cut: int) -> list[dict[str, Any]]:
            # The question and the latest user message always stay, even when their round's steps
            # are summarized.
            return [rest[i] for i in kept_users if first <= i < cut] + rest[cut:]

        target_tokens = int(self.options.target * ctx.context_window)
        fixed = tokens.count_messages(system) + tokens.count_messages(pinned) - 3
        # Each message is counted once (cached by the counter); the tail after each cut is a suffix sum.
        sizes = [tokens.count_messages((m,)) - 3 for m in rest]
        after = [0] * (len(rest) + 1)
        for i in range(len(rest) - 1, -1, -1):
            after[i] = after[i + 1] + sizes[i]
        cut = cuts[-1]
        for candidate in cuts:  # keep as much as the target allows
            tail_tokens = after[candidate] + sum(sizes[i] for i in kept_users if first <= i < candidate)
            if fixed + tail_tokens + self.options.max_summary_tokens <= target_tokens:
                cut = candidate
                break
        kept_tail = tail_for(cut)
        evicted = [m for i, m in enumerate(rest[first:cut], first) if i not in kept_users]
        if not evicted:
            ctx.record("skipped", reason="nothing_to_evict")
            return
        kept_tokens = fixed + tokens.count_messages(kept_tail)
        # Aim for the target; when what must stay already fills it, still allow half the summary budget.
        budget = min(
            self.options.max_summary_tokens, max(target_tokens - kept_tokens, self.options.max_summary_tokens // 2)
        )
        previous_text = "\n".join(strip_summary_marker(m.get("content")) for m in previous) or None
        replaced_tokens = tokens.count_messages(evicted) + (tokens.count_messages(previous) if previous else 0) - 3
        if replaced_tokens - budget < self.options.min_gain_tokens and not overflow:
            ctx.record("skipped", reason="small_gain", replaceable_tokens=replaced_tokens)
            return

        read = _most_recent(evicted, sizes_of=tokens, limit=self._read_limit(ctx, replaced_tokens))
        facts: list[Fact] = extract_facts(read)
        if previous_text:
            facts += [f for f in extract_facts(previous_text) if f.key not in {g.key for g in facts}]
        name, summarizer = self._summarizer(ctx)
        started = time.perf_counter()
        # With the ledger on, a summarizer that does not keep facts itself gets 70% of the budget
        # and the key facts the rest.
        keeps_facts = getattr(summarizer, "fact_list", False)
        prose_budget = int(budget * 0.7) if self.options.key_facts and facts and not keeps_facts else budget
        try:
            request = SummaryRequest(read, previous_text, prose_budget, tokens.count_text, _most_useful(facts, budget))
            text = self._summarize(summarizer, request)
            text = self._with_key_facts(text, facts, tokens.count_text, budget)
            text = escape_surrogates(text)  # lone surrogates from the span cannot be sent as UTF-8
            size = tokens.count_text(text)
            if size > self.options.max_summary_tokens:
                raise SummaryFailed(
                    f"summary of {size} tokens is over max_summary_tokens ({self.options.max_summary_tokens})"
                )
            summary = summary_message(messages, text, self.options.summary_role, ctx.message_format)
            if tokens.count_message(summary) >= replaced_tokens:
                raise SummaryFailed(
                    f"summary of {size} tokens is not smaller than the {replaced_tokens} tokens it replaces"
                )
        except Exception as exc:  # noqa: BLE001 - any failure falls back to truncation, loudly
            original = list(messages)
            kept = pinned + kept_tail
            if ctx.message_format == ANTHROPIC and not previous:
                kept = _opening_with_a_user_turn(kept)  # an Anthropic conversation opens with the user
            messages[:] = system + previous + kept
            if ctx.count() >= tokens_before:
                messages[:] = original  # truncating this span would not help either
                ctx.record("skipped", reason="summary_failed_no_gain", error=type(exc).__name__)
                return
            contents = [text_of(m) for m in (*evicted, *previous, *system, *kept_tail)]
            error, _ = describe_error(exc, contents, log_content=self.settings.log_content)
            emit(
                "error",
                "ctxlife.summary_failed",
                strategy=self.name,
                summarizer=name,
                session_id=ctx.session_id,
                error=error,
                error_type=type(exc).__name__,
                fallback="truncated",
                evicted_messages=len(evicted),
            )
            ctx.record(
                "truncated",
                reason="summary_failed",
                summarizer=name,
                evicted_messages=len(evicted),
                error=type(exc).__name__,
            )
            return
        original = list(messages)
        messages[:] = system + [summary] + pinned + kept_tail
        tokens_after = ctx.count()
        if tokens_after >= tokens_before:
            # Whole-list accounting can disagree with the span's (reordered turns, overheads):
            # a compaction must make the context smaller, or it is not done.
            messages[:] = original
            ctx.record("skipped", reason="no_gain", tokens=tokens_before)
            return
        kept_facts = len(facts) - len(facts_missing_from(facts, text))
        ctx.record(
            "compacted",
            summarizer=name,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            evicted_messages=len(evicted),
            summary_tokens=tokens.count_text(summary["content"]),
            unread_messages=len(evicted) - len(read),
            facts_found=len(facts),
            facts_kept=kept_facts,
            seconds=round(time.perf_counter() - started, 3),
        )

    def _summarize(self, summarizer: Summarizer, request: SummaryRequest) -> str:
        """Run the summarizer with a time limit; anything but a non-empty string is a failure.

        One summary thread at a time: while a summary that timed out is still running, the next
        compaction truncates instead of piling up blocked threads. The thread is a daemon (not a
        ThreadPoolExecutor worker, which the interpreter joins at exit), so a model call that
        hangs never keeps the program from exiting.
        """
        if self._running is not None and not self._running.done():
            raise SummaryFailed("the previous summary has not finished yet (it timed out); truncating instead")
        future: Future[str] = Future()
        self._running = future

        def work() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(summarizer.summarize(request))
                except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                    future.set_exception(exc)

        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(work,), name="ctxlife-summary", daemon=True).start()
        try:
            text = future.result(timeout=self.options.timeout_seconds)
        except TimeoutError:
            raise SummaryFailed(f"summarizer did not answer within {self.options.timeout_seconds} s") from None
        if not isinstance(text, str):
            raise SummaryFailed(f"summarizer returned {type(text).__name__}, not text")
        text = strip_summary_marker(text).strip()
        if not text:
            raise SummaryFailed("summarizer returned an empty summary")
        return text

    def _with_key_facts(self, text: str, facts: list[Fact], count: Any, budget: int) -> str:
        if not self.options.key_facts or not facts:
            return text
        missing = facts_missing_from(facts, text)
        if not missing:
            return text
        block = format_fact_list(missing, budget - count(text) - 1, count)
        return f"{text}\n{block}" if block else text


def _opening_with_a_user_turn(kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kept`` from its first user turn on (the units before it are truncated too)."""
    for i, message in enumerate(kept):
        if is_user_turn(message):
            return kept[i:]
    return kept


def _most_recent(
    evicted: list[dict[str, Any]], *, sizes_of: ctxlife.TokenCounter, limit: int | None
) -> list[dict[str, Any]]:
    """The most recent messages of ``evicted`` whose tokens add up to at most ``limit`` (all of them
    when ``limit`` is None or they fit), starting at a message that is not a tool result (a result
    whose call is not read is dropped with it). The newest message is always read."""
    if limit is None:
        return evicted
    total = 0
    for i in range(len(evicted) - 1, -1, -1):
        total += sizes_of.count_messages((evicted[i],)) - 3
        if total > limit:
            start = i + 1
            while start < len(evicted) - 1 and is_tool_result(evicted[start]):
                start += 1
            return evicted[start:] or evicted[-1:]
    return evicted


def _most_useful(facts: list[Fact], budget: int) -> list[Fact]:
    """The facts a summary of ``budget`` tokens can hope to hold, ids and codes first.

    A summary of a few hundred tokens holds a few hundred facts at most; handing a summarizer
    thousands (a huge span) only makes it slower (matching is facts x sentences). The ledger
    check after summarizing still covers every fact.
    """
    limit = max(100, budget * 2 // 3)
    if len(facts) <= limit:
        return facts
    rank = {kind: i for i, kind in enumerate(KIND_PRIORITY)}
    return sorted(facts, key=lambda f: rank.get(f.kind, len(rank)))[:limit]


@contextmanager
def _released_with_a_warning(
    lock: AbstractContextManager[None], strategy: str, session_id: str | None
) -> Iterator[None]:
    """Hold ``lock``; a store that fails while releasing it (it just went down) is a warning, not an
    error: the compaction done under the lock stands."""
    done = False
    try:
        with lock:
            yield
            done = True
    except ctxlife.StoreError as exc:
        if not done:
            raise
        emit(
            "warning", "ctxlife.lock_release_failed", strategy=strategy, session_id=session_id, error=type(exc).__name__
        )
