"""tool_output on a real CrewAI crew (scripted model, no network). Only these tests need CrewAI: the
framework-neutral tool_output tests are in test_tool_output.py and run on a core-only install."""

from __future__ import annotations

import re
import stat

import pytest
from strategy_helpers import MARK_RE, big_text

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.testing import react_action, react_final, scripted_llm, tool_call
from ctxlife_strategies.tool_output import RECALL_TOOL

pytestmark = pytest.mark.imports("crewai")


def _observation(message: dict) -> str:
    content = message.get("content") or ""
    return content.split("\nObservation: ", 1)[1] if "\nObservation: " in content else ""


def _dump_crew(llm, text: str, runs: list[int]):
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    @tool("dump_table")
    def dump_table(table: str) -> str:
        """Dump a whole database table."""
        runs.append(1)
        return text

    agent = Agent(role="Analyst", goal="find the odd row", backstory="You read tables.", llm=llm, tools=[dump_table])
    task = Task(name="find", description="Find the row with the needle.", expected_output="the row", agent=agent)
    return Crew(agents=[agent], tasks=[task])


@pytest.mark.e2e
def test_a_200kb_result_reaches_the_model_capped_and_the_agent_recalls_the_elided_part(tmp_path, counter):
    text = big_text(3700)
    text = text[:120_000] + " NEEDLE-42 " + text[120_000:]
    assert len(text.encode()) >= 200_000
    cap = 300
    seen: dict[str, str] = {}

    def recall_elided(messages):
        match = MARK_RE.search(_observation(messages[-2]))  # the capped dump_table observation
        seen["ref"], seen["start"] = match.groups()
        return react_action(RECALL_TOOL, {"ref": seen["ref"], "start": seen["start"], "query": ""})

    def search_needle(messages):
        return react_action(RECALL_TOOL, {"ref": seen["ref"], "start": "0", "query": "NEEDLE-42"})

    llm = scripted_llm(
        [react_action("dump_table", {"table": "rows"}), recall_elided, search_needle, react_final("row found")]
    )
    runs: list[int] = []
    crew = _dump_crew(llm, text, runs)
    config = settings_from_dict(
        {"strategies": ["tool_output"], "tool_output": {"max_tokens": cap, "store_dir": str(tmp_path / "out")}}
    )
    ctxlife.wrap(crew, config)
    assert crew.kickoff().raw == "row found"
    assert runs == [1] and len(llm.calls) == 4

    # 1. The model saw the 200 KB result as at most `cap` tokens, with the marker.
    capped = _observation(llm.calls[1][-2])
    assert counter.count_text(capped) <= cap
    assert "tokens elided here" in capped and text.startswith(capped.partition("\n[... ctxlife")[0])

    # 2. The agent called ctxlife_recall and received exactly the elided text from where the cut began.
    page = _observation(llm.calls[2][-2])
    body, _, footer = page.partition("\n[ctxlife_recall: characters ")
    start = int(seen["start"])
    assert len(body) > 100 and text[start : start + len(body)] == body
    assert counter.count_text(body + "\n[ctxlife_recall: characters " + footer) <= cap
    assert "Next page" in footer

    # 3. It can search the whole result: the needle, from the elided middle, comes back with its offset.
    found = _observation(llm.calls[3][-2])
    offset = int(re.search(r"@(\d+): ", found).group(1))
    assert text[offset : offset + 9] == "NEEDLE-42" and 120_000 <= offset <= 120_001

    # The full result is on disk, owner-only.
    saved = tmp_path / "out" / f"{seen['ref']}.txt"
    assert saved.read_text(encoding="utf-8") == text and stat.S_IMODE(saved.stat().st_mode) == 0o600


@pytest.mark.e2e
def test_native_tool_calling_results_are_capped_too(tmp_path, counter):
    llm = scripted_llm([[tool_call("dump_table", {"table": "rows"}, "c1")], "done"], native_tools=True)
    runs: list[int] = []
    crew = _dump_crew(llm, big_text(2000), runs)
    config = settings_from_dict(
        {"strategies": ["tool_output"], "tool_output": {"max_tokens": 200, "store_dir": str(tmp_path)}}
    )
    ctxlife.wrap(crew, config)
    assert crew.kickoff().raw == "done"
    tool_message = llm.calls[1][-1]
    assert tool_message["role"] == "tool" and counter.count_text(tool_message["content"]) <= 200


@pytest.mark.e2e
def test_the_recall_tool_reaches_tasks_built_before_wrap(tmp_path):
    llm = scripted_llm([react_final("done")])
    crew = _dump_crew(llm, "x", [])
    config = settings_from_dict({"strategies": ["tool_output"], "tool_output": {"store_dir": str(tmp_path)}})
    ctxlife.wrap(crew, config)
    crew.kickoff()
    assert f"Tool Name: {RECALL_TOOL}" in llm.calls[0][0]["content"]


@pytest.mark.e2e
def test_with_sessions_on_the_result_lives_in_the_session_and_the_agent_recalls_it(tmp_path):
    text = big_text(2000)
    seen: dict[str, str] = {}

    def recall_with_the_ref_only(messages):
        seen["ref"] = MARK_RE.search(_observation(messages[-2])).group(1)
        return react_action(RECALL_TOOL, {"ref": seen["ref"]})  # start and query left out

    llm = scripted_llm([react_action("dump_table", {"table": "rows"}), recall_with_the_ref_only, react_final("ok")])
    crew = _dump_crew(llm, text, [])
    config = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "tool_output"],
            "store": f"file://{tmp_path / 'sessions'}",
            "tool_output": {"max_tokens": 300, "store_dir": str(tmp_path / "workspace")},
        }
    )
    ctxlife.wrap(crew, config, session_id="s1")
    assert crew.kickoff().raw == "ok"
    page = _observation(llm.calls[2][-2])
    assert page.startswith(text[:100]) and "Next page" in page
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path / 'sessions'}") as store:
        assert store.get_blob("s1", seen["ref"]) == text
    assert not (tmp_path / "workspace").exists()
