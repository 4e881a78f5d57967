"""Every option ctxlife offers, listed (issue 43): at most 45, and each one documented.

An option is worth having when a shipped config (configs/) or a benchmark sets it, or when the docs
measure what changing it does; anything else is a constant. A new option fails this test until it
is added to OPTIONS below and given a line in its strategy's page (docs/strategies/NAME.md), which
is the moment to say why it must be an option.
"""

from __future__ import annotations

import re
from pathlib import Path

from ctxlife.config import Settings
from ctxlife.plugins import registry
from ctxlife.strategy import ModelSettings

DOCS = Path(__file__).resolve().parent.parent / "docs"
LIMIT = 45

OPTIONS = {
    # top-level settings (docs/configuration.md)
    "strategies", "threshold", "context_window", "agent_model", "session_id", "message_format", "log_content",
    "store",
    # the [model] table: the model ctxlife calls, shared by every strategy that calls one
    "model.name", "model.base_url", "model.api_key_env", "model.timeout_seconds", "model.context_window",
    "model.options",
    "bootstrap.text", "bootstrap.files", "bootstrap.agents",
    "llm_summary.target", "llm_summary.headroom_calls", "llm_summary.keep_rounds", "llm_summary.min_gain_tokens",
    "llm_summary.max_summary_tokens", "llm_summary.summarizer", "llm_summary.max_read_tokens", "llm_summary.background",
    "llm_summary.summary_role",
    "recall.max_share", "recall.top_k", "recall.index_dir", "recall.search_tool", "recall.scope",
    "snapshot_restore.restore",
    "task_scope.policy", "task_scope.tasks", "task_scope.max_tokens", "task_scope.summarizer",
    "tool_cache.tools", "tool_cache.ttl_seconds",
    "tool_output.max_tokens", "tool_output.max_share", "tool_output.tools", "tool_output.store_dir",
    "truncate_last_n.rounds", "truncate_last_n.always", "truncate_last_n.pin_first_user",
}  # fmt: skip


def offered() -> set[str]:
    """What the code offers: the top-level settings (the [model] table by its keys) and the options of
    every first-party strategy (third-party ones, such as docs/examples' redact, count for their owners)."""
    names = {key for key in Settings.model_fields if key != "model"}
    names |= {f"model.{key}" for key in ModelSettings.model_fields}
    reg = registry()
    for name in reg.names():
        if reg.entries[name].package == "ctxlife":
            names |= {f"{name}.{key}" for key in reg.get(name).Options.model_fields}
    return names


def test_the_options_are_the_listed_ones_and_at_most_45():
    assert offered() == OPTIONS, (
        f"new: {sorted(offered() - OPTIONS)}, gone: {sorted(OPTIONS - offered())}; an option needs a shipped "
        "config or a measured reason (issue 43), a line in OPTIONS and one in its docs page"
    )
    assert len(OPTIONS) <= LIMIT, len(OPTIONS)


def test_every_strategy_option_has_a_line_in_its_page():
    missing = []
    for option in sorted(OPTIONS):
        table, dot, key = option.partition(".")
        if not dot or table == "model":
            continue  # top-level settings and [model]: the generated docs/configuration.md
        page = (DOCS / "strategies" / f"{table}.md").read_text(encoding="utf-8")
        if not re.search(rf"`{key}[` ]|^{key} =", page, re.MULTILINE):
            missing.append(option)
    assert missing == []


def test_the_model_table_is_documented_where_the_strategies_that_call_a_model_are():
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert "## `[model]`" in configuration
    for key in ModelSettings.model_fields:
        assert f"| `{key}` |" in configuration.split("## `[model]`")[1].split("\n## ")[0], key
    for page in ("llm_summary.md", "task_scope.md"):
        assert "[model]" in (DOCS / "strategies" / page).read_text(encoding="utf-8"), page
