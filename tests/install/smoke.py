"""Run inside a fresh virtual environment by tests/test_install.py: ``python smoke.py EXTRA...``.

For each extra named, a smoke test through the public API as a user would write it; first, every
module of ctxlife imports, or names the extra it needs (one that is not installed here). Run from an
empty folder (everything is written there); prints one ``EXTRA: ...`` line per check and exits
non-zero at the first failure. ``CTXLIFE_SMOKE_BASE_URL`` is the fake OpenAI-compatible endpoint of
the openai check, ``CTXLIFE_SMOKE_REDIS`` the redis check's server.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxlife
import ctxlife_strategies
from ctxlife.config import settings_from_dict

HERE = Path.cwd()


def chat(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an airline agent."}]
    for r in range(rounds):
        messages += [
            {"role": "user", "content": f"Please check reservation RS{r:03d}X for mia_li_{3600 + r}. " + "ok " * 60},
            {"role": "assistant", "content": f"Reservation RS{r:03d}X is confirmed on flight HAT{100 + r}."},
        ]
    return messages


def imports(extras: set[str]) -> None:
    """Every module imports, except those needing an extra that is not installed (they name it)."""
    count, refused = 0, []
    for package in (ctxlife, ctxlife_strategies):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith(".__main__") or info.name == "ctxlife.pytest_plugin":  # pytest's, not the user's
                continue
            count += 1
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                needed = [e for e in EXTRAS if f"ctxlife[{e}]" in str(exc)]
                assert needed and not set(needed) & extras, f"{info.name}: {type(exc).__name__}: {exc}"
                refused.append(info.name)
    print(f"imports: {count} modules, {len(refused)} name an extra not installed here: {refused}")


def openai_route() -> None:
    """The model route summarizes through the endpoint (no fallback); `ctxlife check` calls it."""
    import openai

    base_url = os.environ["CTXLIFE_SMOKE_BASE_URL"]
    model = {"name": "smoke-model", "base_url": base_url}  # the [model] table (issue 43)
    settings = settings_from_dict(
        {"strategies": ["llm_summary"], "llm_summary": {"min_gain_tokens": 20}, "model": model}
    )
    messages = chat(30)
    report = ctxlife.manage(messages, config=settings, context_window=4000)
    [compacted] = [a for a in report.actions if a.what == "compacted"]
    assert compacted.details["summarizer"] == "model:smoke-model", compacted.details
    assert "fallback_from" not in compacted.details, compacted.details
    assert "SMOKE MODEL SUMMARY" in json.dumps(messages), "the model's summary is not in the list"
    config = HERE / "ctxlife.toml"
    config.write_text(f'strategies = ["llm_summary"]\n[model]\nname = "smoke-model"\nbase_url = "{base_url}"\n')
    ctxlife_cli = Path(sys.executable).with_name("ctxlife")
    checked = subprocess.run([ctxlife_cli, "check", str(config), "--json"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    print(f"openai: openai {openai.__version__}: summarized by the endpoint, ctxlife check OK")


def langchain() -> None:
    """CtxlifeMiddleware under create_agent, across a restart (snapshot_restore on a file store)."""
    import langchain_core
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    from ctxlife.integrations.langchain import CtxlifeMiddleware

    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"file://{HERE / 'lc-sessions'}"})
    thread = {"configurable": {"thread_id": "u42"}}
    first = create_agent(
        GenericFakeChatModel(messages=iter([AIMessage("Noted.")])),
        [],
        middleware=[CtxlifeMiddleware(config, context_window=4000)],
    )
    first.invoke({"messages": [HumanMessage("My order is ORD-4242.")]}, thread)
    # the restart: a new middleware and agent; the caller sends only the new question
    again = create_agent(
        GenericFakeChatModel(messages=iter([AIMessage("ORD-4242.")])),
        [],
        middleware=[CtxlifeMiddleware(config, context_window=4000)],
    )
    state = again.invoke({"messages": [HumanMessage("What was my order?")]}, thread)
    contents = [m.content for m in state["messages"]]
    assert contents[:2] == ["My order is ORD-4242.", "Noted."] and contents[-1] == "ORD-4242.", contents
    print(f"langchain: langchain-core {langchain_core.__version__}: the session restored in a new agent")


def redis() -> None:
    """A session on Redis: recorded by one host, restored by the next."""
    import redis as redis_client

    config = settings_from_dict({"strategies": ["snapshot_restore"], "store": os.environ["CTXLIFE_SMOKE_REDIS"]})
    with ctxlife.Session("smoke-redis", config, context_window=4000) as session:
        session.prepare({"role": "user", "content": "My locker is 7Q-4471."})
        session.record_reply({"role": "assistant", "content": "Noted: 7Q-4471."})
    with ctxlife.Session("smoke-redis", config, context_window=4000) as session:
        listing = session.prepare({"role": "user", "content": "Which locker?"})
    assert [m["content"] for m in listing][-3:] == ["My locker is 7Q-4471.", "Noted: 7Q-4471.", "Which locker?"]
    print(f"redis: redis {redis_client.__version__}: the session came back from the server")


def otel() -> None:
    """Each Host gets a tracer from the OpenTelemetry API (no SDK: spans are no-ops) and manages as usual."""
    from opentelemetry import version

    from ctxlife.telemetry import host_tracer

    assert host_tracer() is not None
    plain = settings_from_dict({"strategies": ["truncate_last_n"]})
    report = ctxlife.manage(chat(30), config=plain, context_window=2000)
    assert report.acted == ["truncate_last_n"]
    print(f"otel: opentelemetry-api {version.__version__}: a tracer per host, manage() traced")


def plot() -> None:
    """`ctxlife replay --plot` draws the chart."""
    import matplotlib

    recorded = HERE / "chat.json"
    recorded.write_text(json.dumps(chat(30)))
    png = HERE / "replay.png"
    done = subprocess.run(
        [Path(sys.executable).with_name("ctxlife"), "replay", str(recorded), "--window", "2000", "--plot", str(png)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and png.stat().st_size > 10_000, done.stderr
    print(f"plot: matplotlib {matplotlib.__version__}: replay chart written")


def agents() -> None:
    """Runner.run with AgentsSession: the run is recorded, and a restart reads the conversation back."""
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.models.interface import Model
    from agents.version import __version__ as agents_version
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    from ctxlife.integrations.openai_agents import AgentsSession

    class Clerk(Model):  # an offline model: no network, no key
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            text = ResponseOutputText(text="Your locker is 7Q-4471.", type="output_text", annotations=[])
            message = ResponseOutputMessage(
                id="msg_1", content=[text], role="assistant", status="completed", type="message"
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield

    config = settings_from_dict({"strategies": ["llm_summary"], "store": f"file://{HERE / 'agents-sessions'}"})

    async def run() -> None:
        agent = Agent(name="clerk", instructions="Answer briefly.", model=Clerk())
        session = AgentsSession("smoke-agents", config, context_window=4000)
        try:
            run_config = session.run_config(RunConfig(tracing_disabled=True))
            result = await Runner.run(agent, "Which locker is mine?", session=session, run_config=run_config)
            assert result.final_output == "Your locker is 7Q-4471."
        finally:
            await session.close()
        again = AgentsSession("smoke-agents", config, context_window=4000)
        try:
            items = await again.get_items()
        finally:
            await again.close()
        assert len(items) == 2 and items[0]["content"] == "Which locker is mine?", items

    asyncio.run(run())
    print(f"agents: openai-agents {agents_version}: a run recorded and read back after a restart")


def crewai() -> None:
    """The crewai extra's smoke test is `ctxlife demo` (a real crew on a scripted LLM), run by the test."""
    import crewai as crewai_package

    assert ctxlife.wrap  # ctxlife.wrap() is the entry point; the demo exercises it
    print(f"crewai: crewai {crewai_package.__version__}: importable; the demo runs the crew")


EXTRAS: dict[str, Callable[[], None]] = {
    "openai": openai_route,
    "langchain": langchain,
    "redis": redis,
    "otel": otel,
    "plot": plot,
    "agents": agents,
    "crewai": crewai,
}

if __name__ == "__main__":
    wanted = sys.argv[1:]
    imports(set(wanted))
    for extra in wanted:
        EXTRAS[extra]()
