"""What the report page shows for a replay built by hand: every figure and text of each call's panel, the
timeline, the summary line, the chart's bars drawn to scale, and every stored text escaped (mutation scopes
report-page and report-chart, issue 44). No store and no strategy run: the page is a function of the replay."""

from __future__ import annotations

import base64
import errno
import hashlib
import itertools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from ctxlife.errors import CtxlifeError
from ctxlife.inspection import RECORDED, SIMULATED, Composition, Frame, Part, SessionReplay
from ctxlife.report import render_html, write_report

MARKUP = '<b onclick="x()">it\'s & more</b>'
ESCAPED = "&lt;b onclick=&quot;x()&quot;&gt;it&#x27;s &amp; more&lt;/b&gt;"
SVG = "{http://www.w3.org/2000/svg}"
SRC = Path(__file__).resolve().parents[2] / "src"  # the ctxlife under test, for a child process


def _composition(*parts: tuple[str, str, int, str], total: int) -> Composition:
    built = [Part(kind, i, role, tokens, text) for i, (kind, role, tokens, text) in enumerate(parts)]
    return Composition([{"role": p.role, "content": p.text} for p in built], built, total)


def _quiet(index: int = 0, label: str = "call 1", **extra: Any) -> Frame:
    """A call where nothing happened (a skipped action only)."""
    comp = _composition(("system", "system", 30, "You are terse."), ("recent", "user", 1200, "Hi"), total=1233)
    return Frame(
        index, label, comp, 1233, 1233, 1233, actions=[{"strategy": "llm_summary", "what": "skipped"}], **extra
    )


def _busy(index: int = 1) -> Frame:
    """A call with everything: a restore, a compaction, recall, a failure and a problem."""
    comp = _composition(
        ("system", "system", 40, "You are terse."),
        ("bootstrap", "system", 7, "Known: falcon"),
        ("summary", "user", 300, f"History summary: {MARKUP}"),
        ("recall", "user", 50, "Earlier: ..."),
        ("recent", "user", 2500, MARKUP),
        total=2900,
    )
    return Frame(
        index,
        f"call {index + 1}",
        comp,
        12345,
        9000,
        2900,
        actions=[
            {"strategy": "llm_summary", "what": "compacted", "evicted": 4, "note": MARKUP},
            {"strategy": "recall", "what": "skipped"},
            {"strategy": MARKUP, "what": MARKUP},
        ],
        failures=[{"strategy": "tool_output", "node": "before_llm_call", "error": MARKUP}],
        evicted=[
            {"role": "user", "tokens": 1500, "text": MARKUP},
            {"role": MARKUP, "tokens": "2000", "text": "second"},
        ],
        summary=MARKUP,
        recalled=[
            {"seq": 3, "role": "assistant", "text": MARKUP, "score": 0.5},
            {"seq": "12", "role": MARKUP, "text": "int score", "score": 2},
            {"seq": 7, "role": "user", "text": "no score", "score": None},
        ],
        recall_block=f"Recalled: {MARKUP}",
        restored={"from_snapshot": 1200, "snapshot_covers": 34567, "from_records": 1001},
        problems=[MARKUP],
        source=RECORDED,
    )


def _replay(frames: list[Frame], **extra: Any) -> SessionReplay:
    fields: dict[str, Any] = {
        "session_id": "sess-1",
        "view": "",
        "store_url": "file:///tmp/<store>",
        "config": "ctxlife.toml",
        "context_window": 4000,
        "threshold": 0.8,
        "encoding": "o200k_base",
        "frames": frames,
        "messages": 1234,
        "source": SIMULATED,
        "note": "SIMULATED on purpose",
    }
    return SessionReplay(**{**fields, **extra})


def _panel_of(page: str, index: int) -> str:
    found = re.findall(
        rf'<section class="call-detail" id="call-{index}" data-call="{index}" hidden>(.*?)</section>', page, re.S
    )
    assert len(found) == 1, f"one panel for call {index}"
    return str(found[0])


