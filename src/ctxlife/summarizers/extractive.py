"""The offline summarizer: picks the lines worth the most per token, then adds the facts they miss."""

from __future__ import annotations

from collections.abc import Callable
from math import fsum

from ctxlife.errors import ConfigError
from ctxlife.facts import FACT_LIST_HEADER, Fact, extract_facts, facts_missing_from, format_fact_list
from ctxlife.messages import QUOTE_MARK, QUOTED_NOTE, quote
from ctxlife.summarizers.base import SummaryRequest, running_summary_and_span
from ctxlife.summarizers.candidates import Candidates, FactKey, Snippet, SummaryLine
from ctxlife.summarizers.rendering import fit_to_tokens

_MIN_COST = 10  # short units are not free: "Is that OK?" says little on its own
_MIN_RATIO = 0.2  # value per token under which a low-value fragment is not worth its tokens
_UNLIMITED = 10**9


class ExtractiveSummarizer:
    """Offline summarizer: keeps what carries the ledger's facts, the user's requests, decisions, open
    questions and errors, and fits the budget exactly (what it keeps first, for users: docs/strategies/llm_summary.md,
    "Summarizers").

    How it works:

    1. The span is cut into candidate units (:mod:`ctxlife.summarizers.candidates`): sentences of user and
       assistant messages (a markdown list stays one unit with its heading), one line per tool call,
       ``called NAME(args)``, with a short result riding along (``-> Error: ...``) or fragments of a long one
       (JSON results are split along their structure; fragments of a list element are labelled with its
       id/code). Long free-text arguments (a ``think`` tool's thought) become prose; a repeated call shows only
       the arguments that changed; a call without a result shows ``-> (no result yet, call id ...)``. CrewAI
       ReAct text (``Action:``/``Action Input:``/``Observation:``) is read as tool calls.
    2. Each unit is worth a base value (requests and the first request most, errors, decisions, questions of
       the last message, state-changing calls) plus the weight of the ledger facts it adds: ids and codes weigh
       most, and facts said in the conversation, passed as arguments or kept by the previous summary weigh
       about three times more than facts only seen in tool output.
    3. Up to ``fact_share`` of the budget is reserved for a ``Key facts:`` block (only as much as the whole
       ledger needs). Stated decisions, constraints and names go in first, within a third of the rest
       (:meth:`_Draft._pin_stated`), state-changing tool calls next, newest first; then units are picked
       greedily by value per token (:meth:`_Draft._select`); duplicates are skipped. The ledger facts the
       chosen units do not carry go in the ``Key facts:`` block (:func:`ctxlife.facts.format_fact_list`), and
       budget still left is spent on more units.
    4. The previous summary is folded first: its lines compete in the same selection and its facts (its own
       ``Key facts:`` block is parsed back) join the ledger at full weight, so folding compresses it only when
       the budget forces it and never nests one summary or fact block inside another.

    Lines are rendered in chronological order (previous summary first). The result is checked with
    ``count_tokens`` and never exceeds ``max_tokens``.

    Options: ``fact_list`` (append the ``Key facts:`` block, default on), ``fact_share`` (its budget share,
    default 0.5), ``max_call_tokens`` (budget of one ``called ...`` line, x1.5 for state-changing tools),
    ``fragment_tokens`` (size of tool-result fragments).
    """

    name = "extractive"

    def __init__(
        self,
        *,
        fact_list: bool = True,
        fact_share: float = 0.5,
        max_call_tokens: int = 60,
        fragment_tokens: int = 40,
    ) -> None:
        if not 0.0 <= fact_share <= 1.0:
            raise ConfigError(f"ExtractiveSummarizer: fact_share must be within [0, 1], got {fact_share!r}")
        if max_call_tokens < 8 or fragment_tokens < 8:
            raise ConfigError("ExtractiveSummarizer: max_call_tokens and fragment_tokens must be >= 8")
        self.fact_list = fact_list
        self.fact_share = fact_share
        self.max_call_tokens = max_call_tokens
        self.fragment_tokens = fragment_tokens

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"ExtractiveSummarizer(fact_list={self.fact_list}, fact_share={self.fact_share})"

    # ---- public -----------------------------------------------------------------------

    def summarize(self, request: SummaryRequest) -> str:
        budget = request.max_tokens
        if budget <= 0:
            return ""
        cache: dict[str, int] = {}
        raw_count = request.count_tokens

        def count(s: str) -> int:
            n = cache.get(s)
            if n is None:
                n = int(raw_count(s))
                cache[s] = n
            return n

        return _Draft(self, request, count).build()


