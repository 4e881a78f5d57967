"""recall_costs: what ``recall`` costs and how often it speaks up (issue 21's figures, before and after).

Measured, each on its own:

* ``cpu``: CPU time recall adds to a ``manage()`` call when the session's raw history holds 1k / 10k /
  100k messages (median of 30 calls, with recall minus without; the history is a MemoryBank chat
  repeated, written straight to a file store; the index is built on the first call, reported apart
  as ``build_s``). The difference of two medians carries the noise of everything else a call does
  (recording grows with the history), so recall's own hook is also timed directly (``hook_ms``,
  median CPU time of ``recall``'s before-call hook over the same calls);
* ``disk``: the index's size on disk against the raw history's (bytes of the store's raw-history
  files), after the build;
* ``snapshots``: snapshot writes over 100 calls of an app that keeps sending its list (block
  included), with and without recall (``snapshot_restore`` + ``llm_summary`` extractive, 4k window);
* ``small_talk``: of the replayed MemoryBank turns (ordinary chat, no question about the past), on
  how many recall inserted a block (4k window; ``--split dev`` to tune, ``heldout`` to quote).

Run against any checkout: ``PYTHONPATH=<checkout>/src:<checkout>/strategies .venv/bin/python
benchmarks/recall_costs.py [--sizes 1000 10000 100000] [--only cpu,disk,snapshots,small_talk]``.
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memorybank import SYSTEM_PROMPT, chat_pool, load_answer_keys, load_bank, question_texts

SYSTEM = SYSTEM_PROMPT["en"]


def _size(folder: Path, *, index: bool) -> int:
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and (("recall" in str(path.relative_to(folder))) == index):
            total += path.stat().st_size
    return total


def _timed_hook(spent: list[float]) -> Callable[[], None]:
    """Time recall's before-call hook into ``spent`` (CPU seconds per call); returns the undo."""
    from ctxlife_strategies.recall import Recall

    hook = Recall.recall_after_compaction

    @functools.wraps(hook)  # keeps the hook marker and the signature pluggy reads
    def timed(self: Any, ctx: Any) -> None:
        started = time.process_time()
        try:
            hook(self, ctx)
        finally:
            spent.append(time.process_time() - started)

    Recall.recall_after_compaction = timed  # type: ignore[method-assign]

    def undo() -> None:
        Recall.recall_after_compaction = hook  # type: ignore[method-assign]

    return undo


def cpu_and_disk(sizes: list[int], calls: int = 30) -> list[dict[str, Any]]:
    from ctxlife.api import clear_hosts, manage
    from ctxlife.config import settings_from_dict
    from ctxlife.sessions import open_store

    pool, questions = chat_pool("en"), question_texts("en")
    rows = []
    for size in (200, *sizes):  # the first warms up imports and caches; not reported
        row: dict[str, Any] = {"history_messages": size}
        for with_recall in (False, True):
            with tempfile.TemporaryDirectory(prefix="ctxlife-recall-costs-") as tmp:
                url = f"file://{tmp}/sessions"
                history = [dict(pool[i % len(pool)]) for i in range(size)]
                with open_store(url) as store:
                    for start in range(0, size, 5000):
                        store.append("long", history[start : start + 5000])
                strategies = ["snapshot_restore", "llm_summary"] + (["recall"] if with_recall else [])
                settings = settings_from_dict(
                    {
                        "strategies": strategies,
                        "store": url,
                        "snapshot_restore": {"restore": False},
                        "llm_summary": {"summarizer": "extractive"},
                    }
                )
                live = [{"role": "system", "content": SYSTEM}, *history[-6:]]
                hook: list[float] = []
                undo = _timed_hook(hook) if with_recall else lambda: None  # before the host binds the hook
                first = time.perf_counter()
                manage(
                    live + [{"role": "user", "content": questions[0]}],
                    config=settings,
                    context_window=8000,
                    session_id="long",
                )
                first = time.perf_counter() - first
                hook.clear()  # the first call builds the index: reported as build_s
                cpu: list[float] = []
                for i in range(calls):
                    live = [live[0], *live[-6:]]
                    live.append({"role": "user", "content": questions[(i + 1) % len(questions)]})
                    started = time.process_time()
                    manage(live, config=settings, context_window=8000, session_id="long")
                    cpu.append(time.process_time() - started)
                    live = [m for m in live if m.get("content") is not None]
                    live.append({"role": "assistant", "content": pool[i % len(pool)]["content"]})
                undo()
                clear_hosts()
                key = "with_recall" if with_recall else "without_recall"
                row[key] = {"first_call_s": round(first, 3), "median_ms": round(statistics.median(cpu) * 1000, 3)}
                if with_recall:
                    row["hook_ms"] = round(statistics.median(hook) * 1000, 3) if hook else None
                    row["index_bytes"] = _size(Path(tmp) / "sessions", index=True)
                    row["raw_bytes"] = _size(Path(tmp) / "sessions", index=False)
                    row["index_to_raw"] = round(row["index_bytes"] / max(row["raw_bytes"], 1), 2)
        row["recall_adds_ms"] = round(row["with_recall"]["median_ms"] - row["without_recall"]["median_ms"], 3)
        row["build_s"] = round(row["with_recall"]["first_call_s"] - row["without_recall"]["first_call_s"], 3)
        rows.append(row)
    return rows[1:]


