"""``tool_output``: cap tool results, keep the full result, let the agent recall it."""

from __future__ import annotations

import json
import re
import stat

import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from strategy_helpers import MARK_RE, big_text

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import ToolCallContext
from ctxlife.host import Host
from ctxlife.messages import tool_name_key
from ctxlife.tokens import TokenCounter
from ctxlife_strategies.tool_output import RECALL_TOOL, ToolOutput, shorten

REF = "to_0123456789abcdef"


def make_host(tmp_path, **options) -> Host:
    options.setdefault("store_dir", str(tmp_path / "store"))
    return Host(settings_from_dict({"strategies": ["tool_output"], "tool_output": options}), context_window=8192)


def after(host: Host, tool: str, result: str) -> ToolCallContext:
    ctx = ToolCallContext(tool_name=tool, tool_input={}, result=result, raw_result=result)
    host.after_tool_call(ctx)
    return ctx


@pytest.fixture(scope="module")
def count():
    return TokenCounter("gpt-4o").count_text


# -- shortening ------------------------------------------------------------------------


def test_text_keeps_head_and_tail_with_a_marker_that_fits(count):
    text = big_text()
    out, kind = shorten(text, 300, count, REF)
    assert kind == "text"
    assert count(out) <= 300
    head, _, tail = out.partition("\n[... ctxlife: ")
    assert text.startswith(head) and len(head) > 200
    marker, _, rest = tail.partition(" ...]\n")
    assert text.endswith(rest) and len(rest) > 100
    elided, start = re.match(r"(\d+) tokens elided here \(characters (\d+)-", marker).groups()
    assert int(start) == len(head)
    assert int(elided) > count(text) - 300
    assert f'ctxlife_recall {{"ref": "{REF}", "start": "{start}", "query": ""}}' in marker


def test_json_keeps_keys_shortens_arrays_and_cuts_strings_in_the_middle(count):
    data = {
        "users": [{"id": i, "name": f"user{i}", "bio": "b" * 400 + "END", "tags": ["t"] * 30} for i in range(400)],
        "meta": {"count": 400, "note": "n" * 3000, "nested": {"deep": {"x": 1}}},
    }
    out, kind = shorten(json.dumps(data), 400, count, REF)
    assert kind == "json" and count(out) <= 400
    body, _, note = out.partition("\n[ctxlife: JSON shortened")
    shown = json.loads(body)  # still valid JSON
    assert set(shown) == {"users", "meta"} and set(shown["meta"]) == {"count", "note", "nested"}
    assert shown["meta"]["nested"] == {"deep": {"x": 1}}
    assert shown["users"][-1] == f"... {400 - (len(shown['users']) - 1)} more items"
    assert set(shown["users"][0]) == {"id", "name", "bio", "tags"}
    assert re.fullmatch(r"b+…\[\d+ chars cut\]…b*END", shown["users"][0]["bio"])
    assert shown["meta"]["note"].startswith("nnn") and "chars cut" in shown["meta"]["note"]
    assert f'"ref": "{REF}"' in note


def test_json_too_wide_for_its_keys_falls_back_to_text(count):
    data = {f"key_{i:05d}": i for i in range(3000)}
    out, kind = shorten(json.dumps(data), 200, count, REF)
    assert kind == "text" and count(out) <= 200


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _deep(levels: int, width: int) -> dict:
    """``levels`` nested objects, each with ``width`` fields and an array holding the next level."""
    node: dict = {"leaf": "x" * 40}
    for level in range(levels, 0, -1):
        node = {
            **{f"field_{level}_{j}": f"value {level}.{j}" for j in range(width)},
            "next": [node, {"sibling": level}],
        }
    return node


@pytest.mark.parametrize(("levels", "width", "cap"), [(12, 6, 300), (20, 3, 250), (8, 10, 400)])
def test_deep_json_is_summarized_below_a_depth(count, levels, width, cap):
    """Too deep for even one item per array: the levels above a depth are kept whole (every key,
    one item per array), everything below is one placeholder naming what it replaced."""
    data = _deep(levels, width)
    out, kind = shorten(json.dumps(data), cap, count, REF)
    assert kind == "json" and count(out) <= cap
    shown = json.loads(out.partition("\n[ctxlife")[0])
    assert 0 < _depth(shown) < _depth(data), "nothing was summarized below a depth"
    node, original, kept_levels = shown, data, 0
    while isinstance(node, dict):
        assert set(node) == set(original), "a level above the cut lost keys"
        assert all(node[k] == original[k] for k in original if k != "next")
        kept_levels += 1
        nxt = node["next"]
        if isinstance(nxt, str):  # the array at the cut, summarized
            assert nxt == "[... 2 items]"
            break
        assert isinstance(nxt, list) and nxt[-1] == "... 1 more items"
        node, original = nxt[0], original["next"][0]
        if isinstance(node, str):  # the object at the cut, summarized
            assert node == f"{{... {len(original)} keys}}"
            break
    assert 0 < kept_levels < levels, kept_levels


