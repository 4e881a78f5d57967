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
        store.append_raw("u42", [{"role": "user", "content": "where is order 17?"}])
    return tmp_path


@pytest.mark.parametrize("command", list(COMMANDS))
def test_exit_codes(folder: Path, command: str) -> None:
    argv = COMMANDS[command]
    for config, what in [
        ("missing.toml", "missing config"),
        ("malformed.toml", "malformed TOML"),
        ("bad-url.toml", "store URL without a scheme"),
        ("unknown-scheme.toml", "unknown store scheme"),
    ]:
        done = run(folder, *argv, "--config", config)
        assert done.returncode == 2, (what, done.stderr)
        assert "error" in done.stderr and "Traceback" not in done.stderr, (what, done.stderr)
    done = run(folder, *argv, "--store", "file://sessions?nosuchoption=1")
    assert done.returncode == 2 and "nosuchoption" in done.stderr

    if command != "list":  # a session that is not there: 1, the documented "no such session"
        other = [a if a != "u42" else "u7" for a in argv]
        done = run(folder, *other, "--config", "good.toml")
        assert done.returncode == 1, done.stderr
        assert "u7" in done.stderr

    done = run(folder, *argv, "--config", "good.toml")
    assert done.returncode == 0, done.stderr
    assert "u42" in done.stdout or "order 17" in done.stdout
