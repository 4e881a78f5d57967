"""llm_summary with a model of the user's choosing: every failure shape still leaves a list that fits.

The endpoints are local HTTP servers speaking the OpenAI wire format (real client, real HTTP); the
model's replies are scripted. What a real model does is in test_real_model.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import is_summary, validate
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from ctxlife.tokens import TokenCounter
from ctxlife_strategies.llm_summary import LLMSummary

sys.path.insert(0, str(Path(__file__).parent))
from fake_endpoint import completion, error, serve  # noqa: E402

WINDOW = 4000


def config(model: dict | None = None, **options):
    """llm_summary with ``options``; ``model`` is the [model] table (the model ctxlife calls)."""
    return settings_from_dict({"strategies": ["llm_summary"], "llm_summary": options, "model": model or {}})


def turn(r: int, words: int = 60) -> list[dict]:
    code = f"RS{r:03d}X"
    call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
    result = {"reservation_id": code, "flight": f"HAT{100 + r}", "notes": "ok " * words}
    return [
        user(f"Please check reservation {code} for user mia_li_{3600 + r}; I paid ${100 + r}.50."),
        assistant(None, [call]),
        tool_result(call["id"], json.dumps(result)),
        assistant(f"Reservation {code} is confirmed on flight HAT{100 + r}."),
    ]


def chat(rounds: int, words: int = 60) -> list[dict]:
    messages = [system("You are an airline agent.")]
    for r in range(rounds):
        messages += turn(r, words)
    return messages


def keeping(text: str, prompt: list[dict]) -> str:
    """A model's summary: ``text`` and the newest reservation code of its prompt (a summary that carries
    none of its span's facts is not used)."""
    codes = re.findall(r"RS\d{3}X", json.dumps(prompt))
    return f"{text} Last: {max(codes)}." if codes else text


def acted(report):
    return next((a for a in report.actions if a.what in {"compacted", "truncated"}), None)


def run_loop(host_or_manage, turns: int, words: int = 60):
    """A plain loop: the list handed back is the next call's base. Returns each call's token count."""
    counter = TokenCounter(None)
    messages = [system("You are an airline agent.")]
    sizes = []
    for r in range(turns):
        messages += turn(r, words)[:1]
        host_or_manage(messages)
        assert validate(messages) == []
        sizes.append(counter.count_messages(messages))
        messages += turn(r, words)[1:]
    return sizes


@pytest.mark.parametrize(
    "reply, error_type",
    [
        (
            error(400, "This model's maximum context length is 2048 tokens", "context_length_exceeded"),
            "ContextLengthExceeded",
        ),
        (error(500, "internal error"), "ModelError"),
        (completion("", 0.0), "SummaryFailed"),
        (lambda body: (200, "<html>not json</html>", 0.0), "ModelError"),
        (lambda body: (200, json.dumps({"choices": []}), 0.0), "ModelError"),
        (completion("late", delay=6.0), "ModelError|SummaryFailed"),
    ],
    ids=["400-context-length", "500", "empty", "non-json", "no-choices", "timeout"],
)
def test_every_failure_shape_of_an_endpoint_falls_back_to_the_extractive_summary(reply, error_type):
    with serve(reply) as server:
        host = Host(
            config({"name": "local", "base_url": server["base_url"], "timeout_seconds": 3.0}),
            context_window=WINDOW,
        )
        messages = chat(12)
        with capture_logs() as logs:
            report = host.manage(messages)
        action = acted(report)
        assert action.what == "compacted" and action.details["summarizer"] == "extractive"
        assert action.details["fallback_from"] == "model:local"
        assert is_summary(messages[1]) and validate(messages) == []
        assert report.tokens_after <= 0.25 * WINDOW + 50
        events = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
        assert (
            len(events) == 1
            and events[0]["fallback"] == "extractive"
            and events[0]["error_type"] in error_type.split("|")
        )
        assert not [e for e in logs if e["event"] == "ctxlife.strategy_failed"]


