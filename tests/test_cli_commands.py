"""What ``ctxlife strategies``, ``check``, ``session``, ``report`` and ``demo`` print and exit with, run in
this process through ``ctxlife.cli.main`` (tests/test_cli.py runs the installed command in a subprocess;
here mutation testing, scope ``cli``, sees the code run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife import cli
from ctxlife.cli import main
from ctxlife.events import redacted
from ctxlife.plugins import registry
from ctxlife.sessions import Snapshot, open_store
from ctxlife.tokens import TokenCounter

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich's tables: one line per row


def test_strategies_json_is_the_registry_indented(capsys: Any) -> None:
    assert main(["strategies", "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(registry().describe(), indent=2) + "\n"


def test_strategies_table_names_each_strategy_with_its_hooks(capsys: Any) -> None:
    assert main(["strategies"]) == 0
    out = capsys.readouterr().out
    assert "Installed ctxlife strategies (active only when a config names them)" in out
    header = next(line for line in out.splitlines() if "name" in line and "hooks" in line)
    assert [cell.strip() for cell in header.split("┃")[1:5]] == ["name", "hooks", "package", "version"]
    row = next(line for line in out.splitlines() if " truncate_last_n " in line)
    assert "before_llm_call" in row and "ctxlife_before_llm_call" not in row
    assert ctxlife.__version__ in row


def test_check_json_prints_the_resolved_settings(tmp_path: Path, capsys: Any) -> None:
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["truncate_last_n"]\n[truncate_last_n]\nrounds = 3\n')
    assert main(["check", str(config), "--json"]) == 0
    out = capsys.readouterr().out
    resolved = json.loads(out)
    assert out == json.dumps(resolved, indent=2) + "\n"
    assert resolved["strategies"] == ["truncate_last_n"] and resolved["truncate_last_n"]["rounds"] == 3


def test_check_says_ok_and_the_config_then_the_settings(tmp_path: Path, capsys: Any) -> None:
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["truncate_last_n"]\n')
    assert main(["check", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"OK {config}"
    from ctxlife.config import load_settings

    assert json.loads(out.split("\n", 1)[1]) == redacted(load_settings(str(config)).resolved())


def test_check_one_problem_is_one_line_several_are_listed(tmp_path: Path, capsys: Any) -> None:
    one = tmp_path / "one.toml"
    one.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["missing.md"]\n')
    assert main(["check", str(one)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ctxlife check: error: strategy 'bootstrap': file 'missing.md' does not exist")
    assert len(err.splitlines()) == 1
    two = tmp_path / "two.toml"
    two.write_text(
        'strategies = ["bootstrap", "llm_summary"]\n[bootstrap]\nfiles = ["missing.md"]\n[llm_summary]\ntarget = 0.5\n'
    )
    assert main(["check", str(two)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "ctxlife check: error: 2 problems:"
    assert lines[1].startswith("  - strategy 'bootstrap': file 'missing.md' does not exist")
    assert lines[2].startswith("  - strategy 'llm_summary' option 'target' (0.5) must be below the threshold (0.4)")


def test_check_asks_the_summary_model_unless_told_not_to(tmp_path: Path, capsys: Any) -> None:
    """A [model] endpoint nobody answers: the config is not OK (every compaction would fall back), unless
    --no-connect skips the call; the key in the URL is never printed."""
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        'strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = "llm"\n'
        '[model]\nname = "m"\nbase_url = "http://user:s3cret@127.0.0.1:9/v1"\n'
    )
    assert main(["check", str(config), "--no-connect", "--json"]) == 0
    assert "s3cret" not in capsys.readouterr().out
    assert main(["check", str(config), "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.strip()
    assert line.startswith(f"ctxlife check: {config}: strategy 'llm_summary': ")
    assert "s3cret" not in line and len(captured.err.splitlines()) == 1


def test_an_error_names_the_command_and_exits_1(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('strategies = ["nope"]\n')
    assert main(["check", str(bad)]) == 1
    assert capsys.readouterr().err.startswith(
        f"ctxlife check: error: unknown strategy 'nope' in 'strategies' (in {bad})"
    )


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_strategies", interrupted)
    assert main(["strategies"]) == 130


def test_version_and_a_missing_command(capsys: Any) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"ctxlife {ctxlife.__version__}\n"
    with pytest.raises(SystemExit) as usage:
        main([])
    assert usage.value.code == 2 and "COMMAND" in capsys.readouterr().err


def stored_session(url: str) -> None:
    settings = {"store": url, "strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}
    from ctxlife.config import settings_from_dict

    with ctxlife.Session("u42", settings_from_dict(settings), context_window=8000) as session:
        session.messages({"role": "user", "content": "Where is order 17?"})
        session.messages({"role": "assistant", "content": "In aisle 4."}, {"role": "user", "content": "Thanks."})


def test_session_commands_read_the_configs_store_and_show_counts_tokens(tmp_path: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    messages = [{"role": "user", "content": "Where is order 17?"}, {"role": "assistant", "content": "In aisle 4."}]
    with open_store(url) as store:
        store.append("u42", messages)
        store.save_snapshot(Snapshot(session_id="u42", messages=messages, raw_length=2, updated_at=1.7e9, meta={}))
    config = tmp_path / "ctxlife.toml"
    config.write_text(f'store = "{url}"\n')
    assert main(["session", "list", "--config", str(config)]) == 0
    assert "u42" in capsys.readouterr().out
    assert main(["session", "show", "u42", "--config", str(config)]) == 0
    shown = capsys.readouterr().out.splitlines()
    tokens = TokenCounter().count_messages(messages)
    assert any(line.split() == ["Context", "tokens", str(tokens)] for line in shown)
    assert main(["session", "list", "--config", str(tmp_path / "missing.toml")]) == 2
    assert capsys.readouterr().err.startswith("ctxlife session: error: ")
    assert main(["session", "list", "--store", url]) == 0  # --store alone: no config read
    assert "u42" in capsys.readouterr().out


def test_session_rm_removes_the_recall_index_the_config_names(tmp_path: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    index = tmp_path / "index"
    config = tmp_path / "ctxlife.toml"
    config.write_text(f'store = "{url}"\nstrategies = ["recall"]\n[recall]\nindex_dir = "{index}"\n')
    from ctxlife.config import load_settings

    with ctxlife.Session("u42", load_settings(str(config)), context_window=8000) as session:
        for n in range(3):
            session.messages({"role": "user", "content": f"Order {n} is in aisle {n}."})
    assert any(index.iterdir())
    assert main(["session", "rm", "u42", "--config", str(config)]) == 0
    assert not any(index.rglob("*u42*")) and not any(p.is_file() for p in index.rglob("*"))


def test_report_writes_the_page_and_says_what_it_holds(tmp_path: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    stored_session(url)
    page = tmp_path / "r.html"
    assert main(["report", "u42", "-o", str(page), "--store", url, "--title", "Order desk"]) == 0
    out = capsys.readouterr().out
    assert out == f"wrote {page}: 2 recorded calls, 0 compaction(s)\n"
    assert "Order desk" in page.read_text(encoding="utf-8")
    assert main(["report", "u42", "-o", str(page), "--store", url, "--simulate", "--window", "8000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"wrote {page}: ") and "simulated calls" in lines[0]
    assert len(lines) == 2 and lines[1]  # the note saying how it was replayed


def test_demo_passes_its_options_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import ctxlife.cli._demo as demo

    seen: dict[str, Any] = {}

    def run_demo(**kwargs: Any) -> int:
        seen.update(kwargs)
        return 3

    monkeypatch.setattr(demo, "run_demo", run_demo)
    argv = [
        "demo",
        "--config",
        "c.toml",
        "--model",
        "m",
        "--turns",
        "2",
        "--workspace",
        str(tmp_path),
        "--chart",
        "x.png",
    ]
    assert main(argv) == 3
    assert seen == {"config": "c.toml", "model": "m", "turns": 2, "workspace": str(tmp_path), "chart": "x.png"}
