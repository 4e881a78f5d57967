"""A hypothesis state machine over one session: exactly-once history and exact restore, proved by search.

One caller talks to one session through ctxlife hosts on a real store (a file store in a temporary
folder; SQLite and a real redis-server in the fast variants). Hypothesis picks the steps:

* **user turn** — the caller appends a user message and calls the host; the model answers with text
  or with 1-3 parallel tool calls (then **tool results** arrive in completion order, any
  permutation of the calls, and the host is called again);
* **rebuild from JSON** — the caller rebuilds its list from JSON (a stateless HTTP handler);
* **new host** — a fresh ``Host`` on the same store (what ``manage()`` does when its host cache is
  evicted or the config changes); the caller keeps its list;
* **restart** — the process dies: every host and its memory are gone; the caller keeps only
  ``[system, new user]``;
* **second worker** — the next call is served by another worker (another host on the same store,
  with its own memory), as behind a load balancer;
* **compaction** — the next call runs with a small window, so ``llm_summary`` compacts;
* **bad record** — a message that is not JSON (NaN in tool arguments, bytes in a field);
* **crash mid-write** (file store) — a torn or invalid last line written straight into ``_raw.jsonl``.

The oracle is this file's own: plain lists of canonical JSON (``json.dumps(sort_keys=True)``), never
ctxlife's fingerprints or alignment. Invariants, checked after every call:

* ``raw_exactly_once`` — the raw history (``store.read_records``) holds every message the caller ever
  passed, exactly once and in order (a bad message may be recorded in a safe form or left out);
* ``model_sees_expected`` — what the model is sent equals the caller's list (steady state, new host,
  rebuilt list, other worker) or, on the first call after a restart, the conversation the agent last
  saw plus the new user message; when a compaction acted, the model sees a subsequence of it plus at
  most one summary, ending with the new turn;
* ``nothing_lost`` — the session's snapshot plus its raw records after ``raw_length`` give back the
  conversation the caller now holds (what the model saw), so a restore right now would be exact;
* ``no_failures`` — no strategy failed (a failure is a rolled-back step: lost recording or restore);
* ``failed_restore_writes_nothing`` — a call in which the restoring strategy failed left the
  snapshot as it was.

The number of steps and examples run is printed in the reliability summary (``stats`` fixture) and
with ``pytest -s`` at the end of each test.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ctxlife.config import Settings, settings_from_dict
from ctxlife.host import Host
from ctxlife.sessions import open_store

BIG_WINDOW = 1_000_000
SMALL_WINDOW = 700  # tokens: a compaction on any conversation longer than a few turns
SYSTEM = {"role": "system", "content": "You are a careful support agent. Answer briefly."}
WORDS = [
    "order",
    "NO6JO3",
    "refund",
    "shipped",
    "Berlin",
    "ticket",
    "42",
    "warehouse",
    "2024-05-15",
    "cancel",
    "ok",
    "ü",
    "🙂",
]

MACHINE = settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
    derandomize=False,
)
SCALE = float(os.environ.get("RELIABILITY_EXAMPLES", "1"))


# -- the oracle: my own canonical JSON ----------------------------------------------------------------


def canon(message: Any) -> str:
    """Canonical JSON of a caller's message (NaN kept as NaN, bytes as a tagged repr): for equality only."""
    return json.dumps(
        message, sort_keys=True, ensure_ascii=False, allow_nan=True, default=lambda o: f"<{type(o).__name__} {o!r}>"
    )


def is_bad(message: Any) -> bool:
    """Not plain JSON (NaN, bytes, objects): a store may keep it in a safe form or leave it out."""
    try:
        json.dumps(message, allow_nan=False)
    except (TypeError, ValueError):
        return True
    return False


def is_prompt(message: dict[str, Any]) -> bool:
    return canon(message) == canon(SYSTEM)