def test_the_summary_line_counts_the_calls_compactions_recalls_and_failures() -> None:
    two_failures = _busy(2)
    two_failures.failures = two_failures.failures * 2
    page = render_html(_replay([_quiet(0), _busy(1), two_failures, _quiet(3, recall_block="block")]))
    assert (
        '<p class="meta">store <b>file:///tmp/&lt;store&gt;</b> &middot; config <b>ctxlife.toml</b> &middot; '
        "window <b>4,000</b> tokens, threshold <b>80%</b> &middot; tokens counted with <b>o200k_base</b> &middot; "
        "1,234 stored messages, <b>4</b> calls, peak 2,900 tokens, 2 compaction(s), 3 recall(s), 3 failure(s)</p>"
    ) in page


def test_the_heading_names_the_session_and_its_view_or_the_title_given() -> None:
    page = render_html(_replay([_quiet()], session_id="s<1>"))
    assert "<title>ctxlife session report: s&lt;1&gt;</title>" in page
    assert "<h1>ctxlife session report: s&lt;1&gt;</h1>" in page
    page = render_html(_replay([_quiet()], view="Writer.task0"))
    assert "<h1>ctxlife session report: sess-1 [Writer.task0]</h1>" in page
    page = render_html(_replay([_quiet()], view="Writer.task0"), title="Release <notes>")
    assert "<title>Release &lt;notes&gt;</title>" in page and "<h1>Release &lt;notes&gt;</h1>" in page
    assert "sess-1" not in page.split("<body")[0]


def test_the_page_opens_at_the_first_compaction_or_else_the_last_call() -> None:
    assert '<body data-start="2">' in render_html(_replay([_quiet(0), _quiet(1), _busy(2), _busy(3)]))
    assert '<body data-start="1">' in render_html(_replay([_quiet(0), _quiet(1, label="call 2")]))
    assert '<body data-start="">' in render_html(_replay([]))


def test_the_only_script_that_may_run_is_the_pages_own() -> None:
    page = render_html(_replay([_busy(0)]))
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode("ascii")
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;; style-src '
        f'&#x27;unsafe-inline&#x27;; script-src &#x27;sha256-{digest}&#x27;; img-src data:">'
    ) in page
    assert page.startswith('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">')
    assert page.endswith("</script></body></html>\n")


@pytest.mark.parametrize(
    ("source", "frames", "shown"),
    [
        (SIMULATED, [_quiet()], '<p class="mode simulated">SIMULATED on purpose.</p>'),
        (RECORDED, [_quiet(source=RECORDED)], '<p class="mode recorded">Recorded: as sent.</p>'),
        (
            RECORDED,
            [_quiet(source=RECORDED), _quiet(1, "asked"), _quiet(2, "next call")],
            '<p class="mode recorded">Recorded: as sent (asked, next call: simulated).</p>',
        ),
    ],
    ids=["simulated", "recorded", "recorded-with-simulated-calls"],
)
def test_the_page_says_whether_each_call_was_recorded_or_simulated(
    source: str, frames: list[Frame], shown: str
) -> None:
    note = "SIMULATED on purpose" if source == SIMULATED else "as sent"
    assert shown in render_html(_replay(frames, source=source, note=note))


def test_the_legend_names_every_part_kind_in_its_colour_and_the_markers() -> None:
    page = render_html(_replay([_quiet()]))
    assert (
        '<div class="legend"><span><i class="swatch" style="background:#6c757d"></i>system prompt</span>'
        '<span><i class="swatch" style="background:#9467bd"></i>bootstrap</span>'
        '<span><i class="swatch" style="background:#ff7f0e"></i>summary</span>'
        '<span><i class="swatch" style="background:#2ca02c"></i>recall block</span>'
        '<span><i class="swatch" style="background:#1f77b4"></i>recent turns</span>'
        '<span><i class="swatch" style="background:#333;height:2px"></i>window</span>'
        '<span><i class="swatch" style="background:#d62728;height:2px"></i>threshold</span>'
        '<span class="muted">markers: C compaction, R recall, S restore, ! failure; click a bar or a marker</span>'
        '</div><div class="chart"><svg '
    ) in page


def test_the_page_fits_a_phones_width() -> None:
    page = render_html(_replay([_quiet()]))
    assert 'img-src data:"><meta name="viewport" content="width=device-width, initial-scale=1"><title>' in page


def test_an_empty_replay_says_no_calls_and_a_peak_of_0() -> None:
    page = render_html(_replay([]))
    assert "<b>0</b> calls, peak 0 tokens, 0 compaction(s), 0 recall(s), 0 failure(s)</p>" in page


