"""CrewAI's own context handling (``respect_context_window``), through real crews on a scripted LLM.

Each recording is turned into one CrewAI task run by one agent in native tool-calling mode:

* the recording's system prompt becomes the agent's backstory, its first user turn the task;
* every assistant message with tool calls becomes a scripted reply with those tool calls; the
  recorded results come back from replay tools of the same names;
* an assistant message answered by a user turn becomes a call of an ``ask_user`` tool whose
  result is the user's reply (CrewAI has no mid-task user turns; this is how a conversational
  agent is written for it);
* the last assistant message is the final answer.

So the k-th model call of the crew is the k-th call point of the recording. The scripted LLM
(:func:`ctxlife.testing.scripted_llm`) records every message list it receives; those are
measured with the same meter as the other methods. Three runs per recording and window:

* ``CrewAI unmanaged``: ``respect_context_window=False``, the cost ceiling in CrewAI's encoding;
* ``CrewAI respect_context_window``: CrewAI 1.15's own handling. It summarizes with the agent's
  LLM when its estimate (4 characters a token, message text only) passes the usable window
  (crewai.LLM applies 0.85 to the model's window; the scripted LLM is given 0.85 x window).
  The scripted LLM answers those summary requests with ctxlife's extractive summary of the
  text CrewAI asks it to summarize, within 600 tokens (the same budget as ``llm_summary``);
* ``CrewAI + ctxlife llm_summary``: the same crew wrapped with ``ctxlife.wrap`` (extractive
  summarizer, threshold 0.4 of the same window), CrewAI's own handling still on.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from bench_methods import SUMMARY_TOKENS, THRESHOLD, FactUse, MethodTotals, _meter, fact_uses, measure_call

from ctxlife.replay import Conversation, call_points
from ctxlife.testing import offline_environment, tool_call

CREWAI_SUMMARY_SYSTEM = "You are a precise assistant that creates structured summaries"
#: mode -> (respect_context_window, use_better_compaction, wrapped with ctxlife)
MODES: dict[str, tuple[bool, bool, bool]] = {
    "CrewAI unmanaged": (False, False, False),
    "CrewAI respect_context_window": (True, False, False),
    "CrewAI defaults": (True, True, False),
    "CrewAI + ctxlife llm_summary": (True, True, True),
}

_tool_class: type | None = None


def _replay_tool_class() -> type:
    global _tool_class
    if _tool_class is None:
        offline_environment()
        from crewai.tools import BaseTool
        from pydantic import BaseModel, ConfigDict

        class AnyArgs(BaseModel):
            model_config = ConfigDict(extra="allow")

        class ReplayTool(BaseTool):
            """Returns the recorded results of one tool, in order."""

            args_schema: type[BaseModel] = AnyArgs
            queue: list[str] = []  # noqa: RUF012 - a pydantic field: each tool gets its own list

            def _run(self, **kwargs: Any) -> str:
                return self.queue.pop(0) if self.queue else "(no recorded result)"

        _tool_class = ReplayTool
    return _tool_class


def script_for(messages: list[dict[str, Any]]) -> tuple[list[Any], dict[str, list[str]]]:
    """Scripted replies (one per call point) and the recorded results of each tool."""
    script: list[Any] = []
    queues: dict[str, list[str]] = {}
    k = 2  # after the system prompt and the task
    while k < len(messages):
        message = messages[k]
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            script.append([copy.deepcopy(c) for c in calls])
            j = k + 1
            for call in calls:
                if j < len(messages) and messages[j].get("role") == "tool":
                    queues.setdefault(call["function"]["name"], []).append(messages[j].get("content") or "")
                    j += 1
            k = j
            continue
        if message.get("role") == "assistant":
            if k + 2 < len(messages) and messages[k + 1].get("role") == "user":
                script.append([tool_call("ask_user", {"message": message.get("content") or ""}, f"ask_{k}")])
                queues.setdefault("ask_user", []).append(messages[k + 1].get("content") or "")
                k += 2
                continue
            script.append(message.get("content") or "Done.")
            break
        k += 1
    return script, queues


def _is_summary_request(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and str(messages[0].get("content") or "").startswith(CREWAI_SUMMARY_SYSTEM)


_CONVERSATION_RE = re.compile(r"<conversation>\n(.*)\n</conversation>", re.DOTALL)


def _scripted_summary(messages: list[dict[str, Any]]) -> str:
    from ctxlife.summarizers import SummaryRequest, get_summarizer

    text = str(messages[-1].get("content") or "")
    found = _CONVERSATION_RE.search(text)
    body = found.group(1) if found else text
    summary = get_summarizer("extractive").summarize(
        SummaryRequest([{"role": "user", "content": body}], None, SUMMARY_TOKENS, _meter().count_text)
    )
    return f"<summary>\n{summary}\n</summary>"


@dataclass
class CrewRun:
    """The model calls of one crew run: the agent's (in order) and the summary requests' sizes."""

    calls: list[list[dict[str, Any]]]
    summary_tokens: list[int]
    steps: int
    seconds: float


def run_crew(conversation: Conversation, window: int, mode: str) -> CrewRun:
    """Run one recording as a crew on the scripted LLM; return what the LLM received."""
    offline_environment()
    from crewai import Agent, Crew, Task

    import ctxlife
    from ctxlife.config import settings_from_dict
    from ctxlife.testing import scripted_llm

    respect, better_compaction, wrapped = MODES[mode]
    messages = conversation.messages
    steps, queues = script_for(messages)
    remaining = list(steps)
    summary_tokens: list[int] = []

    def reply(received: list[dict[str, Any]]) -> Any:
        if _is_summary_request(received):
            summary_tokens.append(_meter().count_messages(received))
            return _scripted_summary(received)
        return remaining.pop(0) if remaining else "Done."

    tool_cls = _replay_tool_class()
    tools = [tool_cls(name=name, description=f"Recorded tool {name}.", queue=list(q)) for name, q in queues.items()]
    llm = scripted_llm([reply] * (len(steps) * 4 + 100), context_window=int(0.85 * window), native_tools=True)
    system = messages[0].get("content") if messages and messages[0].get("role") == "system" else "You help users."
    task_text = next((m.get("content") for m in messages if m.get("role") == "user"), "Help the user.")
    agent = Agent(
        role="Agent",
        goal="Complete the user's request.",
        backstory=str(system),
        llm=llm,
        tools=tools,
        verbose=False,
        max_iter=len(steps) + 50,
        respect_context_window=respect,
        use_better_compaction=better_compaction,
    )
    task = Task(description=str(task_text), expected_output="The outcome for the user.", agent=agent)
    crew = Crew(agents=[agent], tasks=[task], verbose=False)
    if wrapped:
        settings = settings_from_dict(
            {
                "strategies": ["llm_summary"],
                "threshold": THRESHOLD,
                "context_window": window,
                "llm_summary": {"summarizer": "extractive", "max_summary_tokens": SUMMARY_TOKENS},
            },
            source="bench (CrewAI + ctxlife)",
        )
        ctxlife.wrap(crew, settings)
    started = time.perf_counter()
    crew.kickoff()
    seconds = time.perf_counter() - started
    calls = [c for c in llm.calls if not _is_summary_request(c)]
    return CrewRun(calls, summary_tokens, len(steps), seconds)


def measure_run(run: CrewRun, conversation: Conversation, window: int) -> MethodTotals:
    """Measure a crew run's agent calls like every other method's contexts.

    The k-th agent call is the k-th call point of the recording; a crew that makes one more call
    after the script ends (recordings that end on a tool result) has that call left out.
    """
    messages = conversation.messages
    points = list(call_points(messages))
    calls = run.calls[: len(points)]
    uses_at: dict[int, list[FactUse]] = {}
    for use in fact_uses(messages):
        uses_at.setdefault(use.call, []).append(use)
    totals = MethodTotals()
    task_message = next((m for m in calls[0] if m.get("role") == "user"), None) if calls else None
    previous: list[dict[str, Any]] | None = None
    for index, context in enumerate(calls):
        measure_call(totals, context, previous, window, task_message, uses_at.get(points[index], []), False)
        previous = context
    sizes = [len(c) for c in calls]
    totals.compactions = sum(1 for a, b in pairwise(sizes) if b < a)
    totals.summary_calls = len(run.summary_tokens)
    totals.summary_prompt_tokens = sum(run.summary_tokens)
    totals.seconds = run.seconds
    return totals


def run_suite(
    conversations: list[Conversation], windows: list[int], modes: list[str] | None = None
) -> dict[int, dict[str, dict[str, Any]]]:
    """Totals per window and mode. ``CrewAI unmanaged`` does not depend on the window: run once."""
    out: dict[int, dict[str, MethodTotals]] = {w: {} for w in windows}
    short: dict[tuple[int, str], int] = {}
    for mode in modes or list(MODES):
        for window in windows if mode != "CrewAI unmanaged" else windows[:1]:
            for conversation in conversations:
                run = run_crew(conversation, window, mode)
                targets = windows if mode == "CrewAI unmanaged" else [window]
                for w in targets:
                    totals = measure_run(run, conversation, w)
                    if totals.calls < len(list(call_points(conversation.messages))):
                        short[(w, mode)] = short.get((w, mode), 0) + 1
                    if mode not in out[w]:
                        out[w][mode] = totals
                    else:
                        out[w][mode].add(totals)
    return {
        w: {mode: {**t.as_dict(), "runs_with_fewer_calls": short.get((w, mode), 0)} for mode, t in by_mode.items()}
        for w, by_mode in out.items()
    }


def session_series(conversation: Conversation, window: int, mode: str) -> list[int]:
    """Context tokens of every agent call of one crew run (for the per-call chart)."""
    run = run_crew(conversation, window, mode)
    meter = _meter()
    return [meter.count_messages(c) for c in run.calls[: len(list(call_points(conversation.messages)))]]
