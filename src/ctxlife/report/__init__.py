"""The HTML session report: one self-contained file showing what the model saw, call by call.

``ctxlife report ID -o report.html`` (and ``ctxlife replay --session ID --html FILE``) write it from a
:class:`~ctxlife.replay.SessionReplay`: the calls as recorded (what the model was sent) or, in a
simulation, as the config's strategies make them now (a banner at the top says which); a stacked
bar per call (system prompt, bootstrap, summary, recall block, recent turns; tokens against the
window and the threshold line), a marker for each compaction, recall, restore and failure, and per
call a panel with the summary text and what it evicted, the recalled passages with their scores,
the restore, the failures and the whole list.

The file needs nothing else: CSS, JavaScript and SVG are inline, nothing is fetched. Every text of
the session is escaped (it is untrusted: a message holding ``<script>`` is shown, never run), and
the page's own script only toggles which panel is shown.
"""

from __future__ import annotations

from ctxlife.report.html import KIND_COLORS, render_html, write_report

__all__ = ["KIND_COLORS", "render_html", "write_report"]