def _over(value, cap: int, count, grow: str):
    """``value`` grown until its JSON is over ``cap`` tokens: repeated in an array, wrapped in more
    levels, or given a long string field (the three ways real results get big)."""
    for _ in range(64):
        text = json.dumps(value, ensure_ascii=False)
        if count(text) > cap:
            return value, text
        if grow == "array":
            value = [value] * 4
        elif grow == "deep":
            value = {"level": value, "items": [value, value]}
        else:
            value = {"value": value, "note": "note " + json.dumps(value, ensure_ascii=False) * 4 + "x" * 200}
    raise AssertionError("could not grow the value over the cap")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda children: st.lists(children, max_size=60) | st.dictionaries(st.text(max_size=12), children, max_size=12),
    max_leaves=400,
)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES, st.sampled_from(["array", "deep", "wide"]), st.integers(min_value=100, max_value=600))
def test_any_result_fits_its_cap(count, value, grow, cap):
    """Every JSON result over its cap is shortened to fit (the value is grown over the cap, so every
    example reaches the assertion)."""
    value, text = _over(value, cap, count, grow)
    out, kind = shorten(text, cap, count, REF)
    event(f"shortened as {kind}")
    assert count(out) <= cap
    if kind == "json":
        json.loads(out.partition("\n[ctxlife")[0])  # a JSON result stays valid JSON


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=4000), st.integers(min_value=100, max_value=300))
def test_any_text_fits_its_cap(count, text, cap):
    """Any text over its cap (doubled until it is: every example reaches the assertion, even a run
    of one character the tokenizer packs 64 to a token) fits, and keeps its head."""
    for _ in range(24):
        if count(text) > cap:
            break
        text += text
    assert count(text) > cap
    out, kind = shorten(text, cap, count, REF)
    event(f"shortened as {kind}")
    assert count(out) <= cap
    if kind == "text":
        head = out.partition("\n[... ctxlife: ")[0]
        assert text.startswith(head)


# -- through the host -------------------------------------------------------------------


def test_small_results_are_left_alone(tmp_path):
    host = make_host(tmp_path, max_tokens=200)
    ctx = after(host, "search", "short result")
    assert ctx.result == "short result" and not ctx.actions
    assert not (tmp_path / "store").exists()


def test_capped_result_is_saved_owner_only_and_recorded(tmp_path):
    host = make_host(tmp_path, max_tokens=250)
    text = big_text(800)
    ctx = after(host, "Dump Table", text)
    assert host.counter().count_text(ctx.result) <= 250
    (action,) = ctx.actions
    assert action.strategy == "tool_output" and action.what == "capped"
    ref = action.details["ref"]
    assert action.details["tool"] == "Dump Table" and action.details["tokens_after"] <= 250
    store = tmp_path / "store"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    saved = store / f"{ref}.txt"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert saved.read_text(encoding="utf-8") == text
    assert json.loads((store / f"{ref}.json").read_text())["cap"] == 250
    # Content-addressed: the same result again is the same ref, one file.
    again = after(host, "dump_table", text)
    assert again.actions[0].details["ref"] == ref
    assert len(list(store.glob("*.txt"))) == 1


def test_tools_list_table_and_wildcard(tmp_path):
    text = big_text(400)
    listed = make_host(tmp_path, max_tokens=200, tools=["Dump_Table"])
    assert after(listed, "dump_table", text).result != text
    assert after(listed, "dumpTable", text).result == text  # names are not rewritten
    assert after(listed, "search", text).result == text
    table = make_host(tmp_path, tools={"dump_table": 150, "scrape": 300})
    count = table.counter().count_text
    assert 100 < count(after(table, "dump_table", text).result) <= 150
    assert 150 < count(after(table, "scrape", text).result) <= 300
    assert after(table, "search", text).result == text
    wildcard = make_host(tmp_path, tools={"dump_table": 150, "*": 400})
    assert 150 < count(after(wildcard, "search", text).result) <= 400


def test_max_share_of_the_window(tmp_path):
    strategy = ToolOutput(ToolOutput.Options(max_share=0.05, store_dir=str(tmp_path)))
    assert strategy.cap_for("x", 8192) == 409
    assert strategy.cap_for("x", 0) == 1000  # window unknown: max_tokens
    both = ToolOutput(ToolOutput.Options(max_share=0.05, max_tokens=300, store_dir=str(tmp_path)))
    assert both.cap_for("x", 8192) == 300 and both.cap_for("x", 2000) == 100
    # The host tells the window to model calls; tool_output remembers it for tool calls.
    host = make_host(tmp_path, max_share=0.05)
    host.manage([{"role": "user", "content": "hi"}])
    assert host.counter().count_text(after(host, "t", big_text(400)).result) <= 409