def test_the_timeline_lists_each_calls_events_in_order() -> None:
    only_block = _quiet(2, "call 3", recall_block="block")
    only_problem = _quiet(3, "next call", problems=["no user turn"])
    only_failure = _quiet(4, "asked", failures=[{"strategy": "s", "node": "n", "error": "e"}])
    only_recalled = _quiet(5, "call 6", recalled=[{"seq": 1, "role": "user", "text": "t", "score": 1.0}])
    only_evicted = _quiet(6, "call 7", evicted=[{"role": "user", "tokens": 5, "text": "t"}])
    restored = _quiet(7, "call 8", restored={"from_snapshot": 0, "snapshot_covers": 0, "from_records": 0})
    frames = [_quiet(0), _busy(1), only_block, only_problem, only_failure, only_recalled, only_evicted, restored]
    page = render_html(_replay(frames))
    timeline = re.search(r'<h2>Timeline</h2><ol class="events">(.*?)</ol>', page, re.S)
    assert timeline is not None
    assert re.findall(
        r'<li><button type="button" class="event ev-(\w+)" data-call="(\d+)">([^<]*)</button></li>', timeline.group(1)
    ) == [
        ("restore", "1", "call 2: restore"),
        ("compaction", "1", "call 2: compaction"),
        ("recall", "1", "call 2: recall"),
        ("failure", "1", "call 2: failure"),
        ("recall", "2", "call 3: recall"),
        ("failure", "3", "next call: failure"),
        ("failure", "4", "asked: failure"),
        ("recall", "5", "call 6: recall"),
        ("compaction", "6", "call 7: compaction"),
        ("restore", "7", "call 8: restore"),
    ]
    assert "no compaction, recall, restore or failure" not in page


def test_a_session_where_nothing_happened_says_so() -> None:
    page = render_html(_replay([_quiet(0), _quiet(1, "call 2")]))
    assert (
        '<h2>Timeline</h2><ol class="events"><li class="muted">no compaction, recall, restore or failure in this '
        "session</li></ol>"
    ) in page
    panel = _panel_of(page, 0)
    for absent in ("What the strategies did", "Restored", "Compaction", "Recall", "Failures"):
        assert absent not in panel


def test_a_quiet_calls_panel_shows_its_tokens_by_kind_and_its_parts() -> None:
    page = render_html(_replay([_quiet(0)]))
    panel = _panel_of(page, 0)
    assert panel.startswith(
        '<h2>call 1: 1,233 tokens sent <span class="muted">(2 messages; the whole conversation so far would be '
        "1,233; window 4,000)</span></h2>"
    )
    assert (
        '<table><tr><th class="num">system prompt</th><th class="num">bootstrap</th><th class="num">summary</th>'
        '<th class="num">recall block</th><th class="num">recent turns</th></tr>'
        '<tr><td class="num">30</td><td class="num">0</td><td class="num">0</td><td class="num">0</td>'
        '<td class="num">1,200</td></tr></table>'
    ) in panel
    assert panel.endswith(
        '<details><summary>The 2 parts of the list sent</summary><table class="parts"><tr><th class="num">#</th>'
        '<th>part</th><th>role</th><th class="num">tokens</th><th>text</th></tr>'
        '<tr><td class=num>0</td><td><span class="kind" style="background:#6c757d">system</span></td><td>system</td>'
        "<td class=num>30</td><td><pre>You are terse.</pre></td></tr>"
        '<tr><td class=num>1</td><td><span class="kind" style="background:#1f77b4">recent</span></td><td>user</td>'
        "<td class=num>1,200</td><td><pre>Hi</pre></td></tr></table></details>"
    )


