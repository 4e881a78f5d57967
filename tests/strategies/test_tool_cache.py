"""``tool_cache``: identical calls to allow-listed tools are answered from the session's cache."""

from __future__ import annotations

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import ToolCallContext
from ctxlife.host import Host
from ctxlife_strategies.tool_cache import MAX_ENTRIES, ToolCache, cache_key


def make_host(**options) -> Host:
    return Host(settings_from_dict({"strategies": ["tool_cache"], "tool_cache": options}), context_window=8192)


def call(host: Host, tool: str, args: dict, run, session_id: str | None = None) -> ToolCallContext:
    """One tool call through nodes 3 and 4, running ``run`` unless a strategy answered it."""
    ctx = ToolCallContext(tool_name=tool, tool_input=dict(args))
    host.before_tool_call(ctx, session_id=session_id)
    if ctx.result is None:
        raw = run(**ctx.tool_input)
        after = ToolCallContext(tool_name=tool, tool_input=ctx.tool_input, result=str(raw), raw_result=raw)
    else:
        after = ToolCallContext(tool_name=tool, tool_input=ctx.tool_input, result=ctx.result, skipped_by=ctx.skipped_by)
    host.after_tool_call(after, session_id=session_id)
    after.actions[:0] = ctx.actions
    return after


class Counter:
    def __init__(self, reply: str = "result for {q}") -> None:
        self.runs = 0
        self.reply = reply

    def __call__(self, **kwargs) -> str:
        self.runs += 1
        return self.reply.format(**kwargs) if "{" in self.reply else self.reply


def test_key_is_tool_name_and_canonical_arguments():
    assert cache_key("Search Web", {"b": 1, "a": [2, {"y": 1, "x": 2}]}) == '"search web":{"a":[2,{"x":2,"y":1}],"b":1}'
    assert cache_key("search", {"a": 1, "b": 2}) == cache_key("search", {"b": 2, "a": 1})
    assert cache_key("search", {"a": 1}) != cache_key("search", {"a": "1"})


def test_tool_names_are_compared_exactly_in_every_script():
    # Before: every CJK name normalised to "", so cancelling was answered from the lookup's cache.
    host = make_host(tools=["查询订单"])
    lookup, cancel = Counter("order A1: shipped"), Counter("order A1: cancelled")
    call(host, "查询订单", {"id": "A1"}, lookup)
    cancelled = call(host, "取消订单", {"id": "A1"}, cancel)
    assert cancel.runs == 1 and cancelled.result == "order A1: cancelled" and cancelled.skipped_by is None
    again = call(host, "查询订单", {"id": "A1"}, lookup)
    assert lookup.runs == 1 and again.result == "[cached result from call 1]\norder A1: shipped"
    # Case and Unicode normalisation (NFC) are all that is ignored.
    assert cache_key("Café", {}) == cache_key("cafe\u0301", {}) == cache_key("CAFÉ", {})
    assert cache_key("search_web", {}) != cache_key("searchWeb", {}) != cache_key("Search Web", {})
    assert cache_key("получить", {}) != cache_key("отменить", {})
    assert cache_key("a", {"x": 1}) != cache_key('a:{"x":1}', {})


def test_second_identical_call_is_answered_from_the_cache():
    host = make_host(tools=["search"])
    search = Counter()
    first = call(host, "search", {"q": "x", "n": 3}, search)
    assert first.result == "result for x" and search.runs == 1
    assert [a.what for a in first.actions] == ["stored"]
    second = call(host, "search", {"n": 3, "q": "x"}, search)
    assert search.runs == 1
    assert second.result == "[cached result from call 1]\nresult for x"
    assert second.skipped_by == "tool_cache"
    assert [(a.what, a.details) for a in second.actions] == [("hit", {"tool": "search", "call": 1})]
    other = call(host, "search", {"q": "y", "n": 3}, search)
    assert other.result == "result for y" and search.runs == 2


def test_tools_not_on_the_allow_list_always_run():
    host = make_host(tools=["search"])
    book = Counter("booked")
    call(host, "book_flight", {"id": 1}, book)
    call(host, "book_flight", {"id": 1}, book)
    assert book.runs == 2


def test_empty_allow_list_caches_nothing():
    host = make_host()
    search = Counter()
    call(host, "search", {"q": "x"}, search)
    call(host, "search", {"q": "x"}, search)
    assert search.runs == 2


