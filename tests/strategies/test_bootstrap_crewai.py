"""bootstrap on a real CrewAI crew (scripted model, no network). Only these tests need CrewAI: the
framework-neutral bootstrap tests are in test_bootstrap.py and run on a core-only install."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.testing import scripted_llm

pytestmark = pytest.mark.imports("crewai")

REPO = Path(__file__).resolve().parents[2]
TODAY = dt.date.today().isoformat()

BLOCK = "PROFILE for {agent_role} (session {session_id}, {date}): weekly reports give the summary first."


def _crew(llm):
    from crewai import Agent, Crew, Task

    writer = Agent(role="Writer", goal="write reports", backstory="You write about {topic}.", llm=llm)
    researcher = Agent(role="Researcher", goal="find facts", backstory="You dig.", llm=llm)
    research = Task(name="research", description="Research {topic}.", expected_output="facts", agent=researcher)
    write = Task(name="write", description="Write about {topic}.", expected_output="a report", agent=writer)
    return Crew(agents=[researcher, writer], tasks=[research, write])


def _system(call) -> str:
    assert call[0]["role"] == "system"
    return call[0]["content"]


@pytest.mark.e2e
def test_injected_once_per_agent_across_wraps_and_kickoffs():
    llm = scripted_llm()  # every call answers "Done." at once: one call per task
    crew = _crew(llm)
    config = settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": BLOCK}})
    ctxlife.wrap(crew, config, session_id="s-1")
    ctxlife.wrap(crew, config, session_id="s-1")  # a no-op
    crew.kickoff(inputs={"topic": "tea"})
    crew.kickoff(inputs={"topic": "tea"})
    crew.kickoff(inputs={"topic": "coffee"})  # CrewAI restores and re-renders the backstory
    assert len(llm.calls) == 6
    for kickoff in range(3):
        research, write = llm.calls[2 * kickoff], llm.calls[2 * kickoff + 1]
        for call, role in ((research, "Researcher"), (write, "Writer")):
            expected = f"PROFILE for {role} (session s-1, {TODAY}): weekly reports give the summary first."
            assert _system(call).count(expected) == 1
            assert _system(call).count("PROFILE for") == 1
    assert "You write about tea." in _system(llm.calls[1])
    assert "You write about coffee." in _system(llm.calls[5])
    # Unwrap and wrap again: still exactly once.
    ctxlife.unwrap(crew)
    ctxlife.wrap(crew, config, session_id="s-1")
    crew.kickoff(inputs={"topic": "tea"})
    assert _system(llm.calls[-1]).count("PROFILE for") == 1


@pytest.mark.e2e
def test_only_the_listed_agents_get_the_text():
    llm = scripted_llm()
    crew = _crew(llm)
    config = settings_from_dict(
        {"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE for {agent_role}.", "agents": ["writer"]}}
    )
    ctxlife.wrap(crew, config)
    crew.kickoff(inputs={"topic": "tea"})
    research, write = llm.calls
    assert "PROFILE" not in _system(research)
    assert _system(write).count("PROFILE for Writer.") == 1


@pytest.mark.e2e
def test_xiaopaw_reaches_the_first_model_call(tmp_path, monkeypatch):
    from crewai import Agent, Crew, Task

    monkeypatch.setenv("CTXLIFE_STORE", f"file://{tmp_path / 'sessions'}")  # not configs/workspace
    llm = scripted_llm()
    agent = Agent(role="Assistant", goal="help the user with their tasks", backstory="You help.", llm=llm)
    task = Task(description="Summarize this week's work.", expected_output="a weekly report", agent=agent)
    crew = ctxlife.wrap(Crew(agents=[agent], tasks=[task]), REPO / "configs" / "xiaopaw.toml")
    crew.kickoff()
    crew.kickoff()
    for call in llm.calls:
        assert _system(call).count("You are XiaoPaw, a work assistant in Feishu.") == 1
        assert "save it to the sandbox first" in _system(call)


@pytest.mark.e2e
def test_use_system_prompt_false_gets_no_system_message_and_the_text_once_in_the_first_user_turn():
    from crewai import Agent, Crew, Task

    llm = scripted_llm()
    agent = Agent(role="Writer", goal="write", backstory="You write.", llm=llm, use_system_prompt=False)
    task = Task(description="Write about tea.", expected_output="a report", agent=agent)
    crew = ctxlife.wrap(
        Crew(agents=[agent], tasks=[task]),
        settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": BLOCK}}),
    )
    crew.kickoff()
    crew.kickoff()
    assert len(llm.calls) == 2
    for call in llm.calls:
        assert [m["role"] for m in call if m["role"] == "system"] == []
        first_user = next(m for m in call if m["role"] == "user")
        assert first_user["content"].count("PROFILE for Writer") == 1
        assert "Write about tea." in first_user["content"]  # the task is still there
        assert sum(str(m["content"]).count("PROFILE for") for m in call) == 1
