"""Tests for survivors of the re-runs of scopes whose mutated functions changed (issue 44, mutate43):
what a user relies on that no earlier test of those scopes asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxlife.cli import main
from ctxlife.sessions import open_store
from ctxlife.sessions.ids import session_key

CONFIG = 'strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = "extractive"\n'
TURNS = [{"role": "user", "content": "Look up order 4711."}, {"role": "assistant", "content": "It has shipped."}]


def test_replay_finds_a_session_by_the_apps_id_and_by_the_key_it_is_stored_under(tmp_path: Path, capsys: Any) -> None:
    # `ctxlife replay --session` takes an id as `ctxlife session` does (scope replay-cli, `replay_stored`'s key_of):
    # the id the app used, or the store's key typed as it is stored (a file name copied from the store).
    config = tmp_path / "cfg.toml"
    config.write_text(CONFIG)
    url = f"file://{tmp_path / 'sessions'}"
    key = str(session_key("a@b.com"))
    with open_store(url) as store:
        store.append(session_key("a@b.com"), TURNS)
        assert [s.session_id for s in store.list_sessions()] == [key] and key != "a@b.com"  # stored encoded
    argv = ["replay", "--store", url, "--config", str(config), "--window", "4000"]
    for typed in ("a@b.com", key):
        assert main([*argv, "--session", typed, "--json"]) == 0, typed
        shown = json.loads(capsys.readouterr().out)
        assert len(shown["calls"]) == 1, typed  # the stored turn found, under either name
        assert main([*argv, "--session", typed]) == 0, typed
        assert "Session 'a@b.com'" in capsys.readouterr().out, typed  # the table names the app's id