def test_a_busy_calls_panel_shows_what_each_strategy_did_and_every_stored_text_escaped() -> None:
    page = render_html(_replay([_busy(0)]))
    assert MARKUP not in page and 'onclick="' not in page
    panel = _panel_of(page, 0)
    assert panel.startswith(
        '<h2>call 1: 2,900 tokens sent <span class="muted">(5 messages; the whole conversation so far would be '
        "12,345; window 4,000)</span></h2>"
    )
    assert (
        '<tr><td class="num">40</td><td class="num">7</td><td class="num">300</td><td class="num">50</td>'
        '<td class="num">2,500</td></tr>'
    ) in panel
    # the strategies' actions, skips left out, each with its details
    assert (
        "<h3>What the strategies did</h3><ul>"
        f"<li><b>llm_summary</b>: compacted <span class=muted>evicted=4, note={ESCAPED}</span>"
        f"<li><b>{ESCAPED}</b>: {ESCAPED} <span class=muted></span></ul>"
    ) in panel
    assert (
        '<h3 class="restore">Restored from the store</h3><p>1,200 message(s) from the snapshot (it covers raw '
        "history up to message 34,567) and 1,001 record(s) after it.</p>"
    ) in panel
    assert (
        f'<h3 class="compaction">Compaction</h3><p>Summary written at this call:</p><pre class="summary-text">{ESCAPED}'
        "</pre><details open><summary>2 message(s) evicted (3,500 tokens; still in the raw history)</summary>"
        '<table class="evicted"><tr><th>role</th><th class="num">tokens</th><th>text</th></tr>'
        f"<tr><td>user</td><td class=num>1,500</td><td><pre>{ESCAPED}</pre></td></tr>"
        f"<tr><td>{ESCAPED}</td><td class=num>2,000</td><td><pre>second</pre></td></tr></table></details>"
    ) in panel
    assert (
        '<h3 class="recall">Recall</h3><table class="passages"><tr><th class="num">message</th><th>role</th>'
        '<th class="num">score</th><th>passage</th></tr>'
        f"<tr><td class=num>3</td><td>assistant</td><td class=num>0.50</td><td><pre>{ESCAPED}</pre></td></tr>"
        f"<tr><td class=num>12</td><td>{ESCAPED}</td><td class=num>2.00</td><td><pre>int score</pre></td></tr>"
        "<tr><td class=num>7</td><td>user</td><td class=num>-</td><td><pre>no score</pre></td></tr></table>"
        f'<details><summary>The block as sent</summary><pre class="recall-block">Recalled: {ESCAPED}</pre></details>'
    ) in panel
    assert (
        f'<h3 class="fail">Failures</h3><ul><li class="fail"><b>tool_output</b> at before_llm_call: {ESCAPED} (its '
        "edit was rolled back)</li>"
        f'<li class="fail">the list sent is not valid for the provider: {ESCAPED}</li></ul>'
    ) in panel
    assert (
        '<tr><td class=num>1</td><td><span class="kind" style="background:#9467bd">bootstrap</span></td>'
        "<td>system</td><td class=num>7</td><td><pre>Known: falcon</pre></td></tr>"
    ) in panel
    assert f"<td class=num>2,500</td><td><pre>{ESCAPED}</pre></td></tr>" in panel


def test_a_truncation_without_a_summary_shows_the_evicted_messages_only() -> None:
    frame = _quiet(0, evicted=[{"role": "tool", "tokens": 9, "text": "old output"}])
    panel = _panel_of(render_html(_replay([frame])), 0)
    assert '<h3 class="compaction">Compaction</h3><details open><summary>1 message(s) evicted (9 tokens' in panel
    assert "summary-text" not in panel


def test_a_recall_block_without_passages_shows_the_block_alone() -> None:
    panel = _panel_of(render_html(_replay([_quiet(0, recall_block="Recalled: x")])), 0)
    assert (
        '<h3 class="recall">Recall</h3><details><summary>The block as sent</summary>'
        '<pre class="recall-block">Recalled: x</pre></details>'
    ) in panel
    assert "passages" not in panel


def test_a_problem_without_a_failure_is_listed_under_failures() -> None:
    panel = _panel_of(render_html(_replay([_quiet(0, problems=["tool result without its call"])])), 0)
    assert (
        '<h3 class="fail">Failures</h3><ul><li class="fail">the list sent is not valid for the provider: tool result '
        "without its call</li></ul>"
    ) in panel


def test_an_unknown_part_kind_gets_a_grey_badge() -> None:
    frame = _quiet(0)
    frame.composition.parts.append(Part("other", 2, "user", 0, "?"))
    panel = _panel_of(render_html(_replay([frame])), 0)
    assert '<span class="kind" style="background:#999">other</span>' in panel


# The chart: bars to scale, parsed as SVG.


def _svg(page: str) -> ET.Element:
    found = re.search(r'<div class="chart">(<svg .*?</svg>)</div>', page, re.S)
    assert found is not None
    return ET.fromstring(found.group(1))