def test_the_recall_tool_itself_is_never_capped(tmp_path):
    host = make_host(tmp_path, max_tokens=100)
    text = big_text(100)
    assert after(host, RECALL_TOOL, text).result == text


# -- recall -----------------------------------------------------------------------------


def test_recall_pages_rebuild_the_full_result_each_within_the_cap(tmp_path):
    host = make_host(tmp_path, max_tokens=300)
    (strategy,) = host.strategies
    text = big_text(600)
    ref = after(host, "dump", text).actions[0].details["ref"]
    (spec,) = strategy.provided_tools()
    assert spec.name == RECALL_TOOL and set(spec.parameters) == {"ref", "start", "query"}
    count = host.counter().count_text
    pieces, start = [], "0"
    for _ in range(500):
        page = spec.function(ref=ref, start=start, query="")
        assert count(page) <= 300
        body, _, footer = page.rpartition("\n[ctxlife_recall: ")
        pieces.append(body)
        found = MARK_RE.search(footer)
        if found is None:
            assert "end of the result" in footer
            break
        start = found.group(2)
    assert "".join(pieces) == text


def test_recall_query_finds_passages_with_offsets(tmp_path):
    host = make_host(tmp_path, max_tokens=300)
    text = big_text(2000)
    text = text[:50_000] + " NEEDLE-42 " + text[50_000:]
    ref = after(host, "dump", text).actions[0].details["ref"]
    (strategy,) = host.strategies
    found = strategy.recall(ref, "0", "needle-42")
    offset = int(re.search(r"@(\d+): ", found).group(1))
    assert text[offset : offset + 9] == "NEEDLE-42"
    assert "no more matches" in found
    many = strategy.recall(ref, "0", "alpha beta")
    assert host.counter().count_text(many) <= 300 and "more passages" in many
    assert "no passage" in strategy.recall(ref, "0", "zebra")


def test_recall_rejects_bad_refs_and_offsets(tmp_path):
    strategy = ToolOutput(ToolOutput.Options(store_dir=str(tmp_path)))
    assert "no stored result with ref '../../etc/passwd'" in strategy.recall("../../etc/passwd", "0", "")
    assert "no stored result" in strategy.recall("to_ffffffffffffffff", "0", "")
    ref, where = strategy.save("x" * 10, tool="t", cap=200)
    assert where == "workspace"
    assert 'start must be a character offset such as "0"' in strategy.recall(ref, "ten", "")
    assert strategy.recall(ref, "", "").startswith("xxxxxxxxxx\n[ctxlife_recall: characters 0-10 of 10; end")


def test_tool_names_are_compared_exactly_nfc_and_case_folded():
    assert tool_name_key("Search Web") == "search web"
    assert tool_name_key("DUMP_table") == "dump_table" != tool_name_key("dumpTable")
    assert tool_name_key("查询订单") == "查询订单" != tool_name_key("取消订单")
    assert tool_name_key("cafe\u0301") == tool_name_key("Café")


def test_cjk_tool_names_select_their_own_caps(tmp_path):
    text = big_text(400)
    host = make_host(tmp_path, tools={"导出表格": 150})
    assert after(host, "导出表格", text).result != text
    assert after(host, "查询订单", text).result == text  # before: every CJK name was "", so it was capped too


# -- bad options --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_tokens": 10},
            "strategy 'tool_output' option 'max_tokens' (in a dict): "
            "Input should be greater than or equal to 100 (got 10)",
        ),
        (
            {"max_share": 2},
            "strategy 'tool_output' option 'max_share' (in a dict): Input should be less than or equal to 0.5 (got 2)",
        ),
        (
            {"tools": "dump_table"},
            "strategy 'tool_output' option 'tools' (in a dict): Value error, tools must be a list of tool names "
            "or a table of tool name = max_tokens (got a str) (got 'dump_table')",
        ),
        (
            {"tools": {"dump_table": 5}},
            "strategy 'tool_output' option 'tools' (in a dict): Value error, the cap of tool 'dump_table' must be "
            "at least 100 tokens, got 5 (got {'dump_table': 5})",
        ),
        (
            {"tools": {"dump_table": "lots"}},
            "strategy 'tool_output' option 'tools' (in a dict): Value error, the cap of tool 'dump_table' must be "
            "an integer number of tokens, got 'lots' (got {'dump_table': 'lots'})",
        ),
        (
            {"max_token": 500},
            "strategy 'tool_output' has no option 'max_token' (in a dict) (did you mean 'max_tokens'?)",
        ),
    ],
)
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        settings_from_dict({"strategies": ["tool_output"], "tool_output": options})
    assert str(info.value) == message


