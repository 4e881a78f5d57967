"""``llm_summary``'s background fold (issue 39), and the pieces the foreground compaction shares with it.

A model slower than the agent's calls summarizes each evicted span in a daemon thread as soon as it is
evicted, folding its running summary (:class:`Fold`); a compaction puts in that running summary plus
extractive notes of the evicted messages the model has not read yet. :class:`BackgroundFold` is the
part of :class:`~ctxlife_strategies.llm_summary.LLMSummary` that keeps it; :class:`Pace` measures
whether the model is slower than the calls. A strategy-private module: only ``llm_summary`` imports it.
"""

from __future__ import annotations

import contextvars
import copy
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ctxlife
from ctxlife.facts import FACT_LIST_HEADER, KIND_PRIORITY, Fact, extract_facts, facts_missing_from
from ctxlife.messages import is_tool_result, text_of
from ctxlife.summarizers import LLMSummarizer, Summarizer, SummaryRequest, cut_at_lines

if TYPE_CHECKING:
    from ctxlife_strategies.llm_summary import LLMSummary


class SummaryFailed(ctxlife.CtxlifeError):
    """A summarizer failed; the strategy fell back to truncation."""


class SummaryLacksFacts(SummaryFailed):
    """A summary that carries none of the facts of the span it would replace ("Sure! Here is the summary.")."""


_PACE_CALLS = 8  # the recent calls whose growth sizes the room a compaction leaves
_MODEL_SHARE = 0.5  # of a background compaction's prose budget: the model's running summary (the rest: notes)
FOLD_AFTER_SECONDS = 1.0  # a foreground summary shorter than this is waited for whole (a wait no one notices)
_MIN_NOTES_TOKENS = 48  # the extractive notes of a background compaction get at least this many
_JOB_FACTS = 24  # ledger facts named in a background summary's prompt
_MAX_PENDING_TOKENS = 32_000  # evicted messages kept for the model to read (more: it is down, or far behind)


@dataclass
class Pace:
    """How one view's context grows: the tokens each recent call added (what came in between two
    calls, not this strategy's own edits), how long the model took to summarize and when the last
    compaction ended (whether the model is slower than the agent's calls)."""

    last_count: int | None = None
    calls: int = 0
    growth: tuple[int, ...] = ()
    summary_seconds: float | None = None  # the model's last summary
    compacted_at: float | None = None  # the end of the last compaction (time.monotonic())
    model_wrote: str | None = None  # the last summary the model made of everything evicted (no notes)

    def called(self, tokens: int) -> None:
        self.calls += 1
        if self.last_count is not None and tokens >= self.last_count:  # a smaller list was edited: no sample
            self.growth = (*self.growth, tokens - self.last_count)[-_PACE_CALLS:]

    def per_call(self) -> int | None:
        """The tokens one call adds: the 75th percentile of the recent calls' (None before two calls)."""
        growth = self.growth
        if len(growth) < 2:
            return None
        return int(statistics.quantiles(growth, n=4, method="inclusive")[2])


@dataclass
class _FoldJob:
    """A model summary being made in the background of the first ``messages`` pending messages."""

    future: Future[str]
    messages: int
    name: str
    stale: bool = False  # what it reads was folded otherwise since: dropped when done
    seconds: float = 0.0  # how long the model took (set before the future is)


@dataclass
class Fold:
    """Background compaction of one view (issue 39: a model slower than the agent's calls). The model
    summarizes each evicted span as soon as it is evicted, folding its running summary (``model_text``,
    of ``model_read`` messages); a compaction never waits for it: it puts in the running summary made
    so far plus extractive notes of the evicted messages the model has not read yet (``pending``,
    copies, oldest first). ``written`` is the summary text last put in, ``carried`` the summary the
    history started from (folded into the model's first)."""

    carried: str | None = None
    carried_by_model: bool = False
    model_text: str | None = None
    model_read: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)
    notes: str | None = None  # the extractive notes of ``pending`` in the last summary (None: made again)
    written: str | None = None
    job: _FoldJob | None = None
    failed_call: int | None = None  # the call (Pace.calls) in which the model's summary last failed


def pace_of(ctx: ctxlife.LLMCallContext) -> Pace:
    paces: dict[str, Pace] = ctx.state.setdefault("pace", {})  # per view: each lane grows on its own
    return paces.setdefault(ctx.view, Pace())


def _prose_of(summary: str | None) -> str | None:
    """A previous summary's text without its "Key facts" list (the ledger carries the facts)."""
    if not summary:
        return None
    at = summary.rfind(FACT_LIST_HEADER)
    return (summary[:at] if at >= 0 else summary).strip() or None


def carries_some_facts(text: str, span_facts: list[Fact]) -> None:
    """Raise :class:`SummaryLacksFacts` when the span had facts and ``text`` carries none of them: such
    a summary would replace the span and lose what it held (the extractive summary is used instead)."""
    if not span_facts:
        return
    missing = facts_missing_from(span_facts, text)
    if len(missing) == len(span_facts):
        kinds = ", ".join(sorted({f.kind for f in span_facts}))  # kinds only: facts are message content
        raise SummaryLacksFacts(
            f"the summary carries none of the {len(span_facts)} facts of the span it would replace ({kinds}); "
            "the extractive summary is used instead"
        )