def match(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str | None:
    """None if ``actual`` is ``expected``, where a bad expected message may stand in any form of the
    same role or be absent; else what differs first."""
    i = 0
    for k, e in enumerate(expected):
        a = actual[i] if i < len(actual) else None
        if a is not None and canon(a) == canon(e):
            i += 1
            continue
        if is_bad(e):
            nxt = expected[k + 1] if k + 1 < len(expected) else None
            if a is not None and a.get("role") == e.get("role") and (nxt is None or canon(a) != canon(nxt)):
                i += 1  # recorded in a safe form
            continue  # or left out
        return f"at {k}: expected {canon(e)[:160]}, got {canon(a)[:160] if a is not None else 'nothing'}"
    if i != len(actual):
        return f"{len(actual) - i} unexpected message(s) after the expected {len(expected)}: {canon(actual[i])[:160]}"
    return None


def summarised(expected: list[dict[str, Any]], actual: list[dict[str, Any]], turn: int) -> str | None:
    """A compacted ``actual``: at most one message not in ``expected`` (the summary), the rest a
    subsequence of ``expected`` that keeps its last ``turn`` messages."""
    new = [m for m in actual if canon(m) not in {canon(e) for e in expected}]
    if len(new) > 1:
        return f"{len(new)} messages appeared from nowhere: {[canon(m)[:80] for m in new]}"
    kept = [m for m in actual if canon(m) in {canon(e) for e in expected}]
    it = iter(canon(e) for e in expected)
    if not all(c in it for c in map(canon, kept)):
        return "the kept messages are not in their original order"
    if turn and [canon(m) for m in actual[-turn:]] != [canon(m) for m in expected[-turn:]]:
        return "the current turn was not kept"
    return None


# -- the stores ----------------------------------------------------------------------------------------


def make_settings(url: str) -> Settings:
    """snapshot_restore + llm_summary (extractive, compacting hard when the window is small) on ``url``."""
    tables: dict[str, Any] = {
        "strategies": ["snapshot_restore", "llm_summary"],
        "llm_summary": {
            "summarizer": "extractive",
            "min_gain_tokens": 0,
            "keep_rounds": 1,
            "target": 0.3,
            "threshold": 0.6,
        },
    }
    if "store" in Settings.model_fields:  # the host owns the store (issue 11)
        tables["store"] = url
    else:
        tables["snapshot_restore"] = {"store": url}
    return settings_from_dict(tables)


def record_reply(host: Host, messages: list[dict[str, Any]], reply: dict[str, Any]) -> bool:
    """Tell the host about the model's reply, if this version of ctxlife has a call for it."""
    for name in ("after_llm_call", "record_reply"):
        fn = getattr(host, name, None)
        if fn is not None:
            fn(messages, reply) if name == "record_reply" else fn(messages)
            return True
    return False


@dataclass
class Totals:
    steps: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    examples: int = 0


def session_machine(kind: str, url_for: Any, totals: Totals, stats: Any) -> type[RuleBasedStateMachine]:
    """The state machine class over a store of ``kind``; ``url_for(folder)`` gives a fresh store URL."""

    class SessionMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.folder = Path(tempfile.mkdtemp(prefix="ctxlife-machine-"))
            self.url = url_for(self.folder)
            self.sid = "m" + uuid.uuid4().hex[:10]
            self.settings = make_settings(self.url)
            self.store = open_store(self.url)
            self.msgs: list[dict[str, Any]] = [dict(SYSTEM)]  # the caller's list
            self.oracle: list[dict[str, Any]] = []  # every message the caller passed, in order
            self.pending: list[dict[str, Any]] = []  # in the caller's list, not passed to ctxlife yet
            self.workers: list[Host | None] = [None, None]
            self.active = 0
            self.restarted = False  # the next call is the first after a restart
            self.compact_next = False
            self.open_calls: list[str] = []  # tool calls awaiting results
            self.n = 0  # a counter for unique texts and ids
            self.checks: Counter[str] = Counter()
            self.steps: Counter[str] = Counter()

        # -- plumbing ---------------------------------------------------------------------------

        def host(self) -> Host:
            h = self.workers[self.active]
            if h is None:
                h = self.workers[self.active] = Host(self.settings, session_id=self.sid)
            return h

        def step(self, name: str) -> None:
            totals.steps[name] += 1
            self.steps[name] += 1

        def text(self, words: list[str]) -> str:
            self.n += 1
            return f"{' '.join(words)} #{self.n}"

        def records(self) -> list[dict[str, Any]]:
            return [r.message for r in self.store.read_records(self.sid)]

        def snapshot_doc(self) -> str | None:
            snap = self.store.load_snapshot(self.sid)
            return None if snap is None else canon([snap.messages, snap.raw_length])

        def call(self, new: list[dict[str, Any]]) -> None:
            """The caller appends ``new`` and calls the host before the model call; check everything."""
            self.oracle += self.pending + new
            self.pending = []
            if self.restarted:  # the caller kept only [system, new user]
                before_conv = [m for m in self.msgs if not is_prompt(m)]
                self.msgs = [dict(SYSTEM), *new]
                expected = [dict(SYSTEM), *before_conv, *new]
            else:
                self.msgs += new
                expected = list(self.msgs)
            snap_before = self.snapshot_doc()
            window = SMALL_WINDOW if self.compact_next else BIG_WINDOW
            report = self.host().manage(self.msgs, context_window=window)
            self.restarted = self.compact_next = False
            seen = self.msgs  # edited in place: what the model is sent (the caller keeps it)
            self.check("no_failures", not report.failures, f"strategies failed: {report.failures}")
            if any(f.strategy == "snapshot_restore" for f in report.failures):
                self.check(
                    "failed_restore_writes_nothing",
                    self.snapshot_doc() == snap_before,
                    "a failed call rewrote the snapshot",
                )
            if "llm_summary" in report.acted:
                problem = summarised(expected, seen, len(new))
                self.check("model_sees_expected", problem is None, f"compacted list: {problem}")
            else:
                problem = match(expected, seen)
                self.check("model_sees_expected", problem is None, f"the model was sent a different list: {problem}")
            self.check_store()

        def reply(self, message: dict[str, Any]) -> None:
            """The model's reply: the caller appends it; ctxlife records it now if it has a call for it."""
            self.msgs.append(message)
            if record_reply(self.host(), self.msgs, message):
                self.oracle.append(message)
                self.check_store()
            else:
                self.pending.append(message)

        def check(self, name: str, ok: bool, message: str) -> None:
            self.checks[name] += 1
            totals.checks[name] += 1
            assert ok, f"{name}: {message}"

        def check_store(self) -> None:
            raw = self.records()
            problem = match(self.oracle, raw)
            self.check("raw_exactly_once", problem is None, f"raw history vs every message passed: {problem}")
            snap = self.store.load_snapshot(self.sid)
            saved = [m for m in snap.messages if not is_prompt(m)] if snap is not None else []
            tail = [r.message for r in self.store.read_records(self.sid, snap.raw_length if snap is not None else 0)]
            conv = [m for m in self.msgs[: len(self.msgs) - len(self.pending)] if not is_prompt(m)]
            problem = match(conv, saved + tail)
            self.check("nothing_lost", problem is None, f"snapshot + raw tail vs the caller's conversation: {problem}")

        def model_answers(self, data: st.DataObject) -> None:
            kind = data.draw(st.sampled_from(["text", "text", "tools"]), label="reply")
            if kind == "tools":
                calls = []
                for _ in range(data.draw(st.integers(1, 3), label="parallel calls")):
                    self.n += 1
                    args: Any = json.dumps({"item": f"A{self.n}"})
                    if data.draw(st.integers(0, 9), label="nan arguments") == 0:
                        self.step("bad_record_nan")  # NaN in the arguments (a dict, as some SDKs keep them)
                        args = {"item": f"A{self.n}", "weight": math.nan}
                    calls.append(
                        {"id": f"call_{self.n}", "type": "function", "function": {"name": "lookup", "arguments": args}}
                    )
                self.open_calls = [c["id"] for c in calls]
                self.reply({"role": "assistant", "content": None, "tool_calls": calls})
            else:
                self.reply(
                    {
                        "role": "assistant",
                        "content": self.text(data.draw(st.lists(st.sampled_from(WORDS), max_size=30), label="answer")),
                    }
                )

        # -- rules --------------------------------------------------------------------------------

        @precondition(lambda self: not self.open_calls)
        @rule(data=st.data(), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=40))
        def user_turn(self, data: st.DataObject, words: list[str]) -> None:
            self.step("user_turn")
            self.call([{"role": "user", "content": self.text(words)}])
            self.model_answers(data)

        @precondition(lambda self: bool(self.open_calls))
        @rule(data=st.data(), bad=st.sampled_from([None, None, None, "bytes"]))
        def tool_results(self, data: st.DataObject, bad: str | None) -> None:
            order = data.draw(st.permutations(self.open_calls), label="completion order")
            self.step("tool_results_parallel" if len(order) > 1 else "tool_results")
            results: list[dict[str, Any]] = [
                {"role": "tool", "tool_call_id": c, "content": f'{{"status": "ok", "id": "{c}"}}'} for c in order
            ]
            if bad == "bytes":
                self.step("bad_record_bytes")
                results[0]["raw"] = b"\x00\xff payload"
            self.open_calls = []
            self.call(results)
            self.model_answers(data)

        @precondition(lambda self: not any(isinstance(v, bytes) for m in self.msgs for v in m.values()))
        @rule()
        def rebuild_from_json(self) -> None:
            self.step("rebuild_from_json")
            self.msgs = json.loads(json.dumps(self.msgs))
            self.pending = self.msgs[len(self.msgs) - len(self.pending) :] if self.pending else []

        @rule()
        def new_host(self) -> None:
            self.step("new_host")
            old = self.workers[self.active]
            if old is not None:
                old.close()
            self.workers[self.active] = None

        @precondition(lambda self: not self.open_calls and len(self.msgs) > 1)
        @rule()
        def restart(self) -> None:
            self.step("restart")
            for h in self.workers:
                if h is not None:
                    h.close()
            self.workers = [None, None]
            self.active = 0
            self.restarted = True  # the next user turn starts from [system, new user]

        @rule()
        def second_worker(self) -> None:
            self.step("second_worker")
            self.active = 1 - self.active

        @rule()
        def compaction(self) -> None:
            self.step("compaction")
            self.compact_next = True

        @precondition(lambda self: kind == "file")
        @rule(
            garbage=st.sampled_from(['{"seq": 99, "view": "", "at": 1.5, "fp": "ab', "\n", "[1,2]\n", '{"role": "us'])
        )
        def crash_mid_write(self, garbage: str) -> None:
            self.step("crash_mid_write")
            path = Path(self.url.removeprefix("file://")) / f"{self.sid}_raw.jsonl"
            if path.exists():
                with open(path, "a", encoding="utf-8") as f:
                    f.write(garbage)

        @invariant()
        def count(self) -> None:
            totals.steps["(invariant rounds)"] += 1

        def teardown(self) -> None:
            totals.examples += 1
            stats.example({"steps": sum(self.steps.values()), **self.checks})
            for h in self.workers:
                if h is not None:
                    h.close()
            self.store.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    SessionMachine.__name__ = f"SessionMachine_{kind}"
    return SessionMachine


