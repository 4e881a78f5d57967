"""A crew kicked off again in the same process sends every task what a new process would send it.

Each kickoff builds every agent's list from scratch; ``snapshot_restore`` puts each task's earlier
conversation back in front on that task's first call of the run, not only on the run's first call.
Real CrewAI crews on a scripted offline LLM; the store is SQLite under tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.testing import scripted_llm

pytestmark = [pytest.mark.e2e, pytest.mark.imports("crewai")]


def _crew(llm: Any) -> Any:
    from crewai import Agent, Crew, Task

    agent = Agent(role="Clerk", goal="answer stock questions", backstory="You know the warehouse.", llm=llm)
    check = Task(name="check", description="Check item A1.", expected_output="stock status", agent=agent)
    report = Task(name="report", description="Write a stock report.", expected_output="a report", agent=agent)
    return Crew(agents=[agent], tasks=[check, report], verbose=False)


def _sent(calls: list[Any]) -> list[list[str]]:
    return [[json.dumps(m, sort_keys=True) for m in call] for call in calls]


def test_a_second_kickoff_in_the_same_process_restores_every_task_as_a_new_process_does(tmp_path: Path) -> None:
    from ctxlife.testing import react_final

    answers = [react_final("A1: 12 units."), react_final("Report: A1 in stock.")]
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"sqlite:///{tmp_path / 'one.db'}"})
    same = scripted_llm(answers * 2)
    crew = _crew(same)
    ctxlife.wrap(crew, settings, session_id="crew")
    crew.kickoff()
    first_run = len(same.calls)
    crew.kickoff()

    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": f"sqlite:///{tmp_path / 'two.db'}"})
    for _ in range(2):  # a new crew and host each time: a new process as far as ctxlife knows
        fresh = scripted_llm(answers)
        crew = _crew(fresh)
        ctxlife.wrap(crew, settings, session_id="crew")
        crew.kickoff()

    assert first_run == 2 and len(same.calls) == 4
    # The report task's first call of the second run holds its first run's exchange (restored), as a new process's.
    assert len(same.calls[3]) > len(same.calls[1])
    assert _sent(same.calls[2:]) == _sent(fresh.calls)