def _f(element: ET.Element, name: str) -> float:
    return float(element.attrib[name])


def test_the_chart_draws_each_call_as_a_bar_stacked_by_kind_to_scale() -> None:
    frames = [_quiet(0), _busy(1), _quiet(2, "next call (simulated)")]
    replay = _replay(frames, context_window=4000, threshold=0.8)
    svg = _svg(render_html(replay))
    width, height = _f(svg, "width"), _f(svg, "height")
    assert svg.attrib["aria-label"] == "context tokens per call"
    bars = svg.findall(f"{SVG}g[@class='bar']")
    assert [b.attrib["data-call"] for b in bars] == ["0", "1", "2"]
    window_line = svg.find(f"{SVG}line[@class='window-line']")
    threshold_line = svg.find(f"{SVG}line[@class='threshold-line']")
    assert window_line is not None and threshold_line is not None
    bottoms, scales, lefts = [], [], []
    for bar, frame in zip(bars, frames, strict=True):
        segments = bar.findall(f"{SVG}rect")
        outline = segments.pop()
        assert outline.attrib["class"] == "frame" and outline.attrib["fill"] == "none"
        kinds = {k: v for k, v in frame.composition.tokens_by_kind().items() if v}
        assert [s.attrib["class"] for s in segments] == [f"seg seg-{k}" for k in kinds]
        assert [int(s.attrib["data-tokens"]) for s in segments] == list(kinds.values())
        assert [s.attrib["fill"] for s in segments] == [
            {
                "system": "#6c757d",
                "bootstrap": "#9467bd",
                "summary": "#ff7f0e",
                "recall": "#2ca02c",
                "recent": "#1f77b4",
            }[k]
            for k in kinds
        ]
        # stacked bottom to top, each segment's height its tokens at one scale
        bottom = _f(outline, "y") + _f(outline, "height")
        below = bottom
        for segment, tokens in zip(segments, kinds.values(), strict=True):
            assert _f(segment, "y") + _f(segment, "height") == pytest.approx(below, abs=0.11)
            scales.append((_f(segment, "height"), tokens))
            below = _f(segment, "y")
        assert _f(outline, "y") <= below  # the outline is the whole request (the reply priming on top)
        scales.append((_f(outline, "height"), frame.composition.total))
        bottoms.append(bottom)
        assert {_f(r, "x") for r in [*segments, outline]} == {_f(outline, "x")}
        assert {_f(r, "width") for r in [*segments, outline]} == {_f(outline, "width")}
        lefts.append((_f(outline, "x"), _f(outline, "x") + _f(outline, "width")))
        assert 0 < _f(outline, "y") and bottom < height and lefts[-1][1] < width
    assert len(set(bottoms)) == 1
    assert all(right < left for (_, right), (left, _) in itertools.pairwise(lefts))  # left to right, apart
    scale = sum(h for h, _ in scales) / sum(t for _, t in scales)
    assert all(abs(h - t * scale) <= 0.11 for h, t in scales)  # every height at one scale (to 0.1 px)
    # the window and the threshold (80% of it, 3,200) drawn across the bars at the same scale
    for line, tokens in ((window_line, 4000), (threshold_line, 3200)):
        assert _f(line, "y1") == _f(line, "y2") == pytest.approx(bottoms[0] - tokens * scale, abs=0.5)
        assert _f(line, "x1") <= lefts[0][0] and _f(line, "x2") > lefts[-1][1]
    # every horizontal line ends where the window line does, on the page; the labels of the window and the
    # threshold start after it, their 11-px text centred on the line (baseline 4 px below it)
    grid = [line for line in svg.findall(f"{SVG}line") if "class" not in line.attrib]
    assert {_f(line, "x2") for line in [*grid, threshold_line]} == {_f(window_line, "x2")}
    assert _f(window_line, "x2") < width
    texts = {"".join(t.itertext()): t for t in svg.findall(f"{SVG}text")}
    for line, name in ((window_line, "window 4,000"), (threshold_line, "threshold 3,200 (80%)")):
        label = texts[name]
        assert _f(line, "x2") < _f(label, "x") < width
        assert _f(label, "y") == pytest.approx(_f(line, "y1") + 4, abs=0.11)
    assert max(_f(t, "y") for t in texts.values()) == _f(texts["model call"], "y") < height  # the axis's name
    # each bar is labelled with its call under it
    assert ["".join(b.find(f"{SVG}text").itertext()) for b in bars] == ["1", "2", "next"]  # type: ignore[union-attr]
    for bar, (left, right) in zip(bars, lefts, strict=True):
        label = bar.find(f"{SVG}text")
        assert label is not None and _f(label, "x") == pytest.approx((left + right) / 2)
        assert label.attrib["text-anchor"] == "middle" and bottoms[0] < _f(label, "y") < height
    titles = ["".join(b.find(f"{SVG}title").itertext()) for b in bars]  # type: ignore[union-attr]
    assert titles == [
        "call 1: 1,233 tokens (system prompt 30, recent turns 1,200)",
        "call 2: 2,900 tokens (system prompt 40, bootstrap 7, summary 300, recall block 50, recent turns 2,500)",
        "next call (simulated): 1,233 tokens (system prompt 30, recent turns 1,200)",
    ]


