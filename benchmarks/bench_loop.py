"""The 1,000-turn loop: what a user of an agent feels per turn, ctxlife next to the peers as their docs set them up.

One conversation of ``TURNS`` turns (the synthetic veterinary front-desk agent of ``synthetic_agent.py``,
seeds 1, 2, ... one after the other: per turn a user message, usually a tool call with its JSON result, and
a reply), played through three systems **interleaved by turn in one process** (turn 1 through each, then
turn 2 through each, the order rotating every turn), so the machine's load falls on all three alike. The
model is fake and free (it replies from the script), so what is measured is the system around it:

* ``ctxlife``: LangChain ``create_agent`` with ``CtxlifeMiddleware`` (``snapshot_restore`` + ``llm_summary``
  (extractive summarizer) + ``recall``, a ``sqlite://`` store, no checkpointer: each turn sends only the new
  user message and the session is restored from the store, as docs/integrations.md describes);
* ``langchain``: the same agent with LangChain's ``SummarizationMiddleware`` (its summary model fake too,
  trigger at the same token line, its default ``keep``) and LangGraph's ``SqliteSaver`` checkpointer, as
  LangChain's docs build one;
* ``agents_sdk``: the OpenAI Agents SDK's ``SQLiteSession`` as its docs use it around each model call:
  ``get_items()`` before, ``add_items()`` after (storage only: it manages no context).

Each system's store is a SQLite file on local disk. Figures: CPU time of a whole turn
(``time.process_time``: the agent's ``invoke``, or the SDK's reads and writes), median (p50) and 99th
percentile over the turns, and the total; the ratios are ctxlife's over each peer's, measured in the same
run. The conversation is played ``RUNS`` (3) times; the figures are the medians of the runs and the ratios come
with their spread. ``--quick`` plays 200 turns.

Run: ``.venv/bin/python benchmarks/bench_loop.py [--quick] [--turns N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import synthetic_agent
from provenance import stamp

TURNS = 1_000
WINDOW = 16_000
THRESHOLD = 0.4  # ctxlife's default line; the LangChain peer's trigger is the same number of tokens
SYSTEMS = ("ctxlife", "langchain", "agents_sdk")
SYSTEM_PROMPT = "You are the front-desk assistant of a veterinary clinic. Use the tools to look things up."


def turns(count: int) -> list[list[dict[str, Any]]]:
    """``count`` turns, each a list of OpenAI chat messages (user first), from seeds 1, 2, ..."""
    out: list[list[dict[str, Any]]] = []
    seed = 1
    while len(out) < count:
        for turn in synthetic_agent.generate(seed).turns:
            messages = list(turn.messages)
            if not any(m["role"] == "assistant" for m in messages):  # every turn gets a model call and a reply
                messages.append({"role": "assistant", "content": "Noted."})
            out.append(messages)
        seed += 1
    return out[:count]


# -- the LangChain agents -------------------------------------------------------------------------


def _replies(script: list[list[dict[str, Any]]]) -> Iterator[Any]:
    """The assistant messages of every turn, in order, as LangChain messages (what the fake model says)."""
    from langchain_core.messages import AIMessage

    for turn in script:
        for message in turn:
            if message["role"] != "assistant":
                continue
            calls = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"] or "{}"), "id": c["id"]}
                for c in message.get("tool_calls") or []
            ]
            yield AIMessage(content=message.get("content") or "", tool_calls=calls)


def _tools(script: list[list[dict[str, Any]]]) -> list[Any]:
    """One LangChain tool per tool name of the script, answering with the script's results in order."""
    from langchain_core.tools import StructuredTool

    results: dict[str, list[str]] = {}
    schemas: dict[str, dict[str, Any]] = {}
    for turn in script:
        names = {}
        for message in turn:
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
                schema = schemas.setdefault(call["function"]["name"], {"type": "object", "properties": {}})
                for key in json.loads(call["function"]["arguments"] or "{}"):
                    schema["properties"][key] = {"type": "string"}
            if message["role"] == "tool":
                results.setdefault(names.get(message["tool_call_id"], ""), []).append(message["content"])

    def answering(name: str) -> Any:
        pending = iter(results.get(name, []))

        def run(**_: Any) -> str:
            return next(pending, "{}")

        return StructuredTool.from_function(
            func=run, name=name, description=f"{name} (scripted)", args_schema=schemas[name]
        )

    return [answering(name) for name in schemas]


