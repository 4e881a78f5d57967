"""Recording per call, this tree beside an older commit's recorder, interleaved in one process (issue 41).

The older commit's ``src/ctxlife`` is taken with ``git archive`` into a temporary folder and imported as
``ctxlife_<commit>`` (its imports renamed), so both recorders run in one process, on one machine
load, call by call. Each side has its own SQLite store (``synchronous=FULL``, the default) in the
same temporary folder, and records the same stateless caller: a conversation of N tau-bench messages
(``bench_sessions.conversation``) rebuilt with ``json.loads`` before every call, with the model's
reply and the next question appended. Each side is driven as its host drives it: this tree gets the
host's comparison of the list with the one it handed back (``PreviousList.compare`` +
``Recorder.expect`` with the host's copy of the list as compared, untimed: the host's work, not the
recorder's) before ``record``, and ``PreviousList.remember`` of that copy after it (``frozen=True``, as
the host: one copy of the list per call, kept by both); both get ``leave`` after it. Timed:
``Recorder.record`` alone, CPU (``time.process_time``) and wall, garbage collection off inside; the
sides alternate which goes first. Also reported: the CPU of the store's ``append`` inside ``record``,
and the rest (the recorder's own work).

Three rounds (each a fresh pair of stores); per round the medians and the ratio this tree / old; the
spread is the lowest and highest ratio of the three. ``make bench`` runs it as the ``recording``
question (:func:`run`: 10,000 messages, 30 calls a round; ``--quick`` 2,000 and 10) beside another
question: both sides slow alike, so the ratios hold. It needs the commit in the clone's git history
(a shallow clone lacks it): without it the question is reported as not run, saying so. Run (prints JSON)::

    PYTHONPATH=src:strategies .venv/bin/python benchmarks/ab_recording.py [--commit e03a850] [--size 10000] [--calls 40]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

from bench_sessions import SYSTEM, conversation

REPO = Path(__file__).resolve().parent.parent
BASE_COMMIT = "e03a850"  # issue 41: recording at 10k no slower than this commit's recorder


def available(commit: str) -> bool:
    """Whether ``commit`` is in this clone's history (a shallow or exported tree may lack it)."""
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True, check=False
    )
    return found.returncode == 0