def test_a_small_conversations_bars_stand_on_0_and_show_a_1_token_part() -> None:
    comp = _composition(("system", "system", 1, "."), ("recent", "user", 40, "Hi"), total=44)
    svg = _svg(render_html(_replay([Frame(0, "call 1", comp, 44, 44, 44)], context_window=100)))
    zero = max(_f(line, "y1") for line in svg.findall(f"{SVG}line") if "class" not in line.attrib)
    segments = svg.findall(f".//{SVG}rect")
    assert [s.attrib["class"] for s in segments] == ["seg seg-system", "seg seg-recent", "frame"]
    scale = 300 / 108  # the bars' height (300 px) for the axis's top, 8% above the window
    system, recent, outline = segments
    assert _f(system, "y") + _f(system, "height") == pytest.approx(zero, abs=0.11)
    assert _f(system, "height") == pytest.approx(scale, abs=0.11)
    assert _f(recent, "y") + _f(recent, "height") == pytest.approx(_f(system, "y"), abs=0.11)
    assert _f(outline, "y") + _f(outline, "height") == pytest.approx(zero, abs=0.11)


def test_the_chart_axis_reaches_above_the_window_and_the_tallest_bar() -> None:
    tall = _quiet(1, "call 2")
    tall.composition.total = 9000
    for frames, top in (([_quiet(0)], 4000), ([_quiet(0), tall], 9000)):
        svg = _svg(render_html(_replay(frames, context_window=4000)))
        ticks = [t for t in svg.findall(f"{SVG}text") if t.attrib.get("text-anchor") == "end"]
        values = [int("".join(t.itertext()).replace(",", "")) for t in ticks]
        assert values == [int(top * 1.08 * k / 4) for k in range(5)]
        lines = [line for line in svg.findall(f"{SVG}line") if "class" not in line.attrib]
        assert len(lines) == 5
        ys = [_f(line, "y1") for line in lines]
        assert ys == sorted(ys, reverse=True) and ys[0] > ys[-1] > 0  # 0 at the bottom, the top above
        outline = svg.findall(f".//{SVG}rect[@class='frame']")[-1]
        bottom = _f(outline, "y") + _f(outline, "height")
        assert ys[0] == pytest.approx(bottom, abs=0.11)
        for line, tick in zip(lines, ticks, strict=True):
            assert _f(line, "y2") == _f(line, "y1") and _f(tick, "y") == pytest.approx(_f(line, "y1") + 4, abs=0.11)
            assert _f(tick, "x") < _f(line, "x1") < _f(outline, "x")


def test_an_empty_conversation_draws_an_empty_chart() -> None:
    frame = Frame(0, "call 1", Composition([], [], 0), 0, 0, 0)
    svg = _svg(render_html(_replay([frame], context_window=0, threshold=0.5)))
    assert svg.findall(f".//{SVG}rect[@class='frame']")  # drawn, no division by zero
    ticks = [t for t in svg.findall(f"{SVG}text") if t.attrib.get("text-anchor") == "end"]
    assert ["".join(t.itertext()) for t in ticks] == ["0", "0", "0", "0", "1"]  # an axis from 0 to 1 token
    assert "".join(svg.find(f".//{SVG}title").itertext()) == "call 1: 0 tokens"  # type: ignore[union-attr]
    svg = _svg(render_html(_replay([])))
    assert svg.findall(f"{SVG}g") == [] and _f(svg, "width") > 0


