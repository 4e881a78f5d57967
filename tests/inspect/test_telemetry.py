"""OpenTelemetry spans per node dispatch and per strategy, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_sessions import SESSION, config_data, turns
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed: pip install 'ctxlife[otel]'")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from ctxlife.telemetry import Tracer  # noqa: E402


class Broken:
    """A plugin whose before-call hook raises with the conversation in its message."""

    name = "broken"

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        raise RuntimeError(f"cannot handle {ctx.messages[-1]['content']}")


class CallsAModel:
    """A plugin that calls "a model" traced by the application: its span nests under the strategy's."""

    name = "calls_a_model"

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        with self.tracer.start_as_current_span("app.model_call"):
            pass


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    # The test session turns the SDK off for CrewAI (OTEL_SDK_DISABLED, no network); this test's own provider is on.
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    return InMemorySpanExporter()


def _run_session(store_url: str, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = settings_from_dict(config_data(store_url), source="test config")
    host = ctxlife.Host(settings, session_id=SESSION, plugins=[Broken(), CallsAModel(provider.get_tracer("app"))])
    assert host.tracer is not None, "OpenTelemetry is installed: the host traces by default"
    host.tracer = Tracer(provider.get_tracer("ctxlife"), model="gpt-4o")
    try:
        with ctxlife.Session(SESSION, host=host, system="You are a support clerk.") as session:
            for user, reply in turns():
                session.messages({"role": "user", "content": user})
                session.record_reply(reply)
            session.messages({"role": "user", "content": "What is falcon's release code name?"})
    finally:
        host.close()
    return list(exporter.get_finished_spans())


@pytest.mark.parametrize("store_kind", ["file"])
def test_spans_for_each_node_and_strategy(store_url: str, exporter: InMemorySpanExporter) -> None:
    with capture_logs() as logs:
        spans = _run_session(store_url, exporter)
    nodes = [s for s in spans if s.name == "ctxlife.before_llm_call"]
    assert len(nodes) == len(turns()) + 1  # one per model call
    # The structlog events stay, one per dispatch as before.
    assert sum(1 for e in logs if e["event"] == "ctxlife.node" and e["node"] == "before_llm_call") == len(nodes)
    assert [s.name for s in spans].count("ctxlife.bootstrap") == 1
    for node in nodes:
        attrs = node.attributes or {}
        assert attrs["gen_ai.conversation.id"] == SESSION
        assert attrs["gen_ai.request.model"] == "gpt-4o"
        assert attrs["ctxlife.context_window"] == config_data(store_url)["context_window"]
        assert attrs["ctxlife.tokens.before"] > 0 and attrs["ctxlife.tokens.after"] > 0
        assert list(attrs["ctxlife.strategies.failed"]) == ["broken"]
        children = [s for s in spans if s.parent is not None and s.parent.span_id == node.context.span_id]
        # Every strategy's hook implementations (recall has one: its block is replaced at the end), then the plugin.
        names = sorted(s.name for s in children)
        assert names == sorted(
            [
                "ctxlife.strategy llm_summary",
                "ctxlife.strategy recall",
                "ctxlife.strategy broken",
                "ctxlife.strategy calls_a_model",
            ]
        ), names
        plugin = next(s for s in children if s.name == "ctxlife.strategy calls_a_model")
        nested = [s for s in spans if s.name == "app.model_call" and s.parent.span_id == plugin.context.span_id]
        assert len(nested) == 1
        for child in children:
            assert child.start_time >= node.start_time and child.end_time <= node.end_time
    compactions = [
        s
        for s in spans
        if s.name == "ctxlife.strategy llm_summary" and "compacted" in (s.attributes or {})["ctxlife.actions"]
    ]
    assert compactions, "the small window makes llm_summary compact"
    attrs = compactions[0].attributes or {}
    assert attrs["ctxlife.evicted_messages"] > 0 and attrs["ctxlife.summary_tokens"] > 0
    assert attrs["ctxlife.summarizer.name"] == "extractive" and attrs["ctxlife.summarizer.latency_ms"] >= 0
    assert any(e.name == "ctxlife.action" for e in compactions[0].events)
    node = next(s for s in nodes if s.context.span_id == compactions[0].parent.span_id)
    assert node.attributes["ctxlife.tokens.after"] < node.attributes["ctxlife.tokens.before"]
    assert node.attributes["ctxlife.strategies.acted"][0] in ("llm_summary", "recall")
    recalls = [
        s for s in spans if s.name == "ctxlife.strategy recall" and "ctxlife.recalled_passages" in (s.attributes or {})
    ]
    assert recalls and recalls[-1].attributes["ctxlife.recalled_passages"] >= 1
    assert recalls[-1].attributes["ctxlife.recalled_tokens"] > 0
    # A strategy that raised: ERROR with its exception's type, never the conversation it quoted.
    broken = [s for s in spans if s.name == "ctxlife.strategy broken"]
    assert broken and all(s.status.status_code is StatusCode.ERROR for s in broken)
    assert broken[0].attributes["error.type"] == "RuntimeError"
    for span in spans:
        text = repr(span.attributes) + repr(span.status.description) + repr([e.attributes for e in span.events])
        assert "falcon" not in text and "Ticket" not in text


def test_no_opentelemetry_no_tracing(tmp_path: Path) -> None:
    """Without the extra, the host has no tracer and dispatches as before."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import ctxlife\n"
        "from ctxlife.config import settings_from_dict\n"
        "host = ctxlife.Host(settings_from_dict({'strategies': ['truncate_last_n']}), context_window=4000)\n"
        "messages = [{'role': 'user', 'content': 'hi'}]\n"
        "report = host.manage(messages)\n"
        "print(host.tracer is None, report.tokens_after > 0, 'opentelemetry.trace' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "False"]


def test_default_tracer_uses_the_global_provider() -> None:
    from ctxlife.telemetry import host_tracer

    found: Any = host_tracer("m")
    assert isinstance(found, Tracer) and found.model == "m"
