"""task_scope on a real CrewAI crew (scripted model, no network). Only these tests need CrewAI: the
framework-neutral task_scope tests are in test_task_scope.py and run on a core-only install."""

from __future__ import annotations

import pytest
from strategy_helpers import FILLER, research_output

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.testing import react_final, scripted_llm

pytestmark = pytest.mark.imports("crewai")

CONTEXT_HEAD = "This is the context you're working with:\n"

PLAN = "Plan: rebook mia_li_3668 on HAT101 on 2024-05-11 and refund $121. " + FILLER * 10


def _crew(llm):
    from crewai import Agent, Crew, Task

    agent = Agent(role="Travel agent", goal="help travellers", backstory="You plan trips.", llm=llm)
    research = Task(name="research", description="Research flights.", expected_output="findings", agent=agent)
    plan = Task(name="plan", description="Make a plan.", expected_output="a plan", agent=agent)
    reply = Task(name="reply", description="Write the reply to the traveller.", expected_output="a reply", agent=agent)
    return Crew(agents=[agent], tasks=[research, plan, reply])


def _context_of(call) -> str | None:
    task_message = call[1]["content"]
    if CONTEXT_HEAD not in task_message:
        return None
    # Agents without tools end the task message with "Provide your complete response:".
    return task_message.split(CONTEXT_HEAD, 1)[1].split("\n\nProvide your complete response:", 1)[0]


def _run(options):
    llm = scripted_llm([react_final(research_output()), react_final(PLAN), react_final("Dear Mia, ...")])
    crew = _crew(llm)
    ctxlife.wrap(crew, settings_from_dict({"strategies": ["task_scope"], "task_scope": options}))
    assert crew.kickoff().raw == "Dear Mia, ..."
    assert len(llm.calls) == 3  # one model call per task: call i is task i's first call
    return llm.calls


@pytest.mark.e2e
def test_carry_gives_later_tasks_a_compact_labelled_context(counter):
    calls = _run({"max_tokens": 250})
    assert _context_of(calls[0]) is None
    second, third = _context_of(calls[1]), _context_of(calls[2])
    full = research_output()
    assert counter.count_text(full) > 250
    assert counter.count_text(second) <= 250 and second.startswith("[ctxlife: earlier task outputs, compacted from")
    assert "HAT100" in second and FILLER * 3 not in second
    assert counter.count_text(third) <= 250
    assert "From task 'research':" in third and "From task 'plan':" in third and "mia_li_3668" in third


@pytest.mark.e2e
def test_isolate_per_task_by_name_and_index(counter):
    calls = _run({"policy": "full", "tasks": {"plan": "isolate", "2": "carry"}, "max_tokens": 200})
    assert _context_of(calls[1]) is None  # plan: isolated, no context section at all
    third = _context_of(calls[2])  # reply (index 2): carried
    assert third is not None and counter.count_text(third) <= 200


@pytest.mark.e2e
def test_full_is_crewais_behaviour():
    calls = _run({"policy": "full"})
    research, plan = research_output().strip(), PLAN.strip()  # CrewAI strips final answers
    assert _context_of(calls[1]) == research
    assert _context_of(calls[2]) == research + "\n\n----------\n\n" + plan