def snapshots(calls: int = 100) -> dict[str, int]:
    from ctxlife.config import settings_from_dict
    from ctxlife.host import Host

    pool, questions = chat_pool("en"), question_texts("en")
    out = {}
    for with_recall in (False, True):
        with tempfile.TemporaryDirectory(prefix="ctxlife-recall-snap-") as tmp:
            strategies = ["snapshot_restore", "llm_summary"] + (["recall"] if with_recall else [])
            settings = settings_from_dict(
                {"strategies": strategies, "store": f"file://{tmp}/s", "llm_summary": {"summarizer": "extractive"}}
            )
            host = Host(settings, context_window=4000, session_id="snap")
            live: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
            saves = 0
            for i in range(calls):
                user = questions[i % len(questions)] if i % 5 == 4 else pool[2 * i % len(pool)]["content"]
                live.append({"role": "user", "content": user})
                report = host.before_llm_call(live)
                saves += sum(1 for a in report.actions if a.what == "snapshot_saved")
                live.append({"role": "assistant", "content": pool[(2 * i + 1) % len(pool)]["content"]})
            host.close()
            out["with_recall" if with_recall else "without_recall"] = saves
    out["calls"] = calls
    return out


def small_talk(split: str, window: int = 4000) -> dict[str, Any]:
    from ctxlife.config import settings_from_dict
    from ctxlife.host import Host

    bank = load_bank("en")
    keys = load_answer_keys("en")
    users = keys["split"][split]
    turns = fired = tokens = 0
    for user in users:
        with tempfile.TemporaryDirectory(prefix="ctxlife-recall-talk-") as tmp:
            settings = settings_from_dict(
                {
                    "strategies": ["snapshot_restore", "llm_summary", "recall"],
                    "store": f"file://{tmp}/s",
                    "llm_summary": {"summarizer": "extractive"},
                }
            )
            host = Host(settings, context_window=window, session_id="talk")
            live: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
            for exchanges in bank[user]["history"].values():
                for e in exchanges:
                    live.append({"role": "user", "content": e["query"]})
                    report = host.before_llm_call(live)
                    turns += 1
                    acted = [a for a in report.actions if a.strategy == "recall" and a.what == "recalled"]
                    if acted:
                        fired += 1
                        tokens += int(acted[0].details.get("tokens", 0))
                    live.append({"role": "assistant", "content": e["response"]})
            host.close()
    return {"split": split, "window": window, "turns": turns, "fired": fired, "block_tokens": tokens}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--only", default="cpu,snapshots,small_talk")
    parser.add_argument("--split", default="dev", choices=("dev", "heldout"))
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    result: dict[str, Any] = {}
    if "cpu" in only:
        result["cpu_and_disk"] = cpu_and_disk(args.sizes)
    if "snapshots" in only:
        result["snapshots"] = snapshots()
    if "small_talk" in only:
        result["small_talk"] = small_talk(args.split)
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
