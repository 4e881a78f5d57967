"""What `ctxlife replay` exits with (issue 44, mutation scope `replay-cli`): 0 when every call's list
is valid, 1 when one is not (docs/inspecting.md), for a recording (table or --json) and a stored session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxlife.cli import main
from ctxlife.sessions import open_store

VALID = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Look up order 4711."},
    {"role": "assistant", "content": "It has shipped."},
]
ORPHAN = [  # a tool result whose call is not in the list: a provider refuses it
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Look up order 4711."},
    {"role": "assistant", "content": "Looking."},
    {"role": "tool", "tool_call_id": "call_gone", "content": '{"order": 4711, "status": "shipped"}'},
    {"role": "assistant", "content": "It has shipped."},
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text('strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = "extractive"\n')
    return path


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_recording_of_valid_calls_exits_0(tmp_path: Path, config: Path, capsys: Any, as_json: bool) -> None:
    file = tmp_path / "valid.json"
    file.write_text(json.dumps(VALID))
    code = main(["replay", str(file), "--config", str(config), "--window", "4000", *(["--json"] if as_json else [])])
    out = capsys.readouterr().out
    assert code == 0
    if as_json:
        shown = json.loads(out)
        assert set(shown) == {
            "config", "context_window", "window_source", "threshold", "encoding", "facts_kept_definition",
            "conversations",
        }  # fmt: skip
        assert (shown["context_window"], shown["config"]) == (4000, str(config))
        assert shown["conversations"][0]["totals"]["invalid_calls"] == 0


def _stored(tmp_path: Path, messages: list[dict[str, Any]]) -> str:
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s", [m for m in messages if m["role"] != "system"])
    return url


@pytest.mark.parametrize(("messages", "code"), [(VALID, 0), (ORPHAN, 1)], ids=["valid", "invalid"])
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_stored_session_exits_1_only_when_a_call_would_send_an_invalid_list(
    tmp_path: Path, config: Path, capsys: Any, messages: list[dict[str, Any]], code: int, as_json: bool
) -> None:
    url = _stored(tmp_path, messages)
    argv = ["replay", "--session", "s", "--store", url, "--config", str(config), "--window", "4000"]
    assert main([*argv, *(["--json"] if as_json else [])]) == code
    out = capsys.readouterr().out
    if code == 0:  # (an invalid stored list stops the replay with an error naming it: exit 1 too)
        assert ('"session_id": "s"' in out) is as_json  # --json prints the replay as JSON
