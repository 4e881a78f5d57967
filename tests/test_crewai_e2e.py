"""End to end: real CrewAI crews on a scripted offline LLM, wrapped with ctxlife."""

from __future__ import annotations

import asyncio
import threading

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.integrations.crewai import host_of
from ctxlife.testing import HookRecorder, react_action, react_final, scripted_llm

pytestmark = [pytest.mark.e2e, pytest.mark.imports("crewai")]


def make_crew(llm, executions: list[str] | None = None, role: str = "Inventory clerk"):
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    runs = executions if executions is not None else []

    @tool("lookup")
    def lookup(item: str) -> str:
        """Look up an item in the inventory."""
        runs.append(item)
        return f"item {item}: 12 units in warehouse W7, price $19.99. " + "detail " * 30

    agent = Agent(
        role=role,
        goal="answer stock questions",
        backstory="You know the warehouse.",
        llm=llm,
        tools=[lookup],
        verbose=False,
    )
    check = Task(name="check", description="Check items A1, B2 and C3.", expected_output="stock status", agent=agent)
    report = Task(name="report", description="Write a stock report.", expected_output="a report", agent=agent)
    return Crew(agents=[agent], tasks=[check, report], verbose=False)


def three_lookups_then_report():
    return [
        react_action("lookup", {"item": "A1"}),
        react_action("lookup", {"item": "B2"}),
        react_action("lookup", {"item": "C3"}),
        react_final("A1, B2 and C3 are in stock."),
        react_action("lookup", {"item": "D4"}),
        react_final("Report: all in stock."),
    ]


TRUNCATE = settings_from_dict({"strategies": ["truncate_last_n"], "truncate_last_n": {"rounds": 1, "always": True}})


def test_all_six_hooks_fire_at_their_nodes_with_neutral_objects():
    llm = scripted_llm(three_lookups_then_report())
    runs: list[str] = []
    crew = make_crew(llm, runs)
    recorder = HookRecorder()
    ctxlife.wrap(crew, TRUNCATE, session_id="s1", plugins=[recorder])
    out = crew.kickoff()
    assert out.raw == "Report: all in stock."
    assert runs == ["A1", "B2", "C3", "D4"]

    hooks = recorder.hooks()
    assert hooks[0] == "ctxlife_bootstrap"
    assert hooks.count("ctxlife_task_start") == 2 and hooks.count("ctxlife_task_end") == 2
    assert hooks.count("ctxlife_before_llm_call") == len(llm.calls) == 6
    assert hooks.count("ctxlife_before_tool_call") == hooks.count("ctxlife_after_tool_call") == 4
    # Order within the first task: start, then model/tool calls, then end.
    first_task = hooks[hooks.index("ctxlife_task_start") : hooks.index("ctxlife_task_end") + 1]
    assert first_task[:3] == ["ctxlife_task_start", "ctxlife_before_llm_call", "ctxlife_before_tool_call"]
    assert first_task[3] == "ctxlife_after_tool_call"

    boot = recorder.of("ctxlife_bootstrap")[0].snapshot
    assert boot["agent_role"] == "Inventory clerk" and boot["backstory"] == "You know the warehouse."
    assert boot["session_id"] == "s1"

    start = recorder.of("ctxlife_task_start")
    assert [c.snapshot["task_name"] for c in start] == ["check", "report"]
    assert [c.snapshot["task_index"] for c in start] == [0, 1]
    assert start[0].snapshot["context_text"] == ""
    assert "A1, B2 and C3 are in stock." in start[1].snapshot["context_text"]  # CrewAI passes task 1's output on

    before_tool = recorder.of("ctxlife_before_tool_call")[0].snapshot
    assert before_tool["tool_name"] == "lookup" and before_tool["tool_input"] == {"item": "A1"}
    assert before_tool["result"] is None
    after_tool = recorder.of("ctxlife_after_tool_call")[0].snapshot
    assert after_tool["result"].startswith("item A1: 12 units")

    end = recorder.of("ctxlife_task_end")
    assert end[0].snapshot["output"] == "A1, B2 and C3 are in stock."
    assert end[0].snapshot["messages"][0]["role"] == "system"

    llm_call = recorder.of("ctxlife_before_llm_call")[0]
    assert isinstance(llm_call.ctx, ctxlife.LLMCallContext)
    assert llm_call.snapshot["context_window"] == 8192 and llm_call.snapshot["agent_role"] == "Inventory clerk"
    assert llm_call.snapshot["task_name"] == "check"
    assert all(isinstance(m, dict) for m in llm_call.snapshot["messages"])


def test_the_model_receives_the_truncated_list():
    llm = scripted_llm(three_lookups_then_report())
    crew = make_crew(llm)
    ctxlife.wrap(crew, TRUNCATE)
    crew.kickoff()
    # Call 4 of task 1 (after three tool steps): system + pinned task + only the last round.
    fourth = llm.calls[3]
    roles = [m["role"] for m in fourth]
    assert roles[0] == "system" and fourth[1]["content"].strip().startswith("Current Task: Check items")
    user_turns = [m for m in fourth if m["role"] == "user"]
    assert len(user_turns) == 2  # the pinned task and the last round's user message
    assert not any("lookup" in (m.get("content") or "") and "A1" in (m.get("content") or "") for m in fourth)
    assert any("C3" in (m.get("content") or "") for m in fourth)


