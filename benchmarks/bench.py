"""``make bench``: every benchmark question in one run, then docs/benchmarks.md from the results.

The questions and the file that answers each are listed in ``benchmarks/README.md`` and
``report/questions.py``. Each question runs in its own process (``bench.py --worker NAME``):
the timing-sensitive ones (overhead, session stores) one at a time with nothing else running,
then the others side by side, ``--jobs`` at a time. Each question's results go to
``benchmarks/results/<name>.json`` and all of them to ``benchmarks/results/latest.json``, stamped
with the commit and the hash of the product code they measured (``provenance.py``); then
``docs/benchmarks.md``, ``docs/benchmarks/*.png`` and the README's benchmark paragraph are written
from that JSON alone.

Run:

    make bench                                      # everything (<= 10 minutes on 2 cores)
    .venv/bin/python benchmarks/bench.py --quick    # smaller, into workspace/bench-quick/
    .venv/bin/python benchmarks/bench.py --only recall,crewai   # re-run some, keep the rest
    .venv/bin/python benchmarks/bench.py --report-only          # docs from the committed JSON
                                    # (after a question ran on its own: collects its results/<name>.json)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import provenance
import report
from ctxlife.integrations.scripted import OFFLINE_ENV
from report import questions

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

RESULTS = HERE / "results"
DOCS = REPO / "docs"
README = REPO / "README.md"
QUICK = REPO / "workspace" / "bench-quick"


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


# -- one question, in its own process ------------------------------------------------------------


def worker(name: str, quick: bool, into: Path) -> int:
    """Run one question's ``run(quick)`` and write its results to ``into``."""
    question = questions.BY_NAME[name]
    run = questions.function(question, "run")
    if run is None:
        raise SystemExit(f"benchmarks/{question.module}.py has no run(quick) function")
    write_json(into, run(quick))
    return 0


def _start(name: str, quick: bool, scratch: Path) -> tuple[subprocess.Popen[bytes], Path, float]:
    into = scratch / f"{name}.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--into", str(into)]
    if quick:
        command.append("--quick")
    log(f"{name}: started ({questions.BY_NAME[name].module}.py)")
    return subprocess.Popen(command, cwd=REPO, env=os.environ | OFFLINE_ENV), into, time.perf_counter()


def run_questions(
    names: list[str], quick: bool, jobs: int, scratch: Path, last_seconds: dict[str, float]
) -> tuple[dict[str, Any], dict[str, float]]:
    """Run the named questions: the timing-sensitive ones one at a time, then the rest ``jobs`` at a time,
    longest first (by the previous run's wall times)."""
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    present = []
    for name in names:
        question = questions.BY_NAME[name]
        if question.path.exists():
            present.append(name)
        else:
            results[name] = {"not_run": f"`benchmarks/{question.module}.py` does not exist yet"}
            log(f"{name}: skipped (no {question.module}.py)")
    alone = [n for n in present if questions.BY_NAME[n].alone]
    shared = sorted((n for n in present if not questions.BY_NAME[n].alone), key=lambda n: -(last_seconds.get(n) or 0))
    for batch, width in ((alone, 1), (shared, jobs)):
        pending = list(batch)
        running: list[tuple[str, subprocess.Popen[bytes], Path, float]] = []
        while pending or running:
            while pending and len(running) < width:
                name = pending.pop(0)
                running.append((name, *_start(name, quick, scratch)))
            time.sleep(0.2)
            for name, process, into, started in list(running):
                if process.poll() is None:
                    continue
                running.remove((name, process, into, started))
                seconds[name] = round(time.perf_counter() - started, 1)
                if process.returncode == 0 and into.exists():
                    results[name] = json.loads(into.read_text(encoding="utf-8"))
                    log(f"{name}: done in {seconds[name]} s")
                else:
                    module = questions.BY_NAME[name].module
                    results[name] = {"not_run": f"`{module}.py` failed (exit {process.returncode})"}
                    log(f"{name}: FAILED (exit {process.returncode}) after {seconds[name]} s")
    return results, seconds


