"""Memory of one shared host over many short conversations (issue 37: +29 MB per 800 closed sessions).

One :class:`ctxlife.Host` serves every conversation, as the LangChain middleware's does in a server
process. Each conversation is a new session id that makes a few model calls the way the middleware
drives them (``start_run``, ``task_start``, ``before_llm_call`` per turn with the reply recorded by the
next call's list, ``task_end``) and is never used again. Strategies: ``snapshot_restore``,
``llm_summary`` (extractive), ``recall`` and ``tool_output``, on a SQLite store in a temporary folder;
the conversation is long enough to be compacted once.

The figure is the process's resident set (``VmRSS`` of ``/proc/self/status``, after ``gc.collect()``)
every ``--every`` sessions. ``--unbounded`` sets the host's session bound (``ctxlife.host_sessions.SESSIONS``)
beyond the run's session count: the host then keeps every session's state, as it did before the bound.

Run: ``.venv/bin/python benchmarks/bench_host_memory.py [--sessions 2000] [--unbounded]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxlife import host_sessions
from ctxlife.config import settings_from_dict
from ctxlife.contexts import TaskContext
from ctxlife.host import Host

WINDOW = 3000
TURNS = 6


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def conversation(host: Host, session: str) -> None:
    """One short conversation: a run of ``TURNS`` model calls, then its end."""
    host.start_run(session)
    host.task_start(TaskContext(description="Check my orders", context_text=""), session_id=session)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful support agent."}]
    for turn in range(TURNS):
        messages.append(
            {"role": "user", "content": f"{session}: where is order ORD-{turn:05d}? " + "It was due last week. " * 30}
        )
        host.before_llm_call(messages, session_id=session)
        messages.append(
            {"role": "assistant", "content": f"Order ORD-{turn:05d} ships tomorrow via carrier C{turn}. " * 8}
        )
    host.record_reply(messages, session_id=session)
    host.task_end(TaskContext(output=str(messages[-1]["content"]), messages=list(messages)), session_id=session)


def run(sessions: int, every: int, unbounded: bool) -> dict[str, Any]:
    if unbounded:
        host_sessions.SESSIONS = sessions + 1
    with tempfile.TemporaryDirectory() as folder:
        settings = settings_from_dict(
            {
                "strategies": ["snapshot_restore", "llm_summary", "recall", "tool_output"],
                "store": f"sqlite:///{folder}/sessions.db",
                "llm_summary": {"summarizer": "extractive"},
                "tool_output": {"store_dir": f"{folder}/tool-output"},
            }
        )
        host = Host(settings, context_window=WINDOW)
        samples: list[tuple[int, float]] = []
        gc.collect()
        samples.append((0, rss_mb()))
        started = time.perf_counter()
        for n in range(sessions):
            conversation(host, f"user-{n}")
            if (n + 1) % every == 0:
                gc.collect()
                samples.append((n + 1, rss_mb()))
        seconds = time.perf_counter() - started
        kept = len(host._table)
        host.close()
    return {
        "sessions": sessions,
        "calls_per_session": TURNS,
        "session_bound": host_sessions.SESSIONS,
        "sessions_kept_at_end": kept,
        "rss_mb": samples,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--unbounded", action="store_true", help="keep every session's state (no bound)")
    args = parser.parse_args()
    print(json.dumps(run(args.sessions, args.every, args.unbounded)))


if __name__ == "__main__":
    main()
