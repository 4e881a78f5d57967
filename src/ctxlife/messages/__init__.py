"""The one message model of ctxlife: formats, units, rounds, pairing, validity, inserted messages.

The formats, units and rounds, pairing and the messages ctxlife inserts: docs/concepts.md, "Message
formats", "Units and rounds" and "Invariants". Pairing trusts ids only within one turn: real traces
reuse ids across turns and sometimes inside one message, or leave them out, so a result whose id is
missing or names no unanswered call goes to the first unanswered call (:func:`pair_tool_results`).

Modules, lowest first (each imports only those before it):

* :mod:`~ctxlife.messages.previous` -- what is unchanged in a caller's list since the list a host
  handed back last time, in one C-level comparison (:class:`PreviousList`, :class:`Agreement`,
  :func:`common_prefix`, :func:`differences`);
* :mod:`~ctxlife.messages.formats` -- the two formats, detecting them and refusing anything else
  (:func:`check_shape`, :class:`ShapeMemo`), roles, :func:`split_system`;
* :mod:`~ctxlife.messages.text` -- the text of a message (:func:`content_text`, :func:`text_of`),
  what a model is charged for (:func:`countable`), :func:`tool_name_key`, :func:`escape_surrogates`;
* :mod:`~ctxlife.messages.cutting` -- safe cut points in text of any script (:func:`safe_cut`,
  :data:`CJK`);
* :mod:`~ctxlife.messages.inserted` -- marks on the messages ctxlife inserts (:func:`mark_inserted`,
  :func:`inserted_kind`), summary messages and the ``History summary:`` marker;
* :mod:`~ctxlife.messages.turns` -- tool calls and their pairing, units, rounds and turns;
* :mod:`~ctxlife.messages.validation` -- :func:`validate` (what a provider would reject),
  :func:`same_messages`;
* :mod:`~ctxlife.messages.bootstrap` -- the bootstrap section (:func:`apply_bootstrap`,
  :func:`strip_bootstrap`).

Import these names from ``ctxlife.messages``; the modules are how the code is organised, not
part of the API.
"""

from __future__ import annotations

from ctxlife.messages.bootstrap import (
    apply_bootstrap,
    bootstrap_section,
    has_bootstrap_section,
    strip_bootstrap,
)
from ctxlife.messages.cutting import (
    CJK,
    CJK_PUNCTUATION,
    safe_cut,
)
from ctxlife.messages.formats import (
    ANTHROPIC,
    OPENAI,
    Message,
    ShapeMemo,
    check_shape,
    is_system,
    list_format,
    nested_stamp,
    restamp,
    role,
    split_system,
)
from ctxlife.messages.inserted import (
    BOOTSTRAP_END,
    BOOTSTRAP_START,
    MARK_KEYS,
    QUOTE_MARK,
    QUOTED_NOTE,
    RECALL_PREFIX,
    SUMMARY_PREFIX,
    inserted_kind,
    inserted_meta,
    inserted_text,
    is_inserted,
    is_recall_block,
    is_summary,
    mark_inserted,
    plain_role,
    quote,
    restore_inserted,
    starts_with_summary_marker,
    strip_inserted_marks,
    strip_summary_marker,
    summary_message,
)
from ctxlife.messages.previous import (
    Agreement,
    PreviousList,
    common_prefix,
    differences,
)
from ctxlife.messages.text import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW,
    TOKENS_PER_TOOL_CALL,
    content_text,
    countable,
    escape_surrogates,
    json_payload,
    own_text,
    text_of,
    tool_calls,
    tool_name_key,
)
from ctxlife.messages.turns import (
    ToolCall,
    Unit,
    calls_of,
    current_turn_index,
    has_calls,
    is_tool_result,
    is_user_turn,
    last_user_index,
    pair_tool_calls,
    pair_tool_results,
    raw_calls,
    round_starts,
    split_units,
    tool_call_arguments,
    tool_call_name,
    tool_results_by_call,
    unit_starts,
)
from ctxlife.messages.validation import (
    Problem,
    same_messages,
    validate,
)

__all__ = [
    "Agreement",
    "PreviousList",
    "common_prefix",
    "differences",
    "ANTHROPIC",
    "BOOTSTRAP_END",
    "BOOTSTRAP_START",
    "CJK",
    "CJK_PUNCTUATION",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW",
    "MARK_KEYS",
    "QUOTED_NOTE",
    "QUOTE_MARK",
    "Message",
    "OPENAI",
    "Problem",
    "RECALL_PREFIX",
    "SUMMARY_PREFIX",
    "ShapeMemo",
    "TOKENS_PER_TOOL_CALL",
    "ToolCall",
    "Unit",
    "apply_bootstrap",
    "bootstrap_section",
    "calls_of",
    "check_shape",
    "content_text",
    "countable",
    "current_turn_index",
    "escape_surrogates",
    "has_bootstrap_section",
    "has_calls",
    "inserted_kind",
    "inserted_meta",
    "inserted_text",
    "is_inserted",
    "is_recall_block",
    "is_summary",
    "is_system",
    "is_tool_result",
    "is_user_turn",
    "json_payload",
    "last_user_index",
    "list_format",
    "mark_inserted",
    "quote",
    "nested_stamp",
    "own_text",
    "pair_tool_calls",
    "pair_tool_results",
    "plain_role",
    "raw_calls",
    "restamp",
    "restore_inserted",
    "role",
    "round_starts",
    "safe_cut",
    "same_messages",
    "split_system",
    "split_units",
    "unit_starts",
    "starts_with_summary_marker",
    "strip_bootstrap",
    "strip_inserted_marks",
    "strip_summary_marker",
    "summary_message",
    "text_of",
    "tool_call_arguments",
    "tool_call_name",
    "tool_calls",
    "tool_name_key",
    "tool_results_by_call",
    "validate",
]