def test_bad_options_in_a_file_name_the_file(tmp_path):
    path = tmp_path / "ctxlife.toml"
    path.write_text('strategies = ["tool_output"]\n[tool_output]\nmax_tokens = "many"\n')
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        ctxlife.load_settings(path)
    assert str(info.value) == (
        f"strategy 'tool_output' option 'max_tokens' (in {path}): Value error, expected a number, got the text 'many'"
    )


def test_the_docs_examples_are_valid_configs(doc_examples):
    for example in doc_examples("tool_output"):
        settings = settings_from_dict(example, source="docs/strategies/tool_output.md")
        assert "tool_output" in settings.strategies


def test_with_a_session_store_the_full_result_is_a_blob_of_the_session(tmp_path):
    from ctxlife.sessions import open_store

    host = make_host(tmp_path, max_tokens=200)
    host.store = open_store(f"file://{tmp_path / 'sessions'}")  # as when snapshot_restore is active
    try:
        text = big_text(500)
        ctx = ToolCallContext(tool_name="dump", tool_input={}, result=text, raw_result=text)
        host.after_tool_call(ctx, session_id="u42")
        details = ctx.actions[0].details
        ref = details["ref"]
        assert details["saved_in"] == "session"
        assert host.store.get_blob("u42", ref) == text
        assert json.loads(host.store.get_blob("u42", f"{ref}.meta"))["cap"] == 200
        assert not (tmp_path / "store").exists()
        # The agent's recall call is answered at node 3, where the session is known.
        call = ToolCallContext(tool_name=RECALL_TOOL, tool_input={"ref": ref})  # start and query left out
        host.before_tool_call(call, session_id="u42")
        assert call.skipped_by == "tool_output"
        assert call.result.startswith(text[:50]) and host.counter().count_text(call.result) <= 200
        # Another session does not see it.
        other = ToolCallContext(tool_name=RECALL_TOOL, tool_input={"ref": ref, "start": "0", "query": ""})
        fresh = make_host(tmp_path, max_tokens=200)
        fresh.store = host.store
        fresh.before_tool_call(other, session_id="someone-else")
        assert other.result.startswith("ctxlife_recall: no stored result")
        # The tool's own function (no session at hand) finds it through this process's index.
        (strategy,) = host.strategies
        assert strategy.provided_tools()[0].function(ref=ref, start="0", query="").startswith(text[:50])
    finally:
        host.store.close()


def test_recall_is_answered_before_the_tool_runs_without_a_store(tmp_path):
    host = make_host(tmp_path, max_tokens=200)
    text = big_text(500)
    ref = after(host, "dump", text).actions[0].details["ref"]
    call = ToolCallContext(tool_name=RECALL_TOOL, tool_input={"ref": ref, "start": "100", "query": ""})
    host.before_tool_call(call)
    assert call.result.startswith(text[100:150])
    assert [a.what for a in call.actions] == ["recalled"]


def test_a_failing_session_store_falls_back_to_the_workspace(tmp_path):
    class BrokenStore:
        def get_blob(self, session_id, key):
            raise OSError("disk full")

        put_blob = get_blob

    host = make_host(tmp_path, max_tokens=200)
    host.store = BrokenStore()
    text = big_text(500)
    ctx = ToolCallContext(tool_name="dump", tool_input={}, result=text, raw_result=text)
    host.after_tool_call(ctx, session_id="u42")
    details = ctx.actions[0].details
    assert details["saved_in"] == "workspace" and host.counter().count_text(ctx.result) <= 200
    (strategy,) = host.strategies
    assert strategy.recall(details["ref"], "0", "").startswith(text[:50])


def test_a_result_with_lone_surrogates_is_capped_escaped_and_recallable(tmp_path):
    # os.listdir on a non-UTF-8 file name gives lone surrogates; before, the strategy crashed
    # on encoding and the whole result (33,011 tokens here) reached the model past a 200-token cap.
    text = "\n".join(f"report_{i}_\udcff\udcfe.csv  {i * 7} bytes" for i in range(3000))
    host = make_host(tmp_path, max_tokens=200)
    ctx = ToolCallContext(tool_name="ls", tool_input={}, result=text, raw_result=text)
    report = host.after_tool_call(ctx)
    assert report.failures == []
    assert host.counter().count_text(ctx.result) <= 200
    ctx.result.encode("utf-8")  # what the model sees can be sent
    assert "report_0_\\udcff\\udcfe.csv" in ctx.result
    ref = report.actions[0].details["ref"]
    strategy = host.strategies[0]
    page = strategy.recall(ref, "0", "")
    page.encode("utf-8")
    assert page.startswith("report_0_\\udcff\\udcfe.csv")
    assert "report_2999_" in strategy.recall(ref, "0", "report_2999")


