"""What ``ctxlife strategies``, ``check``, ``session``, ``report`` and ``demo`` print and exit with, run in
this process through ``ctxlife.cli.main`` (tests/test_cli.py runs the installed command in a subprocess;
here mutation testing, scope ``cli``, sees the code run)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife import cli
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
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
    assert "Installed ctxlife strategies (active only when a config names them)" in [
        line.strip() for line in out.splitlines()
    ]
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
    """A [model] endpoint nobody answers: the config is not OK (every compaction would fall back), one line per
    strategy that calls it, unless --no-connect skips the call; the key in the URL is never printed."""
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        'strategies = ["llm_summary", "task_scope"]\n'
        '[llm_summary]\nsummarizer = "llm"\n[task_scope]\nsummarizer = "llm"\n'
        '[model]\nname = "m"\nbase_url = "http://user:s3cret@127.0.0.1:9/v1"\n'
    )
    assert main(["check", str(config), "--no-connect", "--json"]) == 0
    assert "s3cret" not in capsys.readouterr().out
    assert main(["check", str(config), "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert [line.split(": ")[:3] for line in lines] == [
        ["ctxlife check", str(config), "strategy 'llm_summary'"],
        ["ctxlife check", str(config), "strategy 'task_scope'"],
    ]
    assert all("127.0.0.1:9" in line and "***" in line and "s3cret" not in line for line in lines)


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
    with pytest.raises(SystemExit):
        main(["nosuch"])
    assert capsys.readouterr().err.startswith("usage: ctxlife [-h] [--version] COMMAND")


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


def indexed_session(tmp_path: Path) -> tuple[Path, Path]:
    """A config with recall's index in its own folder, and session u42 of three turns indexed there."""
    url = f"file://{tmp_path / 'sessions'}"
    index = tmp_path / "index"
    config = tmp_path / "ctxlife.toml"
    config.write_text(f'store = "{url}"\nstrategies = ["recall"]\n[recall]\nindex_dir = "{index}"\n')
    from ctxlife.config import load_settings

    with ctxlife.Session("u42", load_settings(str(config)), context_window=8000) as session:
        for n in range(3):
            session.messages({"role": "user", "content": f"Order {n} is in aisle {n}."})
    return config, index


def test_session_rm_removes_the_recall_index_the_config_names(tmp_path: Path, capsys: Any) -> None:
    config, index = indexed_session(tmp_path)
    assert any(index.iterdir())
    assert main(["session", "rm", "u42", "--config", str(config)]) == 0
    assert not any(index.rglob("*u42*")) and not any(p.is_file() for p in index.rglob("*"))


def compacted_session(url: str) -> None:
    settings = settings_from_dict(
        {
            "store": url,
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 20},
        }
    )
    with ctxlife.Session("u42", settings, context_window=1000) as session:
        for i in range(12):
            session.messages({"role": "user", "content": f"Question {i} about order {i}: " + "where is it? " * 15})
            session.add({"role": "assistant", "content": f"In aisle {i}."})


def test_report_writes_the_page_and_says_what_it_holds(tmp_path: Path, capsys: Any) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    compacted_session(url)
    page = tmp_path / "r.html"
    assert main(["report", "u42", "-o", str(page), "--store", url, "--title", "Order desk"]) == 0
    assert capsys.readouterr().out == f"wrote {page}: 12 recorded calls, 7 compaction(s)\n"
    assert "Order desk" in page.read_text(encoding="utf-8")
    assert main(["report", "u42", "-o", str(page), "--store", url, "--ask", "And order 99?"]) == 0
    assert capsys.readouterr().out == f"wrote {page}: 13 recorded calls, 7 compaction(s)\n"  # one more call
    assert main(["report", "u42", "-o", str(page), "--store", url, "--simulate", "--window", "1000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"wrote {page}: 13 simulated calls, 3 compaction(s)",
        "SIMULATED on purpose (--simulate): the config's strategies were run again on a copy of the session "
        "(built-in defaults); compactions and summaries may differ from what the model was sent",
    ]


def test_report_writes_report_html_by_default(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    stored_session(url)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "u42", "--store", url, "--view", ""]) == 0
    assert capsys.readouterr().out.startswith("wrote report.html: 2 recorded calls")
    assert (tmp_path / "report.html").is_file()


