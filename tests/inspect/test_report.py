"""``ctxlife report ID -o report.html``: one self-contained page, checked as text and in a real headless Chromium."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_sessions import HOSTILE, SESSION, fingerprint_store, turns

from ctxlife.cli import main
from ctxlife.replay import SessionReplay, replay_session
from ctxlife.report import render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _report(stored: dict[str, Any], store) -> tuple[SessionReplay, str]:
    result = replay_session(stored["settings"], store, SESSION, next_call=True, simulate=True)
    return result, render_html(result)


def test_report_command_writes_a_self_contained_page(
    stored: dict[str, Any], store_url: str, config_file: Path, tmp_path: Path, capsys
) -> None:
    before = fingerprint_store(store_url)
    out = tmp_path / "report.html"
    assert main(["report", SESSION, "-o", str(out), "--config", str(config_file)]) == 0
    assert fingerprint_store(store_url) == before  # the store is only read
    assert f"{len(turns())} recorded calls" in capsys.readouterr().out  # one per recorded reply
    page = out.read_text(encoding="utf-8")
    assert '<p class="mode recorded">' in page and "SIMULATED" not in page
    # Nothing is fetched: no external scripts, styles, images, fonts or frames; a policy forbids them too.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert 'http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;;' in page
    # Session text is escaped, never markup.
    assert "<script>window.__pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own


def test_report_shows_compactions_recalls_and_the_restore(stored: dict[str, Any], store) -> None:
    result, page = _report(stored, store)
    assert page.count('class="bar"') == len(result.frames)
    assert result.frames[-1].label == "next call (simulated)" and result.frames[-1].restored is not None
    assert '<p class="mode simulated">SIMULATED on purpose (--simulate)' in page
    assert result.frames[-1].restored["from_snapshot"] > 0
    compacted = [f for f in result.frames if f.summary is not None]
    assert compacted
    for frame in compacted:
        assert f'class="marker marker-compaction" data-call="{frame.index}"' in page
    assert 'class="marker marker-restore"' in page
    assert "window " in page and "threshold " in page


def _browser(tmp_path: Path) -> Any:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "chromium and chromium-driver are not installed, so the report cannot be checked in a browser here; "
            "install them with `apt-get install chromium chromium-driver` (CI's .ci/run does)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="the selenium package is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(
        service=Service(CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")), options=options
    )


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["file"])  # the page does not depend on the store; the others are above
def test_report_in_a_real_browser(stored: dict[str, Any], store, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    result, page = _report(stored, store)
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    driver = _browser(tmp_path)
    try:
        driver.get(path.as_uri())
        assert driver.find_element(By.TAG_NAME, "h1").text.startswith("ctxlife session report")
        # One stacked bar per call, each with the segments of its parts.
        bars = driver.find_elements(By.CSS_SELECTOR, "svg .bar")
        assert len(bars) == len(result.frames)
        for bar, frame in zip(bars, result.frames, strict=True):
            segments = bar.find_elements(By.CSS_SELECTOR, "rect.seg")
            assert len(segments) == sum(1 for v in frame.composition.tokens_by_kind().values() if v > 0)
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg .threshold-line")) == 1
        # The hostile message was shown as text, and did not run.
        assert driver.execute_script("return window.__pwned === undefined")
        assert driver.execute_script("return document.querySelectorAll('img').length") == 0
        assert HOSTILE in driver.execute_script("return document.body.textContent")
        # A click on a compaction shows its summary (only that call's panel is shown).
        frame = next(f for f in result.frames if f.summary is not None and f.index != result.frames[0].index)
        last = result.frames[-1]
        driver.find_element(By.CSS_SELECTOR, f"svg .bar[data-call='{last.index}']").click()
        assert not driver.find_element(By.ID, f"call-{frame.index}").is_displayed()
        driver.find_element(By.CSS_SELECTOR, f".marker-compaction[data-call='{frame.index}']").click()
        panel = driver.find_element(By.ID, f"call-{frame.index}")
        assert panel.is_displayed() and not driver.find_element(By.ID, f"call-{last.index}").is_displayed()
        summary = panel.find_element(By.CSS_SELECTOR, ".summary-text")
        assert summary.is_displayed()
        assert summary.get_attribute("textContent") == frame.summary
    finally:
        driver.quit()


@pytest.mark.parametrize("store_kind", ["file"])
def test_report_picks_the_only_view_and_names_the_views_otherwise(store_url: str, tmp_path: Path, capsys) -> None:
    import ctxlife
    from ctxlife.config import settings_from_dict

    settings = settings_from_dict({"strategies": ["llm_summary"], "context_window": 4000, "store": store_url})
    with ctxlife.Session("crew", settings, view="Writer.task0") as session:
        session.messages({"role": "user", "content": "Draft the release note."})
        session.record_reply("Here is the draft.")
    out = tmp_path / "crew.html"
    args = ["report", "crew", "-o", str(out), "--store", store_url, "--window", "4000"]
    assert main(args) == 0
    assert "crew [Writer.task0]" in out.read_text(encoding="utf-8")
    with ctxlife.Session("crew", settings, view="Editor.task1") as session:
        session.messages({"role": "user", "content": "Edit it."})
    assert main(args) == 1
    assert "its views are 'Editor.task1', 'Writer.task0': pass --view" in capsys.readouterr().err
    assert main([*args, "--view", "Editor.task1"]) == 0


@pytest.mark.parametrize("simulate", [False, True], ids=["recorded", "simulated"])
def test_replay_session_reports_its_progress_up_to_the_total(stored: dict[str, Any], store, simulate: bool) -> None:
    seen: list[tuple[int, int]] = []
    result = replay_session(stored["settings"], store, SESSION, simulate=simulate, progress=lambda *p: seen.append(p))
    total = len(result.frames) if not simulate else result.messages
    assert seen[-1] == (total, total) and total > 1
    assert all(t == total for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # never backwards


@pytest.mark.parametrize("store_kind", ["file"])
def test_report_command_draws_a_progress_bar_on_a_terminal_only(
    stored: dict[str, Any], config_file: Path, tmp_path: Path
) -> None:
    code = "import sys; from ctxlife.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [
        sys.executable,
        "-c",
        code,
        "report",
        SESSION,
        "-o",
        str(tmp_path / "r.html"),
        "--config",
        str(config_file),
    ]
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    piped = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    leader, follower = pty.openpty()  # stderr on a terminal
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, timeout=120, env=env)
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert run.returncode == 0
    assert f"reading {SESSION}".encode() in drawn and f"{len(turns())}/{len(turns())}".encode() in drawn, drawn[-500:]
    assert b"wrote " in run.stdout  # the summary line still goes to stdout


@pytest.mark.parametrize("store_kind", ["file"])  # the page does not depend on the store
def test_a_summary_that_quotes_markup_is_shown_as_text(store_url: str) -> None:
    """Issue 44: no test failed when the report inserted a summary unescaped (the shared session's
    extractive summaries never quote its hostile message). Here the summarizer quotes every user turn."""
    from inspect_sessions import config_data

    import ctxlife
    from ctxlife.config import settings_from_dict
    from ctxlife.sessions import open_store
    from ctxlife.summarizers import register_summarizer, unregister_summarizer

    class Quoting:
        name = "quoting_for_test"

        def summarize(self, request: Any) -> str:
            said = [str(m.get("content")) for m in request.messages if m.get("role") == "user"]
            return "The user said: " + " / ".join(s[:120] for s in said)

    data = config_data(store_url)
    data["llm_summary"] = {**data["llm_summary"], "summarizer": "quoting_for_test"}
    settings = settings_from_dict(data, source="test config")
    register_summarizer("quoting_for_test", Quoting)
    try:
        with ctxlife.Session("hostile", settings, system="You are a support clerk.") as session:
            greeting, *rest = turns()
            for said, reply in [greeting, (f"Please quote this exactly: {HOSTILE}", f"Quoted: {HOSTILE}"), *rest]:
                session.messages({"role": "user", "content": said})
                session.record_reply(reply)
        with open_store(store_url) as store:  # the replay builds the config's strategies again
            result = replay_session(settings, store, "hostile")
    finally:
        unregister_summarizer("quoting_for_test")
    assert [f for f in result.frames if f.summary is not None and HOSTILE in f.summary], (
        "precondition: a compaction's summary quotes the markup"
    )
    page = render_html(result)
    assert "<script>window.__pwned" not in page and "<img src=x" not in page
    shown = re.findall(r'<pre class="summary-text">(.*?)</pre>', page, re.S)
    assert any("&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x" in s for s in shown)
    assert page.count("<script>") == 1  # the page's own
