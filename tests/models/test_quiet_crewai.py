"""A summary call ctxlife makes through a CrewAI LLM and handles: CrewAI prints nothing about its failure.

Real crews, CrewAI's own ``LLM`` (its OpenAI provider, real HTTP) against a local OpenAI-compatible
server: the agent's calls get tool calls and answers, the summary call gets an HTTP 400.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict

pytestmark = [pytest.mark.e2e, pytest.mark.imports("crewai")]

sys.path.insert(0, str(Path(__file__).parent))
from fake_endpoint import completion, error, serve, tool_call  # noqa: E402

TOO_LONG = error(400, "This model's maximum context length is 2048 tokens; 7129 requested.", "context_length_exceeded")
PANEL = "LLM Call Failed"  # the body of CrewAI's red "LLM Error" panel
SETTINGS = settings_from_dict(
    {
        "context_window": 2500,
        "strategies": ["llm_summary"],
        "llm_summary": {
            "summarizer": "llm",
            "keep_rounds": 1,
            "min_gain_tokens": 20,
            "background": False,
        },
    }
)


def is_summary_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages", [])
    return len(messages) == 2 and "summar" in str(messages[0].get("content", "")).lower()


def lookups_then_answer(lookups: int):
    """The agent's replies: ``lookups`` native tool calls, then a final answer."""
    agent_calls = 0

    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        nonlocal agent_calls
        agent_calls += 1
        if agent_calls > lookups:
            return completion("All in stock.")(body)
        return tool_call("lookup", {"item": f"I{agent_calls}"}, call_id=f"call_{agent_calls}")(body)

    return reply


def verbose_crew(base_url: str) -> Any:
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool

    @tool("lookup")
    def lookup(item: str) -> str:
        """Look up an item in the inventory."""
        return f"item {item}: 12 units in warehouse W7, price $19.99. " + "detail " * 300

    llm = LLM(model="openai/fake-model", base_url=base_url, api_key="not-used")
    agent = Agent(
        role="clerk", goal="answer stock questions", backstory="the warehouse", llm=llm, tools=[lookup], verbose=True
    )
    task = Task(name="check", description="Check the items.", expected_output="stock status", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=True)


def crewai_error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What CrewAI's providers log with ``logging.error`` (printed by a root handler, as basicConfig sets)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "root"]


def printed(capfd: pytest.CaptureFixture[str]) -> str:
    from crewai.events import crewai_event_bus

    crewai_event_bus.flush()  # CrewAI prints its panels from event handler threads
    out, err = capfd.readouterr()
    return out + err


def test_a_failed_summary_by_the_agents_llm_prints_no_crewai_error_and_falls_back(capfd, caplog):
    agent_reply = lookups_then_answer(6)

    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        return TOO_LONG(body) if is_summary_request(body) else agent_reply(body)

    with serve(reply) as endpoint, capture_logs() as logs:
        crew = ctxlife.wrap(verbose_crew(endpoint["base_url"]), SETTINGS)
        out = crew.kickoff()
    terminal = printed(capfd)

    assert out.raw == "All in stock."
    assert any(is_summary_request(body) for body in endpoint["requests"]), "no summary was asked for"
    assert PANEL not in terminal and "maximum context length" not in terminal
    assert crewai_error_lines(caplog) == []
    failures = [e for e in logs if e["event"] == "ctxlife.summary_failed"]
    assert failures and failures[0]["fallback"] == "extractive" and "context length" in failures[0]["error"]
    later_agent_calls = [b["messages"] for b in endpoint["requests"][-3:] if not is_summary_request(b)]
    assert any("History summary" in str(m.get("content")) for call in later_agent_calls for m in call)


def test_a_failed_call_of_the_agents_own_model_still_shows_crewai_s_error(capfd, caplog):
    with serve(error(400, "model 'fake-model' is not served here", "model_not_found")) as endpoint:
        crew = ctxlife.wrap(verbose_crew(endpoint["base_url"]), SETTINGS)
        with pytest.raises(Exception, match="not served here"):
            crew.kickoff()
    terminal = printed(capfd)

    assert PANEL in terminal and "not served here" in terminal
    assert any("not served here" in line for line in crewai_error_lines(caplog))
