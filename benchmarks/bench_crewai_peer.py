"""Question: what does CrewAI's own context handling do to a long agent run, and what does wrapping
the crew with ctxlife change?

Real crews (crewai, native tool calling) on ctxlife's scripted offline LLM replay recorded agent
conversations (tau-bench airline, 200 GPT-4o trajectories):

* the recording's system prompt becomes the agent's backstory, its first user turn the task;
* every assistant message with tool calls becomes a scripted reply with those tool calls, answered
  by replay tools returning the recorded results;
* an assistant message answered by a user turn becomes an ``ask_user`` tool call whose result is
  that turn (CrewAI has no mid-task user turns);
* the last assistant message is the final answer.

So the crew's k-th model call is the recording's k-th call, and the scripted LLM records exactly
what each call received. Modes (CrewAI 1.15, each as it ships):

* ``CrewAI unmanaged``: ``respect_context_window=False``, ``use_better_compaction=False``;
* ``CrewAI defaults`` (``respect_context_window=True``, ``use_better_compaction=True``): CrewAI 1.15
  as it ships. It summarizes when its estimate (4 characters a token, message text only) passes the
  usable window (0.85 x window), asking the agent's LLM for the summary; offline, the scripted LLM
  answers with ctxlife's extractive summary of the text CrewAI sends, within 600 tokens, and those
  calls are counted separately. Large tool results are deferred to a file with a preview;
* ``CrewAI + ctxlife llm_summary``: CrewAI defaults wrapped with ``ctxlife.wrap`` (``llm_summary``,
  extractive summarizer, threshold 0.4 of the same window).

Measured per call, with the retention question's definitions (``grading.py``; nothing of
ctxlife grades itself): tokens sent (tiktoken ``cl100k_base``, OpenAI chat accounting), calls over
the window, provider-invalid tool sequences, whether the task message is still there, and
**re-used arguments kept**: every value the recorded agent passed verbatim to a tool, having first
read it in an earlier message (and not in the system prompt); kept when the context sent at that
call holds it (case and whitespace ignored, not inside a longer word or number). CrewAI writes its
own prompt, so compare its rows with ``CrewAI unmanaged``, not with other sections.

Run: ``.venv/bin/python benchmarks/bench_crewai_peer.py [--quick]`` (prints the section; ``make
bench`` runs it as the ``crewai`` question, results in ``benchmarks/results/crewai.json``).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from grading import invalid_codes, kept, message_text, reused_argument_needs
from report.charts import color, pyplot, save
from report.fmt import n, pct, table, window

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"
WINDOWS = (4_000, 8_000)  # at 32k no tau-bench trajectory reaches any trigger
THRESHOLD = 0.4  # ctxlife's trigger when wrapped
SUMMARY_TOKENS = 600  # CrewAI's summaries (scripted) and llm_summary's, the same budget
CREWAI_SUMMARY_SYSTEM = "You are a precise assistant that creates structured summaries"
#: mode -> (respect_context_window, use_better_compaction, wrapped with ctxlife)
MODES: dict[str, tuple[bool, bool, bool]] = {
    "CrewAI unmanaged": (False, False, False),
    "CrewAI defaults": (True, True, False),
    "CrewAI + ctxlife llm_summary": (True, True, True),
}

Message = dict[str, Any]


# -- the recordings ----------------------------------------------------------------------------


def load(path: Path = DATA, limit: int | None = None) -> list[list[Message]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        trajectories = [item["traj"] for item in json.load(handle)]
    return trajectories[:limit]


def call_points(messages: list[Message]) -> list[int]:
    """Indices of the recorded assistant messages: the model was called with everything before each."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]


def _tool_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def script_for(messages: list[Message]) -> tuple[list[Any], dict[str, list[str]]]:
    """Scripted replies (one per call point) and the recorded results of each tool, in order."""
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
                script.append([_tool_call("ask_user", {"message": message.get("content") or ""}, f"ask_{k}")])
                queues.setdefault("ask_user", []).append(messages[k + 1].get("content") or "")
                k += 2
                continue
            script.append(message.get("content") or "Done.")
            break
        k += 1
    return script, queues


