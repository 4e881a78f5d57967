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


# -- what `ctxlife replay` is told and says back (issue 44, the replay-cli scope's survivors) -----------

SHORT = [{"role": "user", "content": "Look up order 4711."}, {"role": "assistant", "content": "It has shipped."}]
LONG = [*VALID, {"role": "user", "content": "And order 4712?"}, {"role": "assistant", "content": "Not yet."}]


def _trajectories(tmp_path: Path) -> Path:
    """A tau-bench file of two conversations of different lengths (2 and 5 messages)."""
    file = tmp_path / "two.json"
    file.write_text(json.dumps([{"task_id": 1, "traj": SHORT}, {"task_id": 2, "traj": LONG}]))
    return file


@pytest.mark.parametrize(("picked", "calls"), [(0, 1), (1, 2)])
def test_conversation_n_replays_that_conversation_alone(
    tmp_path: Path, config: Path, capsys: Any, picked: int, calls: int
) -> None:
    argv = ["replay", str(_trajectories(tmp_path)), "--config", str(config), "--window", "4000", "--json"]
    assert main([*argv, "--conversation", str(picked)]) == 0
    shown = json.loads(capsys.readouterr().out)["conversations"]
    assert [c["totals"]["calls"] for c in shown] == [calls]


@pytest.mark.parametrize("picked", ["2", "-1"])
def test_a_conversation_outside_the_file_is_an_error_naming_the_range(
    tmp_path: Path, config: Path, capsys: Any, picked: str
) -> None:
    file = _trajectories(tmp_path)
    code = main(["replay", str(file), "--config", str(config), "--window", "4000", "--conversation", picked])
    assert code == 1
    assert f"no conversation {picked} in {file}; it holds 2 (0..1)" in capsys.readouterr().err


def test_without_a_window_replay_says_how_to_give_one(tmp_path: Path, config: Path, capsys: Any) -> None:
    file = tmp_path / "valid.json"
    file.write_text(json.dumps(VALID))
    assert main(["replay", str(file), "--config", str(config)]) == 1
    said = capsys.readouterr().err
    assert (
        said
        == "ctxlife replay: error: replay needs a context window: pass --window N or set context_window in the config\n"
    )


def test_replay_takes_a_file_or_a_session_not_both(tmp_path: Path, config: Path, capsys: Any) -> None:
    file = tmp_path / "valid.json"
    file.write_text(json.dumps(VALID))
    assert main(["replay", str(file), "--session", "s", "--config", str(config)]) == 1
    said = capsys.readouterr().err
    assert (
        said
        == "ctxlife replay: error: replay takes a recording FILE or --session ID (a stored session), one of the two\n"
    )


def test_json_output_is_indented_and_keeps_non_ascii_text(tmp_path: Path, config: Path, capsys: Any) -> None:
    """--json is read by people too: two-space indents, and a stored session's Chinese text as written."""
    chat = [{"role": "user", "content": "订单 4711 到哪里了？"}, {"role": "assistant", "content": "已发货。"}]
    url = _stored(tmp_path, chat)
    code = main(["replay", "--session", "s", "--store", url, "--config", str(config), "--window", "4000", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith('{\n  "') and "订单 4711" in out


def test_a_recordings_json_is_indented_by_two(tmp_path: Path, config: Path, capsys: Any) -> None:
    file = tmp_path / "valid.json"
    file.write_text(json.dumps(VALID))
    assert main(["replay", str(file), "--config", str(config), "--window", "4000", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n  "config"') and '\n      "' in out  # two spaces per level


def test_plot_draws_the_conversation_to_the_file_named(tmp_path: Path, config: Path, capsys: Any) -> None:
    pytest.importorskip("matplotlib", reason="--plot needs the plot extra: pip install 'ctxlife[plot]'")
    png, file = tmp_path / "calls.png", tmp_path / "valid.json"
    file.write_text(json.dumps(VALID))
    assert main(["replay", str(file), "--config", str(config), "--window", "4000", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_sessions_view_is_replayed_when_named(tmp_path: Path, config: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s", SHORT)
        store.append("s", [{"role": "user", "content": "Only in the lane."}], view="lane")
    argv = ["replay", "--session", "s", "--store", url, "--config", str(config), "--window", "4000", "--json"]
    assert main([*argv, "--view", "lane"]) == 0
    lane = capsys.readouterr().out
    assert main(argv) == 0
    default = capsys.readouterr().out
    assert "Only in the lane." in lane and "Only in the lane." not in default


def test_html_says_where_the_report_went(tmp_path: Path, config: Path, capsys: Any) -> None:
    page = tmp_path / "report.html"
    url = _stored(tmp_path, VALID)
    argv = ["replay", "--session", "s", "--store", url, "--config", str(config), "--window", "4000"]
    assert main([*argv, "--html", str(page)]) == 0
    assert f"HTML report: {page}" in capsys.readouterr().out and page.stat().st_size > 0
