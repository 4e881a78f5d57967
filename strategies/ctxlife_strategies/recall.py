"""``recall``: what compaction evicted comes back when the conversation needs it.

Before each model call (after compaction), the question being worked on (the latest user turn, or
the task at the first call of a task) is searched in the session's raw history. Passages that match
and are no longer in the context come back as one marked user message placed right before the
latest user message::

    Recalled from earlier in this conversation (these messages are no longer above; ...):
    [2023-04-30 20:14, message 17]
    assistant: That sounds like a trip worth taking. Do you have any other places in mind?
    user: I also like the coast. If you like, you can stay at "The Harbour Lodge". ...

The block is replaced on every call (never accumulated), kept within ``max_tokens`` (default 10% of
the window), never recorded into the raw history and never summarized. Passages are messages (a
tool call, or one chunk of a long tool result, can be recalled alone) with a neighbour on each side.

The search is lexical (SQLite FTS5, BM25, Porter stemming; Chinese and other scripts without spaces
as character bigrams), offline, and incremental: each call indexes only the records recorded since
the last one. The index is a cache of the raw history: a lost or stale index is rebuilt from it.

The agent can also search itself with the ``ctxlife_search_history(query, limit)`` tool, offered to
every agent of a wrapped crew (answered at node 3, where the session is known).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Literal

from pydantic import Field

import ctxlife
from ctxlife.events import emit
from ctxlife.messages import current_turn_index, is_recall_block, mark_inserted
from ctxlife.recall import HistorySearch, live_keys, render
from ctxlife.strategy import ToolSpec

SEARCH_TOOL = "ctxlife_search_history"


def _tool_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


class Recall(ctxlife.Strategy):
    """Bring back evicted passages of the raw history that the current question refers to."""

    name = "recall"

    class Options(ctxlife.Options):
        max_tokens: int | None = Field(
            None, ge=50, description="Most tokens of the recalled block (default: max_share of the window)."
        )
        max_share: float = Field(0.1, gt=0, le=0.5, description="Budget of the block as a share of the window.")
        top_k: int = Field(4, ge=1, le=50, description="Most passages in the block.")
        min_score: float = Field(
            1.0,
            ge=0,
            description="Least BM25 score a passage needs (FTS5's bm25, higher is better): below it, the "
            "question is not taken to refer to that passage.",
        )
        min_coverage: float = Field(
            0.0,
            ge=0,
            le=1,
            description="Least share of the question's weight (its words, rare ones weighing more) a passage must "
            "hold: matches on a minor word alone (a file suffix, a common verb) are not recalled.",
        )
        context: int = Field(1, ge=0, le=5, description="Neighbouring messages shown on each side of a match.")
        tool_weight: float = Field(
            3.0,
            gt=0,
            le=20,
            description="Multiply the score of tool results by this: BM25 ranks long structured results "
            "below short chat messages that share a question's wording, yet fetched data is what users "
            "ask about again.",
        )
        hit_tokens: int = Field(
            250,
            ge=24,
            description="A matching message longer than this is cut to the excerpt holding most of the "
            "question's words.",
        )
        context_tokens: int = Field(
            100, ge=0, description="A neighbouring message longer than this is cut the same way."
        )
        index_dir: str | None = Field(
            None,
            description='Where the search index lives: a folder, "memory", or (default) beside a file or '
            "SQLite store (in memory for Redis: each worker rebuilds it from the raw history once).",
        )
        chunk_chars: int = Field(
            1200, ge=200, description="Long messages (tool results) are indexed and recalled in chunks of this size."
        )
        search_tool: bool = Field(
            True, description="Offer the ctxlife_search_history tool to the agents of a wrapped crew."
        )
        tool_max_tokens: int = Field(1000, ge=100, description="Most tokens of one ctxlife_search_history answer.")
        role: Literal["user", "assistant"] = Field(
            "user", description="Role of the recalled block (it sits right before the latest user message)."
        )

    def __init__(self, options: Any = None, settings: Any = None) -> None:
        super().__init__(options, settings)
        self._searches: dict[int, tuple[Any, HistorySearch]] = {}
        self._lock = threading.Lock()

    def _search_for(self, store: Any) -> HistorySearch:
        with self._lock:
            found = self._searches.get(id(store))
            if found is None or found[0] is not store:
                found = (
                    store,
                    HistorySearch(store, index_dir=self.options.index_dir, chunk_chars=self.options.chunk_chars),
                )
                self._searches[id(store)] = found
            return found[1]

    def close(self) -> None:
        with self._lock:
            searches, self._searches = list(self._searches.values()), {}
        for _, search in searches:
            search.close()

    # -- node 2 ---------------------------------------------------------------------------

    @ctxlife.hookimpl(tryfirst=True)
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        # The previous call's block goes before anything else looks at the context: it is not
        # part of the conversation (not recorded, not summarized).
        _strip(ctx.messages)

    @ctxlife.hookimpl(specname="ctxlife_before_llm_call", trylast=True)
    def recall_after_compaction(self, ctx: ctxlife.LLMCallContext) -> None:
        messages = ctx.messages
        _strip(messages)
        if ctx.session_id is None or ctx.store is None:
            if not ctx.state.get("warned"):
                ctx.state["warned"] = True
                emit(
                    "warning",
                    "ctxlife.recall_without_history",
                    strategy=self.name,
                    hint="recall searches the raw history: configure a session store and a session_id",
                )
            return
        latest = _last_user(messages)
        turn = current_turn_index(messages)
        if latest is None or turn is None:
            return
        query = _own_words(messages, turn)
        if not query.strip():
            return
        budget = self.options.max_tokens or int(self.options.max_share * ctx.context_window)
        room = ctx.context_window - ctx.count() - 64  # never push the call over the window
        budget = min(budget, room)
        if budget < 50:
            ctx.record("skipped", reason="no_room")
            return
        search = self._search_for(ctx.store)
        visible = live_keys(messages)
        passages = search.passages(
            ctx.session_id,
            query,
            limit=self.options.top_k,
            in_view=lambda record: (record.role, record.text) in visible,
            context=self.options.context,
            min_score=self.options.min_score,
            tool_weight=self.options.tool_weight,
            min_coverage=self.options.min_coverage,
        )
        if not passages:
            return
        text, shown = render(
            passages,
            budget,
            ctx.tokens.count_text,
            query=query,
            context_tokens=self.options.context_tokens,
            hit_tokens=self.options.hit_tokens,
        )
        if text is None:
            ctx.record("skipped", reason="over_budget", passages=len(passages))
            return
        # Registered as inserted: never recorded, summarized or recalled again, even as a copy.
        messages.insert(latest, mark_inserted({"role": self.options.role, "content": text}, "recall"))
        ctx.record(
            "recalled",
            passages=len(shown),
            messages=sum(len(p.records) for p in shown),
            tokens=ctx.tokens.count_text(text),
            seqs=[p.hit.seq for p in shown],
            scores=[round(p.hit.score, 3) for p in shown],
        )

    # -- the search tool ------------------------------------------------------------------

    def provided_tools(self) -> list[ToolSpec]:
        if not self.options.search_tool:
            return []
        return [
            ToolSpec(
                name=SEARCH_TOOL,
                description=(
                    "Search this conversation's full history, including what is no longer in your context "
                    "(older turns, earlier tool results). Give words that the passage you need would "
                    "contain (names, titles, ids, dates such as 'May 2nd'); limit is how many passages "
                    "to return (default 5). Returns the matching messages with their date and position."
                ),
                function=self._search_without_session,
                parameters={
                    "query": "Words to look for, e.g. 'order 4711 refund' or 'movie recommended'.",
                    "limit": 'How many passages to return, e.g. "5".',
                },
            )
        ]

    def _search_without_session(self, query: str = "", limit: str | int = "5") -> str:
        return (
            f"{SEARCH_TOOL}: the conversation history is not available here (no session store is "
            "configured); answer from the context you have."
        )

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        if _tool_key(ctx.tool_name) != SEARCH_TOOL:
            return
        args = ctx.tool_input if isinstance(ctx.tool_input, dict) else {}
        query = " ".join(str(args.get("query", "") or "").split())
        try:
            limit = max(1, min(20, int(str(args.get("limit", "") or 5).strip())))
        except ValueError:
            limit = 5
        if ctx.store is None or ctx.session_id is None:
            ctx.result = self._search_without_session(query, limit)
            return
        ctx.result = self.search_history(ctx.store, ctx.session_id, query, limit, count=ctx.tokens.count_text)
        ctx.record("searched", limit=limit)

    def search_history(self, store: Any, session_id: str, query: str, limit: int = 5, *, count: Any = None) -> str:
        """The text ``ctxlife_search_history`` answers: the best passages for ``query``, within the tool's cap."""
        if not query:
            return f'{SEARCH_TOOL}: give a query, e.g. {{"query": "refund order 4711", "limit": "5"}}.'
        if count is None:
            count = ctxlife.TokenCounter(getattr(self.settings, "model", None)).count_text
        passages = self._search_for(store).passages(session_id, query, limit=limit, context=self.options.context)
        if not passages:
            return f'{SEARCH_TOOL}: nothing in this conversation\'s history matches "{query}".'
        text, shown = render(
            passages,
            self.options.tool_max_tokens,
            count,
            query=query,
            header=f'Passages of this conversation\'s history matching "{query}" (best first):',
            context_tokens=self.options.context_tokens,
            hit_tokens=max(self.options.hit_tokens, self.options.tool_max_tokens // 2),
        )
        return text or f"{SEARCH_TOOL}: the matching passages are too long to show; try more specific words."


def _own_words(messages: list[dict[str, Any]], turn: int) -> str:
    """The question's own words: without the template a framework wraps every request in.

    CrewAI's task prompt ("Current Task: The user says: ...", "This is the expected criteria for
    your final answer: ...", "Begin! ...") recurs in every task message and would match every
    earlier one. Lines another user message repeats verbatim are left out, and so are words that
    every other user message in the context holds (when there are at least two).
    """
    from ctxlife.recall import query_terms

    text = _text(messages[turn])
    others = [_text(m) for i, m in enumerate(messages) if i != turn and m.get("role") == "user"]
    seen_lines = {line.strip() for other in others for line in other.splitlines() if line.strip()}
    own = "\n".join(line for line in text.splitlines() if line.strip() and line.strip() not in seen_lines) or text
    if len(others) >= 2:
        common = set(query_terms(others[0], limit=200))
        for other in others[1:]:
            common &= set(query_terms(other, limit=200))
            if not common:
                break
        if common:
            words = [w for w in re.findall(r"\S+", own) if _bare(w) not in common]
            own = " ".join(words) or own
    return own


def _bare(word: str) -> str:
    return re.sub(r"[^\w]+", "", word.casefold())


def _strip(messages: list[dict[str, Any]]) -> None:
    if any(is_recall_block(m) for m in messages):
        messages[:] = [m for m in messages if not is_recall_block(m)]


def _last_user(messages: list[dict[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def _text(message: dict[str, Any]) -> str:
    from ctxlife.recall import message_text

    return message_text(message)