def test_cuts_split_no_word_emoji_or_id_inside_cjk_text(tmp_path):
    # The atoms a cut may fall between: CJK characters, whole ids/emails/numbers, whole emoji sequences.
    atoms = [
        *"订单号是",
        "ORD-88231",
        "，",
        *"退款申请",
        "RF-5521",
        "，",
        *"邮箱",
        "zhang.wei@example.com",
        " ",
        "👨‍👩‍👧‍👦",
        " ",
        "🇨🇳",
        " ",
        "é",
        " ",
        *"金额为",
        "￥",
        "1,299.00",
        "。",
    ]
    unit = "".join(atoms)
    boundaries = {0}
    for atom in atoms:
        boundaries.add(max(boundaries) + len(atom))
    text = unit * 400
    host = make_host(tmp_path, max_tokens=150)
    shown = after(host, "查询订单", text).result
    head, _, rest = shown.partition("\n[... ctxlife:")
    tail = rest.split("...]\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail) and len(head) > 20 and len(tail) > 20
    assert len(head) % len(unit) in boundaries, repr(head[-12:])
    assert (len(text) - len(tail)) % len(unit) in boundaries, repr(tail[:12])


# -- exactly what the model sees, counted in characters ----------------------------------
# With a character counter (one token per character: the strategy takes any counter) the
# shortening's arithmetic is exact, so these tests pin where each cut falls and what the
# marker says for a given cap. A change to the cut heuristics changes what the model sees
# (and every cached prompt after it): these make such a change deliberate.

SHORT_LINES = "\n".join(f"line {i:04d} " + "x" * 28 for i in range(300))  # 11,699 characters
FLAT_WORDS = " ".join(["alpha", "beta", "gamma", "delta"] * 750)[:17249]


def _parts(out: str, n: int) -> tuple[int, int, int]:
    head, _, rest = out.partition("\n[... ctxlife: ")
    found = re.match(r"(\d+) tokens elided here \(characters (\d+)-(\d+) of (\d+)\)", rest)
    assert found, out
    elided, start, end, total = map(int, found.groups())
    assert (start, total) == (len(head), n)
    return elided, start, end


@pytest.mark.parametrize(
    ("text", "cap", "size", "cut"),
    [
        (SHORT_LINES, 400, 366, (88, 11627)),
        (SHORT_LINES, 1000, 987, (468, 11388)),
        (SHORT_LINES, 2500, 2470, (1365, 10803)),
        (FLAT_WORDS, 400, 391, (109, 17175)),
        (FLAT_WORDS, 1000, 989, (471, 16939)),
    ],
)
def test_text_cut_points_and_marker_are_exact_for_a_given_cap(text, cap, size, cut):
    from ctxlife_strategies.tool_output import _text_marker

    out, kind = shorten(text, cap, len, REF)
    assert kind == "text"
    elided, start, end = _parts(out, len(text))
    assert (start, end) == cut
    # The marker counts exactly what it leaves out, and the result is head + marker + tail.
    assert elided == end - start
    assert out == text[:start] + _text_marker(REF, elided, start, end, len(text)) + text[end:]
    assert len(out) == size <= cap
    # Cuts fall at a line end (short lines) or between words.
    if "\n" in text and cap >= 1000:
        assert text[start - 1] == "\n" and text[end - 1] == "\n"
    else:
        assert text[start - 1] in " \n" and text[end - 1] in " \n"


def test_snap_keeps_something_out_when_head_and_tail_cover_the_whole_text():
    from ctxlife_strategies.tool_output import _snap

    spaces = " " * 100  # every position is a fine cut: the arithmetic alone decides
    assert _snap(spaces, 50, 50) == (50, 49)
    assert _snap(spaces, 300, 0) == (50, 49)
    assert _snap(spaces, -5, 10) == (0, 10)
    assert _snap(spaces, 10, -5) == (10, 0)
    assert _snap(spaces, 20, 30) == (20, 30)


def test_snap_moves_cuts_to_a_close_line_break():
    from ctxlife_strategies.tool_output import _snap

    # The head ends after the last line break in its last 20%.
    assert _snap("x" * 33 + "\n" + "y" * 3 + "\n" + "z" * 62, 40, 0) == (38, 0)
    assert _snap("a" * 35 + "\n" + "b" * 64, 40, 0) == (36, 0)
    assert _snap("a " * 10 + "\n" + "b " * 40, 40, 0) == (39, 0)  # the break at 20 is too far: a word end
    # The tail starts after the first line break in its first fifth.
    assert _snap("a" * 53 + "\n" + "bb\n" + "c" * 43, 10, 50) == (0, 46)
    assert _snap("a" * 59 + "\n" + "c" * 40, 10, 50) == (0, 40)
    assert _snap("a " * 30 + "b" * 9 + "\n" + "c" * 30, 10, 40) == (10, 40)  # the break at 69: too far
    assert _snap("a" * 95 + "\n" + "c" * 4, 10, 5) == (0, 4)
    assert _snap("a" * 96 + "\n" + "cc" + "\n", 10, 4) == (0, 3)
    # A line break that is the text's last character is no place to start the tail.
    assert _snap("a " * 49 + "b\n", 10, 3) == (10, 2)
    assert _snap("a " * 48 + "b\nc", 10, 2) == (10, 1)
    # Without a line break the tail starts at a word start after the cut point.
    words = " ".join(["word"] * 30)
    assert _snap(words, 20, 33) == (20, 29)
    assert _snap(words, 20, 31) == (20, 29)


def test_a_cut_json_string_keeps_two_thirds_head_and_counts_what_it_cut():
    from ctxlife_strategies.tool_output import _cut_string

    assert _cut_string("a" * 10, 10) == "a" * 10
    assert _cut_string("a" * 11, 10) != "a" * 11
    value = "x" * 20 + " " + "y" * 100
    out = _cut_string(value, 60)
    # The head's word end is 19 characters back from 40: too far, so a cut between letters.
    assert out == value[:40] + "…[61 chars cut]…" + value[101:]
    out = _cut_string("y" * 100 + " " + "x" * 20, 60)
    assert out == "y" * 40 + "…[61 chars cut]…" + "x" * 20
    words = " ".join(["alpha", "beta", "gamma", "delta"] * 25)
    out = _cut_string(words, 60)
    head, _, rest = out.partition("…[")
    cut, _, tail = rest.partition(" chars cut]…")
    assert words.startswith(head) and words.endswith(tail)
    assert int(cut) == len(words) - len(head) - len(tail)
    assert head.endswith(" ") and words[len(words) - len(tail) - 1] == " "
    assert (len(head), len(tail)) == (40, 16)


def test_limits_are_per_nesting_level():
    from ctxlife_strategies.tool_output import _limits

    assert _limits(5) == ({}, 0, 0)
    assert _limits([]) == ({1: 0}, 0, 1)
    assert _limits({"k": [[1, 2], [3, [4, 5, 6, 7]]], "s": "abcdef"}) == ({2: 2, 3: 2, 4: 4}, 6, 4)
    assert _limits({"a": [1, 2, [3, 4, 5]], "bb": {"c": "xyz"}}) == ({2: 3, 3: 3}, 3, 3)
    assert _limits({"a": [1], "b": [1, 2, 3]}) == ({2: 3}, 1, 2)  # the longest array of a level, in any order


def test_shrink_keeps_items_per_level_and_summarizes_below_the_depth():
    from ctxlife_strategies.tool_output import _shrink

    data = {"a": [1, 2, 3, [4, 5, 6]], "b": {"c": {"d": [1]}}, "l": [[1, 2, 3], [4]]}
    # items(level) is called with the array's nesting level (the outer object is level 1).
    assert _shrink(data, lambda level: level, 24, None) == {
        "a": [1, 2, "... 2 more items"],
        "b": {"c": {"d": [1]}},
        "l": [[1, 2, 3], [4]],
    }
    assert _shrink(data, lambda level: 3, 24, 2) == {
        "a": [1, 2, 3, "... 1 more items"],
        "b": {"c": "{... 1 keys}"},
        "l": ["[... 3 items]", "[... 1 items]"],
    }
    assert _shrink(data, lambda level: 9, 24, 1) == {"a": "[... 4 items]", "b": "{... 1 keys}", "l": "[... 2 items]"}
    assert _shrink([1, 2], lambda level: 2, 24, None) == [1, 2]


JSON_ITEMS = json.dumps(
    {
        "items": [
            {"id": i, "name": f"item {i}", "tags": ["t"] * (i % 5), "note": "café " * (i % 7)} for i in range(40)
        ],
        "meta": {"source": "x" * 300},
    },
    ensure_ascii=False,
)
JSON_WIDE = json.dumps(
    {f"key{i:02d}": {"inner": {"deep": [list(range(30))] * 3, "more": {"x": [1, 2, 3]}}} for i in range(12)}
)


@pytest.mark.parametrize(
    ("text", "cap", "size", "facts"),
    [
        (JSON_ITEMS, 600, 555, ['"... 37 more items"', "[239 chars cut]", '"note": "café café "']),
        (JSON_ITEMS, 1500, 1424, ['"... 27 more items"', "[155 chars cut]", '"id": 12,']),
        (JSON_WIDE, 700, 668, ['"inner": "{... 2 keys}"']),
        (JSON_WIDE, 1200, 1088, ['"deep": "[... 3 items]", "more": "{... 1 keys}"']),
        (JSON_WIDE, 1600, 1460, ['"deep": ["[... 30 items]", "... 2 more items"], "more": {"x": "[... 3 items]"}']),
    ],
)
def test_json_shortening_is_exact_for_a_given_cap(text, cap, size, facts):
    out, kind = shorten(text, cap, len, REF)
    assert kind == "json"
    body, _, note = out.partition("\n[ctxlife: JSON shortened from ")
    assert note.startswith(f"{len(text)} tokens")
    json.loads(body)
    assert len(out) == size <= cap
    for fact in facts:
        assert fact in body  # non-ASCII kept as is, not \u escapes


def test_fit_chars_ends_are_exact_with_a_character_counter():
    from ctxlife_strategies.tool_output import _fit_chars

    flat = " ".join(["alpha", "beta", "gamma", "delta"] * 400)
    assert [_fit_chars(flat, s, b, len) for s, b in [(0, 100), (7, 100), (0, 1000), (7, 1000)]] == [86, 92, 920, 931]
    assert [_fit_chars(SHORT_LINES, s, b, len) for s, b in [(0, 100), (7, 100), (0, 1000), (7, 1000)]] == [
        78,
        88,
        897,
        897,
    ]
    assert _fit_chars(flat, len(flat), 50, len) == len(flat)
    assert _fit_chars("z" * 500, 0, 100, len) == 90
    assert _fit_chars("z" * 40, 0, 100, len) == 40


def test_a_page_stays_within_the_cap_when_the_footer_costs_more_joined():
    from ctxlife_strategies.tool_output import _read_page

    body = "P" + " word" * 400

    def joined(s: str) -> int:  # a counter for which page + footer cost 40 more than apart
        return len(s) + (40 if s[:1] == "P" and "[ctxlife_recall" in s else 0)

    page = _read_page(body, REF, 0, 300, joined)
    assert joined(page) == 292 <= 300
    assert page == body[:122] + (
        f"\n[ctxlife_recall: characters 0-122 of {len(body)}. Next page: "
        f'ctxlife_recall {{"ref": "{REF}", "start": "122", "query": ""}}]'
    )


def test_a_search_hit_on_a_line_of_120_to_240_characters_shows_the_whole_line():
    from ctxlife_strategies.tool_output import _search_page

    line = "needle " + "y" * 193  # 200 characters, after a 10- or 100-character first line
    for first in ("intro line", "i" * 100):
        page = _search_page(f"{first}\n{line}\nlast", REF, "needle", 0, 1000, len)
        assert f"\n@{len(first) + 1}: {line}\n" in page


def test_snap_prefers_a_close_line_break_to_a_word_start_for_the_tail():
    from ctxlife_strategies.tool_output import _snap

    # A word start comes first; the line break within the tail's first fifth wins.
    assert _snap("a " * 27 + "\n" + "c" * 45, 10, 50) == (10, 45)
    assert _snap("a " * 29 + "b\n" + "c" * 40, 10, 50) == (10, 40)  # the break 9 characters in (of 10)
    assert _snap("a " * 47 + "x\nyyy", 10, 5) == (10, 5)  # a 5-character tail looks 1 character on
    assert _snap("a " * 49 + "b\n", 10, 1) == (10, 1)  # the last character: the tail keeps it
    assert _snap("a " * 49 + "\nb", 10, 2) == (10, 1)


def test_fit_chars_grows_an_underestimate_to_the_budget():
    from ctxlife_strategies.tool_output import _fit_chars

    def words(s: str) -> int:  # about 6 characters a token: the 4-character estimate is short
        return len(s.split())

    flat = " ".join(["alpha", "beta", "gamma", "delta"] * 400)
    cases = [(0, 25), (0, 100), (500, 100), (500, 300), (7, 60)]
    ends = [_fit_chars(flat, s, b, words) for s, b in cases]
    assert ends == [132, 569, 1069, 2202, 345]
    assert all(words(flat[s:e]) <= b for (s, b), e in zip(cases, ends, strict=True))
    assert _fit_chars(" ".join(["alpha"] * 20), 0, 25, words) == 119  # all of it
    # A page of one long unbroken token still moves forward (a word end before it is no place to cut).
    assert _fit_chars("aaaa " + "z" * 500, 5, 10, len) == 14
    assert _fit_chars("line one\nline two\nend", 0, 100, len) == 21  # all of it, not up to its last line break
    assert _fit_chars("z" * 50, 0, 1, len) == 1
    # Within the budget, for every budget from 20 to 119.
    assert [_fit_chars("z" * 600, 0, b, len) for b in range(20, 120)] == [
        19, 21, 22, 23, 23, 25, 26, 23, 28, 29, 26, 27, 28, 28, 34, 30, 31, 32, 33, 34,
        34, 36, 37, 38, 38, 39, 40, 40, 43, 43, 44, 45, 45, 47, 47, 48, 49, 51, 51, 52,
        53, 54, 55, 56, 57, 57, 58, 60, 61, 62, 62, 63, 64, 65, 67, 67, 68, 68, 70, 71,
        72, 73, 73, 75, 75, 76, 77, 79, 79, 80, 81, 81, 83, 84, 85, 85, 86, 87, 89, 89,
        90, 90, 92, 93, 94, 96, 96, 96, 97, 99, 100, 101, 101, 102, 103, 105, 105, 106, 107, 107,
    ]  # fmt: skip


def test_pages_stay_within_the_cap_for_every_cap_when_the_footer_costs_more_joined():
    from ctxlife_strategies.tool_output import _read_page

    body = " word" * 400

    def joined(s: str) -> int:
        return len(s) + (40 if "word" in s and "[ctxlife_recall" in s else 0)

    def end_and_size(offset: int, cap: int) -> tuple[int, int]:
        page = _read_page(body, REF, offset, cap, joined)
        end = int(re.search(r"characters \d+-(\d+) of", page).group(1))
        assert page.startswith(body[offset:end]) and joined(page) <= cap
        return end, joined(page)

    assert [end_and_size(0, cap)[0] for cap in range(290, 330, 3)] == [
        113, 117, 117, 121, 121, 126, 129, 129, 134, 134, 137, 153, 142, 158
    ]  # fmt: skip
    assert [end_and_size(10, cap)[0] for cap in range(290, 330, 3)] == [
        123, 127, 127, 131, 131, 136, 136, 139, 139, 144, 147, 147, 152, 168
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "cap", "size", "cut"),
    [
        ("é " * 1000 + "a " * 4000, 300, 299, (26, 9984)),
        ("é " * 1000 + "a " * 4000, 600, 595, (106, 9930)),
        ("é " * 1000 + "a " * 4000, 1000, 977, (210, 9860)),
        ("a" * 8000 + "é" * 2000, 600, 595, (90, 9940)),
        ("a" * 8000 + "é" * 2000, 1000, 980, (178, 9881)),
    ],
)
def test_text_whose_head_costs_more_per_character_is_shrunk_until_it_fits(text, cap, size, cut):
    from ctxlife_strategies.tool_output import _text_marker

    def dense(s: str) -> int:  # "é" costs 5 tokens, anything else 1: the average misjudges the head
        return len(s) + 4 * s.count("é")

    out, kind = shorten(text, cap, dense, REF)
    assert kind == "text"
    start, end = cut
    elided = dense(text) - dense(text[:start]) - dense(text[end:])
    assert out == text[:start] + _text_marker(REF, elided, start, end, len(text)) + text[end:]
    assert dense(out) == size <= cap


