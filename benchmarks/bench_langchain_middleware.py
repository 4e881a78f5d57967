"""Per-call overhead of CtxlifeMiddleware on a LangChain v1 agent (``create_agent``).

The same agent (LangChain's ``GenericFakeChatModel``, no tools of its own, so one model call per
``invoke``) is invoked with a history of N messages in its state, with and without the
middleware; the figure is CPU time per call (``time.process_time``, immune to other load on the
machine), median of ``--repeats`` rounds of ``--calls`` invocations each. Policies:

* ``default``: ``configs/default.toml`` (truncate_last_n; below the threshold it only counts);
* ``summary``: llm_summary (extractive), at a window where it does not need to compact;
* ``summary+tools``: llm_summary, tool_output and tool_cache (the tool hooks do not fire: no tools).

Run: ``.venv/bin/python benchmarks/bench_langchain_middleware.py`` (needs ``ctxlife[langchain]``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxlife.config import load_settings, settings_from_dict
from ctxlife.integrations.langchain import CtxlifeMiddleware

REPO = Path(__file__).resolve().parents[1]


class FakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools (the middleware offers ctxlife_recall)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def history(n: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(n // 2):
        messages.append(HumanMessage(f"Request {i}: please look up order ORD-{10_000 + i} and its shipping status."))
        messages.append(
            AIMessage(
                f"Order ORD-{10_000 + i} shipped on 2024-11-{1 + i % 28:02d} via carrier C{i % 7}; tracking T{i:08d}."
            )
        )
    return messages


def policies(tmp: Path) -> dict[str, Any]:
    return {
        "default": load_settings(REPO / "configs" / "default.toml"),
        "summary": settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}),
        "summary+tools": settings_from_dict(
            {
                "strategies": ["llm_summary", "tool_output", "tool_cache"],
                "llm_summary": {"summarizer": "extractive"},
                "tool_output": {"store_dir": str(tmp)},
                "tool_cache": {"tools": ["lookup"]},
            }
        ),
    }


def cpu_per_call(agent: Any, state: list[BaseMessage], calls: int) -> float:
    start = time.process_time()
    for i in range(calls):
        agent.invoke({"messages": [*state, HumanMessage(f"And order {i}?")]})
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="ctxlife-bench-"))
    print(
        f"{'messages':>9} {'policy':<14} {'without ms/call':>16} {'with ms/call':>13} "
        f"{'overhead ms':>12} {'overhead':>9}"
    )
    for size in args.sizes:
        state = history(size)
        window = 1_000_000  # nothing to compact: the figure is the cost of looking
        for name, settings in policies(tmp).items():
            plain = create_agent(FakeModel(messages=_replies()), [])
            managed = create_agent(
                FakeModel(messages=_replies()), [], middleware=[CtxlifeMiddleware(settings, context_window=window)]
            )
            cpu_per_call(plain, state, 3)
            cpu_per_call(managed, state, 3)  # warm caches (token counts, imports)
            without = statistics.median(cpu_per_call(plain, state, args.calls) for _ in range(args.repeats))
            with_mw = statistics.median(cpu_per_call(managed, state, args.calls) for _ in range(args.repeats))
            print(
                f"{size:>9} {name:<14} {without * 1000:>16.2f} {with_mw * 1000:>13.2f} "
                f"{(with_mw - without) * 1000:>12.2f} {with_mw / without - 1:>8.0%}"
            )


def _replies() -> Any:
    while True:
        yield AIMessage("Done.")


if __name__ == "__main__":
    main()
