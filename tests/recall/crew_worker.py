"""A worker process for the recall end-to-end test: kickoffs of a chat crew in one session.

    python crew_worker.py STORE_URL SESSION OUT.json MESSAGE [MESSAGE ...]

Each MESSAGE is one kickoff (one user turn). The scripted model answers from what it is sent: to a
question about the spare key it answers with the hiding place if (and only if) its context holds it.
Writes the message lists the model received and the crew's outputs to OUT.json.
"""

from __future__ import annotations

import json
import re
import sys

from ctxlife.testing import offline_environment, react_final, scripted_llm

offline_environment()

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402


def answer_from_context(messages: list[dict]) -> str:
    """The model: answers the key question from its context, else says it does not know."""
    question = str(messages[-1].get("content") or "")
    if "spare key" not in question:
        return react_final("Noted, thanks for telling me.")
    context = "\n".join(str(m.get("content") or "") for m in messages[:-1])
    found = re.search(r"spare key is hidden ([^.\n]+)", context)
    return react_final(
        f"You said the spare key is hidden {found.group(1)}." if found else "I don't know where the key is."
    )


def main() -> None:
    store, session, out, *turns = sys.argv[1:]
    from crewai import Agent, Crew, Task

    llm = scripted_llm([answer_from_context] * (2 * len(turns)), context_window=2500, default=react_final("Noted."))
    agent = Agent(
        role="Companion", goal="chat with the user", backstory="A friendly companion.", llm=llm, verbose=False
    )
    task = Task(description="The user says: {message}", expected_output="a short reply", agent=agent)
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "llm_summary", "recall"],
            "store": store,
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
        }
    )
    ctxlife.wrap(crew, settings, session_id=session)
    outputs = [str(crew.kickoff(inputs={"message": message})) for message in turns]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"calls": llm.calls, "outputs": outputs}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