# -- the whole run ------------------------------------------------------------------------------


def run(names: list[str], quick: bool, jobs: int, results_dir: Path) -> dict[str, Any]:
    import tempfile

    started = time.perf_counter()
    code_before = provenance.code_hash()
    latest_path = results_dir / "latest.json"
    previous = json.loads(latest_path.read_text(encoding="utf-8")) if latest_path.exists() else {}
    latest: dict[str, Any] = {
        "machine": provenance.machine(),
        "quick": quick,
        "questions": dict(previous.get("questions", {})) if previous.get("quick") == quick else {},
        "seconds": dict(previous.get("seconds", {})) if previous.get("quick") == quick else {},
    }
    log(f"questions: {', '.join(names)} ({'quick' if quick else 'full'}, {jobs} jobs)")
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-") as scratch:
        found, seconds = run_questions(names, quick, jobs, Path(scratch), previous.get("seconds", {}))
    if provenance.code_hash() != code_before:
        raise SystemExit("src/ or strategies/ changed during the run: the results measure no single version; run again")
    for name, results in found.items():
        if "not_run" not in results:
            provenance.stamp(results)
            results["quick"] = quick
            write_json(results_dir / f"{name}.json", results)
        latest["questions"][name] = results
        latest["seconds"][name] = seconds.get(name)
    latest["machine"]["load_average_at_end"] = provenance.load_average()
    took = round(time.perf_counter() - started, 1)
    if set(names) == {q.name for q in questions.QUESTIONS} or "duration_seconds" not in previous:
        latest["duration_seconds"] = took  # the last full run's wall time (a partial run keeps it)
    else:
        latest["duration_seconds"] = previous["duration_seconds"]
    provenance.stamp(latest)
    write_json(latest_path, latest)
    log(f"wrote {latest_path} ({took} s)")
    return latest


def collect(results_dir: Path) -> dict[str, Any]:
    """latest.json rebuilt from the per-question files (a question run on its own, e.g.
    ``bench_overhead.py``, writes only its own file); re-stamped when any question changed."""
    latest_path = results_dir / "latest.json"
    latest: dict[str, Any] = (
        json.loads(latest_path.read_text(encoding="utf-8"))
        if latest_path.exists()
        else {"machine": provenance.machine(), "quick": False, "questions": {}, "seconds": {}, "duration_seconds": 0}
    )
    found = dict(latest.get("questions", {}))
    for question in questions.QUESTIONS:
        path = results_dir / f"{question.name}.json"
        if path.exists():
            found[question.name] = json.loads(path.read_text(encoding="utf-8"))
            if found[question.name] != latest.get("questions", {}).get(question.name):  # ran on its own
                latest.setdefault("seconds", {})[question.name] = found[question.name].get("seconds")
    if found != latest.get("questions"):
        latest["questions"] = found
        provenance.stamp(latest)
        write_json(latest_path, latest)
        log(f"collected the per-question results into {latest_path}")
    return latest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run, into workspace/bench-quick/")
    parser.add_argument("--only", default="", help="questions to re-run, comma-separated (the rest keep theirs)")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="questions at a time")
    parser.add_argument(
        "--report-only", action="store_true", help="collect results/<question>.json into latest.json, write the docs"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.update(OFFLINE_ENV)
    if args.worker:
        return worker(args.worker, args.quick, args.into)

    results_dir = QUICK / "results" if args.quick else RESULTS
    docs = QUICK / "docs" if args.quick else DOCS
    names = [n.strip() for n in args.only.split(",") if n.strip()] or [q.name for q in questions.QUESTIONS]
    unknown = [n for n in names if n not in questions.BY_NAME]
    if unknown:
        parser.error(f"unknown question(s) {', '.join(unknown)}; known: {', '.join(questions.BY_NAME)}")
    if args.report_only:
        latest = collect(results_dir)
    else:
        latest = run(names, args.quick, args.jobs, results_dir)
    for path in report.write(latest, docs, None if args.quick else README):
        log(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    failed = [n for n, r in latest["questions"].items() if "failed" in str(r.get("not_run", ""))]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