def most_recent(
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


def most_useful(facts: list[Fact], budget: int) -> list[Fact]:
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


def run_in_daemon(future: Future[str], work_fn: Callable[[], str], name: str) -> None:
    """Run ``work_fn`` in a daemon thread (in the caller's context variables), its result or error into
    ``future``. A daemon, not a ThreadPoolExecutor worker (which the interpreter joins at exit): a model
    call that hangs never keeps the program from exiting."""

    def work() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(work_fn())
            except BaseException as exc:  # noqa: BLE001 - handed back to whoever reads the future
                future.set_exception(exc)

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(work,), name=name, daemon=True).start()


class BackgroundFold:
    """The background fold of :class:`~ctxlife_strategies.llm_summary.LLMSummary` (its base): the model's
    running summary, made span by span."""

    # What it uses of the strategy (declared here for the type checker).
    options: LLMSummary.Options
    settings: ctxlife.SharedSettings
    _notes: Summarizer
    _model_failed_at: float | None
    _summarizer: Callable[[ctxlife.LLMCallContext], tuple[str, Callable[[], Summarizer]]]
    _resting: Callable[[], bool]
    _summary_text: Callable[[Summarizer, SummaryRequest, bool, dict[str, Any]], str]
    _failed_event: Callable[[ctxlife.LLMCallContext, list[tuple[str, BaseException]], list[str], str, int], None]
    _model_failed: Callable[[Exception], None]

    def _fold_of(self, ctx: ctxlife.LLMCallContext, previous_text: str | None) -> Fold:
        """This view's fold, when the list's summary is the one it last wrote; else a new one that starts
        from that summary (the first compaction, a restored session, a list edited or handed over since:
        a model summary of another history is never put in)."""
        folds: dict[str, Fold] = ctx.state.setdefault("fold", {})
        fold = folds.get(ctx.view)
        if fold is None or fold.written != (previous_text or ""):
            job = fold.job if fold is not None else None
            if job is not None:
                job.stale = True  # finishes on its own; none starts before (one summary thread per session)
            by_model = previous_text is not None and previous_text == pace_of(ctx).model_wrote
            fold = folds[ctx.view] = Fold(carried=_prose_of(previous_text), carried_by_model=by_model, job=job)
        else:
            self._harvest(ctx, fold)
        return fold

    def _slower_than_the_pace(self, ctx: ctxlife.LLMCallContext) -> bool:
        """Whether the model's last summary took longer than the agent's calls took since the last compaction
        ended: then the foreground too compacts with the running summary (Fold), waiting only for the span the
        model is reading, instead of for a summary of everything (issue 39: 13.5 s at each compaction)."""
        pace = pace_of(ctx)
        if pace.summary_seconds is None or pace.compacted_at is None or pace.summary_seconds < FOLD_AFTER_SECONDS:
            return False
        return pace.summary_seconds > time.monotonic() - pace.compacted_at

    def _wait_in_foreground(
        self, ctx: ctxlife.LLMCallContext, fold: Fold, fresh: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], dict[str, Any], bool]:
        """The foreground's wait, at most ``timeout_seconds``, for the model's summary under way (the span it
        started on right after the last compaction). With none under way, the model reads what is pending
        and the older half of ``fresh`` (the span this compaction evicts) now; the newer half is left to the
        notes and to the summary started after this compaction (the next compaction waits only for that).
        (The messages still unread after the wait, the event's ``waited_seconds``, whether the model failed.)"""
        started = time.perf_counter()
        if fold.job is None and fold.failed_call == pace_of(ctx).calls:
            return fold.pending + fresh, {}, True  # it failed in this call already (reported): not asked again
        if fold.job is None:
            later = most_recent(fresh, sizes_of=ctx.tokens, limit=ctx.tokens.count_messages(fresh) // 2)
            later = later if len(later) < len(fresh) else []
            fold.pending = fold.pending + fresh[: len(fresh) - len(later)]
            self._start_fold_job(ctx, fold)
            fresh = later
        job = fold.job
        if job is not None and not job.stale:
            try:
                job.future.exception(timeout=self.settings.model.timeout_seconds)
            except TimeoutError:
                pass  # still running: this compaction uses the notes; the summary is taken when it is done
        failed = self._harvest(ctx, fold) is False or fold.failed_call == pace_of(ctx).calls
        return fold.pending + fresh, {"waited_seconds": round(time.perf_counter() - started, 3)}, failed

    def _tend_fold(self, ctx: ctxlife.LLMCallContext) -> None:
        """At each call (cheap): take the model's finished summary, and start the next one over the messages
        evicted since, so that the model never idles while some are unread."""
        fold = ctx.state.get("fold", {}).get(ctx.view)
        if fold is not None:
            self._harvest(ctx, fold)
            if fold.failed_call != pace_of(ctx).calls:
                self._start_fold_job(ctx, fold)

    def _harvest(self, ctx: ctxlife.LLMCallContext, fold: Fold) -> bool | None:
        """Take the finished model summary of the oldest pending messages: it becomes the running summary
        the next compaction puts in; a failed one leaves them to the extractive notes (one error event).
        True when one was taken, False when it failed, None when there was none."""
        if fold.job is None or not fold.job.future.done():
            return None
        job, fold.job = fold.job, None
        try:
            text = job.future.result(timeout=0)
        except Exception as exc:  # noqa: BLE001 - the extractive notes still cover these messages
            if job.stale:
                return None
            if not isinstance(exc, SummaryLacksFacts):  # a useless reply: ask again (no back-off)
                self._model_failed(exc)
            contents = [text_of(m) for m in fold.pending[: job.messages]]
            self._failed_event(ctx, [(job.name, exc)], contents, "extractive", job.messages)
            fold.failed_call = pace_of(ctx).calls  # one failure event per call: asked again from the next
            return False
        if job.stale:
            return None
        self._model_failed_at = None
        pace_of(ctx).summary_seconds = job.seconds
        fold.model_text, fold.carried, fold.notes = text, None, None
        fold.pending = fold.pending[job.messages :]
        fold.model_read += job.messages
        return True

    def _start_fold_job(self, ctx: ctxlife.LLMCallContext, fold: Fold) -> None:
        """Summarize the pending messages with the model in a daemon thread (one at a time per view), folding
        the running summary: one model call, the span condensed extractively first when it is longer."""
        if fold.job is not None or not fold.pending or self._resting():
            return
        name, factory = self._summarizer(ctx)
        if name == "extractive":
            return
        messages = list(fold.pending)
        span_facts = extract_facts(messages)
        budget = max(32, int(self.options.max_summary_tokens * 0.7 * _MODEL_SHARE))
        # A short prompt (the fact block alone could take 300 tokens of ~1,300): the ledger appends what the
        # summary lost anyway.
        facts = most_useful(span_facts, budget)[:_JOB_FACTS]
        request = SummaryRequest(messages, fold.model_text or fold.carried, budget, ctx.tokens.count_text, facts)
        state = ctx.state
        read_limit = self.options.max_summary_tokens  # a longer span is condensed extractively first

        def summarize() -> str:  # its error is handed back at the harvest
            summarizer = factory()
            if isinstance(summarizer, LLMSummarizer):  # one short call: ready a few calls later
                summarizer = copy.copy(summarizer)
                summarizer.max_pieces = 1
                summarizer.max_input_tokens = min(summarizer.max_input_tokens or read_limit, read_limit)
            text = self._summary_text(summarizer, request, False, state)
            carries_some_facts(text, span_facts)
            job.seconds = time.perf_counter() - started
            return text

        job = fold.job = _FoldJob(Future(), len(messages), name)
        started = time.perf_counter()
        run_in_daemon(job.future, summarize, "ctxlife-background-summary")

    def _unread(
        self,
        fold: Fold,
        pending: list[dict[str, Any]],
        fresh: list[dict[str, Any]],
        tokens: ctxlife.TokenCounter,
    ) -> list[dict[str, Any]]:
        """``pending``, when under ``_MAX_PENDING_TOKENS``. Over it (a model down, or far behind) the fold
        starts again from the summary in the list: the model reads the newest span next."""
        if tokens.count_messages(pending) <= _MAX_PENDING_TOKENS:
            return pending
        if fold.job is not None:
            fold.job.stale = True
        fold.carried, fold.model_text, fold.notes, fold.pending = _prose_of(fold.written), None, None, []
        fold.carried_by_model = False
        return fresh

    def _fold_text(
        self, fold: Fold, pending: list[dict[str, Any]], read: list[dict[str, Any]], request: SummaryRequest
    ) -> tuple[str, str]:
        """(the summary text of a background compaction, its notes): the model's running summary (or the
        summary the history started from) in up to ``_MODEL_SHARE`` of the budget, then extractive notes
        of ``pending`` (the evicted messages the model has not read) in the rest. The notes run too: this
        span's are folded into the last compaction's (milliseconds), all of them made again only after
        the model read some."""
        count = request.count_tokens
        head = fold.model_text or fold.carried or ""
        if head:
            head = cut_at_lines(head, int(request.max_tokens * _MODEL_SHARE), count)
        if not pending:
            return head, ""
        # (A tiny budget still gets notes: the summary is cut to max_summary_tokens after the key facts.)
        rest = max(request.max_tokens - count(head) - 1, _MIN_NOTES_TOKENS)
        span, earlier = (read, fold.notes) if fold.notes is not None else (pending, None)
        try:
            notes = self._summary_text(self._notes, SummaryRequest(span, earlier, rest, count, request.facts), True, {})
        except SummaryFailed:
            if not head:
                raise
            return head, ""  # nothing of the span fits: the running summary and the ledger's key facts
        return (f"{head}\n{notes}" if head else notes), notes
