"""Many agents, one session: real CrewAI crews (hierarchical, ``async_execution`` tasks) on the scripted
offline LLM record every message once, per agent-and-task view, and a restart in a new process gives
each agent its own context back.

What each agent *saw* is taken from the scripted LLM's own log of the lists it received (CrewAI's
side), never from ctxlife: the raw history of a view must be exactly the conversation of that agent
on that task (every message it was sent, then its last reply), once.

Also a worker: ``python test_multi_agent.py CREW STORE_URL SESSION ROUND OUT.json`` runs one kickoff
of CREW ("async" or "hierarchical") and writes the lists its model calls received.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxlife.testing import offline_environment, react_action, react_final, scripted_llm

offline_environment()

SRC = Path(__file__).resolve().parents[2] / "src"
TOPICS = {"Research topic Alpha": "Alpha", "Research topic Beta": "Beta"}


def _first_user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")


def _current_task(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The latest task in a list (restored conversations come first) and the replies given since."""
    for i in range(len(messages) - 1, -1, -1):
        text = str(messages[i].get("content") or "")
        if messages[i].get("role") == "user" and ("Current Task" in text or "round" in text):
            return text, sum(1 for m in messages[i:] if m.get("role") == "assistant")
    return _first_user(messages), 0


def brain(messages: list[dict[str, Any]]) -> str:
    """The model of every worker agent: a researcher looks its topic up once, then answers."""
    task, replies = _current_task(messages)
    for needle, topic in TOPICS.items():
        if needle in task:
            if replies == 0:
                return react_action("lookup", {"item": topic}, thought=f"I should look {topic} up.")
            return react_final(f"{topic} is fine (checked).")
    if "find facts" in task:
        return react_final("Fact: X was founded in 1901.")
    return react_final("Report written from the notes.")


def manager(messages: list[dict[str, Any]]) -> str:
    """The manager of the hierarchical crew: delegate once per round, then answer from the result."""
    task = [
        str(m.get("content") or "")
        for m in messages
        if m.get("role") == "user" and "Report on topic X" in str(m.get("content"))
    ]
    found = re.search(r"\(round \d+\)", task[-1] if task else "")
    this_round = found.group(0) if found else ""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if this_round and this_round in str(messages[i].get("content"))), 0
    )
    if not any(m.get("role") == "assistant" for m in messages[last:]):
        return react_action(
            "Delegate work to coworker",
            {"task": f"find facts about X {this_round}", "context": "topic X", "coworker": "Researcher"},
            thought="The researcher should do this.",
        )
    return react_final(f"Report on X {this_round}: founded in 1901.")


def build(kind: str, llm: Any, manager_llm: Any = None) -> Any:
    from crewai import Agent, Crew, Process, Task
    from crewai.tools import tool

    @tool("lookup")
    def lookup(item: str) -> str:
        """Look a topic up."""
        return f"{item}: status nominal, 3 sources."

    if kind == "async":
        a = Agent(role="Researcher", goal="research", backstory="Careful.", llm=llm, tools=[lookup], verbose=False)
        b = Agent(role="Analyst", goal="analyse", backstory="Quick.", llm=llm, tools=[lookup], verbose=False)
        w = Agent(role="Writer", goal="write", backstory="Clear.", llm=llm, verbose=False)
        t0 = Task(
            description="Research topic Alpha (round {round}).", expected_output="notes", agent=a, async_execution=True
        )
        t1 = Task(
            description="Research topic Beta (round {round}).", expected_output="notes", agent=b, async_execution=True
        )
        t2 = Task(
            description="Write the report (round {round}).", expected_output="a report", agent=w, context=[t0, t1]
        )
        return Crew(agents=[a, b, w], tasks=[t0, t1, t2], verbose=False)
    r = Agent(role="Researcher", goal="research", backstory="Careful.", llm=llm, allow_delegation=False, verbose=False)
    t = Task(description="Report on topic X (round {round}).", expected_output="a report")
    return Crew(agents=[r], tasks=[t], process=Process.hierarchical, manager_llm=manager_llm, verbose=False)


