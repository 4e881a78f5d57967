"""Render a :class:`~ctxlife.replay.SessionReplay` as one self-contained HTML page (see the package docs)."""

from __future__ import annotations

import base64
import hashlib
import html
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ctxlife.errors import CtxlifeError
from ctxlife.messages import escape_surrogates
from ctxlife.sessions.ids import original_session_id

if TYPE_CHECKING:
    from ctxlife.inspection import Frame, SessionReplay

__all__ = ["KIND_COLORS", "render_html", "write_report"]

#: The colour of each part kind, bottom to top of a bar.
KIND_COLORS = {
    "system": "#6c757d",
    "bootstrap": "#9467bd",
    "summary": "#ff7f0e",
    "recall": "#2ca02c",
    "recent": "#1f77b4",
}
_KIND_LABELS = {
    "system": "system prompt",
    "bootstrap": "bootstrap",
    "summary": "summary",
    "recall": "recall block",
    "recent": "recent turns",
}

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:20px 28px;color:#1d2330;
background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 8px}h3{font-size:14px;margin:14px 0 6px}
.meta{color:#555;margin:0 0 12px}.meta b{color:#1d2330}
.legend{display:flex;flex-wrap:wrap;gap:14px;margin:8px 0 4px;font-size:13px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.swatch{width:12px;height:12px;border-radius:2px;display:inline-block}
.chart{overflow-x:auto;background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px}
svg .bar{cursor:pointer}svg .bar:hover rect{opacity:.8}svg .bar.selected rect.frame{stroke:#111;stroke-width:2}
svg .marker{cursor:pointer}svg text{font:11px system-ui,sans-serif;fill:#444}
.window-line{stroke:#333;stroke-width:1.2}.threshold-line{stroke:#d62728;stroke-width:1.2;stroke-dasharray:6 4}
.events{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:6px}
.events button{border:1px solid #c9ced6;background:#fff;border-radius:14px;padding:3px 10px;cursor:pointer;font:inherit;
font-size:12.5px}
.events button:hover{background:#eef2f7}
.ev-compaction{border-color:#ff7f0e!important}.ev-recall{border-color:#2ca02c!important}
.ev-restore{border-color:#9467bd!important}.ev-failure{border-color:#d62728!important;color:#b00}
.call-detail{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 16px;margin-top:12px}
.call-detail[hidden]{display:none}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #eceff3;padding:3px 8px;text-align:left;
vertical-align:top}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f5f7f9;border-radius:4px;padding:8px;margin:4px 0;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;max-height:420px;overflow:auto}
.kind{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
.fail{color:#b00}.muted{color:#666}
.mode{padding:6px 10px;border-radius:4px;margin:0 0 10px}.mode.recorded{background:#e8f4ea}
.mode.simulated{background:#fff3cd;border:1px solid #e0a800;font-weight:bold}
details{margin:4px 0}summary{cursor:pointer}
"""

_SCRIPT = """
(function(){
  function show(i, scroll){
    document.querySelectorAll('.call-detail').forEach(function(el){el.hidden = el.dataset.call !== String(i);});
    document.querySelectorAll('svg .bar').forEach(function(el){
      el.classList.toggle('selected', el.dataset.call === String(i));
    });
    var panel = document.getElementById('call-' + i);
    if (scroll && panel && panel.scrollIntoView) { panel.scrollIntoView({block: 'nearest'}); }
  }
  document.querySelectorAll('[data-call]').forEach(function(el){
    if (el.classList.contains('call-detail')) { return; }
    el.addEventListener('click', function(){ show(el.dataset.call, true); });
  });
  var start = document.body.dataset.start;
  if (start !== undefined && start !== '') { show(start, false); }
})();
"""


def _e(value: object) -> str:
    """Escape text for HTML and SVG, attributes included."""
    return html.escape(str(value), quote=True)


def _kinds(frame: Frame) -> dict[str, int]:
    return dict(frame.composition.tokens_by_kind())


def _events(frame: Frame) -> list[tuple[str, str]]:
    """``(css kind, label)`` of what happened at a call, in a fixed order."""
    out = []
    if frame.restored is not None:
        out.append(("restore", "restore"))
    if frame.compacted:
        out.append(("compaction", "compaction"))
    if frame.recalled or frame.recall_block:
        out.append(("recall", "recall"))
    if frame.failures or frame.problems:
        out.append(("failure", "failure"))
    return out


_MARKER_SHAPES = {
    "compaction": ("#ff7f0e", "C"),
    "recall": ("#2ca02c", "R"),
    "restore": ("#9467bd", "S"),
    "failure": ("#d62728", "!"),
}


def _chart(replay: SessionReplay) -> str:
    frames = replay.frames
    window = replay.context_window
    budget = int(replay.threshold * window)
    top = max([window, *(f.composition.total for f in frames)]) * 1.08 or 1
    bar, gap, left, right, chart_h, above, below = 26, 10, 64, 150, 300, 66, 34
    width = left + max(len(frames), 1) * (bar + gap) + right
    height = above + chart_h + below

    def y(tokens: float) -> float:
        return above + chart_h - chart_h * tokens / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="context tokens per call" class="timeline">'
    ]
    for tick in range(0, 5):  # axis: 0, 25%, 50%, 75%, 100% of the top
        value = top * tick / 4
        parts.append(
            f'<line x1="{left - 4}" x2="{width - right}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#eceff3"/>'
            f'<text x="{left - 8}" y="{y(value) + 4:.1f}" text-anchor="end">{int(value):,}</text>'
        )
    for i, frame in enumerate(frames):
        x = left + i * (bar + gap)
        kinds = _kinds(frame)
        base = 0
        tip = ", ".join(f"{_KIND_LABELS[k]} {v:,}" for k, v in kinds.items() if v)
        parts.append(f'<g class="bar" data-call="{i}"><title>{_e(frame.label)}: {frame.composition.total:,} tokens')
        parts.append(f" ({_e(tip)})</title>" if tip else "</title>")
        for kind, color in KIND_COLORS.items():
            tokens = kinds.get(kind, 0)
            if tokens <= 0:
                continue
            y0, y1 = y(base), y(base + tokens)
            parts.append(
                f'<rect class="seg seg-{kind}" x="{x}" y="{y1:.1f}" width="{bar}" height="{max(y0 - y1, 0.5):.1f}" '
                f'fill="{color}" data-tokens="{tokens}"/>'
            )
            base += tokens
        parts.append(
            f'<rect class="frame" x="{x}" y="{y(frame.composition.total):.1f}" width="{bar}" '
            f'height="{y(0) - y(frame.composition.total):.1f}" fill="none"/>'
        )
        label = frame.label.removeprefix("call ") if frame.label.startswith("call ") else frame.label.split()[0]
        parts.append(f'<text x="{x + bar / 2}" y="{above + chart_h + 14}" text-anchor="middle">{_e(label)}</text></g>')
        for k, (kind, _) in enumerate(_events(frame)):
            color, letter = _MARKER_SHAPES[kind]
            cy = above - 10 - k * 15
            parts.append(
                f'<g class="marker marker-{kind}" data-call="{i}"><title>{_e(kind)} at {_e(frame.label)}</title>'
                f'<circle cx="{x + bar / 2}" cy="{cy}" r="6.5" fill="{color}"/>'
                f'<text x="{x + bar / 2}" y="{cy + 3.5}" text-anchor="middle" style="fill:#fff;font-weight:bold">'
                f"{letter}</text></g>"
            )
    x_end = width - right
    parts.append(
        f'<line class="window-line" x1="{left}" x2="{x_end}" y1="{y(window):.1f}" y2="{y(window):.1f}"/>'
        f'<text x="{x_end + 6}" y="{y(window) + 4:.1f}">window {window:,}</text>'
        f'<line class="threshold-line" x1="{left}" x2="{x_end}" y1="{y(budget):.1f}" y2="{y(budget):.1f}"/>'
        f'<text x="{x_end + 6}" y="{y(budget) + 4:.1f}" style="fill:#d62728">threshold {budget:,} '
        f"({replay.threshold:.0%})</text>"
        f'<text x="{left}" y="{height - 6}">model call</text>'
        "</svg>"
    )
    return "".join(parts)


def _mode_text(replay: SessionReplay) -> str:
    if replay.source == "recorded":
        simulated = [f.label for f in replay.frames if f.source != "recorded"]
        extra = f" ({', '.join(simulated)}: simulated)" if simulated else ""
        return f"Recorded: {replay.note}{extra}."
    return replay.note + "."


def _kind_badge(kind: str) -> str:
    return f'<span class="kind" style="background:{KIND_COLORS.get(kind, "#999")}">{_e(kind)}</span>'


def _panel(frame: Frame, replay: SessionReplay) -> str:
    comp = frame.composition
    kinds = _kinds(frame)
    out = [f'<section class="call-detail" id="call-{frame.index}" data-call="{frame.index}" hidden>']
    out.append(
        f"<h2>{_e(frame.label)}: {comp.total:,} tokens sent "
        f'<span class="muted">({len(comp.messages)} messages; the whole conversation so far would be '
        f"{frame.unmanaged_tokens:,}; window {replay.context_window:,})</span></h2>"
    )
    out.append("<table><tr>" + "".join(f'<th class="num">{_e(_KIND_LABELS[k])}</th>' for k in KIND_COLORS) + "</tr>")
    out.append("<tr>" + "".join(f'<td class="num">{kinds.get(k, 0):,}</td>' for k in KIND_COLORS) + "</tr></table>")
    acted = [a for a in frame.actions if a.get("what") != "skipped"]
    if acted:
        out.append("<h3>What the strategies did</h3><ul>")
        for action in acted:
            details = ", ".join(f"{k}={v}" for k, v in action.items() if k not in ("strategy", "what"))
            out.append(
                f"<li><b>{_e(action['strategy'])}</b>: {_e(action['what'])} <span class=muted>{_e(details)}</span>"
            )
        out.append("</ul>")
    if frame.restored is not None:
        r = frame.restored
        out.append(
            '<h3 class="restore">Restored from the store</h3>'
            f"<p>{r['from_snapshot']:,} message(s) from the snapshot (it covers raw history up to message "
            f"{r['snapshot_covers']:,}) and {r['from_records']:,} record(s) after it.</p>"
        )
    if frame.compacted:
        out.append('<h3 class="compaction">Compaction</h3>')
        if frame.summary is not None:
            out.append(f'<p>Summary written at this call:</p><pre class="summary-text">{_e(frame.summary)}</pre>')
        evicted_tokens = sum(int(m["tokens"]) for m in frame.evicted)
        out.append(
            f"<details open><summary>{len(frame.evicted)} message(s) evicted ({evicted_tokens:,} tokens; still in "
            'the raw history)</summary><table class="evicted"><tr><th>role</th><th class="num">tokens</th>'
            "<th>text</th></tr>"
        )
        for message in frame.evicted:
            out.append(
                f"<tr><td>{_e(message['role'])}</td><td class=num>{int(message['tokens']):,}</td>"
                f"<td><pre>{_e(message['text'])}</pre></td></tr>"
            )
        out.append("</table></details>")
    if frame.recalled or frame.recall_block:
        out.append('<h3 class="recall">Recall</h3>')
        if frame.recalled:
            out.append(
                '<table class="passages"><tr><th class="num">message</th><th>role</th><th class="num">score</th>'
                "<th>passage</th></tr>"
            )
            for passage in frame.recalled:
                score = passage.get("score")
                shown = f"{float(score):.2f}" if isinstance(score, (int, float)) else "-"
                out.append(
                    f"<tr><td class=num>{int(passage['seq'])}</td><td>{_e(passage['role'])}</td>"
                    f"<td class=num>{shown}</td><td><pre>{_e(passage['text'])}</pre></td></tr>"
                )
            out.append("</table>")
        if frame.recall_block:
            out.append(
                f'<details><summary>The block as sent</summary><pre class="recall-block">{_e(frame.recall_block)}'
                "</pre></details>"
            )
    if frame.failures or frame.problems:
        out.append('<h3 class="fail">Failures</h3><ul>')
        for failure in frame.failures:
            out.append(
                f'<li class="fail"><b>{_e(failure["strategy"])}</b> at {_e(failure["node"])}: '
                f"{_e(failure['error'])} (its edit was rolled back)</li>"
            )
        for problem in frame.problems:
            out.append(f'<li class="fail">the list sent is not valid for the provider: {_e(problem)}</li>')
        out.append("</ul>")
    out.append(f"<details><summary>The {len(comp.parts)} parts of the list sent</summary>")
    out.append('<table class="parts"><tr><th class="num">#</th><th>part</th><th>role</th><th class="num">tokens</th>')
    out.append("<th>text</th></tr>")
    for part in comp.parts:
        out.append(
            f"<tr><td class=num>{part.index}</td><td>{_kind_badge(part.kind)}</td><td>{_e(part.role)}</td>"
            f"<td class=num>{part.tokens:,}</td><td><pre>{_e(part.text)}</pre></td></tr>"
        )
    out.append("</table></details></section>")
    return "".join(out)


def render_html(replay: SessionReplay, *, title: str | None = None) -> str:
    """The report page for ``replay`` (a :class:`~ctxlife.replay.SessionReplay`), as one HTML string."""
    frames = replay.frames
    heading = title or f"ctxlife session report: {original_session_id(replay.session_id)}" + (
        f" [{replay.view}]" if replay.view else ""
    )
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    # Nothing may be fetched and only the page's own script may run, whatever the session holds.
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; img-src data:"
    start = next((f.index for f in frames if f.compacted), frames[-1].index if frames else "")
    compactions = sum(1 for f in frames if f.compacted)
    recalls = sum(1 for f in frames if f.recalled or f.recall_block)
    failures = sum(len(f.failures) for f in frames)
    peak = max((f.composition.total for f in frames), default=0)
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(policy)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title><style>{_CSS}</style></head>",
        f'<body data-start="{start}"><h1>{_e(heading)}</h1>',
        f'<p class="meta">store <b>{_e(replay.store_url)}</b> &middot; config <b>{_e(replay.config)}</b> &middot; '
        f"window <b>{replay.context_window:,}</b> tokens, threshold <b>{replay.threshold:.0%}</b> &middot; "
        f"tokens counted with <b>{_e(replay.encoding)}</b> &middot; {replay.messages:,} stored messages, "
        f"<b>{len(frames)}</b> calls, peak {peak:,} tokens, {compactions} compaction(s), {recalls} recall(s), "
        f"{failures} failure(s)</p>",
        f'<p class="mode {_e(replay.source)}">{_e(_mode_text(replay))}</p>',
        '<div class="legend">'
        + "".join(
            f'<span><i class="swatch" style="background:{c}"></i>{_e(_KIND_LABELS[k])}</span>'
            for k, c in KIND_COLORS.items()
        )
        + '<span><i class="swatch" style="background:#333;height:2px"></i>window</span>'
        '<span><i class="swatch" style="background:#d62728;height:2px"></i>threshold</span>'
        '<span class="muted">markers: C compaction, R recall, S restore, ! failure; click a bar or a marker</span>'
        "</div>",
        f'<div class="chart">{_chart(replay)}</div>',
        '<h2>Timeline</h2><ol class="events">',
    ]
    for frame in frames:
        for kind, label in _events(frame):
            out.append(
                f'<li><button type="button" class="event ev-{kind}" data-call="{frame.index}">'
                f"{_e(frame.label)}: {_e(label)}</button></li>"
            )
    if not any(_events(f) for f in frames):
        out.append('<li class="muted">no compaction, recall, restore or failure in this session</li>')
    out.append("</ol>")
    out.extend(_panel(frame, replay) for frame in frames)
    out.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(out)


def write_report(replay: SessionReplay, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Write :func:`render_html` of ``replay`` to ``path`` (UTF-8); return the path.

    Raises :class:`~ctxlife.errors.CtxlifeError` naming the path when it is a folder or cannot be
    written. Lone surrogates in stored text (a non-UTF-8 file name) are written as ``\\udXXX``.
    """
    target = Path(path)
    if target.is_dir():
        raise CtxlifeError(
            f"cannot write the report to {str(target)!r}: it is a folder; pass a file name "
            f"(for example -o {str(target / 'report.html')!r})"
        )
    text = escape_surrogates(render_html(replay, title=title))
    try:
        if target.parent != Path("."):
            target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CtxlifeError(f"cannot write the report to {str(target)!r}: {exc.strerror or exc}") from None
    return target