def test_a_huge_reply_is_cut_to_the_budget_after_one_request_to_condense_it():
    huge = "\n".join(f"Goal line {i}: keep reservation RS{i:03d}X for mia_li_{3600 + i}." for i in range(600))
    shorter = "Goal: check reservations RS000X-RS009X.\nFacts: all confirmed."

    def reply(body):
        asked_to_condense = "Shorten this summary" in body["messages"][-1]["content"]
        return completion(shorter if asked_to_condense else huge)(body)

    with serve(reply) as server:
        host = Host(config({"name": "local", "base_url": server["base_url"]}), context_window=WINDOW)
        messages = chat(12)
        action = acted(host.manage(messages))
        assert action.what == "compacted" and action.details["summarizer"] == "model:local"
        assert "Goal: check reservations RS000X-RS009X." in messages[1]["content"]
        assert (
            len(server["requests"]) == 2 and "Shorten this summary" in server["requests"][1]["messages"][-1]["content"]
        )


def test_prompts_fit_the_summarizers_own_window_and_max_tokens_fits_the_prose_budget():
    counter = TokenCounter(None)
    with serve(completion("Goal: reservations checked.\nFacts: RS000X confirmed.")) as server:
        host = Host(
            config({"name": "local", "base_url": server["base_url"], "context_window": 1024}, max_read_tokens=None),
            context_window=16_000,
        )
        messages = chat(60)  # about 11k tokens: far more than one prompt of a 1k model holds
        action = acted(host.manage(messages))
        assert action.what == "compacted" and action.details["summarizer"] == "model:local"
        requests = server["requests"]
        assert len(requests) >= 2  # summarized in pieces
        for body in requests:
            prompt = counter.count_messages(body["messages"])
            assert prompt * 1.2 + body["max_tokens"] <= 1024, (prompt, body["max_tokens"])
            assert body["max_tokens"] <= 0.7 * 600 + 1  # the prose budget, not the whole summary budget
        assert "part 2 of" in requests[1]["messages"][-1]["content"]


def test_the_prompt_is_structured_and_in_the_conversations_language():
    with serve(completion("目标：查询订单。")) as server:
        host = Host(config({"name": "local", "base_url": server["base_url"]}), context_window=WINDOW)
        messages = [system("你是客服。")]
        for r in range(14):
            messages += [
                user(f"请帮我查询订单 DD{r:04d} 的物流状态，我明天要出差，地址是上海市浦东新区世纪大道{r}号。" * 3),
                assistant(f"订单 DD{r:04d} 已发货，预计后天送达。请问还有什么需要帮忙的吗？" * 3),
            ]
        action = acted(host.manage(messages))
        assert action.what == "compacted"
        system_prompt = server["requests"][0]["messages"][0]["content"]
        assert "目标" in system_prompt and "切记" in system_prompt
    with serve(completion("Goal: reservations.")) as server:
        host = Host(config({"name": "local", "base_url": server["base_url"]}), context_window=WINDOW)
        host.manage(chat(12))
        system_prompt = server["requests"][0]["messages"][0]["content"]
        for section in ("Goal:", "Decisions:", "Facts:", "Open items:", "Do not forget:"):
            assert section in system_prompt


def test_the_fact_ledger_never_takes_identifiers_the_model_invented():
    replies = iter(["Goal: checks. The model invented ZQ7777Y and INV-998877 here.", "Goal: more checks."])
    with serve(lambda body: completion(keeping(next(replies, "Goal: checks."), body["messages"]))(body)) as server:
        host = Host(config({"name": "local", "base_url": server["base_url"]}, min_gain_tokens=0), context_window=WINDOW)
        messages = chat(12)
        host.manage(messages)
        assert "ZQ7777Y" in messages[1]["content"]
        for r in range(12, 20):
            messages += turn(r)
        action = acted(host.manage(messages))
        assert action.what == "compacted"
        facts_block = messages[1]["content"].split("Key facts:")[-1]
        assert "ZQ7777Y" not in facts_block and "INV-998877" not in facts_block
        assert "RS000X" in messages[1]["content"]  # a real fact of the first span is still carried