def langchain_agents(script: list[list[dict[str, Any]]], workdir: Path) -> dict[str, Any]:
    import sqlite3

    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
    from langgraph.checkpoint.sqlite import SqliteSaver

    from ctxlife.config import settings_from_dict
    from ctxlife.integrations.langchain import CtxlifeMiddleware

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "llm_summary", "recall"],
            "threshold": THRESHOLD,
            "store": f"sqlite:///{workdir / 'ctxlife.db'}",
            "llm_summary": {"summarizer": "extractive"},
        },
        source="bench_loop",
    )
    ctxlife_agent = create_agent(
        FakeModel(messages=_replies(script)),
        _tools(script),
        system_prompt=SYSTEM_PROMPT,
        middleware=[CtxlifeMiddleware(settings, context_window=WINDOW, session_id="loop")],
    )
    conn = sqlite3.connect(str(workdir / "langgraph.db"), check_same_thread=False)
    peer = create_agent(
        FakeModel(messages=_replies(script)),
        _tools(script),
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            SummarizationMiddleware(
                model=FakeListChatModel(responses=["Summary of the conversation so far."]),
                trigger=("tokens", int(THRESHOLD * WINDOW)),
            )
        ],
        checkpointer=SqliteSaver(conn),
    )
    return {"ctxlife": ctxlife_agent, "langchain": peer, "conn": conn, "middleware": ctxlife_agent}


# -- the loop -------------------------------------------------------------------------------------


def play(count: int) -> dict[str, Any]:
    from agents import SQLiteSession

    script = turns(count)
    cpu: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-loop-") as tmp:
        workdir = Path(tmp)
        agents = langchain_agents(script, workdir)
        session = SQLiteSession("loop", str(workdir / "agents.db"))
        loop = asyncio.new_event_loop()
        config = {"configurable": {"thread_id": "loop"}}

        def sdk_turn(turn: list[dict[str, Any]]) -> None:
            # Around each model call: read the session, then add what the call produced.
            items = [turn[0]]
            for message in turn[1:]:
                if message["role"] == "assistant":
                    loop.run_until_complete(session.get_items())
                    loop.run_until_complete(session.add_items(items))
                    items = []
                items.append(message)
            loop.run_until_complete(session.add_items(items))

        def run(name: str, turn: list[dict[str, Any]]) -> None:
            if name == "agents_sdk":
                sdk_turn(turn)
            else:
                agents[name].invoke({"messages": [{"role": "user", "content": turn[0]["content"]}]}, config)

        for i, turn in enumerate(script):
            order = SYSTEMS[i % 3 :] + SYSTEMS[: i % 3]  # rotated: no system always runs first
            for name in order:
                started = time.process_time()
                run(name, turn)
                cpu[name].append(time.process_time() - started)
        session.close()
        loop.close()
        agents["conn"].close()
    model_calls = sum(1 for turn in script for m in turn if m["role"] == "assistant")
    out: dict[str, Any] = {"turns": len(script), "model_calls": model_calls, "systems": {}}
    for name, times in cpu.items():
        ordered = sorted(times)
        out["systems"][name] = {
            "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 2),
            "total_s": round(sum(ordered), 2),
        }
    mine = out["systems"]["ctxlife"]
    out["ratios"] = {
        peer: {
            key: round(mine[key] / out["systems"][peer][key], 2) if out["systems"][peer][key] else None
            for key in ("p50_ms", "p99_ms", "total_s")
        }
        for peer in SYSTEMS[1:]
    }
    return out


#: Whole plays of the conversation: the figures are their medians, the ratios' spread their min-max.
RUNS = 3