# -- running a crew ------------------------------------------------------------------------------


@dataclass
class Totals:
    calls: int = 0
    prompt_tokens: int = 0
    peak: int = 0
    over_window: int = 0
    compactions: int = 0
    invalid_calls: int = 0
    task_missing: int = 0
    reused_arguments: int = 0
    reused_arguments_kept: int = 0
    summary_calls: int = 0
    summary_prompt_tokens: int = 0
    seconds: float = 0.0
    per_call_tokens: list[int] = field(default_factory=list)

    def add(self, other: Totals) -> None:
        for name in self.__dataclass_fields__:
            if name == "peak":
                self.peak = max(self.peak, other.peak)
            elif name != "per_call_tokens":
                setattr(self, name, getattr(self, name) + getattr(other, name))


_METER: Any = None


def _meter() -> Any:
    global _METER
    if _METER is None:
        from ctxlife.tokens import TokenCounter

        _METER = TokenCounter(None)
    return _METER


_TOOL: type | None = None


def _replay_tool() -> type:
    global _TOOL
    if _TOOL is None:
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

        _TOOL = ReplayTool
    return _TOOL


def _is_summary_request(messages: list[Message]) -> bool:
    return bool(messages) and str(messages[0].get("content") or "").startswith(CREWAI_SUMMARY_SYSTEM)


_CONVERSATION = re.compile(r"<conversation>\n(.*)\n</conversation>", re.DOTALL)


def _scripted_summary(messages: list[Message]) -> str:
    from ctxlife.summarizers import SummaryRequest, get_summarizer

    text = str(messages[-1].get("content") or "")
    found = _CONVERSATION.search(text)
    body = found.group(1) if found else text
    request = SummaryRequest([{"role": "user", "content": body}], None, SUMMARY_TOKENS, _meter().count_text)
    return f"<summary>\n{get_summarizer('extractive').summarize(request)}\n</summary>"


def run_crew(messages: list[Message], window: int, mode: str) -> tuple[list[list[Message]], list[int], float]:
    """One recording as a crew: the agent's model calls, the summary requests' sizes, seconds."""
    from ctxlife.integrations.scripted import offline_environment, scripted_llm

    offline_environment()
    from crewai import Agent, Crew, Task

    import ctxlife
    from ctxlife.config import settings_from_dict

    respect, better_compaction, wrapped = MODES[mode]
    steps, queues = script_for(messages)
    remaining = list(steps)
    summaries: list[int] = []

    def reply(received: list[Message]) -> Any:
        if _is_summary_request(received):
            summaries.append(_meter().count_messages(received))
            return _scripted_summary(received)
        return remaining.pop(0) if remaining else "Done."

    tool = _replay_tool()
    tools = [tool(name=name, description=f"Recorded tool {name}.", queue=list(q)) for name, q in queues.items()]
    llm = scripted_llm([reply] * (len(steps) * 4 + 100), context_window=int(0.85 * window), native_tools=True)
    system = messages[0].get("content") if messages[0].get("role") == "system" else "You help users."
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
            source="bench_crewai_peer (CrewAI + ctxlife)",
        )
        ctxlife.wrap(crew, settings)
    started = time.perf_counter()
    crew.kickoff()
    seconds = time.perf_counter() - started
    return [c for c in llm.calls if not _is_summary_request(c)], summaries, seconds


_NEEDS: dict[int, tuple[list[Message], dict[int, list[Any]]]] = {}


def _needs(messages: list[Message]) -> dict[int, list[Any]]:
    """Call point -> the re-used argument needs there (computed once per recording)."""
    cached = _NEEDS.get(id(messages))
    if cached is None or cached[0] is not messages:
        by_call: dict[int, list[Any]] = {}
        for need in reused_argument_needs(messages):
            by_call.setdefault(need.call, []).append(need)
        cached = _NEEDS[id(messages)] = (messages, by_call)
    return cached[1]