def test_model_without_crewai_and_without_endpoint_keeps_compacting_and_check_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "crewai", None)  # as if CrewAI were not installed
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    host = Host(config({"name": "gpt-4o-mini"}), context_window=WINDOW)
    with capture_logs() as logs:
        sizes = run_loop(host.manage, 120)
    assert max(sizes) <= WINDOW
    failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert failed and all(e["fallback"] == "extractive" for e in failed)
    assert not [e for e in logs if e["event"] == "ctxlife.strategy_failed"]

    from ctxlife.cli import main

    path = tmp_path / "ctxlife.toml"
    path.write_text('strategies = ["llm_summary"]\n[model]\nname = "gpt-4o-mini"\n')
    assert main(["check", str(path)]) == 1
    monkeypatch.setitem(sys.modules, "openai", None)
    assert main(["check", str(path)]) == 1
    path.write_text('strategies = ["llm_summary"]\n[model]\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    assert main(["check", str(path)]) == 1
    monkeypatch.delitem(sys.modules, "openai")
    assert main(["check", "--no-connect", str(path)]) == 0  # installed and configured; not called


def test_check_calls_the_endpoint_once_and_fails_with_the_fix_when_it_does_not_answer(tmp_path, capsys):
    from ctxlife.cli import main

    path = tmp_path / "ctxlife.toml"
    with serve(completion("OK")) as server:
        path.write_text(f'strategies = ["llm_summary"]\n[model]\nname = "m"\nbase_url = "{server["base_url"]}"\n')
        assert main(["check", str(path)]) == 0
        assert [(r["model"], r["max_tokens"]) for r in server["requests"]] == [("m", 1)]
    capsys.readouterr()
    assert main(["check", str(path)]) == 1  # the same config, the server gone
    err = capsys.readouterr().err
    assert "strategy 'llm_summary': could not call the [model]: model 'm' at http://127.0.0.1:" in err
    assert "cannot connect" in err and "Fix: start the server, or correct [model] base_url or name" in err
    with serve(error(404, "model 'm' not found", "model_not_found")) as server:
        path.write_text(f'strategies = ["llm_summary"]\n[model]\nname = "m"\nbase_url = "{server["base_url"]}"\n')
        assert main(["check", str(path)]) == 1
    assert "HTTP 404" in capsys.readouterr().err


def test_check_messages_name_the_fix(monkeypatch, tmp_path, capsys):
    from ctxlife.cli import main

    monkeypatch.setitem(sys.modules, "crewai", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "ctxlife.toml"
    path.write_text('strategies = ["llm_summary"]\n[model]\nname = "gpt-4o-mini"\n')
    assert main(["check", str(path)]) == 1
    assert "set [model] base_url" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "openai", None)
    assert main(["check", str(path)]) == 1
    assert "pip install 'ctxlife[openai]'" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_completion_function_reaches_the_summary_through_manage_and_sessions(kind, tmp_path):
    seen: list[int] = []

    def sync_model(messages, max_tokens):
        seen.append(max_tokens)
        return keeping("Goal: reservations checked by my own model.", messages)

    async def async_model(messages, max_tokens):
        await asyncio.sleep(0)
        seen.append(max_tokens)
        return keeping("Goal: reservations checked by my own model.", messages)

    model = sync_model if kind == "sync" else async_model
    settings = config()
    messages = chat(12)
    report = ctxlife.manage(messages, config=settings, context_window=WINDOW, summary_model=model)
    assert acted(report).details["summarizer"] == "agent_llm"
    assert "by my own model" in messages[1]["content"] and seen

    async def amanaged():
        listing = chat(12)
        await ctxlife.amanage(listing, config=settings, context_window=WINDOW, summary_model=model)
        return listing

    assert "by my own model" in asyncio.run(amanaged())[1]["content"]

    store = settings_from_dict(
        {"strategies": ["llm_summary"], "store": f"file://{tmp_path}/sessions", "llm_summary": {}}
    )
    with ctxlife.Session("s1", config=store, context_window=WINDOW, summary_model=model) as session:
        for message in chat(12)[1:]:
            session.add(message)
        listing = session.prepare(user("and now?"))
        assert any("by my own model" in (m.get("content") or "") for m in listing)

    async def in_async_session():
        async with ctxlife.AsyncSession("s2", config=store, context_window=WINDOW, summary_model=model) as session:
            await session.add_items(chat(12)[1:])
            return await session.prepare(user("and now?"))

    assert any("by my own model" in (m.get("content") or "") for m in asyncio.run(in_async_session()))


def test_a_model_that_is_down_is_rested_then_asked_again():
    calls = []

    def flaky(messages, max_tokens):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return keeping("Goal: back up.", messages)

    host = Host(config(min_gain_tokens=0), context_window=WINDOW, summary_model=flaky)
    messages = chat(12)
    assert acted(host.manage(messages)).details["summarizer"] == "extractive"
    used = []
    for r in range(12, 120):  # compactions seconds apart: the model rests for 3 compactions, not 30 s
        messages += turn(r)
        action = acted(host.manage(messages))
        if action is not None:
            used.append(action.details["summarizer"])
        if used[-1:] == ["agent_llm"]:
            break
    assert used == ["extractive"] * LLMSummary.Options.retry_model_after_compactions + ["agent_llm"], used
    assert len(calls) == 2 and "Goal: back up." in messages[1]["content"]


def test_tool_heavy_turns_at_a_small_window_do_not_compact_on_most_calls():
    host = Host(config(), context_window=WINDOW)
    compactions = 0
    calls = 0
    messages = [system("You are an airline agent.")]
    counter = TokenCounter(None)
    for r in range(30):
        messages += turn(r, words=350)[:3]  # a user turn and a large tool result each call
        report = host.manage(messages)
        calls += 1
        compactions += acted(report) is not None
        assert counter.count_messages(messages) <= WINDOW
        messages += turn(r, words=350)[3:]
    assert compactions <= calls // 2, (compactions, calls)


def test_background_compaction_keeps_the_model_off_the_critical_path():
    import threading
    import time

    def run(background: bool, model) -> list[dict]:
        """The first three compactions of a loop whose calls are 0.15 s apart."""
        host = Host(
            config(background=background, min_gain_tokens=0),
            context_window=WINDOW,
            summary_model=model,
        )
        messages = [system("You are an airline agent.")]
        counter = TokenCounter(None)
        actions: list[dict] = []
        for r in range(40):
            if len(actions) == 3:
                break
            messages += turn(r)[:3]
            report = host.manage(messages)
            assert counter.count_messages(messages) <= 0.4 * WINDOW and validate(messages) == []
            done = acted(report)
            actions += [done.details] if done is not None else []
            messages += turn(r)[3:]
            time.sleep(0.15)  # the agent's own model call
        return actions

    def slow_model(messages, max_tokens):
        time.sleep(0.5)
        return keeping("Goal: reservations checked.", messages)

    actions = run(False, slow_model)
    assert [a["summarizer"] for a in actions] == ["agent_llm"] * 3 and not any(a.get("background") for a in actions)
    # A model that answers only when the test ends: a call that waited for it would time out (60 s, an error
    # event; the background summary's own time-out comes long after this loop).
    answer = threading.Event()

    def stuck_model(messages, max_tokens):
        answer.wait()
        return keeping("Goal: reservations checked.", messages)

    try:
        with capture_logs() as logs:
            actions = run(True, stuck_model)
    finally:
        answer.set()
    assert len(actions) == 3 and not [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert all(a["summarizer"] == "extractive" and a["reason"] == "summary_not_ready" for a in actions), actions


def test_a_window_the_endpoint_names_in_a_400_is_learnt_and_the_summary_planned_again():
    counter = TokenCounter(None)

    def reply(body):
        prompt = counter.count_messages(body["messages"]) + body["max_tokens"]
        if prompt > 1024:
            return error(
                400,
                f"This model's maximum context length is 1024 tokens; you requested {prompt}.",
                "context_length_exceeded",
            )(body)
        return completion(keeping("Goal: reservations checked.", body["messages"]))(body)

    with serve(reply) as server:
        host = Host(
            config({"name": "local", "base_url": server["base_url"]}, max_read_tokens=None), context_window=16_000
        )
        messages = chat(60)
        action = acted(host.manage(messages))
        assert action.what == "compacted" and action.details["summarizer"] == "model:local"
        assert "Goal: reservations checked." in messages[1]["content"]
        refused = [b for b in server["requests"] if counter.count_messages(b["messages"]) + b["max_tokens"] > 1024]
        assert len(refused) == 1  # the first, too long for the model; every prompt after it fits


# A fresh interpreter (openai not imported yet): build the host, then compact once with a timeout far
# shorter than `import openai` takes (0.5-20 s) but far longer than a local call (~0.1 s loaded).
_FIRST_CALL = """
import json, sys, threading
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.testing import assistant, system, user

assert "openai" not in sys.modules
model = {"name": "m", "base_url": sys.argv[1], "timeout_seconds": 0.3}
config = {"strategies": ["llm_summary"], "llm_summary": {"min_gain_tokens": 20}, "model": model}
host = Host(settings_from_dict(config), context_window=1000)
# Building the host imports nothing (a CLI command that never calls a model does not pay for it) ...
def loading():
    threads = [t.name for t in threading.enumerate() if t.name == "ctxlife-import-openai"]
    return threads or sorted({"openai"} & set(sys.modules))
built = loading()
messages = [system("You are an airline agent.")]
host.manage(messages + [user("Hello.")])  # ... the first call, far under the threshold, starts the import
preloading = loading()
for r in range(12):
    messages += [user(f"Check reservation RS{r:03d}X. " + "ok " * 20), assistant(f"RS{r:03d}X is confirmed.")]
report = host.manage(messages)
done = [a.details for a in report.actions if a.what == "compacted"]
print(json.dumps({"built": built, "preloading": preloading, "compactions": done}))
"""


def test_the_first_compaction_does_not_count_the_client_import_against_timeout_seconds():
    with serve(completion("Goal: check RS010X and RS011X.")) as endpoint:
        run = subprocess.run(
            [sys.executable, "-c", _FIRST_CALL, endpoint["base_url"]], capture_output=True, text=True, timeout=120
        )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["built"] == []
    assert out["preloading"] in (["ctxlife-import-openai"], ["openai"])  # importing, or done, before any compaction
    [compaction] = out["compactions"]
    assert compaction["summarizer"] == "model:m" and "fallback_from" not in compaction, compaction
    assert endpoint["requests"], "the model was not asked"


def test_one_model_table_serves_llm_summary_and_task_scope(tmp_path, capsys):
    """The [model] table is the one place the called model is configured: llm_summary's compaction
    and task_scope's "llm" carry both call it; `ctxlife check` checks it once per strategy calling it."""
    from ctxlife.contexts import TaskContext

    with serve(completion("Goal: reservations RS000X-RS011X checked.")) as server:
        settings = settings_from_dict(
            {
                "strategies": ["task_scope", "llm_summary"],
                "llm_summary": {"min_gain_tokens": 20},
                "task_scope": {"summarizer": "llm", "max_tokens": 60},
                "model": {"name": "shared", "base_url": server["base_url"]},
            }
        )
        host = Host(settings, context_window=WINDOW)
        action = acted(host.manage(chat(12)))
        assert action.what == "compacted" and action.details["summarizer"] == "model:shared"
        compaction_requests = len(server["requests"])
        task = TaskContext(task_name="report", task_index=1, context_text="Earlier output. " + "ok " * 400)
        host.task_start(task)  # no framework model at all: the [model] is what task_scope calls
        assert len(server["requests"]) > compaction_requests
        assert {r["model"] for r in server["requests"]} == {"shared"}
        assert "Goal: reservations RS000X-RS011X checked." in task.context_text
        host.close()

    from ctxlife.cli import main

    path = tmp_path / "ctxlife.toml"
    path.write_text(
        'strategies = ["task_scope"]\n[task_scope]\nsummarizer = "llm"\n[model]\nname = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
    )
    capsys.readouterr()
    assert main(["check", str(path)]) == 1  # nothing answers on port 9
    assert "strategy 'task_scope': could not call the [model]" in capsys.readouterr().err


def test_a_model_key_left_under_llm_summary_is_an_error_naming_the_model_table(tmp_path):
    path = tmp_path / "ctxlife.toml"
    path.write_text('strategies = ["llm_summary"]\n[llm_summary]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        ctxlife.load_settings(path)
    message = str(info.value)
    assert "strategy 'llm_summary' has no option 'model'" in message and "write name there" in message
    assert "strategy 'llm_summary' has no option 'base_url'" in message and "write base_url there" in message
    assert "it moved to the [model] table, shared by every strategy that calls a model" in message


def test_cli_commands_that_never_call_a_model_do_not_import_its_client(tmp_path):
    # `ctxlife check --no-connect` builds the host (to check the strategies' options) but calls nothing:
    # the openai client's import (1-20 s on a loaded machine) is not started.
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["llm_summary"]\n[model]\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    script = (
        "import sys, threading\n"
        "from ctxlife.cli import main\n"
        "code = main(['check', '--no-connect', sys.argv[1]])\n"
        "names = [t.name for t in threading.enumerate()]\n"
        "print(code, 'openai' in sys.modules or 'ctxlife-import-openai' in names)\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1] == "0 False"