def test_call_numbers_count_every_tool_call_of_the_session():
    host = make_host(tools=["search"])
    search, other = Counter(), Counter("other")
    call(host, "other", {}, other)
    call(host, "search", {"q": "x"}, search)
    assert call(host, "search", {"q": "x"}, search).result.startswith("[cached result from call 2]\n")


def test_ttl_expires_entries():
    host = make_host(tools=["search"], ttl_seconds=10)
    (strategy,) = host.strategies
    now = [1000.0]
    strategy.clock = lambda: now[0]
    search = Counter()
    call(host, "search", {"q": "x"}, search)
    now[0] += 9
    assert call(host, "search", {"q": "x"}, search).result.startswith("[cached")
    now[0] += 2
    expired = call(host, "search", {"q": "x"}, search)
    assert expired.result == "result for x" and search.runs == 2
    assert [a.what for a in expired.actions] == ["expired", "stored"]


def test_cache_is_bounded_least_recently_used_first():
    host = make_host(tools=["search"])
    search = Counter()
    queries = [f"q{i}" for i in range(MAX_ENTRIES)]
    for q in queries:
        call(host, "search", {"q": q}, search)
    call(host, "search", {"q": "q0"}, search)  # q0 is now the most recently used
    stored = call(host, "search", {"q": "new"}, search)  # evicts q1
    assert stored.actions[-1].details == {
        "tool": "search",
        "call": MAX_ENTRIES + 2,
        "entries": MAX_ENTRIES,
        "evicted": 1,
    }
    assert search.runs == MAX_ENTRIES + 1
    call(host, "search", {"q": "q0"}, search)
    assert search.runs == MAX_ENTRIES + 1
    call(host, "search", {"q": "q1"}, search)
    assert search.runs == MAX_ENTRIES + 2


def test_failures_are_not_cached():
    host = make_host(tools=["search"])
    failing = Counter("I encountered an error while trying to use the tool. This was the error: timeout.")
    call(host, "search", {"q": "x"}, failing)
    call(host, "search", {"q": "x"}, failing)
    assert failing.runs == 2


def test_sessions_do_not_share_a_cache():
    host = make_host(tools=["search"])
    search = Counter()
    call(host, "search", {"q": "x"}, search, session_id="alice")
    call(host, "search", {"q": "x"}, search, session_id="bob")
    assert search.runs == 2
    call(host, "search", {"q": "x"}, search, session_id="alice")
    assert search.runs == 2


def test_the_cached_result_is_the_tools_own_result():
    """Another strategy may reshape what the model sees; the cache keeps the tool's raw result."""
    host = make_host(tools=["search"])
    ctx = ToolCallContext(tool_name="search", tool_input={"q": "x"})
    host.before_tool_call(ctx)
    host.after_tool_call(
        ToolCallContext(tool_name="search", tool_input={"q": "x"}, result="SHORTENED", raw_result="raw")
    )
    again = ToolCallContext(tool_name="search", tool_input={"q": "x"})
    host.before_tool_call(again)
    assert again.result == "[cached result from call 1]\nraw"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"tools": "search"},
            "strategy 'tool_cache' option 'tools' (in a dict): Input should be a valid list (got 'search')",
        ),
        (
            {"tools": ["search", " "]},
            "strategy 'tool_cache' option 'tools.1' (in a dict): Value error, must be a non-empty string (got ' ')",
        ),
        (
            {"tools": ["search"], "ttl_seconds": 0},
            "strategy 'tool_cache' option 'ttl_seconds' (in a dict): Input should be greater than 0 (got 0)",
        ),
        (
            {"tools": ["search"], "max_entries": 2},
            "strategy 'tool_cache' has no option 'max_entries' (in a dict): the cache holds at most 256 results per "
            "session (ctxlife_strategies.tool_cache.MAX_ENTRIES), least recently used dropped first",
        ),
        ({"allow": ["search"]}, "strategy 'tool_cache' has no option 'allow' (in a dict)"),
    ],
)
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        settings_from_dict({"strategies": ["tool_cache"], "tool_cache": options})
    assert str(info.value) == message


def test_strategy_defaults():
    options = ToolCache.Options()
    assert options.tools == [] and options.ttl_seconds is None


def test_the_docs_examples_are_valid_configs(doc_examples):
    for example in doc_examples("tool_cache"):
        settings = settings_from_dict(example, source="docs/strategies/tool_cache.md")
        assert "tool_cache" in settings.strategies