class _Draft:
    """One :meth:`ExtractiveSummarizer.summarize` call: the candidates of the span and the
    ones chosen so far, assembled into a summary that fits the budget.

    Fact weights are added with ``math.fsum``: the facts of a unit are a set, whose order
    changes with the interpreter's hash seed, and a plain float sum in that order made the
    same input give different summaries in different processes."""

    def __init__(self, cfg: ExtractiveSummarizer, request: SummaryRequest, count: Callable[[str], int]) -> None:
        self.cfg = cfg
        self.request = request
        self.count = count
        self.budget = request.max_tokens
        self.candidates = Candidates(count, max_call_tokens=cfg.max_call_tokens, fragment_tokens=cfg.fragment_tokens)

    def build(self) -> str:
        c = self.candidates
        previous, span = running_summary_and_span(self.request)
        previous_lines, previous_facts = _split_previous(previous)
        span_facts = list(self.request.facts) if self.request.facts is not None else None
        c.build_ledger("\n".join(previous_lines), previous_facts, span, span_facts)

        first_request = next((i for i, ln in enumerate(previous_lines) if ln.startswith("User:")), None)
        for i, previous_line in enumerate(previous_lines):
            c.add_prose("prev", previous_line, 0.0, 1.5 if i == first_request else 0.0)
        c.add_span(span)

        budget = self.budget
        if any(line.kind == "call" and line.has_result for line in c.lines):
            # room for the line that says what the quote bar on tool output means (added last)
            budget = max(budget - self.count(QUOTED_NOTE + "\n"), 0)
        covered: set[FactKey] = set()
        # 1) the narrative, leaving room for a Key facts block (at most fact_share of the budget)
        reserve = 0
        if self.cfg.fact_list and c.ledger and self.cfg.fact_share > 0:
            full_list = format_fact_list(c.ledger, _UNLIMITED, self.count)
            reserve = min(int(budget * self.cfg.fact_share), self.count(full_list))
        narrative = max(budget - reserve, 0)
        # what someone stated (a decision, a constraint, a name) goes in first, within 1/3 of it
        stated = self._pin_stated(narrative // 3, covered)
        # tool calls that changed something (book, cancel, update, send, ...) go in first,
        # newest first, within 3/5 of the narrative budget
        pinned = 0
        writes = sorted((line for line in c.lines if line.kind == "call" and line.write), key=lambda g: -g.order)
        if writes and writes[0].call != writes[0].call_full:
            # the newest write is shown with all its arguments if that fits
            newest = writes[0]
            short = newest.call
            c.set_call_head(newest, newest.call_full)
            if newest.head_tokens > narrative // 2:
                c.set_call_head(newest, short)
        for line in writes:
            if pinned + line.head_tokens <= narrative * 3 // 5:
                line.opened = True
                pinned += line.head_tokens
                covered.update(line.head_facts)
        self._select(narrative - stated - pinned, covered, _MIN_RATIO)
        text = self._compose(budget)
        # 2) spend what the Key facts block did not need on more narrative
        for _ in range(3):
            left = budget - self.count(text)
            if left <= 2:
                break
            before = self._chosen_count()
            self._select(left - 1, covered)
            if self._chosen_count() == before:
                break
            text = self._compose(budget)
        if QUOTE_MARK in text:
            text = f"{QUOTED_NOTE}\n{text}"
        return fit_to_tokens(text, self.budget, self.count)

    def _pin_stated(self, room: int, covered: set[FactKey]) -> int:
        """Put in the sentences stating a decision, a constraint or a person's name, within ``room``
        tokens: decisions before names (a name also survives in the Key facts block); within each,
        the previous summary's first (they were kept before), then the user's, then the assistant's,
        newest first. Adds the facts they carry to ``covered``; returns the tokens used."""
        rank = {"prev": 0, "user": 1, "assistant": 2}
        stated = [s for s in self.candidates.snippets if s.stated and s.line.kind in rank]
        stated.sort(key=lambda s: (-s.stated, rank[s.line.kind], 0 if s.line.kind == "prev" else -s.order))
        used = 0
        for s in stated:
            cost = s.tokens + (0 if s.line.opened else s.line.head_tokens)
            if used + cost > room:
                continue
            s.selected = True
            s.line.opened = True
            used += cost
            covered.update(s.facts)
        return used

    def _chosen_count(self) -> int:
        c = self.candidates
        return sum(s.selected for s in c.snippets) + sum(line.opened for line in c.lines)

    def _select(self, budget: int, covered: set[FactKey], min_ratio: float = 0.0) -> None:
        """Greedy: add the unit (sentence, result fragment or tool-call line) with the
        best value per token that still fits ``budget`` more tokens, until none does.
        Low-value units (fragments, filler) worth less than ``min_ratio`` per token
        are left out: their facts are cheaper in the ``Key facts:`` block."""
        weights = self.candidates.weights
        used = 0
        snippets = [s for s in self.candidates.snippets if not s.selected]
        calls = [line for line in self.candidates.lines if line.kind == "call"]
        while True:
            best: Snippet | SummaryLine | None = None
            best_ratio = 0.0
            for s in snippets:
                if s.selected:
                    continue
                line = s.line
                cost = s.tokens + (0 if line.opened else line.head_tokens)
                if used + cost > budget:
                    continue
                gain = s.base + fsum(weights.get(k, 0.0) for k in s.facts if k not in covered)
                if not line.opened:
                    gain += line.head_value * 0.5 + fsum(
                        weights.get(k, 0.0) for k in line.head_facts if k not in covered and k not in s.facts
                    )
                ratio = gain / max(cost, _MIN_COST)
                if s.base < 1.0 and ratio < min_ratio:
                    continue  # a low-value fragment: its facts are cheaper in the Key facts block
                if ratio > best_ratio:
                    best, best_ratio = s, ratio
            for line in calls:
                if line.opened or used + line.head_tokens > budget:
                    continue
                gain = line.head_value + fsum(weights.get(k, 0.0) for k in line.head_facts if k not in covered)
                ratio = gain / max(line.head_tokens, _MIN_COST)
                if ratio > best_ratio:
                    best, best_ratio = line, ratio
            if best is None:
                return
            if isinstance(best, SummaryLine):
                best.opened = True
                used += best.head_tokens
                covered.update(best.head_facts)
                continue
            line = best.line
            if not line.opened:
                line.opened = True
                used += line.head_tokens
                covered.update(line.head_facts)
            best.selected = True
            used += best.tokens
            covered.update(best.facts)

    def _render_body(self) -> str:
        by_line: dict[int, list[Snippet]] = {}
        for s in self.candidates.snippets:
            if s.selected:
                by_line.setdefault(s.line.order, []).append(s)
        out: list[str] = []
        for line in self.candidates.lines:
            if not line.opened:
                continue
            parts = [s.text for s in sorted(by_line.get(line.order, []), key=lambda x: x.order)]
            if line.kind == "call":
                if parts:
                    # what a tool returned is third-party text: each part quoted (a later fold that
                    # splits the line into sentences keeps the bar on every one)
                    out.append(f"{line.head} -> " + "; ".join(quote(p) for p in parts))
                else:
                    out.append(line.head)
            elif parts:
                out.append((line.head + " " if line.head else "") + " ".join(parts))
        return "\n".join(out)

    def _drop_least_valuable(self) -> bool:
        """Drop the selected unit (or tool call line) worth the least per token."""
        weights = self.candidates.weights
        selected = [s for s in self.candidates.snippets if s.selected]
        worst: Snippet | SummaryLine | None = None
        worst_ratio = float("inf")
        for s in selected:
            ratio = (s.base + fsum(weights.get(k, 0.0) for k in s.facts)) / max(s.tokens, 1)
            if ratio < worst_ratio:
                worst, worst_ratio = s, ratio
        for line in self.candidates.lines:
            if line.opened and not any(s.selected and s.line is line for s in selected):
                value = line.head_value + fsum(weights.get(k, 0.0) for k in line.head_facts)
                ratio = value / max(line.head_tokens, 1)
                if ratio < worst_ratio:
                    worst, worst_ratio = line, ratio
        if worst is None:
            return False
        if isinstance(worst, Snippet):
            worst.selected = False
            still_shown = any(s.selected and s.line is worst.line for s in self.candidates.snippets)
            if not still_shown and worst.line.kind != "call":
                worst.line.opened = False
        else:
            worst.opened = False
        return True

    def _compose(self, budget: int) -> str:
        """Body + the missing facts, guaranteed within ``budget``."""
        while True:
            body = self._render_body()
            body_tokens = self.count(body) if body else 0
            if body_tokens <= budget:
                break
            if not self._drop_least_valuable():
                body, body_tokens = "", 0
                break
        ledger = self.candidates.ledger
        if not self.cfg.fact_list or not ledger:
            return body
        missing = facts_missing_from(ledger, body) if body else list(ledger)
        if not missing:
            return body
        # the most valuable missing facts first (said in the conversation, passed as arguments)
        weights = self.candidates.weights
        missing.sort(key=lambda f: -weights.get(f.key, 0.0))
        sep = "\n" if body else ""
        room = budget - (self.count(body + sep) if body else 0)
        while room > 0:
            block = _fact_block(missing, room, self.count)
            if not block:
                break
            out = body + sep + block
            if self.count(out) <= budget:
                return out
            room -= max(1, self.count(out) - budget)
        return body


def _fact_block(facts: list[Fact], room: int, count: Callable[[str], int]) -> str:
    """The ``Key facts:`` block of the longest prefix of ``facts`` that fits ``room``."""
    full = format_fact_list(facts, _UNLIMITED, count)
    if not full or count(full) <= room:
        return full if full and count(full) <= room else ""
    lo, hi = 0, len(facts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(format_fact_list(facts[:mid], _UNLIMITED, count)) <= room:
            lo = mid
        else:
            hi = mid - 1
    return format_fact_list(facts[:lo], room, count) if lo else ""


def _split_previous(previous: str) -> tuple[list[str], list[Fact]]:
    """Lines of a previous summary, and the facts it carries (its ``Key facts:``
    block is parsed back into facts by :func:`extract_facts`, not kept as prose)."""
    if not previous:
        return [], []
    lines: list[str] = []
    for raw in previous.splitlines():
        line = raw.strip()
        idx = line.find(FACT_LIST_HEADER)
        if idx >= 0:
            line = line[:idx].strip()
        if line and line != QUOTED_NOTE:  # the note is the summary's own, written again if needed
            lines.append(line)
    return lines, extract_facts(previous)
