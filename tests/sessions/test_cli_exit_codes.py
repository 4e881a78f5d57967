"""``ctxlife session ...`` exit codes, through a real process as a cleanup script runs it:
0 done, 1 no such session (and only that), 2 usage, config or store error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ctxlife.sessions import open_store

CLI = [sys.executable, "-m", "ctxlife.cli"]
COMMANDS = {
    "list": ["list"],
    "show": ["show", "u42"],
    "export": ["export", "u42", "--raw"],
    "search": ["search", "u42", "order"],
    "rm": ["rm", "u42"],
}


def run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "session", *argv], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "good.toml").write_text('store = "file://sessions"\n', encoding="utf-8")
    (tmp_path / "malformed.toml").write_text('store = "file://sessions\n[oops\n', encoding="utf-8")
    (tmp_path / "bad-url.toml").write_text('store = "sessions-without-scheme"\n', encoding="utf-8")
    (tmp_path / "unknown-scheme.toml").write_text('store = "nosuch://x"\n', encoding="utf-8")
    with open_store(f"file://{tmp_path / 'sessions'}") as store:
        store.append("u42", [{"role": "user", "content": "where is order 17?"}])
    return tmp_path


CASES = [
    ("missing.toml", "missing config"),
    ("malformed.toml", "malformed TOML"),
    ("bad-url.toml", "store URL without a scheme"),
    ("unknown-scheme.toml", "unknown store scheme"),
]


@pytest.mark.slow  # 7 processes of 2-3 s each
def test_a_cleanup_script_can_take_1_as_already_gone(folder: Path) -> None:
    """Through a real process, as a script runs it: ``rm`` with every kind of failure."""
    for config, what in CASES[:3]:
        done = run(folder, "rm", "u42", "--config", config)
        assert done.returncode == 2, (what, done.stderr)
        assert "error" in done.stderr and "Traceback" not in done.stderr, (what, done.stderr)
    done = run(folder, "rm", "u42", "--store", "file://sessions?nosuchoption=1")
    assert done.returncode == 2 and "nosuchoption" in done.stderr
    done = run(folder, "rm", "u7", "--config", "good.toml")
    assert done.returncode == 1 and "u7" in done.stderr
    done = run(folder, "rm", "u42", "--config", "good.toml")
    assert done.returncode == 0 and "u42" in done.stdout
    done = run(folder, "rm", "u42", "--config", "good.toml")
    assert done.returncode == 1  # now it is gone


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_subcommand_exits_2_for_usage_and_1_only_for_no_such_session(
    folder: Path, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxlife.cli import main

    monkeypatch.chdir(folder)
    argv = ["session", *COMMANDS[command]]
    for config, what in CASES:
        assert main([*argv, "--config", config]) == 2, what
        assert "error" in capsys.readouterr().err, what
    assert main([*argv, "--store", "file://sessions?nosuchoption=1"]) == 2
    assert "nosuchoption" in capsys.readouterr().err
    if command != "list":
        assert main([a if a != "u42" else "u7" for a in argv] + ["--config", "good.toml"]) == 1
        assert "u7" in capsys.readouterr().err
    assert main([*argv, "--config", "good.toml"]) == 0
    out = capsys.readouterr().out
    assert "u42" in out or "order 17" in out
