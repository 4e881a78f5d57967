"""Config folders whose names hold URL characters (``%``, ``#``, ``?``, spaces): the store URL built from
the folder is encoded, the stores decode it once, and everything lands inside the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import load_settings
from ctxlife.recall import default_index_dir
from ctxlife.sessions import open_store

# manage() with snapshot_restore warns that task_end is not called: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")

FOLDERS = ["Q%20A", "C#bank", "C#shop", "what?now", "with space", "100%"]
STORES = {"file": 'store = "file://sessions"', "sqlite": 'store = "sqlite:///sessions.db"'}


def owner(tmp_path: Path, path: Path) -> str:
    return path.relative_to(tmp_path).parts[0]


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_sessions_and_recall_index_stay_inside_their_config_folder(tmp_path: Path, kind: str) -> None:
    from ctxlife.cli import main

    for name in FOLDERS:
        folder = tmp_path / name
        folder.mkdir()
        config = folder / "ctxlife.toml"
        config.write_text(f'strategies = ["snapshot_restore", "recall"]\n{STORES[kind]}\n', encoding="utf-8")
        messages = [{"role": "user", "content": f"hello from {name}"}]
        report = ctxlife.manage(messages, config=config, session_id="u1", context_window=100_000)
        assert report.failures == []
        ctxlife.record_reply("hi", config=config, session_id="u1")
        # The history search builds the session's recall index where the store keeps it.
        assert main(["session", "search", "u1", "hello", "--config", str(config)]) == 0

    for name in FOLDERS:
        folder = tmp_path / name
        settings = load_settings(folder / "ctxlife.toml")
        with open_store(settings.store_url()) as store:
            if kind == "file":
                assert store.directory == folder / "sessions"
            else:
                assert store.path == folder / "sessions.db"
            assert [r.message["content"] for r in store.read_records("u1")] == [f"hello from {name}", "hi"]
            index = store.derived_dir("u1")  # the recall index is the session's derived data
        assert index is not None and index.is_relative_to(folder), index
        assert (index / "recall.sqlite").exists(), f"no recall index in {index}"
    # Nothing outside the folders: no "Q A", no "C", no "what", no shared index.
    assert {owner(tmp_path, p) for p in tmp_path.rglob("*")} == set(FOLDERS)


@pytest.mark.parametrize("name", FOLDERS)
def test_local_store_urls_round_trip_through_the_stores(tmp_path: Path, name: str) -> None:
    from ctxlife.config import local_store_url

    folder = tmp_path / name
    with open_store(local_store_url("file", folder / "sessions")) as store:
        assert store.directory == folder / "sessions"
    with open_store(local_store_url("sqlite", folder / "s.db") + "?synchronous=NORMAL") as store:
        assert store.path == folder / "s.db"
    assert default_index_dir(local_store_url("file", folder / "sessions") + "?fsync=false") == (
        folder / "sessions" / "recall_index"
    )
    assert default_index_dir(local_store_url("sqlite", folder / "s.db")) == folder / "s.db.recall_index"
