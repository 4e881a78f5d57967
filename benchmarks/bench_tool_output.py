"""How many prompt tokens ``tool_output`` saves on 200 real tau-bench airline trajectories.

Call-by-call replay: each trajectory's messages arrive one by one. Every tool
message goes through the after-tool policy (node 4, ``tool_output`` at the cap)
as it arrives, so the conversation keeps the capped version from then on. At
every assistant turn the prompt is everything before it; it is passed through
``ctxlife.manage()`` and its size (``report.tokens_after``) is summed, once for
the raw conversation and once for the capped one.

Two manage() configs are measured:
* no compaction (``strategies = []``): the policy's effect on its own (the headline);
* ``configs/default.toml``: the same, on top of the default compaction.

Run: .venv/bin/python benchmarks/bench_tool_output.py [--cap 500] [--data PATH] [--json]
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


def replay(trajectories, cap: int, base_config: dict[str, Any], store_dir: str) -> dict[str, Any]:
    plain = settings_from_dict(base_config, source="bench (without tool_output)")
    with_policy = settings_from_dict(
        {
            **base_config,
            "strategies": [*base_config.get("strategies", []), "tool_output"],
            "tool_output": {"max_tokens": cap, "store_dir": store_dir},
        },
        source="bench (with tool_output)",
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
                for name, settings, history in (("without", plain, raw[:i]), ("with", with_policy, shaped)):
                    prompt = [dict(m) for m in history]
                    report = ctxlife.manage(
                        prompt, config=settings, context_window=WINDOW, model=MODEL, session_id=f"t{number}-{name}"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=500, help="tool_output max_tokens (default 500)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="tau-bench trajectories (.json.gz)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()

    trajectories = load(args.data)
    default_config = ctxlife.load_settings(REPO / "configs" / "default.toml")
    default_dict = {"strategies": list(default_config.strategies), **default_config.strategy_tables()}
    results = {}
    with tempfile.TemporaryDirectory() as store:
        for label, config in (("no compaction", {"strategies": []}), ("configs/default.toml", default_dict)):
            results[label] = replay(trajectories, args.cap, config, store)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    first = next(iter(results.values()))
    print(f"tool_output at a cap of {args.cap} tokens, tau-bench airline (gpt-4o), call-by-call replay")
    print(
        f"{first['trajectories']} trajectories, {first['prompts']} prompts, {first['tool_results']} tool results, "
        f"{first['tool_results_capped']} capped ({first['tool_result_tokens_before']:,} -> "
        f"{first['tool_result_tokens_after']:,} tokens of tool results)"
    )
    print(f"{'manage() config':<24}{'without':>14}{'with':>14}{'saved':>12}{'saving':>9}")
    for label, row in results.items():
        print(
            f"{label:<24}{row['prompt_tokens_without']:>14,}{row['prompt_tokens_with']:>14,}"
            f"{row['prompt_tokens_saved']:>12,}{row['saving_percent']:>8.2f}%"
        )


if __name__ == "__main__":
    main()
