from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CTXLIFE = [sys.executable, "-m", "ctxlife.cli"]


def run(*args, cwd=None):
    return subprocess.run([*CTXLIFE, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_import_does_not_import_crewai_or_pydantic():
    """``import ctxlife`` loads neither CrewAI nor pydantic until a name needs them (what keeps it fast;
    the time itself is measured by `make bench`: benchmarks/bench_overhead.py, part "import")."""
    code = "import sys; import ctxlife; print('crewai' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_strategies_lists_installed_ones_as_json_and_table():
    result = run("strategies", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert (
        rows["truncate_last_n"]["hooks"] == ["ctxlife_before_llm_call"]
        and rows["truncate_last_n"]["package"] == "ctxlife"
    )
    table = run("strategies")
    assert "truncate_last_n" in table.stdout and "before_llm_call" in table.stdout


def test_check_prints_resolved_settings_or_fails_with_the_error(tmp_path):
    ok = run("check", str(REPO / "configs" / "example.toml"), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["truncate_last_n"]["rounds"] == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('strategies = ["nope"]\n')
    failed = run("check", str(bad))
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"ctxlife check: error: unknown strategy 'nope' in 'strategies' (in {bad})")


def test_check_reports_the_problems_of_every_strategy_at_once(tmp_path):
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        'strategies = ["bootstrap", "llm_summary"]\n[bootstrap]\nfiles = ["missing.md"]\n[llm_summary]\ntarget = 0.5\n'
    )
    failed = run("check", str(config))
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0] == "ctxlife check: error: 2 problems:"
    assert lines[1].startswith("  - strategy 'bootstrap': file 'missing.md' does not exist")
    assert lines[2].startswith("  - strategy 'llm_summary' option 'target' (0.5) must be below the threshold (0.4)")


def test_session_commands_use_the_configs_store(tmp_path):
    from ctxlife.sessions import Snapshot, open_store

    url = f"file://{tmp_path / 'sessions'}"
    store = open_store(url)
    store.append("u42", [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    store.save_snapshot(Snapshot(session_id="u42", messages=[{"role": "user", "content": "hello"}], raw_length=2))
    store.close()
    (tmp_path / "ctxlife.toml").write_text(f'strategies = ["snapshot_restore"]\nstore = "{url}"\n')
    listed = run("session", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "u42" in listed.stdout
    exported = run("session", "export", "u42", "--raw", cwd=tmp_path)
    assert json.loads(exported.stdout) == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    assert run("session", "rm", "u42", cwd=tmp_path).returncode == 0
    assert run("session", "show", "u42", cwd=tmp_path).returncode == 1


def test_the_demo_config_ships_inside_the_package_and_configs_points_at_it():
    from ctxlife.cli._demo import default_config_path

    packaged = default_config_path()
    assert packaged.is_file() and packaged.parent.name == "configs" and packaged.parent.parent.name == "ctxlife"
    top = REPO / "configs" / "demo.toml"
    assert (
        top.is_symlink() and top.resolve() == packaged.resolve()
    )  # one source: the checkout's file is the packaged one


def test_demo_without_crewai_names_the_extras_to_install(tmp_path):
    code = (
        "import sys; sys.modules['crewai'] = None\n"
        "from ctxlife.cli import main\n"
        "sys.exit(main(['demo', '--workspace', sys.argv[1]]))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "pip install 'ctxlife[crewai,plot]'" in done.stderr


def test_a_reader_that_stops_early_ends_a_command_quietly(tmp_path):
    # `ctxlife session search ID words | head -1`: the search printed "error: [Errno 32] Broken pipe" and
    # exited 2, as if the store had failed. Its stdout here is a pipe whose reader is gone before it writes.
    from ctxlife.sessions import open_store

    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", [{"role": "user", "content": "the lamp order"}, {"role": "assistant", "content": "shipped"}])
    # (a table printed with rich ends as rich ends it: 1)
    for command, code in ((["session", "search", "s1", "lamp", "--store", url], 141), (["strategies"], 1)):
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run([*CTXLIFE, *command], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (code, ""), command