def run_crew(kind: str, store_url: str, session: str, round_: int) -> list[list[dict[str, Any]]]:
    """One kickoff of a wrapped crew; returns every list a model call received, with the reply appended."""
    import ctxlife
    from ctxlife.config import settings_from_dict

    log: list[list[dict[str, Any]]] = []

    def logged(fn: Any) -> Any:
        def reply(messages: list[dict[str, Any]]) -> str:
            text = str(fn(messages))
            log.append([*(dict(m) for m in messages), {"role": "assistant", "content": text}])
            return text

        return reply

    llm = scripted_llm([logged(brain)] * 40, default=react_final("Done."))
    manager_llm = scripted_llm([logged(manager)] * 10, default=react_final("Done.")) if kind != "async" else None
    crew = build(kind, llm, manager_llm)
    settings = settings_from_dict({"store": store_url, "strategies": ["snapshot_restore"]})
    ctxlife.wrap(crew, settings, session_id=session)
    try:
        crew.kickoff(inputs={"round": str(round_)})
    finally:
        ctxlife.unwrap(crew)
    return log


def agent_of(call: list[dict[str, Any]]) -> str:
    """Which agent a call is from: its system prompt (CrewAI's "You are ROLE. ...")."""
    return next((str(m.get("content")) for m in call if m.get("role") == "system"), "")


def final_answer(reply: dict[str, Any]) -> dict[str, Any]:
    """A final ReAct reply as the conversation keeps it: the answer CrewAI's own parser reads from it."""
    from crewai.agents.parser import AgentFinish, parse

    parsed = parse(str(reply["content"]))
    return {"role": "assistant", "content": parsed.output} if isinstance(parsed, AgentFinish) else reply