def test_unwrapped_crew_in_another_thread_is_untouched():
    managed_llm = scripted_llm(three_lookups_then_report())
    managed = make_crew(managed_llm)
    recorder = HookRecorder()
    ctxlife.wrap(managed, TRUNCATE, plugins=[recorder])

    plain_llm = scripted_llm(three_lookups_then_report())
    plain = make_crew(plain_llm, role="Other clerk")
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(crew):
        try:
            barrier.wait(timeout=10)
            crew.kickoff()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in (managed, plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert {c.snapshot["agent_role"] for c in recorder.calls} == {"Inventory clerk"}
    # The plain crew's model saw its full, growing history: no truncation.
    fourth = plain_llm.calls[3]
    assert sum(1 for m in fourth if m["role"] == "user") == 4
    assert any("A1" in (m.get("content") or "") for m in fourth if m["role"] == "assistant")
    # ... while the managed crew's did not.
    assert sum(1 for m in managed_llm.calls[3] if m["role"] == "user") == 2


def test_wrap_twice_is_a_no_op_and_unwrap_restores():
    llm = scripted_llm(three_lookups_then_report())
    crew = make_crew(llm)
    recorder = HookRecorder()
    assert ctxlife.wrap(crew, TRUNCATE, plugins=[recorder]) is crew
    host = host_of(crew)
    ctxlife.wrap(crew, TRUNCATE, plugins=[HookRecorder()])
    assert host_of(crew) is host
    crew.kickoff()
    assert recorder.hooks().count("ctxlife_before_llm_call") == 6

    ctxlife.unwrap(crew)
    assert host_of(crew) is None and "kickoff" not in crew.__dict__
    llm.set_script(three_lookups_then_report())
    before = len(recorder.calls)
    crew.kickoff()
    assert len(recorder.calls) == before
    assert sum(1 for m in llm.calls[-3] if m["role"] == "user") == 4  # no truncation any more


def test_kickoff_async_and_for_each_are_managed():
    llm = scripted_llm(three_lookups_then_report() * 3)
    crew = make_crew(llm)
    recorder = HookRecorder()
    ctxlife.wrap(crew, TRUNCATE, plugins=[recorder])
    asyncio.run(crew.kickoff_async())
    assert recorder.hooks().count("ctxlife_before_llm_call") == 6
    crew.kickoff_for_each(inputs=[{}, {}])
    assert recorder.hooks().count("ctxlife_before_llm_call") == 18
    assert recorder.hooks().count("ctxlife_task_end") == 6


def test_native_async_akickoff_is_managed():
    llm = scripted_llm(three_lookups_then_report())
    crew = make_crew(llm)
    recorder = HookRecorder()
    ctxlife.wrap(crew, TRUNCATE, plugins=[recorder])
    out = asyncio.run(crew.akickoff())
    assert out.raw == "Report: all in stock."
    assert recorder.hooks().count("ctxlife_before_llm_call") == 6
    assert sum(1 for m in llm.calls[3] if m["role"] == "user") == 2  # truncated


def test_a_failing_strategy_leaves_the_crew_working_and_is_reported():
    class Broken:
        name = "broken"

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            ctx.messages.clear()
            raise RuntimeError("boom")

    llm = scripted_llm(three_lookups_then_report())
    crew = make_crew(llm)
    ctxlife.wrap(crew, settings_from_dict({"strategies": []}), plugins=[Broken()])
    failures = []
    host_of(crew).listeners.append(lambda r: failures.extend(r.failures))
    out = crew.kickoff()
    assert out.raw == "Report: all in stock."
    assert all(len(call) >= 2 for call in llm.calls)  # the clear() was rolled back every time
    assert len(failures) == 6 and failures[0].strategy == "broken" and "RuntimeError: boom" in failures[0].error


def test_akickoff_never_waits_for_an_llm_summary_on_the_event_loop(loop_witness):
    """An LLM summary by the agent's own model under akickoff: the event loop keeps running (CrewAI 1.15
    runs the agent's steps, and so ctxlife's hooks, in worker threads), and the compaction is applied.
    Each summary returns only once the loop ran a callback meanwhile (tests/conftest.py LoopWitness)."""
    from collections import deque

    steps = deque([react_action("lookup", {"item": f"I{i}"}) for i in range(8)] + [react_final("All in stock.")])
    summaries: list[int] = []

    def is_summary_request(messages):
        return bool(messages) and "summar" in str(messages[0].get("content", "")).lower() and len(messages) == 2

    def reply(messages):
        if is_summary_request(messages):
            loop_witness.wait_for_the_loop()
            summaries.append(1)
            return "Items I0 to I5 were looked up; all are in stock in warehouse W7."
        return steps.popleft() if steps else react_final("All in stock.")

    llm = scripted_llm([reply] * 40, context_window=2500)
    crew = make_crew(llm)
    crew.tasks = crew.tasks[:1]
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "llm", "keep_rounds": 1, "min_gain_tokens": 20},
        }
    )
    ctxlife.wrap(crew, settings)
    reports = []
    host_of(crew).listeners.append(lambda r: reports.append(r) if r.node == "before_llm_call" else None)

    async def main():
        out = await crew.akickoff()
        await asyncio.sleep(0.5)  # a last summary may still be under way: give it the loop (not asserted)
        return out

    out = loop_witness.run(main)
    assert out.raw == "All in stock."
    assert summaries, "no summary was requested: the test no longer exercises the slow path"
    assert loop_witness.blocked == 0 and loop_witness.served >= 1
    assert [r for r in reports if "llm_summary" in r.acted]
    agent_calls = [c for c in llm.calls if not is_summary_request(c)]
    assert any(any(str(m.get("content", "")).startswith("History summary") for m in call) for call in agent_calls)
