"""A worker process for the restore tests: runs kickoffs of a chat crew in one session.

    python session_worker.py STORE_URLS SESSION OUT.json MESSAGE [MESSAGE ...]

STORE_URLS is a JSON list of store URLs: the same kickoffs run once per store, each with its own
crew (one process imports CrewAI once for all of them). Each MESSAGE is one kickoff (one user
turn). Writes to OUT.json, for each store URL, the message lists the scripted model received, so
the parent process can compare them with the store.
"""

from __future__ import annotations

import json
import sys

from ctxlife.testing import offline_environment, react_action, react_final, scripted_llm

offline_environment()

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402


def main() -> None:
    stores, session, out, *turns = sys.argv[1:]
    calls = {store: run(store, session, turns) for store in json.loads(stores)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(calls, f)


def run(store: str, session: str, turns: list[str]) -> list[object]:
    """The kickoffs on a crew wrapped with snapshot_restore on ``store``; the model's calls."""
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    @tool("lookup")
    def lookup(item: str) -> str:
        """Look up an item in the inventory."""
        return f"item {item}: 12 units in warehouse W7"

    replies = []
    for i, _ in enumerate(turns):
        replies += [react_action("lookup", {"item": f"A{i}"}), react_final(f"Answer {i}: A{i} has 12 units.")]
    llm = scripted_llm(replies)
    agent = Agent(
        role="Assistant",
        goal="help the user",
        backstory="You help with stock questions.",
        llm=llm,
        tools=[lookup],
        verbose=False,
    )
    task = Task(description="The user says: {message}", expected_output="a helpful reply", agent=agent)
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store})
    ctxlife.wrap(crew, settings, session_id=session)
    for message in turns:
        crew.kickoff(inputs={"message": message})
    return list(llm.calls)


if __name__ == "__main__":
    main()
