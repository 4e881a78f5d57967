"""Real worker processes on one session, on every store: exactly-once history and exact restore.

Each worker is a process running ``manage_worker.py`` (one ``ctxlife.Host``, as ``manage()`` keeps),
driven over stdin/stdout by this test, which plays the caller and keeps the oracle: plain lists of
canonical JSON of what it sent (never ctxlife's fingerprints).

* two workers serving one conversation turn by turn (a load balancer in front of two processes;
  the caller's list is rebuilt from JSON for every request), with compactions;
* two workers appending to one session at the same time (one agent each);
* a process that stops after its last reply, and the next process restoring.
"""

from __future__ import annotations

import inspect
import json
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.sessions import open_store

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("manage_worker.py")
SYSTEM = {"role": "system", "content": "You are a careful support agent."}
SMALL_WINDOW = 400


def canon(message: Any) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def conv(messages: list[dict[str, Any]]) -> list[str]:
    """The conversation without the system prompt, as canonical JSON."""
    return [canon(m) for m in messages if canon(m) != canon(SYSTEM)]


class Worker:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""
            pytest.fail(f"worker exited with {self.proc.wait()}: {err[-3000:]}")
        return dict(json.loads(line))

    def ask(self, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.receive()

    def exit(self) -> None:
        self.send(op="exit")
        assert self.proc.wait(timeout=60) == 0, self.proc.stderr.read() if self.proc.stderr else ""


@pytest.fixture
def worker(spawn: Callable[..., subprocess.Popen[str]], store_url: str) -> Iterator[Callable[..., Worker]]:
    code = f"import runpy; runpy.run_path({str(WORKER)!r}, run_name='__main__')"

    def start(session: str, mode: str = "host") -> Worker:
        return Worker(spawn(code, store_url, session, mode))

    yield start


def view_kw(view: str) -> dict[str, Any]:
    """``view=`` for manage() when this ctxlife has views (one per agent), else nothing."""
    return {"view": view} if "view" in inspect.signature(ctxlife.Host.before_llm_call).parameters else {}


def records(store_url: str, session: str) -> list[Any]:
    with open_store(store_url) as store:
        return store.read_records(session)


def test_two_workers_serve_one_conversation_exactly_once(worker: Callable[..., Worker], store_url: str) -> None:
    """Through ctxlife.manage() + ctxlife.record_reply(), as a web app would call them."""
    a, b = worker("lb", "manage"), worker("lb", "manage")
    messages = [dict(SYSTEM)]
    passed: list[str] = []  # every message the caller passed, in order
    route = [a, a, b, a, b, b, a, b, a, b]
    for i, w in enumerate(route):
        messages = json.loads(json.dumps(messages))  # over HTTP: rebuilt for every request
        ask = {"role": "user", "content": f"q{i}: where is order NO{i}JO3? " + "please check the warehouse " * 4}
        sent = [*messages, ask]
        compact = i % 4 == 3
        passed.append(canon(ask))
        out = w.ask(op="call", messages=sent, window=SMALL_WINDOW if compact else None)
        assert out["failures"] == [], out["failures"]
        raw = [canon(r.message) for r in records(store_url, "lb")]
        assert raw == passed, f"call {i}: the raw history is not every message passed, once, in order"
        if "llm_summary" not in out["acted"]:
            assert conv(out["messages"]) == conv(sent), f"call {i}: the model was not sent the caller's list"
        messages = out["messages"]  # the caller keeps what the model saw
        with open_store(store_url) as store:
            snap = store.load_snapshot("lb")
            if compact and "llm_summary" in out["acted"]:
                assert snap is not None and snap.raw_length == store.head("lb"), (
                    "snapshot raw_length is not the store head"
                )
        reply = {"role": "assistant", "content": f"a{i}: order NO{i}JO3 shipped."}
        passed.append(canon(reply))
        if w.ask(op="reply", messages=messages, reply=reply)["recorded"]:
            raw = [canon(r.message) for r in records(store_url, "lb")]
            assert raw == passed, f"reply {i}: the raw history is not every message passed, once, in order"
        messages.append(reply)
    for w in (a, b):
        w.exit()

    # A third process restores for the next request [system, new user].
    c = worker("lb", "manage")
    new = {"role": "user", "content": "and the invoice?"}
    out = c.ask(op="call", messages=[dict(SYSTEM), new], window=None)
    assert conv(out["messages"]) == [*conv(messages), canon(new)], "the restore is not the conversation + the new turn"
    c.exit()
    assert [canon(r.message) for r in records(store_url, "lb")] == [*passed, canon(new)]


def test_two_workers_at_once_record_each_message_once(worker: Callable[..., Worker], store_url: str) -> None:
    a, b = worker("busy"), worker("busy")
    turns = 12
    for w, tag in ((a, "A"), (b, "B")):
        w.send(op="run", tag=tag, turns=turns, compact_every=5, **view_kw(tag))
    done = {tag: w.receive() for w, tag in ((a, "A"), (b, "B"))}
    for w in (a, b):
        w.exit()
    for out in done.values():
        assert out["failures"] == [], out["failures"]
    recs = records(store_url, "busy")
    seqs = [r.seq for r in recs]
    assert seqs == list(range(1, len(recs) + 1)), "sequence numbers are not 1..n"
    for tag in ("A", "B"):
        mine = [canon(r.message) for r in recs if str(r.message.get("content", "")).startswith(f"{tag} ")]
        expected = []
        for i in range(turns):
            expected += [f"{tag} q{i}: ", f"{tag} a{i}: "]
        got = [json.loads(c)["content"].split(": ")[0] + ": " for c in mine]
        assert got == expected, f"worker {tag}: its messages are not recorded exactly once in order: {Counter(got)}"
    with open_store(store_url) as store:
        head = store.head("busy")
        for tag in ("A", "B"):
            snap = store.load_snapshot("busy", **({"view": tag} if view_kw(tag) else {}))
            if snap is not None:
                assert snap.raw_length <= head


def test_two_workers_at_once_each_agent_restores_its_own(worker: Callable[..., Worker], store_url: str) -> None:
    if not view_kw("A"):
        pytest.fail("Host.before_llm_call has no view= (one lane per agent in a session): issue 11")
    a, b = worker("agents"), worker("agents")
    for w, tag in ((a, "A"), (b, "B")):
        w.send(op="run", tag=tag, turns=10, compact_every=4, view=tag)
    done = {tag: w.receive() for w, tag in ((a, "A"), (b, "B"))}
    for w in (a, b):
        w.exit()
    for tag, out in done.items():
        c = worker("agents")
        new = {"role": "user", "content": f"{tag} again"}
        msgs = c.ask(op="call", messages=[dict(SYSTEM), new], window=None, view=tag)["messages"]
        c.exit()
        assert conv(msgs) == [*conv(out["conversation"]), canon(new)], f"agent {tag}'s restore"


@pytest.mark.parametrize("mode", ["host", "manage"])
def test_restart_restores_the_final_reply(worker: Callable[..., Worker], store_url: str, mode: str) -> None:
    first = worker("restart", mode)
    out = first.ask(op="run", tag="R", turns=4, compact_every=3)
    assert out["failures"] == []
    first.exit()  # the process stops right after its last reply
    conversation = out["conversation"]
    assert conversation[-1]["role"] == "assistant"

    second = worker("restart", mode)
    new = {"role": "user", "content": "R: and now?"}
    seen = second.ask(op="call", messages=[dict(SYSTEM), new], window=None)["messages"]
    second.exit()
    assert conv(seen) == [*conv(conversation), canon(new)], "the restore lost or repeated part of the conversation"
    raw = [canon(r.message) for r in records(store_url, "restart")]
    assert raw[-2:] == [canon(conversation[-1]), canon(new)], "the final reply is not in the raw history once"
    assert len(raw) == len(set(raw)), "a message is recorded twice"
