"""``task_scope``: what each task receives from earlier tasks (carry / isolate / full)."""

from __future__ import annotations

import pytest
from strategy_helpers import FILLER, research_output

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import TaskContext
from ctxlife.host import Host
from ctxlife.tokens import TokenCounter
from ctxlife_strategies.task_scope import TaskScope


def make_host(**options) -> Host:
    return Host(settings_from_dict({"strategies": ["task_scope"], "task_scope": options}), context_window=8192)


def start(host: Host, context_text: str, name: str = "t", index: int = 1, session_id: str | None = None) -> TaskContext:
    ctx = TaskContext(task_name=name, task_index=index, context_text=context_text)
    host.task_start(ctx, session_id=session_id)
    return ctx


def end(host: Host, output: str, name: str = "t", index: int = 0, session_id: str | None = None) -> TaskContext:
    ctx = TaskContext(task_name=name, task_index=index, output=output, agent_role="Researcher")
    host.task_end(ctx, session_id=session_id)
    return ctx


@pytest.fixture(scope="module")
def count():
    return TokenCounter(None).count_text


def test_policy_by_name_then_index_then_default():
    strategy = TaskScope(TaskScope.Options(policy="isolate", tasks={"Write Report": "full", "2": "carry"}))
    assert strategy.policy_for("write report", 0) == "full"
    assert strategy.policy_for("other", 2) == "carry"
    assert strategy.policy_for("other", 1) == "isolate"
    assert strategy.policy_for(None, None) == "isolate"


def test_isolate_removes_earlier_outputs(count):
    host = make_host(policy="isolate")
    text = research_output(2)
    ctx = start(host, text)
    assert ctx.context_text == ""
    assert [(a.what, a.details) for a in ctx.actions] == [
        ("isolated", {"task_index": 1, "removed_tokens": count(text)})
    ]


def test_full_leaves_everything():
    host = make_host(policy="full", max_tokens=50)
    text = research_output()
    ctx = start(host, text)
    assert ctx.context_text == text and not ctx.actions


def test_carry_leaves_context_that_fits():
    host = make_host(max_tokens=500)
    ctx = start(host, "Short result: HAT136 is on time.")
    assert ctx.context_text == "Short result: HAT136 is on time." and not ctx.actions


def test_carry_compacts_to_the_budget_keeping_key_facts(count):
    host = make_host(max_tokens=200)
    text = research_output()
    ctx = start(host, text)
    assert count(ctx.context_text) <= 200 < count(text)
    assert ctx.context_text.startswith(f"[ctxlife: earlier task outputs, compacted from {count(text)} tokens]")
    assert "HAT100" in ctx.context_text
    (action,) = ctx.actions
    assert action.what == "carried" and action.details["tokens_after"] <= 200


def test_carry_splits_outputs_labels_them_and_reuses_recorded_summaries(count):
    host = make_host(max_tokens=300)
    first, second = research_output(), "Plan: book HAT101 for user mia_li_3668. " + FILLER * 20
    recorded = end(host, first, name="research", index=0)
    (action,) = recorded.actions
    assert action.what == "recorded" and action.details["tokens"] == count(first)
    assert action.details["summary_tokens"] <= 300
    end(host, second, name="plan", index=1)
    outputs = host._table.sessions[None].state["task_scope"]["outputs"]
    assert [o["task_name"] for o in outputs] == ["research", "plan"]
    assert all(count(o["summary"]) <= 300 for o in outputs)
    ctx = start(host, first + "\n\n----------\n\n" + second, name="write", index=2)
    assert count(ctx.context_text) <= 300
    assert "From task 'research':" in ctx.context_text and "From task 'plan':" in ctx.context_text
    assert ctx.context_text.index("'research'") < ctx.context_text.index("'plan'")
    assert "mia_li_3668" in ctx.context_text


def test_task_end_never_changes_the_output():
    host = make_host(max_tokens=60)
    text = research_output()
    ctx = end(host, text)
    assert ctx.output == text


def test_sessions_keep_separate_records():
    host = make_host()
    end(host, "alpha output", session_id="a")
    end(host, "beta output", session_id="b")
    assert [o["summary"] for o in host._table.sessions["a"].state["task_scope"]["outputs"]] == ["alpha output"]


def test_llm_summarizer_without_a_model_falls_back_to_extractive(count):
    host = make_host(max_tokens=120, summarizer="llm")
    ctx = start(host, research_output())
    assert count(ctx.context_text) <= 120
    assert "summarizer_fallback" in [a.what for a in ctx.actions]


def test_a_failing_summarizer_falls_back_to_a_cut(count):
    from ctxlife.summarizers import register_summarizer, unregister_summarizer

    class Broken:
        def summarize(self, request):
            raise RuntimeError("boom")

    register_summarizer("broken_for_test", Broken)
    try:
        host = make_host(max_tokens=80, summarizer="broken_for_test")
        text = research_output()
        ctx = start(host, text)
        assert 0 < count(ctx.context_text) <= 80
        assert "summary_failed" in [a.what for a in ctx.actions]
    finally:
        unregister_summarizer("broken_for_test")


def test_with_a_session_store_records_survive_a_restart(tmp_path, count):
    from ctxlife.sessions import open_store

    url = f"file://{tmp_path / 'sessions'}"
    first = make_host(max_tokens=200)
    first.store = open_store(url)  # as when snapshot_restore is active
    try:
        recorded = end(first, research_output(), name="research", index=0, session_id="u42")
        assert recorded.actions[-1].details["saved_in"] == "session"
    finally:
        first.store.close()
    later = make_host(max_tokens=200)  # a new process: nothing in memory
    later.store = open_store(url)
    try:
        ctx = start(later, research_output().strip(), name="plan", index=1, session_id="u42")
        assert "From task 'research':" in ctx.context_text and count(ctx.context_text) <= 200
        assert [o["task_name"] for o in later._table.sessions["u42"].state["task_scope"]["outputs"]] == ["research"]
    finally:
        later.store.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"policy": "forget"},
            "strategy 'task_scope' option 'policy' (in a dict): "
            "Input should be 'carry', 'isolate' or 'full' (got 'forget')",
        ),
        (
            {"tasks": {"report": "none"}},
            "strategy 'task_scope' option 'tasks.report' (in a dict): Input should be 'carry', 'isolate' or 'full' "
            "(got 'none')",
        ),
        (
            {"tasks": ["report"]},
            "strategy 'task_scope' option 'tasks' (in a dict): Input should be a valid dictionary (got ['report'])",
        ),
        (
            {"max_tokens": 10},
            "strategy 'task_scope' option 'max_tokens' (in a dict): "
            "Input should be greater than or equal to 50 (got 10)",
        ),
        ({"budget": 300}, "strategy 'task_scope' has no option 'budget' (in a dict)"),
    ],
)
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        settings_from_dict({"strategies": ["task_scope"], "task_scope": options})
    assert str(info.value) == message


def test_unknown_summarizer_is_an_error_at_construction():
    with pytest.raises(ctxlife.ConfigError) as info:
        make_host(summarizer="nope")
    assert str(info.value).startswith(
        "strategy 'task_scope' option 'summarizer': unknown summarizer 'nope'; available: extractive, llm"
    )


def test_the_docs_examples_are_valid_configs(doc_examples):
    for example in doc_examples("task_scope"):
        settings = settings_from_dict(example, source="docs/strategies/task_scope.md")
        assert "task_scope" in settings.strategies