def old_package(commit: str, into: Path) -> str:
    """``src/ctxlife`` at ``commit`` under ``into`` as the package ``ctxlife_<commit>``; its name."""
    name = f"ctxlife_{commit[:12]}"
    blob = subprocess.run(["git", "archive", commit, "src/ctxlife"], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    package = into / name
    (into / "src" / "ctxlife").rename(package)
    pattern = re.compile(r"\b(from|import) ctxlife\b")
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(pattern.sub(rf"\1 {name}", text).replace('"ctxlife.', f'"{name}.'), encoding="utf-8")
    sys.path.insert(0, str(into))
    return name


class Side:
    """One recorder on its own SQLite store, with the CPU its store's append takes counted."""

    def __init__(self, package: str, path: str) -> None:
        store_class = importlib.import_module(f"{package}.sessions.sqlite").SQLiteStore
        self.store = store_class(path)
        self.recorder = importlib.import_module(f"{package}.sessions.recording").recorder_for(self.store)
        self.in_append = 0.0
        inner = self.store.append

        def append(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.in_append += time.process_time() - started

        self.store.append = append
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.store_cpu: list[float] = []

    def timed(self, call: Callable[[], object]) -> None:
        before = self.in_append
        gc.collect()
        gc.disable()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            call()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            gc.enable()
        self.cpu.append(cpu)
        self.wall.append(wall)
        self.store_cpu.append(self.in_append - before)

    def summary(self) -> dict[str, float]:
        def ms(values: list[float]) -> float:
            return round(statistics.median(values) * 1000, 3)

        return {
            "record_cpu_ms": ms(self.cpu),
            "record_wall_ms": ms(self.wall),
            "store_append_cpu_ms": ms(self.store_cpu),
            "recorder_cpu_ms": ms([a - b for a, b in zip(self.cpu, self.store_cpu, strict=True)]),
        }


def one_round(old: str, folder: Path, history: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    from ctxlife.messages import PreviousList

    new_side, old_side = Side("ctxlife", str(folder / "new.db")), Side(old, str(folder / "old.db"))
    text = json.dumps([SYSTEM, *history, {"role": "user", "content": "Hello again, one more question."}])
    handed_back = PreviousList()
    for side in (new_side, old_side):
        first = json.loads(text)
        side.recorder.record("s", first)
        side.recorder.leave("s", first)
        if side is new_side:
            handed_back.remember(first, first, handed_back.compare(first))
    for i in range(calls):
        grown = json.loads(text)
        grown.append({"role": "assistant", "content": f"Reply {i}: your reservation is confirmed."})
        grown.append({"role": "user", "content": f"Question {i + 1}: and the baggage allowance?"})
        text = json.dumps(grown)
        for side in (new_side, old_side) if i % 2 == 0 else (old_side, new_side):
            messages = json.loads(text)  # the stateless caller: its list comes from JSON every call
            recorder = side.recorder
            if side is new_side:
                agreement = handed_back.compare(messages)
                before = list(messages)  # the host's copy of the list as compared, kept until the call ends
                recorder.expect("s", messages, agreement, compared=before)
            side.timed(lambda r=recorder, m=messages: r.record("s", m))
            recorder.leave("s", messages)
            if side is new_side:
                handed_back.remember(messages, before, agreement, frozen=True)  # as the host does
    heads = new_side.store.head("s"), old_side.store.head("s")
    assert heads[0] == heads[1] == len(json.loads(text)) - 1, heads  # every message recorded once, both sides
    new, older = new_side.summary(), old_side.summary()
    return {
        "this_tree": new,
        "old": older,
        "ratio_record_cpu": round(new["record_cpu_ms"] / older["record_cpu_ms"], 2),
        "ratio_record_wall": round(new["record_wall_ms"] / older["record_wall_ms"], 2),
        "ratio_recorder_cpu": round(new["recorder_cpu_ms"] / older["recorder_cpu_ms"], 2),
    }


def measure(commit: str, size: int, calls: int, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of the A/B (each a fresh pair of stores), their ratios' medians and spread."""
    with tempfile.TemporaryDirectory() as tmp:
        old = old_package(commit, Path(tmp) / "old")
        history = conversation(size)
        found = []
        for k in range(rounds):
            folder = Path(tmp) / f"round{k}"
            folder.mkdir()
            found.append(one_round(old, folder, history, calls))
    keys = ("ratio_record_cpu", "ratio_record_wall", "ratio_recorder_cpu")
    return {
        "old_commit": commit,
        "size": size,
        "calls": calls,
        "rounds": found,
        "median": {key: round(statistics.median(r[key] for r in found), 2) for key in keys},
        "spread": {key: [min(r[key] for r in found), max(r[key] for r in found)] for key in keys},
    }


def run(quick: bool = False) -> dict[str, Any]:
    """``make bench``'s ``recording`` question: the A/B against :data:`BASE_COMMIT`, three rounds."""
    if not available(BASE_COMMIT):
        return {
            "not_run": f"commit {BASE_COMMIT} is not in this clone's git history (a shallow clone?): "
            "the recording A/B needs it (`git fetch --unshallow`, then run it again)"
        }
    return measure(BASE_COMMIT, 2_000 if quick else 10_000, 10 if quick else 30, 3)


def section(results: dict[str, Any]) -> str:
    """The ``recording`` part of docs/benchmarks.md: each round, the median ratio and its spread."""
    lines = [
        f"`Recorder.record` per call on a {results['size']:,}-message conversation, this tree beside "
        f"{results['old_commit']}'s recorder, both imported in one process (the old one from `git archive`) and "
        f"alternating call by call, {results['calls']} calls a round, three rounds (a fresh pair of SQLite stores "
        "each, `synchronous=FULL`); the caller is stateless (its list comes from JSON every call), this tree gets "
        "the host's comparison first, as its host drives it (untimed). Median CPU (`time.process_time`, garbage "
        "collection off inside) and wall per call; *store* is the store's `append` inside `record` (this tree also "
        "counts each new message's tokens there, which it keeps for cold restores); *recorder* is the rest.",
        "",
        f"| round | this tree CPU ms | {results['old_commit']} CPU ms | CPU ratio | wall ratio "
        "| store CPU ms (this / old) | recorder CPU ms (this / old) | recorder ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(results["rounds"], 1):
        new, old = r["this_tree"], r["old"]
        lines.append(
            f"| {k} | {new['record_cpu_ms']} | {old['record_cpu_ms']} | {r['ratio_record_cpu']}x "
            f"| {r['ratio_record_wall']}x | {new['store_append_cpu_ms']} / {old['store_append_cpu_ms']} "
            f"| {new['recorder_cpu_ms']} / {old['recorder_cpu_ms']} | {r['ratio_recorder_cpu']}x |"
        )
    median, spread = results["median"], results["spread"]
    lines += [
        "",
        f"Median of the three rounds, this tree / {results['old_commit']}: CPU {median['ratio_record_cpu']}x "
        f"(spread {spread['ratio_record_cpu'][0]}-{spread['ratio_record_cpu'][1]}), wall "
        f"{median['ratio_record_wall']}x ({spread['ratio_record_wall'][0]}-{spread['ratio_record_wall'][1]}), "
        f"the recorder alone {median['ratio_recorder_cpu']}x "
        f"({spread['ratio_recorder_cpu'][0]}-{spread['ratio_recorder_cpu'][1]}); below 1x is faster.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--commit", default=BASE_COMMIT)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not available(args.commit):
        raise SystemExit(
            f"commit {args.commit} is not in this clone's git history (a shallow clone?); git fetch --unshallow"
        )
    print(json.dumps(measure(args.commit, args.size, args.calls, args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