ROWS = json.dumps({"rows": [{"v": list(range(20)), "s": "é" + "q" * 60} for _ in range(30)], "flag": [1]})


@pytest.mark.parametrize(
    ("cap", "size", "cuts"),
    [
        (500, 500, ["9 more items", "9 more items", "28 more items"]),
        (800, 790, ["13 more items"] * 5 + ["25 more items"]),
        (1200, 1190, ["9 more items"] * 7 + ["23 more items"]),
        (2000, 1960, ["8 more items"] * 12 + ["18 more items"]),
    ],
)
def test_json_uses_what_is_left_for_more_outer_items(cap, size, cuts):
    out, kind = shorten(ROWS, cap, len, REF)
    assert kind == "json"
    assert len(out) == size <= cap
    assert re.findall(r'"\.\.\. (\d+ more items)"', out) == cuts
    assert '"s": "é' in out


@pytest.mark.parametrize(
    ("text", "cap", "cut"),
    [
        ("x" * 1000 + " a" * 2000, 230, (0, 4993)),  # the head would cut the leading run: only a tail
        ("x" * 1000 + " a" * 2000, 300, (54, 4965)),
        ("x" * 5000, 230, (0, 5000)),  # neither fits beside the marker: the marker alone
        (" a" * 2000 + "x" * 1000, 240, (17, 5000)),  # the tail would cut the trailing run: only a head
    ],
)
def test_the_marker_counts_what_it_leaves_out_when_the_head_or_the_tail_is_empty(text, cap, cut):
    from ctxlife_strategies.tool_output import _text_marker

    out, kind = shorten(text, cap, len, REF)
    start, end = cut
    assert out == text[:start] + _text_marker(REF, end - start, start, end, len(text)) + text[end:]
    assert len(out) <= cap
