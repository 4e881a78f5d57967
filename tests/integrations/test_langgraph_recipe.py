"""The hand-written LangGraph loop of docs/integrations.md (docs/examples/langgraph_loop.py), run for real."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="the recipe needs pip install 'ctxlife[langchain]'")

from langchain_core.messages import HumanMessage  # noqa: E402

import ctxlife  # noqa: E402
from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.integrations.langchain import to_openai_messages  # noqa: E402
from ctxlife.messages import is_summary, validate  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fake_chat import ScriptedChatModel  # noqa: E402
from test_langchain import lookup_script, lookup_tool  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "docs" / "examples" / "langgraph_loop.py"


def recipe() -> Any:
    spec = importlib.util.spec_from_file_location("langgraph_loop", RECIPE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["langgraph_loop"] = module  # LangGraph resolves the State annotations through it
    spec.loader.exec_module(module)
    return module


def run(write_back: bool) -> tuple[list[ctxlife.Report], dict[str, Any]]:
    host = ctxlife.Host(
        settings_from_dict(
            {
                "strategies": ["llm_summary"],
                "llm_summary": {"summarizer": "extractive", "keep_rounds": 1, "min_gain_tokens": 50},
            }
        ),
        context_window=2000,
    )
    reports: list[ctxlife.Report] = []
    host.listeners.append(lambda r: reports.append(r) if r.node == "before_llm_call" else None)
    graph = recipe().build_graph(
        ScriptedChatModel(script=lookup_script(7)), [lookup_tool(size=60)], host, "You are a clerk.", write_back
    )
    state: dict[str, Any] = {"messages": []}
    for i in range(7):
        state = graph.invoke({"messages": [*state["messages"], HumanMessage(f"Please check R{i:04d}.")]})
    return reports, state


def test_the_recipe_compacts_once_per_crossing_because_it_writes_the_managed_list_back():
    reports, state = run(write_back=True)
    compactions = [r for r in reports if "llm_summary" in r.acted]
    assert len(reports) == 14 and 1 <= len(compactions) <= 3
    assert any(is_summary(m) for m in to_openai_messages(state["messages"]))
    assert validate(to_openai_messages(state["messages"])) == []


def test_without_the_write_back_every_call_above_the_line_compacts_again():
    reports, _ = run(write_back=False)
    above = [r for r in reports if r.tokens_before > r.budget]
    compactions = [r for r in reports if "llm_summary" in r.acted]
    assert len(above) >= 4 and len(compactions) == len(above)  # the failure the recipe avoids


def test_the_docs_show_the_recipe_as_it_is_tested():
    page = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    code = RECIPE.read_text(encoding="utf-8")
    body = code[code.index("from typing import") :]
    assert body.strip() in page, "docs/integrations.md must show docs/examples/langgraph_loop.py as it is"