def test_report_window_must_be_a_number(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["report", "u42", "--store", f"file://{tmp_path}", "--window", "8k"])
    assert usage.value.code == 2 and "argument --window: invalid int value: '8k'" in capsys.readouterr().err


def test_store_migrate_runs_in_the_cli(tmp_path: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    assert main(["store", "migrate", url]) == 0
    assert capsys.readouterr().out.strip()


def test_check_builds_strategies_with_the_configs_folder(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bootstrap's files are relative to the config's folder, not the working directory."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.md").write_text("Orders ship from aisle 4.\n")
    config = folder / "ctxlife.toml"
    config.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["notes.md"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(config), "--json"]) == 0, capsys.readouterr().err


def test_session_reads_the_config_in_the_working_directory_unless_given_a_store(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'sessions'}"
    stored_session(url)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxlife.toml").write_text(f'store = "{url}"\n')
    assert main(["session", "list"]) == 0  # ./ctxlife.toml's store
    assert "u42" in capsys.readouterr().out
    (tmp_path / "ctxlife.toml").write_text("strategies = [\n")  # broken: --store alone never reads it
    assert main(["session", "list", "--store", url]) == 0
    assert "u42" in capsys.readouterr().out
    assert main(["session", "rm", "u42", "--store", url]) == 0  # rm without a config: no recall index to drop
    capsys.readouterr()
    assert main(["session", "list", "--config", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlife session: error: ") and "missing.toml" in err


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
    assert main(["demo"]) == 3
    assert seen == {"config": None, "model": None, "turns": None, "workspace": "workspace", "chart": None}


def test_strategies_table_marks_a_clash_and_a_broken_plugin(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    rows = [
        {
            "name": "fine",
            "hooks": ["ctxlife_before_llm_call", "ctxlife_after_tool_call"],
            "package": "p",
            "version": "1",
            "class": "p:Fine",
            "clashes_with": [],
            "broken": None,
        },
        {
            "name": "twice",
            "hooks": [],
            "package": "a",
            "version": "2",
            "class": "a:T",
            "clashes_with": ["b 1.0", "c 2.0"],
            "broken": None,
        },
        {
            "name": "bad",
            "hooks": [],
            "package": "q",
            "version": "3",
            "class": "q:Bad",
            "clashes_with": [],
            "broken": "ImportError: no module q",
        },
    ]

    class Registry:
        def describe(self) -> list[dict[str, Any]]:
            return rows

    import ctxlife.plugins

    monkeypatch.setattr(ctxlife.plugins, "registry", Registry)
    assert main(["strategies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [cell.strip() for cell in next(line for line in lines if " fine " in line).split("│")[1:5]] == [
        "fine",
        "before_llm_call, after_tool_call",
        "p",
        "1",
    ]
    assert "twice (clash: also in b 1.0, c 2.0)" in next(line for line in lines if " twice " in line)
    assert "broken: ImportError: no module q" in next(line for line in lines if " bad " in line)


def test_session_erase_drops_the_sessions_recall_index(tmp_path: Path, capsys: Any) -> None:
    config, index = indexed_session(tmp_path)
    assert any(p.is_file() for p in index.rglob("*"))
    assert main(["session", "erase", "u42", "--match", "aisle 1", "--config", str(config)]) == 0
    assert not any(p.is_file() for p in index.rglob("*"))


class _GoneReader:
    """A stdout whose reader stopped (`ctxlife ... | head`): writes fail as a pipe's do; the descriptor is real."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self.fd


def test_a_reader_that_stops_early_ends_the_command_quietly(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    # (tests/test_cli.py runs it in a subprocess; this one in-process, where mutation testing reaches it)
    read, write = os.pipe()
    try:
        monkeypatch.setattr(sys, "stdout", _GoneReader(write))
        assert main(["check", str(Path(__file__).parents[1] / "configs" / "example.toml"), "--json"]) == 141
        monkeypatch.undo()
        os.write(write, b"left in the buffer")  # the descriptor goes to the null device now, not to the pipe
        os.close(write)
        write = -1
        assert os.read(read, 100) == b""  # the pipe got nothing (its one writer is gone)
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
    assert capsys.readouterr().err == ""
