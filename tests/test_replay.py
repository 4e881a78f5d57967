"""ctxlife replay: three input formats, per-call rows, totals, validity, bad files."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.replay import InputFileError, load_conversations, replay
from ctxlife.sessions import open_store
from ctxlife.testing import conversation

DATA = Path(__file__).resolve().parent / "data" / "tau-bench-airline-gpt4o.json.gz"
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from synthetic import synthetic_session  # noqa: E402 - the long session the benchmarks measure on


def cli(*args, cwd=None):
    env = {**os.environ, "COLUMNS": "220"}  # a wide terminal: table cells are not wrapped
    return subprocess.run(
        [sys.executable, "-m", "ctxlife.cli", "replay", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env=env,
    )


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.toml"
    path.write_text('strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = "extractive"\n')
    return path


@pytest.mark.slow
def test_a_json_list_replays_call_by_call_with_totals(tmp_path, config):
    messages = synthetic_session(40)
    file = tmp_path / "chat.json"
    file.write_text(json.dumps(messages))
    [conv] = load_conversations(file)
    result = replay(
        conv,
        settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}),
        context_window=4000,
    )
    assert len(result.rows) == sum(1 for m in messages[1:] if m["role"] == "assistant")
    assert result.rows[0].unmanaged_tokens == result.rows[0].managed_tokens  # nothing to do at first
    assert result.managed_total < result.unmanaged_total and result.compactions > 0
    assert result.violations == 0 and result.peak_managed < result.peak_unmanaged

    done = cli(str(file), "--config", str(config), "--window", "4000", "--json", "--plot", str(tmp_path / "p.png"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["conversations"][0]
    assert data["totals"]["calls"] == len(result.rows) and data["totals"]["managed_tokens"] == result.managed_total
    assert any("llm_summary:compacted" in c["actions"] for c in data["calls"])
    assert (tmp_path / "p.png").stat().st_size > 5000

    table = cli(str(file), "--config", str(config), "--window", "4000")
    assert (
        table.returncode == 0
        and "llm_summary:compacted" in table.stdout
        and "every call's message list is provider-valid" in table.stdout
    )


def test_a_raw_session_history_replays(tmp_path, config):
    store = open_store(f"file://{tmp_path / 'sessions'}")
    store.append("u42", conversation(8, tools_per_round=2)[1:])
    store.close()
    raw = tmp_path / "sessions" / "u42_raw.jsonl"
    with raw.open("a") as f:
        f.write('{"role": "user", "content": "torn')  # a crash mid-write: skipped like the store does
    [conv] = load_conversations(raw)
    assert len(conv.messages) == 8 * 6
    done = cli(str(raw), "--config", str(config), "--window", "1000", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["conversations"][0]["totals"]["calls"] == 8 * 3


def test_tau_bench_files_hold_many_conversations(config):
    conversations = load_conversations(DATA)
    assert len(conversations) == 200 and conversations[0].name.startswith("task ")
    done = cli(str(DATA), "--config", str(config), "--window", "4000", "--conversation", "5", "--json")
    assert done.returncode == 0, done.stderr
    [data] = json.loads(done.stdout)["conversations"]
    assert data["name"] == conversations[5].name and data["totals"]["invalid_calls"] == 0


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "bad.json",
            "{not json",
            "bad.json is not JSON: Expecting property name enclosed in double quotes at line 1, column 2",
        ),
        ("empty.json", "", "empty.json is empty; expected a JSON list of messages"),
        (
            "empty_list.json",
            "[]",
            "expected a non-empty JSON list of messages or of tau-bench trajectories, got an empty list",
        ),
        ("shape.json", '[{"content": "no role"}]', "the message list[0] has no 'role'"),
        (  # before: AttributeError: 'str' object has no attribute 'get'
            "function.json",
            '[{"role": "user", "content": "u"}, '
            '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": "lookup"}]}]',
            "the message list[1] tool_calls[0].function is a str",
        ),
        (  # before: TypeError
            "name.json",
            '[{"role": "user", "content": "u"}, {"role": "assistant", "content": null, '
            '"tool_calls": [{"id": "c1", "function": {"name": 7, "arguments": "{}"}}]}]',
            "the message list[1] tool_calls[0].function.name is an int",
        ),
        (
            "bedrock.json",
            '[{"role": "user", "content": [{"text": "hi"}]}]',
            "it looks like Amazon Bedrock Converse / Strands Agents content blocks",
        ),
        ("object.json", '{"foo": 1}', 'a JSON object must have a "messages" list'),
        ("number.json", "42", "expected a non-empty JSON list of messages or of tau-bench trajectories, got int"),
        (
            "lines.jsonl",
            '{"role": "user", "content": "a"}\nnot json\n{"role": "user", "content": "b"}\n',
            "lines.jsonl line 2 is not JSON",
        ),
        ("bin.json", b"\xff\xfe\x00garbage", "bin.json is not UTF-8 text"),
    ],
)
def test_bad_files_get_clear_errors(tmp_path, config, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert message in str(info.value)
    done = cli(str(path), "--config", str(config), "--window", "4000")
    assert done.returncode == 1 and done.stderr.startswith("ctxlife replay: error: ") and message in done.stderr


def test_missing_window_and_missing_file(tmp_path, config):
    done = cli(str(DATA), "--config", str(config))
    assert done.returncode == 1 and "replay needs a context window: pass --window N" in done.stderr
    done = cli(str(tmp_path / "nope.json"), "--config", str(config), "--window", "4000")
    assert done.returncode == 1 and "cannot read" in done.stderr and "nope.json" in done.stderr


#: A recording whose second call would send a tool result that answers no call (providers refuse it).
ORPHAN = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Look up order 4711."},
    {"role": "assistant", "content": "Looking."},
    {"role": "tool", "tool_call_id": "call_gone", "content": '{"order": 4711, "status": "shipped"}'},
    {"role": "assistant", "content": "It has shipped."},
]


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_call_with_an_invalid_list_exits_1_with_or_without_json(tmp_path, config, capsys, as_json):
    """docs/inspecting.md: the exit code is 1 when a call would send a list the provider refuses (issue 44:
    no test failed when --json exited 0)."""
    from ctxlife.cli import main

    file = tmp_path / "orphan.json"
    file.write_text(json.dumps(ORPHAN))
    [conv] = load_conversations(file)
    result = replay(conv, settings_from_dict({"strategies": []}), context_window=4000)
    assert result.violations == 1  # the precondition: the recording holds an invalid call
    code = main(["replay", str(file), "--config", str(config), "--window", "4000", *(["--json"] if as_json else [])])
    out = capsys.readouterr().out
    assert code == 1
    if as_json:
        assert json.loads(out)["conversations"][0]["totals"]["invalid_calls"] == 1
    else:
        assert "1 call(s) would have sent a provider-invalid message list" in " ".join(out.split())


def test_gzipped_json_list(tmp_path, config):
    file = tmp_path / "chat.json.gz"
    file.write_bytes(gzip.compress(json.dumps(conversation(3)).encode()))
    [conv] = load_conversations(file)
    assert len(conv.messages) == 7


def test_the_window_shown_is_the_window_the_strategies_used(tmp_path, monkeypatch):
    """--window beats the environment, which beats the config; header, JSON and chart show the one used."""
    messages = synthetic_session(40)
    file = tmp_path / "chat.json"
    file.write_text(json.dumps(messages))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('strategies = ["llm_summary"]\ncontext_window = 16000\n[llm_summary]\nsummarizer = "extractive"\n')

    def run_json(*extra):
        done = cli(str(file), "--config", str(cfg), "--json", *extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    from_config = run_json()
    assert from_config["context_window"] == 16000 and from_config["window_source"].startswith("the config")
    explicit = run_json("--window", "3000")
    assert explicit["context_window"] == 3000 and explicit["window_source"] == "--window"
    # The strategies worked with 3000, not with the config's 16000: they compacted more, to a lower peak.
    totals = explicit["conversations"][0]["totals"]
    assert totals["compactions"] > from_config["conversations"][0]["totals"]["compactions"]
    assert totals["peak_managed"] < from_config["conversations"][0]["totals"]["peak_managed"]
    monkeypatch.setenv("CTXLIFE_CONTEXT_WINDOW", "5000")
    assert run_json()["context_window"] == 5000
    assert run_json("--window", "3000")["context_window"] == 3000
    table = cli(str(file), "--config", str(cfg), "--window", "3000")
    assert "window 3,000 tokens (from --window)" in table.stdout and "threshold 40% = 1,200 tokens" in table.stdout
    assert "facts kept = tool-call argument values" in table.stdout


def test_facts_kept_is_graded_without_ctxlifes_extractor_at_the_call_that_reuses_the_value(tmp_path):
    """tau-bench: an agent re-uses ids it read earlier; truncation to one round loses some, unmanaged keeps all."""
    [conv] = load_conversations(DATA)[3:4]
    keep_all = replay(conv, settings_from_dict({"strategies": []}), context_window=100_000)
    cut = replay(
        conv,
        settings_from_dict(
            {
                "strategies": ["truncate_last_n"],
                "truncate_last_n": {"rounds": 1, "always": True, "pin_first_user": False},
            }
        ),
        context_window=100_000,
    )
    assert keep_all.facts_total > 0 and keep_all.facts_kept == keep_all.facts_total
    assert cut.facts_total == keep_all.facts_total and cut.facts_kept < cut.facts_total
    assert sum(r.facts_needed for r in cut.rows) == cut.facts_total
