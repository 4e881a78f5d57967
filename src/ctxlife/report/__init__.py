"""The HTML session report: one self-contained file showing what the model saw, call by call.

What it shows and how to make one: docs/inspecting.md, "An HTML report". The file needs nothing else
(CSS, JavaScript and SVG inline, nothing fetched); every text of the session is escaped (it is
untrusted: a message holding ``<script>`` is shown, never run), and the page's own script only
toggles which panel is shown.
"""

from __future__ import annotations

from ctxlife.report.html import KIND_COLORS, render_html, write_report

__all__ = ["KIND_COLORS", "render_html", "write_report"]
