"""Every message shape, every first-party strategy: generated conversations in both formats.

Conversations in OpenAI chat (system prompts as strings or parts, ``developer`` messages, images,
parallel tool calls whose results arrive in any order, legacy ``function_call``) and in Anthropic
Messages (``tool_use``/``tool_result`` blocks, images, the system prompt apart or as a leading system
message), with CJK, emoji and lone surrogates in contents and tool results, are played through every
first-party strategy alone and all of them together. On every model call:

* ``shapes_no_exception``: ``manage()`` returns, no strategy fails or is rolled back;
* ``shapes_valid_same_format``: the output is provider-valid in the input's format (and in no other);
* ``shapes_latest_user_kept``: the input's latest user turn is the output's latest user turn, unchanged;
* ``shapes_system_kept``: every system/developer prompt of the input is still there;
* ``shapes_inserted_recognised``: every summary in the output is recognised as one (nothing edited it
  after ctxlife wrote it), and the bootstrap text is in the output exactly once;
* ``shapes_tokens_within_1pct``: ctxlife's count of the input and of the output is within 1% of an
  independent count (tiktoken directly, ``shapes_gen.independent_count``).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reliability_gen import Checks, examples
from shapes_gen import ShapeDriver, independent_count, scripts, system_prompts

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import (
    SUMMARY_PREFIX,
    apply_bootstrap,
    content_text,
    is_inserted,
    is_summary,
    is_system,
    is_user_turn,
    last_user_index,
    strip_bootstrap,
    validate,
)
from ctxlife.messages.formats import _detect

STRATEGY_OPTIONS: dict[str, dict[str, Any]] = {
    "truncate_last_n": {"rounds": 1},
    "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
    "snapshot_restore": {},
    "bootstrap": {"text": "PROFILE: 用户偏好简洁 ✅ {agent_role} {date}"},
    "tool_output": {"max_tokens": 150},
    "tool_cache": {"tools": ["lookup", "查询订单"]},
    "task_scope": {},
}
CONFIGS = [[name] for name in STRATEGY_OPTIONS] + [list(STRATEGY_OPTIONS)]


def _settings(names: list[str], fmt: str, tmp_path: Any) -> Any:
    data: dict[str, Any] = {"strategies": names, "message_format": fmt, "threshold": 0.4}
    for name in names:
        options = dict(STRATEGY_OPTIONS[name])
        if name == "tool_output":
            options["store_dir"] = str(tmp_path / "tool_outputs")
        if name == "snapshot_restore":
            data["store"] = f"file://{tmp_path / 'sessions'}"
        data[name] = options
    return settings_from_dict(data)


def _checker(host: Host, fmt: str, checks: Checks) -> Any:
    def check(before: list[dict[str, Any]], after: list[dict[str, Any]], report: Any) -> None:
        assert report.failures == [], f"a strategy failed: {report.failures}"
        checks.hit("shapes_no_exception")
        checks.hit(f"shapes_no_exception[{fmt}]")

        assert validate(before, fmt) == [], f"the generator made an invalid list: {validate(before, fmt)[:2]}"
        problems = validate(after, fmt)
        assert problems == [], f"provider-invalid output: {problems[:3]} (actions {report.actions})"
        found, _ = _detect(after, "output")
        assert found in (None, fmt), f"the output turned into {found}"
        checks.hit("shapes_valid_same_format")
        checks.hit(f"shapes_valid_same_format[{fmt}]")

        # The bootstrap may have opened the first user turn with its section: compare with that.
        base = copy.copy(before)
        text = host.bootstrap_text() if host.implements("ctxlife_bootstrap") else ""
        apply_bootstrap(base, text, fmt=fmt)
        i = last_user_index(base)
        if i is not None:
            j = last_user_index(after)
            # Its own content: the bootstrap section is ctxlife's, and opens whichever user turn is first now.
            assert j is not None and strip_bootstrap(after[j]) == strip_bootstrap(base[i]), (
                "the latest user turn was dropped or changed"
            )
            checks.hit("shapes_latest_user_kept")
            checks.hit(f"shapes_latest_user_kept[{fmt}]")

        # What ctxlife inserted stays recognisable: the summary (even as a user message), the bootstrap text once.
        for m in after:
            if content_text(m).startswith(SUMMARY_PREFIX):
                assert is_summary(m), "a summary ctxlife wrote is no longer recognised (edited after it was made)"
        if text:
            assert sum(content_text(m).count(text) for m in after) == 1, "the bootstrap text is not there exactly once"
        checks.hit("shapes_inserted_recognised")
        checks.hit(f"shapes_inserted_recognised[{fmt}]")

        kept = [content_text(m) for m in after if is_system(m)]
        for m in before:
            if is_system(m) and not is_inserted(m):  # a summary may be folded into the next one
                assert any(content_text(m) in k for k in kept), "a system prompt was lost"
                checks.hit("shapes_system_kept")

        for label, messages, counted in (
            ("input", before, report.tokens_before),
            ("output", after, report.tokens_after),
        ):
            independent = independent_count(messages)
            assert abs(counted - independent) <= 0.01 * independent, (
                f"{label}: ctxlife counts {counted} tokens, the independent count {independent}"
            )
        checks.hit("shapes_tokens_within_1pct")
        checks.hit(f"shapes_tokens_within_1pct[{fmt}]")
        assert all(
            is_user_turn(after[k]) for k in ([last_user_index(after)] if last_user_index(after) is not None else [])
        )
        # How often the strategies really changed the list (so the invariants were tested on their work).
        if any(a.what in ("truncated", "compacted", "restored", "injected") for a in report.actions):
            checks.hit(f"shapes_list_changed[{fmt}]")

    return check


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("names", CONFIGS, ids=["+".join(c) if len(c) < 3 else "all" for c in CONFIGS])
def test_every_shape_through_every_strategy(names, fmt, tmp_path, stats):
    @examples(9)
    @given(
        system=system_prompts(fmt),
        script=scripts(),
        window=st.sampled_from([600, 1500, 4000]),
        seed=st.integers(0, 2**16),
    )
    def prop(system, script, window, seed):
        checks = Checks()
        # A new session per example: a store shared across examples would make replays inconsistent.
        host = Host(_settings(names, fmt, tmp_path), context_window=window, session_id=f"s{uuid.uuid4().hex[:12]}")
        try:
            ShapeDriver(host, fmt, system, _checker(host, fmt, checks), seed).play(script)
        finally:
            host.close()
        stats.example(checks.counts)

    prop()


def test_auto_detection_keeps_an_anthropic_session_anthropic(tmp_path, stats):
    """Without ``message_format``, a session is taken as Anthropic once its list shows Anthropic blocks."""

    @examples(20)
    @given(script=scripts(max_turns=3), seed=st.integers(0, 2**16))
    def prop(script, seed):
        checks = Checks()
        settings = _settings(["llm_summary", "truncate_last_n"], "auto", tmp_path)
        host = Host(settings, context_window=600, session_id=f"a{uuid.uuid4().hex[:12]}")
        check = _checker(host, "anthropic", checks)
        seen_blocks = False

        def anthropic_once_seen(before, after, report):
            nonlocal seen_blocks
            seen_blocks = seen_blocks or _detect(before, "input")[0] == "anthropic"
            if seen_blocks:
                check(before, after, report)

        try:
            ShapeDriver(host, "anthropic", [], anthropic_once_seen, seed).play(script)
        finally:
            host.close()
        stats.example(checks.counts)

    prop()
