"""``llm_summary``: compact the middle of the conversation into a running summary.

What it does, its options and why: docs/strategies/llm_summary.md.
The background fold lives in :mod:`ctxlife_strategies.summary_fold`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, ClassVar, Literal

from pydantic import Field

import ctxlife
from ctxlife.events import describe_error, emit
from ctxlife.facts import FACT_LIST_HEADER, Fact, extract_facts, facts_missing_from, format_fact_list
from ctxlife.messages import (
    ANTHROPIC,
    current_turn_index,
    escape_surrogates,
    is_inserted,
    is_summary,
    is_system,
    is_user_turn,
    plain_role,
    round_starts,
    strip_inserted_marks,
    summary_message,
    text_of,
    unit_starts,
)
from ctxlife.models import Complete, configured_completion, model_api, model_route_problem, preload_client
from ctxlife.sessions import LockTimeoutError
from ctxlife.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryRequest,
    cut_at_lines,
    get_summarizer,
    strip_summary_marker,
)
from ctxlife_strategies.summary_fold import (
    FOLD_AFTER_SECONDS,
    BackgroundFold,
    Fold,
    SummaryFailed,
    SummaryLacksFacts,
    carries_some_facts,
    most_recent,
    most_useful,
    pace_of,
    run_in_daemon,
)


class LLMSummary(BackgroundFold, ctxlife.Strategy):
    name = "llm_summary"

    class Options(ctxlife.Options):
        # Fixed values, not options (issue 43: every option is set by a shipped config or documented with a
        # measured reason). Read as self.options.X like the options, so the code that uses them is unchanged.
        keep_units: ClassVar[int] = 4  # the most recent units (a message, or a tool call with its results) kept
        retry_model_after_seconds: ClassVar[float] = 30.0  # after a model failure, extractive this long...
        retry_model_after_compactions: ClassVar[int] = 3  # ...or for this many compactions
        lock_timeout_seconds: ClassVar[float] = 2.0  # wait this long for the session lock, else skip the compaction
        retired: ClassVar[dict[str, str]] = {
            **{
                key: f"it moved to the [model] table, shared by every strategy that calls a model: write {new} there"
                for key, new in (
                    ("model", "name"),
                    ("base_url", "base_url"),
                    ("api_key_env", "api_key_env"),
                    ("model_options", "options"),
                    ("timeout_seconds", "timeout_seconds"),
                    ("summarizer_context_window", "context_window"),
                )
            },
            "api": "the route follows [model] base_url (set: the openai client; unset: crewai.LLM when installed)",
            "connect_timeout_seconds": "connecting gives up after ctxlife.models.CONNECT_TIMEOUT_SECONDS (5 s)",
            "threshold": "llm_summary compacts above the top-level threshold",
            **{
                key: "it is fixed (see docs/strategies/llm_summary.md)"
                for key in (
                    "keep_units",
                    "max_input_tokens",
                    "token_margin",
                    "retry_model_after_seconds",
                    "retry_model_after_compactions",
                    "pin_first_user",
                    "key_facts",
                    "lock_timeout_seconds",
                )
            },
            "background_start": "a background summary starts as soon as a compaction evicts a span",
        }

        target: float = Field(
            0.25,
            gt=0,
            lt=1,
            description="Share of the window to compact down to at most (lower when the recent calls grew fast: "
            "see headroom_calls).",
        )
        headroom_calls: int = Field(
            4,
            ge=0,
            description="After a compaction, leave room under the threshold for this many calls, each sized as the "
            "75th percentile of the tokens the last 8 calls added (the target goes down when that room is more "
            "than the target leaves; never below the latest unit). 0: the fixed target only.",
        )
        keep_rounds: int = Field(
            2,
            ge=1,
            description="The most recent rounds kept verbatim. When they alone are over the target (one long "
            "agent loop on one request), their older tool steps are summarized too, down to the last 4 units.",
        )
        min_gain_tokens: int = Field(200, ge=0, description="Skip a compaction that would save fewer tokens than this.")
        max_summary_tokens: int = Field(600, ge=32, description="Budget of the summary message, key facts included.")
        summarizer: str | None = Field(
            None,
            description='"extractive" (offline), "llm" (the agent\'s own model) or a registered summarizer name. '
            "Default: the agent's model under wrap(), extractive under manage().",
        )
        max_read_tokens: int | None = Field(
            8_000,
            ge=100,
            description="A span far larger than usual (over 1.5 x (threshold - target) x window: a restored "
            "session, a framework handing over thousands of messages at once) is read only up to its most recent "
            "max_read_tokens tokens (at most half the window); older messages are dropped unread, as truncation "
            "drops them (their facts are "
            "neither summarized nor listed). A trade-off: it bounds the time of such a first compaction at the cost "
            "of what the unread part held. A usual compaction reads its whole span, at any window. None reads every "
            "message: the time of a first compaction then grows with the span (seconds at 10,000 messages).",
        )
        summary_role: Literal["system", "user", "assistant"] = Field(
            "system",
            description='Role of the summary message: "user" keeps the tool text it quotes out of the system role '
            '(docs/security.md); "system" (default) for providers that want the history\'s digest there. In '
            "Anthropic Messages lists the summary is always a user message (the system prompt is passed apart).",
        )
        background: bool = Field(
            False,
            description="Never wait for the model: a compaction at the threshold puts in the model's running summary "
            "of the older history (made in the background, from each span as soon as it is evicted) and extractive "
            "notes of the messages the model has not read yet (no call waits for the model or goes above the "
            "threshold).",
        )

    options: Options

    def __init__(
        self, options: LLMSummary.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        global_threshold = self.settings.threshold
        origin = self.settings.origin
        if self.options.target >= global_threshold:
            where = f" ({origin(self.name, 'target')}; threshold {origin(None, 'threshold')})"
            raise ctxlife.StrategyOptionsError(
                f"strategy 'llm_summary' option 'target' ({self.options.target}) must be below the threshold "
                f"({global_threshold}){where}; lower target or raise threshold"
            )
        self._fixed: Summarizer | None = None
        if self.options.summarizer not in (None, "llm"):
            try:
                self._fixed = get_summarizer(self.options.summarizer)  # unknown names fail at load time
            except ctxlife.ConfigError as exc:
                where = f" ({origin(self.name, 'summarizer')})"
                message = f"strategy 'llm_summary' option 'summarizer'{where}: {exc}"
                raise ctxlife.StrategyOptionsError(message) from None
        self._model_summarizer: Summarizer | None = None
        self._extractive: Summarizer = get_summarizer("extractive")
        self._notes = ExtractiveSummarizer(fact_list=False)  # background notes: the ledger appends the facts once
        self._model_failed_at: float | None = None  # when the model last failed (then extractive for a while)
        self._model_error: str = ""
        self._rested = 0  # compactions that did not ask the model since it last failed
        # The openai import is slow: started at the first call (not in __init__: CLI commands that build the
        # host but never call a model do not pay for it), long before the first compaction needs it.
        self._preload = self.model_api() == "openai"

    # -- the configured model route ---------------------------------------------------------

    def model_api(self) -> str | None:
        """The route the ``[model]`` table's model takes ("openai" or "crewai"); None when this strategy
        does not call it (no [model] name, or a named summarizer such as "extractive")."""
        if self.options.summarizer not in (None, "llm"):
            return None
        return model_api(self.settings.model)

    def route_problem(self, connect: bool = False) -> str | None:
        """Why the ``[model]`` this strategy calls cannot be called (with the fix), None if it can (``ctxlife
        check``). With ``connect``, the client is imported and the openai route's endpoint is asked for one token."""
        if self.model_api() is None:
            return None
        return model_route_problem(self.settings.model, connect=connect)

    def _model_completion(self, prose_budget: int) -> Complete:
        """The ``[model]`` table's model: the openai client, or ``crewai.LLM`` (built with the prose budget)."""
        table = self.settings.model
        if model_api(table) == "openai":
            return configured_completion(table)
        options = {"max_tokens": prose_budget, **table.options}
        complete: Complete = ctxlife.completion_for_model(str(table.name), timeout=table.timeout_seconds, **options)
        return complete

    def _read_limit(self, ctx: ctxlife.LLMCallContext, span_tokens: int) -> int | None:
        """How many tokens of an evicted span of ``span_tokens`` the summarizer reads (None: all of it):
        a handover is read up to ``max_read_tokens``, and at most half the window (what one summarizer
        call on a model of that window can take)."""
        limit = self.options.max_read_tokens
        threshold = ctx.threshold
        usual_span = (threshold - self.options.target) * ctx.context_window
        if limit is None or span_tokens <= max(limit, 1.5 * usual_span):
            return None  # a usual compaction reads everything: only a handover is cut
        return max(min(limit, ctx.context_window // 2), 100)

    # -- choosing the summarizer ----------------------------------------------------------

    def _llm(self, complete: Complete, ctx: ctxlife.LLMCallContext) -> LLMSummarizer:
        return LLMSummarizer(
            complete,
            context_window=self.settings.model.context_window or ctx.context_window or None,
        )

    def _summarizer(self, ctx: ctxlife.LLMCallContext) -> tuple[str, Callable[[], Summarizer]]:
        """(name, a factory of the summarizer): the factory may raise (a missing extra): then the
        compaction falls back to the extractive summary."""
        if self.model_api() is not None:

            def model() -> Summarizer:
                if self._model_summarizer is None:
                    prose = int(self.options.max_summary_tokens * 0.7)
                    self._model_summarizer = self._llm(self._model_completion(prose), ctx)
                return self._model_summarizer

            return f"model:{self.settings.model.name}", model
        if self._fixed is not None:
            fixed = self._fixed
            return str(self.options.summarizer or "extractive"), lambda: fixed
        if ctx.complete is not None:
            complete = ctx.complete
            return "agent_llm", lambda: self._llm(complete, ctx)
        if self.options.summarizer == "llm":
            emit("warning", "ctxlife.summarizer_unavailable", strategy=self.name, wanted="llm", using="extractive")
        self._fixed = self._extractive
        return "extractive", lambda: self._extractive

    # -- the hook -------------------------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        if self._preload:
            self._preload = False
            preload_client("openai")
        pace = pace_of(ctx)
        tokens_before = ctx.count()
        pace.called(tokens_before)
        try:
            self._before_call(ctx, tokens_before)
        except BaseException:
            pace.last_count = None  # the host discards this call's edit: the next count is no growth sample
            raise
        pace.last_count = ctx.count()

    def _before_call(self, ctx: ctxlife.LLMCallContext, tokens_before: int) -> None:
        threshold = ctx.threshold
        limit = threshold * ctx.context_window
        extractive_only = False
        self._tend_fold(ctx)
        if self.options.background:
            if tokens_before <= limit:
                return
            # Over the threshold: compact now, never waiting for the model (milliseconds): its running summary
            # of what it has read, and extractive notes of the rest (Fold).
            extractive_only = True
        elif tokens_before <= limit:
            return
        backoff = ctx.state.get("backoff_from")
        if isinstance(backoff, int) and tokens_before <= ctx.context_window:
            # The last compaction could not get under the threshold: wait for real growth (no churn).
            gap = max(self.options.min_gain_tokens, int((threshold - self.options.target) * ctx.context_window / 2))
            if tokens_before < backoff + gap:
                ctx.record("skipped", reason="backing_off", tokens=tokens_before)
                return
        with ExitStack() as held:
            if ctx.store is not None and ctx.session_id is not None:
                ttl = self.settings.model.timeout_seconds + 30
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
            self._compact(ctx, tokens_before, extractive_only=extractive_only)

    # -- hysteresis: room for the next calls -----------------------------------------------

    def _target_tokens(self, ctx: ctxlife.LLMCallContext) -> int:
        """What a compaction aims for: ``target`` x window, lowered so that the next ``headroom_calls``
        calls, each adding what the recent ones added (75th percentile), fit under the threshold."""
        fixed = int(self.options.target * ctx.context_window)
        per_call = pace_of(ctx).per_call()
        if per_call is None or self.options.headroom_calls == 0:
            return fixed
        limit = int((ctx.threshold) * ctx.context_window)
        return max(0, min(fixed, limit - self.options.headroom_calls * per_call))

    def _compact(self, ctx: ctxlife.LLMCallContext, tokens_before: int, *, extractive_only: bool = False) -> None:
        """Replace the span before the kept tail with one summary (``extractive_only``: the offline one,
        the model is not asked: a background summary is not ready)."""
        messages = ctx.messages
        tokens = ctx.tokens
        # What ctxlife inserted for one call only (a recall block) is neither summarized nor kept.
        system, previous, rest = _partition(messages)
        starts = round_starts(rest)  # user turns (not carriers of tool results)
        pinned = [rest[starts[0]]] if starts else []  # the first user message (the task under CrewAI) stays
        first = starts[0] + 1 if pinned else 0
        latest_user = starts[-1] if starts else None
        turn = current_turn_index(rest, starts)  # the question being worked on (not a repeated framework prompt)
        # Where the evicted span may end: at a round start, keeping the last keep_rounds rounds;
        # failing that, at a unit boundary inside them, keeping the last keep_units units.
        keep = self.options.keep_rounds
        round_cuts = [c for c in starts if first < c <= starts[-keep]] if len(starts) > keep else []
        # Over the window itself, the call would fail: then only the latest unit is sure to stay.
        overflow = tokens_before > ctx.context_window
        keep_units = 1 if overflow else self.options.keep_units
        units = unit_starts(rest)
        last_allowed = units[-keep_units] if len(units) > keep_units else 0
        floor = round_cuts[-1] if round_cuts else first
        unit_cuts = [c for c in units if floor < c <= last_allowed and c not in round_cuts]
        cuts = round_cuts + unit_cuts
        # Down to the latest unit, when keeping keep_units would not reach the target (below).
        deeper = sorted(set(cuts) | {c for c in units if floor < c <= units[-1]})
        if not deeper:
            ctx.record("skipped", reason="nothing_to_evict")
            return

        kept_users = sorted({i for i in (turn, latest_user) if i is not None})

        def tail_for(cut: int) -> list[dict[str, Any]]:
            # The question and the latest user message always stay, even when their round's steps
            # are summarized.
            return [rest[i] for i in kept_users if first <= i < cut] + rest[cut:]

        target_tokens = self._target_tokens(ctx)
        fixed = tokens.count_messages(system) + tokens.count_messages(pinned) - 3
        # Each message is counted once (cached by the counter); the tail after each cut is a suffix sum.
        sizes = tokens.count_each(rest)  # each as count_messages((m,)) - 3, in one pass
        after = [0] * (len(rest) + 1)
        for i in range(len(rest) - 1, -1, -1):
            after[i] = after[i + 1] + sizes[i]

        def fitting(candidates: list[int]) -> int | None:
            for candidate in candidates:  # keep as much as the target allows
                tail_tokens = after[candidate] + sum(sizes[i] for i in kept_users if first <= i < candidate)
                if fixed + tail_tokens + self.options.max_summary_tokens <= target_tokens:
                    return candidate
            return None

        found = fitting(cuts)
        if found is None and keep_units > 1 and len(units) > 1:
            # The recent units alone are over the target (large tool results): reach the target down to
            # the latest unit rather than compact again on the next calls (churn).
            found = fitting(deeper)
            if found is None:
                found = deeper[-1]  # as near the target as the latest unit allows
        cut = found if found is not None else (cuts or deeper)[-1]
        kept_tail = tail_for(cut)
        evicted = [m for i, m in enumerate(rest[first:cut], first) if i not in kept_users]
        if not evicted:
            ctx.record("skipped", reason="nothing_to_evict")
            return
        # What the summary message costs besides its text (its prefix and ctxlife's mark line) counts too.
        envelope = tokens.count_message(summary_message(messages, "", self.options.summary_role, ctx.message_format))
        kept_tokens = fixed + tokens.count_messages(kept_tail) + envelope
        # Aim for the target; when what must stay already fills it, still allow half the summary budget.
        # (A quarter bought 0.4 calls per compaction in a 4k window but a model's summary no longer fit:
        # it was condensed without its facts and replaced by the extractive one, issue 39.)
        budget = min(
            self.options.max_summary_tokens,
            max(target_tokens - kept_tokens, self.options.max_summary_tokens // 2),
        )
        previous_text = "\n".join(strip_summary_marker(m.get("content")) for m in previous) or None
        # (= count_messages(evicted) - 3, from the counts above: the evicted are rest[first:cut] but the kept users)
        evicted_tokens = sum(sizes[first:cut]) - sum(sizes[i] for i in kept_users if first <= i < cut)
        replaced_tokens = evicted_tokens + (tokens.count_messages(previous) if previous else 0)
        if replaced_tokens - budget < self.options.min_gain_tokens and not overflow:
            ctx.record("skipped", reason="small_gain", replaceable_tokens=replaced_tokens)
            return

        read = most_recent(evicted, sizes_of=tokens, limit=self._read_limit(ctx, replaced_tokens))
        read = [_without_marks(m) for m in read]
        facts: list[Fact] = extract_facts(read)  # from real messages only
        span_facts = list(facts)
        if previous_text:
            known = {f.key for f in facts}
            for fact in self._carried_facts(ctx, previous_text):
                if fact.key not in known:
                    known.add(fact.key)
                    facts.append(fact)
        name, factory = self._summarizer(ctx)
        started = time.perf_counter()
        fold: Fold | None = None
        pending: list[dict[str, Any]] = []
        notes = ""
        waited: dict[str, Any] = {}
        model_failed = False
        if name != "extractive" and (extractive_only or (self._slower_than_the_pace(ctx) and not self._resting())):
            fold = self._fold_of(ctx, previous_text)  # the model's running summary + notes of the rest
            fresh = [dict(m) for m in read]  # copies: kept until the model has read them
            pending = fold.pending + fresh
            if not extractive_only:  # the foreground waits for what the model has not finished, only that
                pending, waited, model_failed = self._wait_in_foreground(ctx, fold, fresh)
            pending = self._unread(fold, pending, fresh, tokens)
        else:
            ctx.state.get("fold", {}).pop(ctx.view, None)  # a summary of everything: the fold starts again
        attempts: list[tuple[str, Callable[[], Summarizer]]] = [] if fold is not None else [(name, factory)]
        if name != "extractive" or fold is not None:
            attempts.append(("extractive", lambda: self._extractive))
        errors: list[tuple[str, BaseException]] = []
        summary: dict[str, Any] | None = None
        text = ""
        used = name
        for used, make in attempts:
            if used.startswith(("model:", "agent_llm")) and self._resting():
                self._rested += 1
                errors.append((used, SummaryFailed(f"not asked: it failed {self._model_error}")))
                continue
            asked = time.perf_counter()  # (again after make(): building the client is not the model's time)
            try:
                summarizer = make()
                asked = time.perf_counter()
                # A summarizer that does not keep facts itself gets 70% of the budget and the key facts the rest.
                keeps_facts = getattr(summarizer, "fact_list", False) and fold is None
                prose_budget = int(budget * 0.7) if facts and not keeps_facts else budget
                request = SummaryRequest(
                    read, previous_text, prose_budget, tokens.count_text, most_useful(facts, budget)
                )
                if fold is not None:
                    text, notes = self._fold_text(fold, pending, read, request)
                else:
                    text = self._summary_text(summarizer, request, used == "extractive", ctx.state)
                if used.startswith(("model:", "agent_llm")):  # a model's prose, not a summarizer's code
                    carries_some_facts(text, span_facts)
                text = self._with_key_facts(text, facts, tokens.count_text, budget)
                text = escape_surrogates(text)  # lone surrogates from the span cannot be sent as UTF-8
                size = tokens.count_text(text)
                if size > self.options.max_summary_tokens:
                    text = cut_at_lines(text, self.options.max_summary_tokens, tokens.count_text)
                candidate = summary_message(messages, text, self.options.summary_role, ctx.message_format)
                if tokens.count_message(candidate) >= replaced_tokens:
                    raise SummaryFailed(
                        f"summary of {size} tokens is not smaller than the {replaced_tokens} tokens it replaces"
                    )
                summary = candidate
                if used != "extractive" and used == name:
                    self._model_failed_at = None
                    pace_of(ctx).summary_seconds = time.perf_counter() - asked  # slower than the pace: Fold
                break
            except Exception as exc:  # noqa: BLE001 - any failure falls back, loudly
                errors.append((used, exc))
                slow = time.perf_counter() - asked
                if used == name != "extractive" and slow >= FOLD_AFTER_SECONDS:  # a time-out: slow, not down
                    pace_of(ctx).summary_seconds = slow
                if used != "extractive" and not isinstance(exc, SummaryLacksFacts):  # a useless reply: ask again
                    self._model_failed(exc)

        def contents() -> list[str]:  # (for an error event only: 100k texts are not made for nothing)
            return [text_of(m) for m in (*evicted, *previous, *system, *kept_tail)]

        if summary is None:
            if fold is not None:
                fold.written = None  # nothing put in: the next compaction starts a fold afresh
            original = list(messages)
            kept = pinned + kept_tail
            if ctx.message_format == ANTHROPIC and not previous:
                kept = _opening_with_a_user_turn(kept)  # an Anthropic conversation opens with the user
            messages[:] = system + previous + kept
            if ctx.count() >= tokens_before:
                messages[:] = original  # truncating this span would not help either
                ctx.record("skipped", reason="summary_failed_no_gain", error=type(errors[-1][1]).__name__)
                return
            self._failed_event(ctx, errors, contents(), "truncated", len(evicted))
            ctx.record(
                "truncated",
                reason="summary_failed",
                summarizer=name,
                evicted_messages=len(evicted),
                error=type(errors[0][1]).__name__,
            )
            self._note_result(ctx, tokens_before)
            return
        if errors:
            self._failed_event(ctx, errors, contents(), "extractive", len(evicted))
        original = list(messages)
        messages[:] = system + [summary] + pinned + kept_tail
        tokens_after = ctx.count()
        if tokens_after >= tokens_before:
            # Whole-list accounting can disagree with the span's (reordered turns, overheads):
            # a compaction must make the context smaller, or it is not done.
            messages[:] = original
            if fold is not None:
                fold.written = None  # nothing put in: the next compaction starts a fold afresh
            ctx.record("skipped", reason="no_gain", tokens=tokens_before)
            return
        ctx.state["ledger"] = (text, facts[-_LEDGER_LIMIT:])
        kept_facts = len(facts) - len(facts_missing_from(facts, text))
        folded: dict[str, Any] = {}
        if fold is not None:
            fold.pending, fold.notes, fold.written = pending, notes, strip_summary_marker(summary["content"])
            if (fold.model_text is not None or fold.carried_by_model) and not model_failed:  # the model's prose
                used = name
            folded = {"model_read_messages": fold.model_read, "extractive_messages": len(pending)}
            if not model_failed:  # (after a failure the next compaction asks again, and reports it)
                self._start_fold_job(ctx, fold)
        ctx.record(
            "compacted",
            summarizer=used,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            evicted_messages=len(evicted),
            summary_tokens=tokens.count_text(summary["content"]),
            unread_messages=len(evicted) - len(read),
            facts_found=len(facts),
            facts_kept=kept_facts,
            seconds=round(time.perf_counter() - started, 3),
            **({"fallback_from": name} if used != name else {}),
            **({"reason": "summary_not_ready"} if fold is not None and used != name and not model_failed else {}),
            **folded,
            **waited,
        )
        pace = pace_of(ctx)
        pace.compacted_at = time.monotonic()
        pace.model_wrote = strip_summary_marker(summary["content"]) if used == name and fold is None else None
        self._note_result(ctx, tokens_before)

    # -- pieces of a compaction -----------------------------------------------------------

    def _resting(self) -> bool:
        """Whether the model is not asked: it failed less than ``retry_model_after_seconds`` ago, and fewer
        than ``retry_model_after_compactions`` compactions went without it since."""
        failed = self._model_failed_at
        if failed is None or time.monotonic() - failed >= self.options.retry_model_after_seconds:
            return False
        return self._rested < self.options.retry_model_after_compactions

    def _model_failed(self, exc: Exception) -> None:
        """Rest the model (extractive summaries) after it failed; the next error names this failure."""
        self._model_failed_at = time.monotonic()
        self._rested = 0
        self._model_error = f"{time.strftime('%H:%M:%S')}: {type(exc).__name__}: {exc}"[:300]

    def _carried_facts(self, ctx: ctxlife.LLMCallContext, previous_text: str) -> list[Fact]:
        """The ledger of the previous summary: kept in this strategy's state with the summary it belongs
        to; after a restart, read from the summary's own "Key facts" list only (ctxlife wrote it from
        real messages), never from the prose a model wrote."""
        ledger = ctx.state.get("ledger")
        if isinstance(ledger, tuple) and len(ledger) == 2 and ledger[0].strip() in previous_text:
            return list(ledger[1])
        at = previous_text.rfind(FACT_LIST_HEADER)
        return extract_facts(previous_text[at + len(FACT_LIST_HEADER) :]) if at >= 0 else []

    def _failed_event(
        self,
        ctx: ctxlife.LLMCallContext,
        errors: list[tuple[str, BaseException]],
        contents: list[str],
        fallback: str,
        evicted: int,
    ) -> None:
        """One error event for a compaction whose summarizer failed, naming each failure and the fallback."""
        described = []
        for _, exc in errors:
            error, _ = describe_error(exc, contents, log_content=self.settings.log_content)
            described.append(error)
        emit(
            "error",
            "ctxlife.summary_failed",
            strategy=self.name,
            summarizer=errors[0][0],
            session_id=ctx.session_id,
            error=" | ".join(described),
            error_type=type(errors[0][1]).__name__,
            fallback=fallback,
            evicted_messages=evicted,
        )

    def _note_result(self, ctx: ctxlife.LLMCallContext, tokens_before: int) -> None:
        """Remember a compaction that could not get under the threshold (what must stay is too large):
        the next ones wait until the context grew by half the threshold-target gap (no churn)."""
        threshold = ctx.threshold
        after = ctx.count()
        if after > threshold * ctx.context_window:
            ctx.state["backoff_from"] = after
        else:
            ctx.state.pop("backoff_from", None)

    def _summary_text(self, summarizer: Summarizer, request: SummaryRequest, local: bool, state: dict[str, Any]) -> str:
        """The summary of ``request`` within its budget: an over-budget one is condensed by the model
        (asked once for less), then cut at a line; never discarded."""
        count = request.count_tokens
        text = self._summarize(lambda: summarizer.summarize(request), state, local)
        if count(text) <= request.max_tokens:
            return text
        condense = getattr(summarizer, "condense", None)
        if callable(condense) and not local:
            try:
                shorter = self._summarize(lambda: condense(text, int(request.max_tokens * 0.8)), state, local)
                if count(shorter) < count(text):
                    text = shorter
            except Exception:  # noqa: BLE001 - the longer summary is still good: cut it instead
                pass
        return cut_at_lines(text, request.max_tokens, count)

    def _summarize(self, work_fn: Callable[[], str], state: dict[str, Any], local: bool = False) -> str:
        """Run a summarizer call with a time limit; anything but a non-empty string is a failure.

        The extractive summarizer (``local``) runs inline. A model runs in one summary thread at a
        time per session (``state``, the session's ctx.state; other sessions' summaries run at the
        same time): while a summary that timed out is still running, the next compaction falls back
        instead of piling up blocked threads (daemon threads: :func:`run_in_daemon`).
        """
        if local:
            return _checked_text(work_fn())
        running = state.get("running")  # per session: other sessions summarize at the same time
        if running is not None and not running.done():
            raise SummaryFailed("the previous summary has not finished yet (it timed out)")
        future: Future[str] = Future()
        state["running"] = future
        run_in_daemon(future, work_fn, "ctxlife-summary")
        try:
            text = future.result(timeout=self.settings.model.timeout_seconds)
        except TimeoutError:
            raise SummaryFailed(f"summarizer did not answer within {self.settings.model.timeout_seconds} s") from None
        return _checked_text(text)

    def _with_key_facts(self, text: str, facts: list[Fact], count: Any, budget: int) -> str:
        if not facts:
            return text
        missing = facts_missing_from(facts, text)
        if not missing:
            return text
        block = format_fact_list(missing, budget - count(text) - 1, count)
        return f"{text}\n{block}" if block else text


_LEDGER_LIMIT = 2_000  # facts carried from one summary to the next (the most recent ones)


def _checked_text(text: object) -> str:
    if not isinstance(text, str):
        raise SummaryFailed(f"summarizer returned {type(text).__name__}, not text")
    text = strip_summary_marker(text).strip()
    if not text:
        raise SummaryFailed("summarizer returned an empty summary")
    return text


def _without_marks(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without ctxlife's mark lines in its text (a framework folded an inserted message into
    it): neither the summary nor the ledger reads them."""
    content = message.get("content")
    if isinstance(content, str) and "ctxlife:" in content:
        return {**message, "content": strip_inserted_marks(content)}
    return message


_TURN_ROLES = ("user", "assistant", "tool")


def _partition(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The system messages but summaries, the summaries, and the messages neither system nor inserted,
    in one pass (a message with a conversation role and text content that is no mark line, the
    usual one, goes to the last without its mark looked for: :func:`ctxlife.messages.plain_role`)."""
    system: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for m in messages:
        if plain_role(m) in _TURN_ROLES:
            rest.append(m)
        elif is_summary(m):
            previous.append(m)
        elif is_system(m):
            system.append(m)
        elif not is_inserted(m):
            rest.append(m)
    return system, previous, rest


def _opening_with_a_user_turn(kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kept`` from its first user turn on (the units before it are truncated too)."""
    for i, message in enumerate(kept):
        if is_user_turn(message):
            return kept[i:]
    return kept


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
