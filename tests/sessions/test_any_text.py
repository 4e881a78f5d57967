"""Any str (issue 38): lone surrogates, NUL, right-to-left and zero-width characters are stored,
restored, indexed, searched and reported without a crash, on every store; an index write that fails
is rolled back; ``report -o`` naming a folder is a clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.recall import HistoryIndex, HistorySearch
from ctxlife.sessions import RawRecord, open_store

# Session with snapshot_restore warns that task_end is not called: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")

ODD = {
    "surrogate": "report_\udcff\udcfe.txt from the share",  # a non-UTF-8 file name, decoded with surrogateescape
    "half emoji": "weather \ud83d today",
    "nul": "null\x00byte in the middle",
    "rtl": "invoice \u202egnp.exe\u202c attached",
    "zero width": "pass\u200bword\ufeff and\u200d more",
}


def test_any_text_is_stored_restored_indexed_searched_and_reported(store_url: str, tmp_path: Path) -> None:
    cfg = settings_from_dict({"strategies": ["snapshot_restore", "recall"], "store": store_url})
    sent = []
    with ctxlife.Session("odd", cfg, system="sys", context_window=100_000) as session:
        for name, text in ODD.items():
            sent.append({"role": "user", "content": f"{name}: {text}"})
            session.prepare(sent[-1])
            sent.append({"role": "assistant", "content": f"Noted {text}"})
            session.record_reply(sent[-1]["content"])
        for i in range(4):  # later turns push the odd ones out of view, so recall searches them
            session.prepare({"role": "user", "content": f"filler {i}: which file came from the share?"})
            session.record_reply("Let me look.")
    with ctxlife.Session("odd", cfg, system="sys", context_window=100_000) as again:  # a restart
        assert again.get_items()[: len(sent)] == sent
    with open_store(store_url) as store:
        search = HistorySearch(store, index_dir=str(tmp_path / "index"))
        try:
            for query in ("report from the share", "\udcff", "gnp.exe", "null\x00byte", "pass\u200bword"):
                assert search.passages("odd", query) is not None  # no exception, whatever the query
            found = search.passages("odd", "report share")
            assert any("report_" in r.text for p in found for r in p.records)
        finally:
            search.close()
    out = tmp_path / "odd.html"
    assert main(["report", "odd", "-o", str(out), "--store", store_url, "--window", "100000"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "report_\\udcff\\udcfe.txt" in page and "gnp.exe" in page


def test_a_failed_index_write_is_rolled_back(tmp_path: Path) -> None:
    index = HistoryIndex(tmp_path / "index.sqlite")

    def records() -> Any:
        yield RawRecord(1, {"role": "user", "content": "first"})
        raise KeyboardInterrupt  # Ctrl-C while the batch is written

    with pytest.raises(KeyboardInterrupt):
        index.add(records())
    assert index.add([RawRecord(1, {"role": "user", "content": "first \udcff"})]) == 1
    assert [h.seq for h in index.search("first")] == [1]
    index.close()


def test_report_to_an_existing_folder_is_a_clear_error(store_url: str, tmp_path: Path, capsys: Any) -> None:
    cfg = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url})
    with ctxlife.Session("r", cfg, context_window=100_000) as session:
        session.prepare({"role": "user", "content": "hi"})
        session.record_reply("hello")
    folder = tmp_path / "reports"
    folder.mkdir()
    assert main(["report", "r", "-o", str(folder), "--store", store_url, "--window", "100000"]) == 1
    err = capsys.readouterr().err
    assert "it is a folder" in err and "report.html" in err and "Traceback" not in err