def run_machine(kind: str, url_for: Any, stats: Any, examples: int, steps: int) -> Totals:
    totals = Totals()
    machine = session_machine(kind, url_for, totals, stats)
    try:
        run_state_machine_as_test(
            machine, settings=settings(MACHINE, max_examples=max(1, int(examples * SCALE)), stateful_step_count=steps)
        )
    finally:
        rules = sum(n for name, n in totals.steps.items() if not name.startswith("("))
        print(f"\n[{kind}] {totals.examples} examples, {rules} rule steps: {dict(sorted(totals.steps.items()))}")
        print(f"[{kind}] invariant checks: {dict(sorted(totals.checks.items()))}")
    return totals


@pytest.mark.slow
def test_session_machine_file_store(stats: Any) -> None:
    run_machine("file", lambda folder: f"file://{folder / 'sessions'}?fsync=false", stats, examples=60, steps=30)


@pytest.mark.slow
def test_session_machine_sqlite_store(stats: Any) -> None:
    run_machine(
        "sqlite", lambda folder: f"sqlite:///{folder / 'sessions.db'}?synchronous=NORMAL", stats, examples=20, steps=20
    )


@pytest.mark.slow
def test_session_machine_redis_store(stats: Any, redis_url: str) -> None:
    run_machine("redis", lambda folder: f"{redis_url}?prefix={folder.name}:", stats, examples=20, steps=20)