def conversations(log: list[list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each agent's conversation in one run (one task per agent here): the longest list it was sent,
    then its final answer."""
    found: dict[str, list[dict[str, Any]]] = {}
    for call in log:
        key = agent_of(call)
        if len(call) >= len(found.get(key, [])):
            found[key] = call
    return {key: [*call[:-1], final_answer(call[-1])] for key, call in found.items()}


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(str(m.get("role")), str(m.get("content"))) for m in messages]


def without_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") != "system"]


if __name__ == "__main__":
    # KINDS (comma-separated) URL SESSION ROUND OUT: one kickoff of each kind of crew, each in the
    # session "SESSION-KIND" (one process, CrewAI imported once); OUT gets {kind: log}.
    kinds, url, sid, rnd, out = sys.argv[1:6]
    logs = {kind: run_crew(kind, url, f"{sid}-{kind}", int(rnd)) for kind in kinds.split(",")}
    Path(out).write_text(json.dumps(logs), encoding="utf-8")
    sys.exit(0)

import pytest  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.imports("crewai")]

from ctxlife.sessions import open_store  # noqa: E402


def records_by_view(store_url: str, session: str) -> dict[str, list[dict[str, Any]]]:
    views: dict[str, list[dict[str, Any]]] = {}
    with open_store(store_url) as store:
        for record in store.read_records(session):
            views.setdefault(record.view, []).append(record.message)
    return views


def check_once_per_view(store_url: str, session: str, log: list[list[dict[str, Any]]]) -> tuple[int, int]:
    """Each view's records are exactly one agent's conversation, in order; returns (records, messages)."""
    views = records_by_view(store_url, session)
    expected = sorted(shown(without_system(c)) for c in conversations(log).values())
    recorded = sorted(shown(messages) for messages in views.values())
    assert recorded == expected
    return sum(map(len, views.values())), sum(map(len, expected))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["async", "hierarchical"])
def test_every_message_is_recorded_once_in_its_agents_view(kind: str, store_url: str) -> None:
    log = run_crew(kind, store_url, "crew", 1)
    records, messages = check_once_per_view(store_url, "crew", log)
    assert records == messages
    with open_store(store_url) as store:
        seqs = [r.seq for r in store.read_records("crew")]
    assert seqs == list(range(1, len(seqs) + 1))  # one ordered log of the whole crew


@pytest.mark.slow
def test_a_restart_in_a_new_process_gives_each_agent_its_own_context(make_url: Any, tmp_path: Path) -> None:
    url = make_url("file")
    kinds = ["async", "hierarchical"]
    logs = []
    for round_ in (1, 2):
        out = tmp_path / f"round{round_}.json"
        proc = subprocess.run(
            [sys.executable, __file__, ",".join(kinds), url, "crew", str(round_), str(out)],
            capture_output=True,
            text=True,
            env=dict(
                os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
            ),
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        logs.append(json.loads(out.read_text(encoding="utf-8")))
    for kind in kinds:
        before = {agent: without_system(c) for agent, c in conversations(logs[0][kind]).items()}
        assert len(before) == (3 if kind == "async" else 2), kind
        for agent, own in before.items():
            opening = next(c for c in logs[1][kind] if agent_of(c) == agent)  # its first call after the restart
            sent = without_system(opening[:-1])
            assert shown(sent[: len(own)]) == shown(own), (kind, agent)  # its own conversation, exactly
            assert len(sent) == len(own) + 1 and "(round 2)" in str(sent[-1]["content"]), (kind, agent)  # + the task


@pytest.mark.slow
def test_crews_in_several_threads_on_one_session_record_each_agent_once(store_url: str) -> None:
    """Three threads, each running its own wrapped crew (its own host and store object) on one session,
    two kickoffs each: every agent's view holds its conversation (both rounds) exactly once."""
    import threading

    from crewai import Agent, Crew, Task

    import ctxlife
    from ctxlife.config import settings_from_dict

    logs: list[list[dict[str, Any]]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def worker(i: int) -> None:
        try:

            def reply(messages: list[dict[str, Any]]) -> str:
                text = str(brain(messages))
                logs.append([*(dict(m) for m in messages), {"role": "assistant", "content": text}])
                return text

            llm = scripted_llm([reply] * 10, default=react_final("Done."))
            agent = Agent(role=f"Clerk {i}", goal="write", backstory=f"Clerk number {i}.", llm=llm, verbose=False)
            task = Task(description=f"Write the report {i} (round {{round}}).", expected_output="text", agent=agent)
            crew = Crew(agents=[agent], tasks=[task], verbose=False)
            ctxlife.wrap(
                crew, settings_from_dict({"store": store_url, "strategies": ["snapshot_restore"]}), session_id="shared"
            )
            start.wait()
            for round_ in (1, 2):
                crew.kickoff(inputs={"round": str(round_)})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    records, messages = check_once_per_view(store_url, "shared", logs)
    assert records == messages == 3 * 4  # per clerk: task 1, answer 1, task 2, answer 2


@pytest.mark.parametrize("strategies", [["truncate_last_n"], ["snapshot_restore"]])
def test_kickoffs_that_repeat_the_same_task_are_each_recorded(strategies: list[str], tmp_path: Path) -> None:
    """The same crew kicked off three times with the same inputs in one process: each kickoff is a
    new turn of the session (its task message and its answer recorded again), never an edit that
    removes the last kickoff's answer nor a retry that drops its question; with snapshot_restore the
    model sees the earlier kickoffs restored in front."""
    from crewai import Agent, Crew, Task

    import ctxlife
    from ctxlife.config import settings_from_dict

    sizes: list[int] = []

    def reply(messages: list[dict[str, Any]]) -> str:
        sizes.append(len(messages))
        return react_final(f"Answer {len(sizes)}.")

    llm = scripted_llm([reply] * 5, default=react_final("Done."))
    agent = Agent(role="Clerk", goal="write", backstory="Clerk.", llm=llm, verbose=False)
    task = Task(description="Write the daily report.", expected_output="text", agent=agent)
    crew = Crew(agents=[agent], tasks=[task])
    url = f"sqlite:///{tmp_path}/s.db"
    ctxlife.wrap(crew, settings_from_dict({"store": url, "strategies": strategies}), session_id="daily")
    try:
        for _ in range(3):
            crew.kickoff()
    finally:
        ctxlife.unwrap(crew)
    with open_store(url) as store:
        records = store.read_records("daily")
    assert [r.op for r in records] == ["add"] * 6
    assert [(r.message["role"], r.message["content"]) for r in records[1::2]] == [
        ("assistant", f"Answer {n}.") for n in (1, 2, 3)
    ]
    assert all(r.message["role"] == "user" and "Write the daily report." in r.message["content"] for r in records[::2])
    assert sizes == ([2, 4, 6] if strategies == ["snapshot_restore"] else [2, 2, 2])