def run(quick: bool = False, turns_count: int | None = None, runs: int = RUNS) -> dict[str, Any]:
    started = time.perf_counter()
    plays = [play(turns_count or (200 if quick else TURNS)) for _ in range(runs)]
    systems = {
        name: {
            key: round(statistics.median(p["systems"][name][key] for p in plays), 2)
            for key in ("p50_ms", "p99_ms", "total_s")
        }
        for name in SYSTEMS
    }
    ratios = {
        peer: {key: _median_or_none([p["ratios"][peer][key] for p in plays]) for key in ("p50_ms", "p99_ms", "total_s")}
        for peer in SYSTEMS[1:]
    }
    spread = {
        peer: {
            key: [min(values), max(values)] if (values := [v for p in plays if (v := p["ratios"][peer][key])]) else None
            for key in ("p50_ms", "p99_ms", "total_s")
        }
        for peer in SYSTEMS[1:]
    }
    return stamp(
        {
            "what": "a whole agent turn's CPU time over a long conversation, three systems interleaved by turn",
            "date": datetime.now().isoformat(timespec="seconds"),
            "python": sys.version.split()[0],
            "window": WINDOW,
            "threshold": THRESHOLD,
            "turns": plays[0]["turns"],
            "model_calls": plays[0]["model_calls"],
            "runs": runs,
            "systems": systems,
            "ratios": ratios,
            "ratio_spread": spread,
            "plays": plays,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


def _median_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 2) if known else None


PEERS = {
    "ctxlife": "create_agent + CtxlifeMiddleware (snapshot_restore, llm_summary extractive, recall; SQLite store)",
    "langchain": "create_agent + SummarizationMiddleware (fake summary model) + SqliteSaver",
    "agents_sdk": "SQLiteSession get_items() before and add_items() after each model call (no context management)",
}


def section(results: dict[str, Any]) -> str:
    systems = results["systems"]
    runs = results.get("runs", 1)
    lines = [
        f"{results['turns']:,} turns ({results['model_calls']:,} model calls, a fake free model), the three systems "
        f"interleaved by turn in one process, {results['window']:,}-token window; CPU time of a whole turn. "
        f"{runs} runs of the whole conversation: each figure is the median of the runs, each ratio the median of "
        "the runs' ratios with their spread (min-max). `make bench` may run it beside another question, which slows "
        "all three alike: the ratios hold, the milliseconds are an upper bound.",
        "",
        "| system (set up as its docs tell users) | p50 ms | p99 ms | total CPU s | ctxlife's p50 / total over it |",
        "|---|---|---|---|---|",
    ]
    for name in SYSTEMS:
        row = systems[name]
        ratio = results["ratios"].get(name)
        spread = results.get("ratio_spread", {}).get(name)
        versus = ""
        if ratio:
            versus = f"{ratio['p50_ms']}x{_range(spread, 'p50_ms')} / {ratio['total_s']}x{_range(spread, 'total_s')}"
        lines.append(f"| {PEERS[name]} | {row['p50_ms']} | {row['p99_ms']} | {row['total_s']} | {versus} |")
    return "\n".join(lines) + "\n"


def _range(spread: dict[str, Any] | None, key: str) -> str:
    if not spread or not spread.get(key):
        return ""
    low, high = spread[key]
    return f" ({low}-{high})"


def summary(results: dict[str, Any]) -> list[str]:
    lc = results["ratios"]["langchain"]
    spread = results.get("ratio_spread", {}).get("langchain")
    runs = results.get("runs", 1)
    return [
        f"In a {results['turns']:,}-turn agent loop (fake model), ctxlife's turn p50 is {lc['p50_ms']}x"
        f"{_range(spread, 'p50_ms')} and its total CPU {lc['total_s']}x{_range(spread, 'total_s')} LangChain's "
        f"SummarizationMiddleware + SQLite checkpoint, interleaved in one process (median of {runs} runs, min-max)."
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from ctxlife.integrations.scripted import offline_environment

    offline_environment()
    result = run(args.quick, args.turns, args.runs)
    print(section(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
