"""``ctxlife replay --session ID``: a stored session replayed on a copy under any config, recall included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inspect_sessions import CODE_NAME, SESSION, WINDOW, config_data, fingerprint_store, turns

from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.replay import replay_session


@pytest.mark.parametrize("simulate", [False, True], ids=["recorded", "simulated"])
def test_replay_follows_the_session_call_by_call(stored: dict[str, Any], store_url: str, store, simulate: bool) -> None:
    before = fingerprint_store(store_url)
    question = "What is falcon's release code name?"
    result = replay_session(stored["settings"], store, SESSION, ask=question, simulate=simulate)
    assert fingerprint_store(store_url) == before  # the original is untouched

    assert result.source == ("simulated" if simulate else "recorded")
    calls = [f for f in result.frames if f.label.startswith("call ")]
    assert len(calls) == len(turns())  # one call per recorded reply
    # Recorded: what each call sent. Simulated with the same config on the same conversation: the same.
    assert [f.composition.messages for f in calls] == stored["sent"]
    assert result.frames[-1].label == ("asked" if simulate else "asked (simulated)")
    compactions = [f for f in result.frames if f.summary is not None]
    assert compactions, "the small window makes llm_summary compact"
    first = compactions[0]
    assert first.evicted and all(m["tokens"] > 0 for m in first.evicted)
    assert any(CODE_NAME in m["text"] for c in compactions for m in c.evicted)
    asked = result.frames[-1]
    assert asked.recalled, "recall brings the evicted code name back for the question"
    assert any(CODE_NAME in p["text"] for p in asked.recalled)
    assert all(isinstance(p["score"], float) for p in asked.recalled)
    assert asked.recall_block is not None and CODE_NAME in asked.recall_block


def test_replay_under_another_config(stored: dict[str, Any], store_url: str, store) -> None:
    """Compare configs on your own conversation: without recall the answer stays evicted."""
    without = settings_from_dict(config_data(store_url, strategies=["llm_summary"]), source="no recall")
    result = replay_session(without, store, SESSION, ask="What is falcon's release code name?", simulate=True)
    asked = result.frames[-1]
    assert not asked.recalled and asked.recall_block is None
    assert "recall" not in {p.kind for p in asked.composition.parts}
    assert CODE_NAME not in " ".join(p.text for p in asked.composition.parts if p.kind == "recent")
    # A bigger window: nothing to compact, every call sends the whole conversation.
    wide = settings_from_dict(
        config_data(store_url, context_window=WINDOW * 20, strategies=["llm_summary"]), source="wide"
    )
    result = replay_session(wide, store, SESSION, simulate=True)
    assert result.source == "simulated" and "SIMULATED on purpose" in result.note
    assert not any(f.compacted for f in result.frames)
    assert all(f.composition.total == f.unmanaged_tokens for f in result.frames)


def test_replay_session_command(
    stored: dict[str, Any], store_url: str, config_file: Path, tmp_path: Path, capsys
) -> None:
    before = fingerprint_store(store_url)
    report = tmp_path / "out" / "replay.html"
    code = main(
        [
            "replay",
            "--session",
            SESSION,
            "--config",
            str(config_file),
            "--ask",
            "Falcon code name?",
            "--html",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "as recorded" in out and "What each call sent" in out and "asked (simulated)" in out
    assert "llm_summary:compacted" in out
    assert report.is_file() and "<svg" in report.read_text(encoding="utf-8")
    code = main(["replay", "--session", SESSION, "--config", str(config_file), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and len(data["calls"]) == len(turns()) and data["source"] == "recorded"
    code = main(["replay", "--session", SESSION, "--config", str(config_file), "--simulate"])
    out = capsys.readouterr().out
    assert code == 0 and "SIMULATED on purpose (--simulate)" in out and "What each call would have sent" in out
    assert fingerprint_store(store_url) == before


def test_replay_needs_a_file_or_a_session(capsys) -> None:
    assert main(["replay"]) == 1
    assert "a recording FILE or --session ID" in capsys.readouterr().err
