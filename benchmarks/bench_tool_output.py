"""Question: how many prompt tokens does capping tool output (``tool_output``) save?

Call-by-call replay of 200 real tau-bench airline trajectories (gpt-4o): each trajectory's messages
arrive one by one. Every tool result goes through the after-tool node (``tool_output`` at the cap)
as it arrives, so the conversation keeps the capped version from then on. At every assistant turn
the prompt is everything before it; it is passed through ``ctxlife.manage()`` and its size
(``report.tokens_after``) is summed, once for the raw conversation and once for the capped one.

No compaction (``strategies = []``, a 128k window): the policy's effect on its own, at caps of 500
and 200 tokens.

Run: ``.venv/bin/python benchmarks/bench_tool_output.py [--cap 500] [--data PATH] [--json]``; ``make
bench`` runs it as the ``tool_output`` question (``benchmarks/results/tool_output.json``).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import ToolCallContext
from report.fmt import n, pct, table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"
MODEL = "gpt-4o"
WINDOW = 128_000


def load(path: Path) -> list[list[dict[str, Any]]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    return [item["traj"] for item in data]


def _call_args(messages: list[dict[str, Any]], index: int) -> tuple[str, dict[str, Any]]:
    """Name and arguments of the call a tool message answers (paired by position)."""
    k = 0
    j = index - 1
    while j >= 0 and messages[j].get("role") == "tool":
        j -= 1
        k += 1
    calls = messages[j].get("tool_calls") or []
    call = calls[k] if k < len(calls) else {}
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    name = messages[index].get("name") or function.get("name") or "tool"
    return name, arguments if isinstance(arguments, dict) else {}


def replay(
    trajectories: list[list[dict[str, Any]]], cap: int, base_config: dict[str, Any], store_dir: str
) -> dict[str, Any]:
    plain = settings_from_dict(base_config, source="bench_tool_output (the manage() config)")
    with_policy = settings_from_dict(
        {"strategies": ["tool_output"], "tool_output": {"max_tokens": cap, "store_dir": store_dir}},
        source="bench_tool_output (the after-tool policy)",
    )
    policy_host = ctxlife.Host(with_policy, context_window=WINDOW, model=MODEL)
    totals = {"without": 0, "with": 0}
    prompts = capped = tool_results = 0
    tool_tokens_before = tool_tokens_after = 0
    count = policy_host.counter().count_text
    start = time.perf_counter()
    for number, trajectory in enumerate(trajectories):
        raw = copy.deepcopy(trajectory)
        shaped: list[dict[str, Any]] = []
        for i, message in enumerate(raw):
            if message.get("role") == "assistant" and i > 0:
                prompts += 1
                for name, history in (("without", raw[:i]), ("with", shaped)):
                    prompt = [dict(m) for m in history]
                    report = ctxlife.manage(
                        prompt, config=plain, context_window=WINDOW, model=MODEL, session_id=f"t{number}-{name}"
                    )
                    totals[name] += report.tokens_after
            if message.get("role") == "tool":
                tool_results += 1
                tool_name, arguments = _call_args(raw, i)
                ctx = ToolCallContext(tool_name=tool_name, tool_input=arguments, result=message.get("content") or "")
                policy_host.after_tool_call(ctx, session_id=f"t{number}")
                tool_tokens_before += count(message.get("content") or "")
                tool_tokens_after += count(ctx.result or "")
                if ctx.result != message.get("content"):
                    capped += 1
                message = {**message, "content": ctx.result}
            shaped.append(message)
    seconds = time.perf_counter() - start
    saved = totals["without"] - totals["with"]
    return {
        "cap": cap,
        "trajectories": len(trajectories),
        "prompts": prompts,
        "tool_results": tool_results,
        "tool_results_capped": capped,
        "tool_result_tokens_before": tool_tokens_before,
        "tool_result_tokens_after": tool_tokens_after,
        "prompt_tokens_without": totals["without"],
        "prompt_tokens_with": totals["with"],
        "prompt_tokens_saved": saved,
        "saving_percent": round(100 * saved / totals["without"], 2) if totals["without"] else 0.0,
        "seconds": round(seconds, 2),
    }


CAPS = (500, 200)


def run(quick: bool = False, data: Path = DEFAULT_DATA, caps: tuple[int, ...] = CAPS) -> dict[str, Any]:
    """Every cap, one replay each."""
    trajectories = load(data)[: 20 if quick else None]
    with tempfile.TemporaryDirectory() as store:
        rows = [replay(trajectories, cap, {"strategies": []}, store) for cap in caps]
    return {
        "question": "prompt tokens saved by capping tool output",
        "data": {"name": "tau-bench airline (GPT-4o)", "path": str(data.relative_to(REPO)), "model": MODEL},
        "rows": rows,
    }


def section(results: dict[str, Any]) -> str:
    first = results["rows"][0]
    out = [
        f"Call-by-call replay of {first['trajectories']} {results['data']['name']} trajectories "
        f"(`{results['data']['path']}`): every tool result passes through `tool_output` as it arrives, and every "
        "prompt through `ctxlife.manage()` (no compaction, 128k window) with and without the capped results; "
        "prompt tokens summed over "
        f"{n(first['prompts'])} prompts ({n(first['tool_results'])} tool results).\n",
        table(
            ["cap", "tool results capped", "their tokens", "prompt tokens without", "with", "saved"],
            [
                [
                    n(r["cap"]),
                    n(r["tool_results_capped"]),
                    f"{n(r['tool_result_tokens_before'])} → {n(r['tool_result_tokens_after'])}",
                    n(r["prompt_tokens_without"]),
                    n(r["prompt_tokens_with"]),
                    pct(r["saving_percent"] / 100),
                ]
                for r in results["rows"]
            ],
            "rrrrrr",
        ),
        "The airline tools return small JSON and the long system prompt dominates; tools that return pages or "
        "dumps gain far more.\n",
    ]
    return "\n".join(out)


def summary(results: dict[str, Any]) -> list[str]:
    row = results["rows"][0]
    return [
        f"Capping tool output at {n(row['cap'])} tokens (`tool_output`, tau-bench airline) caps "
        f"{n(row['tool_results_capped'])} of {n(row['tool_results'])} tool results and saves "
        f"{pct(row['saving_percent'] / 100)} of prompt tokens."
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=None, help="one tool_output max_tokens (default: 500 and 200)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="tau-bench trajectories (.json.gz)")
    parser.add_argument("--quick", action="store_true", help="20 trajectories")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    results = run(args.quick, args.data, (args.cap,) if args.cap else CAPS)
    print(json.dumps(results, indent=2) if args.json else section(results))


if __name__ == "__main__":
    main()
