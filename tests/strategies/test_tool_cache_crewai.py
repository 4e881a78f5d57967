"""tool_cache on a real CrewAI crew (scripted model, no network). Only these tests need CrewAI: the
framework-neutral tool_cache tests are in test_tool_cache.py and run on a core-only install."""

from __future__ import annotations

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.testing import react_action, react_final, scripted_llm, tool_call

pytestmark = pytest.mark.imports("crewai")

CONFIG = {"strategies": ["tool_cache"], "tool_cache": {"tools": ["get_flight_status"]}}


def _crew(llm, runs: dict[str, int]):
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    @tool("get_flight_status")
    def get_flight_status(flight: str, date: str) -> str:
        """Read a flight's status (read-only)."""
        runs["status"] += 1
        return f"{flight} on {date}: on time, gate B{runs['status']}"

    @tool("send_notice")
    def send_notice(flight: str, date: str) -> str:
        """Send a notice to passengers (a side effect: never cached)."""
        runs["notice"] += 1
        return f"notice {runs['notice']} sent for {flight}"

    agent = Agent(
        role="Gate agent",
        goal="keep passengers informed",
        backstory="You work at the gate.",
        llm=llm,
        tools=[get_flight_status, send_notice],
    )
    task = Task(name="inform", description="Inform passengers of HAT136.", expected_output="done", agent=agent)
    # CrewAI's own cache is switched off so that the executions counted here are the real ones.
    return Crew(agents=[agent], tasks=[task], cache=False)


def _observations(messages):
    return [
        m["content"].split("\nObservation: ", 1)[1]
        for m in messages
        if m["role"] == "assistant" and "\nObservation: " in (m.get("content") or "")
    ]


@pytest.mark.e2e
def test_second_identical_call_does_not_run_the_tool_and_the_model_sees_the_cached_result():
    args = {"flight": "HAT136", "date": "2024-05-20"}
    reordered = {"date": "2024-05-20", "flight": "HAT136"}
    llm = scripted_llm(
        [
            react_action("send_notice", args),
            react_action("get_flight_status", args),
            react_action("send_notice", args),  # not allow-listed: runs again
            react_action("get_flight_status", reordered),  # same call, keys in another order: cached
            react_action("get_flight_status", args),  # right after itself: CrewAI would refuse a repeat
            react_final("Passengers informed."),
        ]
    )
    runs = {"status": 0, "notice": 0}
    crew = ctxlife.wrap(_crew(llm, runs), settings_from_dict(CONFIG))
    assert crew.kickoff().raw == "Passengers informed."
    assert runs == {"status": 1, "notice": 2}  # the cached tool ran once, the other one every time
    seen = _observations(llm.calls[-1])
    assert seen[0] == "notice 1 sent for HAT136"
    assert seen[1] == "HAT136 on 2024-05-20: on time, gate B1"
    assert seen[2].startswith("notice 2 sent for HAT136")  # CrewAI appends a format reminder every 3rd use
    assert seen[3] == "[cached result from call 2]\nHAT136 on 2024-05-20: on time, gate B1"
    assert seen[4].startswith("[cached result from call 2]\nHAT136 on 2024-05-20: on time, gate B1")


@pytest.mark.e2e
def test_without_the_strategy_the_tool_runs_again():
    args = {"flight": "HAT136", "date": "2024-05-20"}
    llm = scripted_llm(
        [
            react_action("get_flight_status", args),
            react_action("send_notice", args),
            react_action("get_flight_status", args),
            react_final("ok"),
        ]
    )
    runs = {"status": 0, "notice": 0}
    ctxlife.wrap(_crew(llm, runs), settings_from_dict({"strategies": []})).kickoff()
    assert runs == {"status": 2, "notice": 1}


@pytest.mark.e2e
def test_native_tool_calls_are_cached_too():
    args = {"flight": "HAT136", "date": "2024-05-20"}
    llm = scripted_llm(
        [[tool_call("get_flight_status", args, "c1")], [tool_call("get_flight_status", args, "c2")], "done"],
        native_tools=True,
    )
    runs = {"status": 0, "notice": 0}
    ctxlife.wrap(_crew(llm, runs), settings_from_dict(CONFIG)).kickoff()
    assert runs["status"] == 1
    tool_messages = [m for m in llm.calls[-1] if m["role"] == "tool"]
    assert tool_messages[1]["content"] == "[cached result from call 1]\nHAT136 on 2024-05-20: on time, gate B1"
