"""``tool_output``'s ``ctxlife_recall``: what the agent reads back of a capped result, page by page and
passage by passage, and what is kept of it (mutation scope ``tool-output``, issue 44)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import ToolCallContext
from ctxlife.host import Host
from ctxlife_strategies.tool_output import RECALL_TOOL

DEPOTS = ["alpha", "bravo", "charlie", "delta", "echo"]
SECRET = "IBAN DE44 5001 0517 5407 3249 31"


class Mask:
    """A privacy filter plugin: the recalled text goes through it."""

    def __init__(self) -> None:
        self.where: list[str] = []

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx: ctxlife.TextContext) -> None:
        self.where.append(ctx.where)
        ctx.text = ctx.text.replace(SECRET, "[masked]")


def make_host(store_dir: Path, plugins: tuple[object, ...] = (), **options: Any) -> Host:
    options.setdefault("store_dir", str(store_dir))
    settings = settings_from_dict({"strategies": ["tool_output"], "tool_output": options})
    return Host(settings, context_window=8192, plugins=plugins)


def capped(host: Host, text: str, tool: str = "dump", **where: Any) -> ToolCallContext:
    ctx = ToolCallContext(tool_name=tool, tool_input={}, result=text, raw_result=text)
    host.after_tool_call(ctx, **where)
    return ctx


def recall(host: Host, tool_input: Any, **where: Any) -> ToolCallContext:
    call = ToolCallContext(tool_name=RECALL_TOOL, tool_input=tool_input)
    host.before_tool_call(call, **where)
    return call


def log_lines(n: int = 400) -> str:
    return "\n".join(
        f"{i:04d} shipment {'failed' if i % 7 == 0 else 'delivered'} depot {DEPOTS[i % 5]} " + "carton " * 6
        for i in range(n)
    )


def test_the_capped_event_says_what_was_done(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=200)
    text = log_lines()
    ctx = capped(host, text)
    count = host.counter().count_text
    (action,) = ctx.actions
    assert action.what == "capped"
    assert action.details == {
        "tool": "dump",
        "kind": "text",
        "tokens_before": count(text),
        "tokens_after": count(ctx.result),
        "cap": 200,
        "ref": action.details["ref"],
        "saved_in": "workspace",
    }
    assert re.fullmatch(r"to_[0-9a-f]{16}", action.details["ref"])


def test_the_full_result_is_kept_owner_only_with_what_it_was(tmp_path: Path) -> None:
    store = tmp_path / "a" / "b" / "store"  # folders that do not exist yet
    host = make_host(store, max_tokens=200)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    assert sorted(p.name for p in store.iterdir()) == [f"{ref}.json", f"{ref}.txt"]  # no temporary file left
    assert (store / f"{ref}.txt").read_text(encoding="utf-8") == text
    assert json.loads((store / f"{ref}.json").read_text()) == {"tool": "dump", "cap": 200, "chars": len(text)}
    for path in store.iterdir():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o700


def test_pages_read_one_after_another_give_back_the_whole_result(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=200)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    count = host.counter().count_text
    start, parts = 0, []
    while True:
        page = recall(host, {"ref": ref, "start": str(start), "query": ""}).result
        assert count(page) <= 200
        body, _, footer = page.rpartition("\n[ctxlife_recall: ")
        parts.append(body)
        end = start + len(body)
        if end == len(text):
            assert footer == f"characters {start}-{end} of {len(text)}; end of the result.]"
            break
        hint = f'ctxlife_recall {{"ref": "{ref}", "start": "{end}", "query": ""}}'
        assert footer == f"characters {start}-{end} of {len(text)}. Next page: {hint}]"
        assert body.endswith("\n")  # a page ends at a line end when one is close
        assert count(body) >= 100  # and holds about as much as fits
        start = end
    assert "".join(parts) == text


def test_a_page_is_as_long_as_the_cap_the_result_was_saved_with(tmp_path: Path) -> None:
    """A tool capped at 150 tokens by the table: its pages are 150 tokens too, not max_tokens."""
    host = make_host(tmp_path / "store", max_tokens=1000, tools={"dump": 150, "*": 1000})
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    count = host.counter().count_text
    page = recall(host, {"ref": ref}).result  # start and query left out: the beginning
    assert page.startswith(text[:40]) and 100 < count(page) <= 150


def test_the_ref_may_come_quoted_and_an_unknown_one_says_how_to_give_it(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=200)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    assert recall(host, {"ref": f' "{ref}" '}).result.startswith(text[:40])
    assert recall(host, {"ref": f"'{ref}'"}).result.startswith(text[:40])
    (strategy,) = host.strategies
    assert strategy.recall() == (
        "ctxlife_recall: no stored result with ref ''. Use the ref exactly as the [ctxlife: ...] note of the "
        "shortened result gives it (to_ followed by 16 hex digits)."
    )
    assert strategy.recall(ref).startswith(text[:40])  # start and query default to the beginning, no search


def test_search_lists_each_matching_line_with_its_offset_then_where_to_go_on(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=200)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    lines = text.split("\n")
    offsets = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines))]
    failed = [(offsets[i], line) for i, line in enumerate(lines) if " failed " in line]
    count = host.counter().count_text

    call = recall(host, {"ref": ref, "start": "0", "query": "  FAILED  "})
    assert call.actions[-1].what == "recalled" and call.actions[-1].details == {"query": True}
    page = call.result
    assert count(page) <= 200
    header, *shown, footer = page.split("\n")
    assert header == f'Passages of {ref} containing "FAILED" (@ = character offset; read around one with "start"):'
    assert shown == [f"@{at + line.index('failed')}: {line}" for at, line in failed[: len(shown)]]
    assert 2 <= len(shown) < len(failed)
    next_at = failed[len(shown)][0] + failed[len(shown)][1].index("failed")
    hint = f'ctxlife_recall {{"ref": "{ref}", "start": "{next_at}", "query": "FAILED"}}'
    assert footer == f"[ctxlife_recall: {len(failed) - len(shown)} more passages. Next: {hint}]"

    # from the last hit on: one passage, no more
    last_at, last_line = failed[-1]
    last = recall(host, {"ref": ref, "start": str(last_at), "query": "failed"}).result.split("\n")
    assert last[1:] == [
        f"@{last_at + last_line.index('failed')}: {last_line}",
        "[ctxlife_recall: 1 passage(s); no more matches.]",
    ]
    assert recall(host, {"ref": ref, "start": "0", "query": ""}).actions[-1].details == {"query": False}


def test_search_for_several_words_keeps_lines_holding_all_of_them(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=400)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    page = recall(host, {"ref": ref, "start": "0", "query": "failed charlie depot"}).result
    shown = [line for line in page.split("\n") if line.startswith("@")]
    assert shown and all(" failed depot charlie " in line for line in shown)
    assert len(shown) == sum(1 for line in text.split("\n") if " failed depot charlie " in line)
    nothing = recall(host, {"ref": ref, "start": "0", "query": "failed depot zulu"}).result
    assert nothing == f'ctxlife_recall: no passage of {ref} from character 0 on contains "failed depot zulu".'


def test_a_hit_in_a_long_line_shows_the_characters_around_it(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=400)
    filler = "".join(f"{i % 10}" for i in range(3000))
    text = "head line\n" + filler[:1500] + " NEEDLE " + filler[1500:]  # one long line, the last: no line break after
    ref = capped(host, text).actions[0].details["ref"]
    at = text.index("needle".upper())
    page = recall(host, {"ref": ref, "start": "0", "query": "needle"}).result
    assert page.split("\n")[1] == f"@{at}: {text[at - 120 : at + 120]}"
    near_end = "head line\n" + filler + " NEEDLE"
    ref = capped(host, near_end).actions[0].details["ref"]
    at = near_end.index("NEEDLE")
    assert recall(host, {"ref": ref, "query": "needle"}).result.split("\n")[1] == f"@{at}: {near_end[at - 120 :]}"


def test_a_single_passage_over_the_page_is_cut_to_fit(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=100)
    words = " ".join(f"w{i * 7919 % 10007}" for i in range(2000))
    text = words[:5000] + " target " + words[5000:]
    ref = capped(host, text).actions[0].details["ref"]
    page = recall(host, {"ref": ref, "query": "target"}).result
    count = host.counter().count_text
    header, line, footer = page.split("\n")
    at = text.index("target")
    assert line.startswith(f"@{at}: {text[at - 120 : at - 100]}") and count(page) <= 100
    assert footer == "[ctxlife_recall: 1 passage(s); no more matches.]"


def test_recall_at_node_3_reads_the_sessions_store_and_masks_the_text(tmp_path: Path) -> None:
    from ctxlife.sessions import open_store

    mask = Mask()
    host = make_host(tmp_path / "store", max_tokens=200, plugins=(mask,))
    host.store = open_store(f"file://{tmp_path / 'sessions'}")
    try:
        text = f"account {SECRET}\n" + log_lines()
        ref = capped(host, text, session_id="u42").actions[0].details["ref"]
        # another process: it knows nothing of the ref but the session's store
        other = make_host(tmp_path / "elsewhere", max_tokens=1000, plugins=(mask,))
        other.store = host.store
        page = recall(other, {"ref": ref, "start": "0"}, session_id="u42").result
        assert page.startswith("account [masked]\n") and SECRET not in page
        assert other.counter().count_text(page) <= 200  # the page of the cap it was saved with
        assert "recall" in mask.where
        found = recall(other, {"ref": ref, "query": "iban"}, session_id="u42").result
        assert found.startswith(f'ctxlife_recall: no passage of {ref} from character 0 on contains "iban"')
    finally:
        host.store.close()


def test_the_recall_tool_tells_the_model_how_to_use_it(tmp_path: Path) -> None:
    (strategy,) = make_host(tmp_path / "store").strategies
    (spec,) = strategy.provided_tools()
    assert spec.name == RECALL_TOOL
    assert spec.description == (
        "Read a tool result that was shortened to save context. Shortened results end with a [ctxlife: ...] note "
        'naming a ref. Give the ref; start is the character offset to read from ("0" for the beginning, or the '
        "offset the note names); query, if not empty, returns only the passages containing those words "
        "(case-insensitive). Long texts come back one page at a time; each page says where the next one starts."
    )
    assert spec.parameters == {
        "ref": "The ref named in the note, e.g. to_0123456789abcdef.",
        "start": 'Character offset to read from, e.g. "0"; with a query, where to search from.',
        "query": 'Words to search for; "" to read the text itself.',
    }


def test_a_result_of_exactly_the_cap_is_left_as_it_is(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=100)
    count = host.counter().count_text
    words = []
    while count(" ".join(words)) < 100:
        words.append(f"item{len(words)}")
    exactly = " ".join(words)
    assert count(exactly) == 100 and len(exactly.encode()) > 100  # the precondition: at the cap, not under
    ctx = capped(host, exactly)
    assert ctx.result == exactly and ctx.actions == []


def test_caps_by_table_and_by_share_of_the_window(tmp_path: Path) -> None:
    (table,) = make_host(tmp_path / "a", tools={"dump": 150}).strategies
    assert table.cap_for("dump") == 150 and table.cap_for("search") is None  # no "*": other tools uncapped
    host = make_host(tmp_path / "b", tools={"dump": 150})
    text = log_lines()
    ctx = ToolCallContext(tool_name="search", tool_input={}, result=text, raw_result=text)
    assert host.after_tool_call(ctx).failures == [] and ctx.result == text
    (share,) = make_host(tmp_path / "c", max_share=0.25).strategies
    assert share.cap_for("dump", 8192) == 2048  # the share alone: max_tokens (1000) only bounds it when given
    assert share.cap_for("dump") == 1000  # no window known: max_tokens
    (both,) = make_host(tmp_path / "d", max_share=0.25, max_tokens=1500).strategies
    assert both.cap_for("dump", 8192) == 1500


def test_the_note_names_the_ref_and_the_size_before(tmp_path: Path) -> None:
    host = make_host(tmp_path / "store", max_tokens=200)
    count = host.counter().count_text
    text = log_lines()
    ctx = capped(host, text)
    ref = ctx.actions[0].details["ref"]
    assert f'ctxlife_recall {{"ref": "{ref}", "start": "' in ctx.result
    rows = json.dumps([{"id": i, "status": "delivered", "note": "carton " * 20} for i in range(300)])
    ctx = capped(host, rows)
    ref = ctx.actions[0].details["ref"]
    assert ctx.actions[0].details["kind"] == "json"
    assert f"[ctxlife: JSON shortened from {count(rows)} tokens: " in ctx.result
    assert f'Full result: ctxlife_recall {{"ref": "{ref}", "start": "0", "query": ""}}' in ctx.result


def test_recall_without_ref_or_query_and_with_its_metadata_gone(tmp_path: Path) -> None:
    store = tmp_path / "store"
    host = make_host(store, max_tokens=150)
    text = log_lines()
    ref = capped(host, text).actions[0].details["ref"]
    call = recall(host, {"start": "0"})
    assert call.result.startswith("ctxlife_recall: no stored result with ref ''.")
    assert recall(host, {"ref": ref}).actions[-1].details == {"query": False}
    count = host.counter().count_text
    for meta in ("", "[1]", None):  # emptied, not an object, deleted: pages fall back to max_tokens
        if meta is None:
            (store / f"{ref}.json").unlink()
        else:
            (store / f"{ref}.json").write_text(meta)
        page = recall(host, {"ref": ref}).result
        assert page.startswith(text[:40]) and 100 < count(page) <= 150


def test_the_text_marker_counts_exactly_what_it_leaves_out(tmp_path: Path) -> None:
    """Head + marker + tail: the marker names the characters between head and tail and the tokens they
    hold (the text's tokens less the head's and the tail's)."""
    host = make_host(tmp_path / "store", max_tokens=200)
    count = host.counter().count_text
    text = log_lines()
    ctx = capped(host, text)
    ref = ctx.actions[0].details["ref"]
    head, marker, tail = re.fullmatch(r"(.*?)\n(\[\.\.\. ctxlife: .*? \.\.\.\])\n(.*)", ctx.result, re.S).groups()
    head, tail = head + "\n", "\n" + tail  # the marker's own line breaks belong to the text around it
    if not text.startswith(head):
        head = head[:-1]
    if not text.endswith(tail):
        tail = tail[1:]
    assert text.startswith(head) and text.endswith(tail) and len(head) > 0 and len(tail) > 0
    start, end = len(head), len(text) - len(tail)
    elided = count(text) - count(head) - count(tail)
    assert marker == (
        f"[... ctxlife: {elided} tokens elided here (characters {start}-{end} of {len(text)}). "
        f'Read them with ctxlife_recall {{"ref": "{ref}", "start": "{start}", "query": ""}}; '
        'put words in "query" to search instead ...]'
    )


def test_when_nothing_fits_beside_the_marker_the_marker_alone_is_left() -> None:
    from ctxlife.tokens import TokenCounter
    from ctxlife_strategies.tool_output import shorten

    count = TokenCounter().count_text
    text = "no line breaks here " * 400
    out, kind = shorten(text, 45, count, "to_0123456789abcdef")
    assert kind == "text"
    assert out == (
        f"[... ctxlife: {count(text)} tokens elided here (characters 0-{len(text)} of {len(text)}). "
        'Read them with ctxlife_recall {"ref": "to_0123456789abcdef", "start": "0", "query": ""}; '
        'put words in "query" to search instead ...]'
    )