def measure(
    messages: list[Message], calls: list[list[Message]], summaries: list[int], seconds: float, window: int
) -> Totals:
    """The crew's k-th agent call is the recording's k-th call point (a call after the script ends is left out)."""
    points = call_points(messages)
    needs = _needs(messages)
    calls = calls[: len(points)]
    task = next((m for m in calls[0] if m.get("role") == "user"), None) if calls else None
    totals = Totals(summary_calls=len(summaries), summary_prompt_tokens=sum(summaries), seconds=seconds)
    for point, context in zip(points, calls, strict=False):
        tokens = _meter().count_messages(context)
        totals.calls += 1
        totals.prompt_tokens += tokens
        totals.peak = max(totals.peak, tokens)
        totals.per_call_tokens.append(tokens)
        totals.over_window += tokens > window
        totals.invalid_calls += bool(invalid_codes(context))
        totals.task_missing += task is not None and task not in context
        if point in needs:
            text = "\n".join(message_text(m) for m in context)
            totals.reused_arguments += len(needs[point])
            totals.reused_arguments_kept += sum(kept(need, text) for need in needs[point])
    totals.compactions = sum(1 for a, b in pairwise(len(c) for c in calls) if b < a)
    return totals


def run(quick: bool = False) -> dict[str, Any]:
    """Every mode at every window over the recordings (CrewAI unmanaged once: it ignores the window)."""
    trajectories = load(limit=20 if quick else None)
    started = time.perf_counter()
    by_window: dict[int, dict[str, Totals]] = {w: {} for w in WINDOWS}
    for messages in trajectories:
        base = run_crew(messages, WINDOWS[0], "CrewAI unmanaged")
        for w in WINDOWS:
            results = {"CrewAI unmanaged": measure(messages, *base, w)}
            for mode in list(MODES)[1:]:
                results[mode] = measure(messages, *run_crew(messages, w, mode), w)
            for mode, totals in results.items():
                totals.per_call_tokens = []
                if mode in by_window[w]:
                    by_window[w][mode].add(totals)
                else:
                    by_window[w][mode] = totals
    return {
        "question": "CrewAI's own context handling vs the same crew wrapped with ctxlife",
        "data": {
            "name": "tau-bench airline (GPT-4o)",
            "path": str(DATA.relative_to(REPO)),
            "trajectories": len(trajectories),
        },
        "windows": list(WINDOWS),
        "threshold": THRESHOLD,
        "summary_tokens": SUMMARY_TOKENS,
        "results": {
            str(w): {mode: {k: v for k, v in asdict(t).items() if k != "per_call_tokens"} for mode, t in modes.items()}
            for w, modes in by_window.items()
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


# -- the report ----------------------------------------------------------------------------------


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def section(results: dict[str, Any]) -> str:
    data = results["data"]
    out = [
        f"Real crews (crewai, native tool calling) on ctxlife's scripted offline LLM replay {data['trajectories']} "
        f"recorded trajectories ({data['name']}, `{data['path']}`): the k-th model call of the crew is the "
        "recording's k-th call. Modes: **CrewAI unmanaged** (`respect_context_window=False`); **CrewAI defaults** "
        "(`respect_context_window=True`, `use_better_compaction=True`: CrewAI summarizes with the agent's LLM when "
        "its 4-characters-a-token estimate passes 0.85 × window; offline those summaries are ctxlife's extractive "
        f"summary of what CrewAI sends, within {results['summary_tokens']} tokens, counted as extra calls); "
        "**CrewAI + ctxlife llm_summary** (CrewAI defaults wrapped with "
        f"`ctxlife.wrap`, threshold {results['threshold']} of the same window). CrewAI writes its own prompt, so "
        "compare these rows with CrewAI unmanaged.\n",
        "*Re-used arguments kept*: values the recorded agent passed verbatim to a tool after reading them in an "
        "earlier message (not in the system prompt), counted as kept when the context sent at that call holds "
        "them (the retention question's definition, `benchmarks/grading.py`; no ctxlife code). *Invalid*: a tool "
        "result without its call, or a call never answered.\n",
    ]
    rows = []
    for w in results["windows"]:
        modes = results["results"][str(w)]
        base = modes["CrewAI unmanaged"]["prompt_tokens"]
        for mode, t in modes.items():
            rows.append(
                [
                    window(w),
                    mode,
                    n(t["calls"]),
                    n(t["prompt_tokens"]),
                    pct(_share(t["prompt_tokens"], base)),
                    n(t["peak"]),
                    n(t["over_window"]),
                    f"{n(t['summary_calls'])} ({n(t['summary_prompt_tokens'])})",
                    n(t["invalid_calls"]),
                    n(t["task_missing"]),
                    pct(_share(t["reused_arguments_kept"], t["reused_arguments"])),
                ]
            )
    out.append(
        table(
            [
                "window",
                "mode",
                "calls",
                "prompt tokens",
                "vs unmanaged",
                "peak",
                "over window",
                "summary calls (their tokens)",
                "invalid",
                "task missing",
                "re-used arguments kept",
            ],
            rows,
            "ll" + "r" * 9,
        )
    )
    out.append("![CrewAI's own handling and ctxlife, through real crews](benchmarks/crewai.png)\n")
    return "\n".join(out)


def summary(results: dict[str, Any]) -> list[str]:
    w = str(results["windows"][0])
    own = results["results"][w]["CrewAI defaults"]
    wrapped = results["results"][w]["CrewAI + ctxlife llm_summary"]
    return [
        f"CrewAI at a {window(w)} window (tau-bench airline, {results['data']['trajectories']} trajectories, real "
        f"crews): its defaults send {n(own['over_window'])} calls over the window and drop the task message on "
        f"{n(own['task_missing'])} calls, keeping {pct(_share(own['reused_arguments_kept'], own['reused_arguments']))} "
        f"of re-used arguments; wrapped with ctxlife `llm_summary`: {n(wrapped['over_window'])} over the window, "
        f"{n(wrapped['task_missing'])} without the task, "
        f"{pct(_share(wrapped['reused_arguments_kept'], wrapped['reused_arguments']))} kept."
    ]


def charts(results: dict[str, Any], out: Path) -> list[Path]:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    windows = [str(w) for w in results["windows"]]
    modes = list(MODES)
    width = 0.8 / len(modes)
    panels: list[tuple[str, Callable[[dict[str, Any], int], float]]] = [
        ("prompt tokens vs CrewAI unmanaged", lambda t, base: _share(t["prompt_tokens"], base) or 0),
        ("calls over the window", lambda t, base: t["over_window"]),
        ("re-used arguments kept", lambda t, base: _share(t["reused_arguments_kept"], t["reused_arguments"]) or 0),
    ]
    for i, mode in enumerate(modes):
        xs = [j + (i - len(modes) / 2 + 0.5) * width for j in range(len(windows))]
        for ax, (_, value) in zip(axes, panels, strict=True):
            ys = [
                value(results["results"][w][mode], results["results"][w]["CrewAI unmanaged"]["prompt_tokens"])
                for w in windows
            ]
            ax.bar(xs, ys, width, label=mode, color=color(mode))
    for ax, (title, _) in zip(axes, panels, strict=True):
        ax.set_xticks(range(len(windows)))
        ax.set_xticklabels([f"{int(w) // 1000}k" for w in windows])
        ax.set_xlabel("context window")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.25)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(modes), fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return [save(fig, out / "crewai.png")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 trajectories")
    args = parser.parse_args()
    print(section(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