def test_the_chart_marks_each_event_above_its_bar() -> None:
    frames = [_quiet(0), _busy(1)]
    svg = _svg(render_html(_replay(frames)))
    markers = svg.findall(f"{SVG}g")
    markers = [m for m in markers if m.attrib["class"].startswith("marker")]
    assert [(m.attrib["class"], m.attrib["data-call"]) for m in markers] == [
        ("marker marker-restore", "1"),
        ("marker marker-compaction", "1"),
        ("marker marker-recall", "1"),
        ("marker marker-failure", "1"),
    ]
    assert ["".join(m.find(f"{SVG}title").itertext()) for m in markers] == [  # type: ignore[union-attr]
        f"{kind} at call 2" for kind in ("restore", "compaction", "recall", "failure")
    ]
    assert ["".join(m.find(f"{SVG}text").itertext()) for m in markers] == ["S", "C", "R", "!"]  # type: ignore[union-attr]
    assert [m.find(f"{SVG}circle").attrib["fill"] for m in markers] == [  # type: ignore[union-attr]
        "#9467bd",
        "#ff7f0e",
        "#2ca02c",
        "#d62728",
    ]
    bar = next(b for b in svg.findall(f"{SVG}g[@class='bar']") if b.attrib["data-call"] == "1")
    outline = bar.find(f"{SVG}rect[@class='frame']")
    assert outline is not None
    centre = _f(outline, "x") + _f(outline, "width") / 2
    window_line = svg.find(f"{SVG}line[@class='window-line']")
    assert window_line is not None
    circles = [m.find(f"{SVG}circle") for m in markers]
    ys = [_f(c, "cy") for c in circles]  # type: ignore[arg-type]
    assert all(b - a >= 13 for a, b in itertools.pairwise(sorted(ys)))  # stacked upwards, apart (r 6.5)
    assert ys == sorted(ys, reverse=True)
    axis_top = min(_f(line, "y1") for line in svg.findall(f"{SVG}line") if "class" not in line.attrib)
    assert all(y - 6.5 >= 0 and y + 6.5 <= axis_top for y in ys)  # above the plot, on the page
    for marker, circle in zip(markers, circles, strict=True):
        assert circle is not None and _f(circle, "cx") == centre
        letter = marker.find(f"{SVG}text")
        assert letter is not None and _f(letter, "x") == centre and _f(letter, "y") == _f(circle, "cy") + 3.5


# write_report: where the page goes


def test_write_report_writes_the_page_into_new_folders_and_escapes_lone_surrogates(tmp_path: Path) -> None:
    replay = _replay([_quiet(0, summary="name \udcff")])
    target = tmp_path / "a" / "b" / "report.html"
    assert write_report(replay, target, title="T") == target
    page = target.read_text(encoding="utf-8")
    assert "<h1>T</h1>" in page and "name \\udcff" in page


def test_write_report_to_a_file_name_alone_writes_in_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert write_report(_replay([_quiet()]), "r.html") == Path("r.html")
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_write_report_names_a_folder_given_as_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CtxlifeError) as caught:
        write_report(_replay([_quiet()]), tmp_path)
    assert str(caught.value) == (
        f"cannot write the report to {str(tmp_path)!r}: it is a folder; pass a file name "
        f"(for example -o {str(tmp_path / 'report.html')!r})"
    )


def test_write_report_names_the_path_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    target = tmp_path / "file" / "report.html"  # its parent is a file
    with pytest.raises(CtxlifeError) as caught:
        write_report(_replay([_quiet()]), target)
    assert str(caught.value) == f"cannot write the report to {str(target)!r}: {os.strerror(errno.EEXIST)}"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_report_is_written_in_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    """A server in the C locale (ASCII): the page is still written, in UTF-8 (a real process, as the
    interpreter reads the locale when it starts)."""
    target = tmp_path / "report.html"
    write_report(_replay([_quiet()]), target)  # here too (mutmut runs the tests that call it in its process)
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]); "
        "from test_report_page import _quiet, _replay; from ctxlife.report import write_report; "
        "write_report(_replay([_quiet(0, summary='caf\\u00e9 \\u4e2d\\u6587')]), sys.argv[1])"
    )
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", code, str(target), str(Path(__file__).parent)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "caf\u00e9 \u4e2d\u6587" in target.read_text(encoding="utf-8")
