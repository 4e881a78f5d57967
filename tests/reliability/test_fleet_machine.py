"""A fleet on one session, searched by hypothesis: the keeper's explicit events against a plain model.

Two worker *processes* (forked from the test process, each with its own store object and host, as
two workers behind a load balancer) serve one conversation, each through two ``ctxlife.Session``
objects sharing its host (two requests in one process). Hypothesis picks the steps:

* **turn** — one session records a user turn (``prepare``) and the model's reply (``record_reply``);
  a long turn makes the config's strategy compact (a snapshot is written);
* **simultaneous turns** — both sessions of one process take a turn at the same moment (threads);
  **concurrent requests** — two coroutines share one ``AsyncSession`` and take a turn each at once;
* **edit**, **regenerate** (pop the last reply, record another), **pop**, **remove**, **erase** — the
  caller's own edits, through any session; **delete the session** — the id then goes on, on either
  worker, and nothing of the deleted conversation may come back;
* **crash and restart** — a worker is killed (SIGKILL) and another is started in its place;
* **failed write** — the store refuses the next append (the call raises, nothing is recorded) or
  writes it and loses the reply (recorded once, whether the call then succeeds or is retried).

The model is this file's own: the conversation as a list of texts, changed by what each step did.
After every step ``store.current()`` (read through a store object of its own) must equal it, and a
new session restores nothing the model no longer holds, and nothing out of its order. ``RELIABILITY_EXAMPLES=4``
(``make test-deep``) runs 350 examples of up to 40 steps per store (300 ran 9,772-9,964 steps).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import uuid
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from fault_store import FaultPlan, faulty_scheme
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.sessions import open_store

SCALE = float(os.environ.get("RELIABILITY_EXAMPLES", "1"))
EXAMPLES = 350 if SCALE >= 4 else max(1, int(5 * SCALE))
STEPS = 40
WINDOW = 1500  # truncate_last_n compacts above 20% of it: a long turn (~300 tokens) or a long history
_FORK = multiprocessing.get_context("fork")


def _serve(url: str, sid: str, conn: Connection) -> None:
    """A worker process: its own store object (through the fault-injecting scheme), host and two
    sessions; runs the commands the machine sends and answers ("ok", result) or ("error", text)."""
    plan = FaultPlan()
    with faulty_scheme(url, plan) as faulty_url:
        cfg = settings_from_dict(
            {"store": faulty_url, "strategies": ["truncate_last_n"], "threshold": 0.2, "truncate_last_n": {"rounds": 2}}
        )
        host = ctxlife.Host(cfg, context_window=WINDOW)
        sessions = [ctxlife.Session(sid, host=host) for _ in range(2)]
        shared = ctxlife.AsyncSession(sid, host=host)  # one object, two concurrent requests

        def coroutines(pairs: list[tuple[str, str]]) -> None:
            async def request(question: str, answer: str) -> None:
                await shared.prepare({"role": "user", "content": question})
                await shared.record_reply(answer)

            async def both() -> None:
                await asyncio.gather(*(request(q, a) for q, a in pairs))

            asyncio.run(both())

        def turn(s: int, question: str, answer: str) -> list[str]:
            sessions[s].prepare({"role": "user", "content": question})
            sessions[s].record_reply(answer)
            report = sessions[s].last_report
            return [f.error for f in report.failures] if report is not None else []

        def simultaneous(pairs: list[tuple[str, str]]) -> list[str]:
            start = threading.Barrier(2)
            errors: list[str] = []

            def run(s: int) -> None:
                try:
                    start.wait(timeout=30)
                    errors.extend(turn(s, *pairs[s]))
                except Exception as exc:  # noqa: BLE001 - sent back to the machine
                    errors.append(f"{type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=run, args=(s,)) for s in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            return errors

        def refused(s: int, question: str) -> str:
            with plan.outage("append"):
                try:
                    sessions[s].prepare({"role": "user", "content": question})
                except StoreError as exc:
                    return str(exc)
            raise AssertionError("a refused append did not raise")

        def lost(s: int, question: str, unreadable: bool) -> None:
            plan.break_("append", mode="landed")
            if unreadable:
                plan.break_("read_records")
            try:
                sessions[s].prepare({"role": "user", "content": question})
            except StoreError:
                plan.heal()
                sessions[s].prepare({"role": "user", "content": question})  # the caller retries
            finally:
                plan.heal()

        commands: dict[str, Any] = {
            "turn": turn,
            "simultaneous": simultaneous,
            "coroutines": coroutines,
            "edit": lambda s, seq, message: sessions[s].edit(seq, message).seq,
            "pop": lambda s: sessions[s].pop(),
            "regenerate": lambda s, answer: (sessions[s].pop(), sessions[s].record_reply(answer).seq)[0],
            "remove": lambda s, seq: [r.seq for r in sessions[s].remove(seq)],
            "erase": lambda s, seq: sessions[s].erase(seq),
            "clear": lambda s: sessions[s].clear(),
            "refused": refused,
            "lost": lost,
        }
        while True:
            name, args = conn.recv()
            try:
                conn.send(("ok", commands[name](*args)))
            except Exception as exc:  # noqa: BLE001 - sent back to the machine
                conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Worker:
    """A worker process forked from this one (ctxlife already imported: a restart costs milliseconds),
    driven over a pipe. ``crash()`` kills it with SIGKILL, as a machine dies."""

    def __init__(self, url: str, sid: str) -> None:
        self.conn, child = _FORK.Pipe()
        self.process = _FORK.Process(target=_serve, args=(url, sid, child), daemon=True)
        self.process.start()
        child.close()

    def call(self, name: str, *args: Any) -> Any:
        self.conn.send((name, args))
        if not self.conn.poll(120):
            raise AssertionError(f"worker did not answer {name}{args!r} within 120 s")
        status, value = self.conn.recv()
        assert status == "ok", f"{name}{args!r} failed in the worker: {value}"
        return value

    def crash(self) -> None:
        self.process.kill()
        self.process.join(timeout=30)
        self.conn.close()


def fleet_machine(url: str) -> type[RuleBasedStateMachine]:
    class Fleet(RuleBasedStateMachine):
        examples = 0  # (counted for the run's report)
        checks = 0

        def __init__(self) -> None:
            super().__init__()
            type(self).examples += 1
            self.sid = f"fleet-{uuid.uuid4().hex[:10]}"
            self.workers = [Worker(url, self.sid) for _ in range(2)]
            self.model: list[str] = []
            self.counter = 0

        def teardown(self) -> None:
            for worker in self.workers:
                worker.crash()

        def text(self, what: str) -> str:
            self.counter += 1
            return f"{what} {self.counter}"

        def seq_of(self, index: int) -> int:
            with open_store(url) as store:
                return store.current(self.sid)[index].seq

        # -- turns ---------------------------------------------------------------------------------

        @rule(p=st.integers(0, 1), s=st.integers(0, 1), long=st.booleans())
        def turn(self, p: int, s: int, long: bool) -> None:
            question = self.text("question") + (" words" * 250 if long else "")
            answer = self.text("answer")
            assert self.workers[p].call("turn", s, question, answer) == []  # no failure reported
            self.model += [question, answer]

        @rule(p=st.integers(0, 1))
        def simultaneous_turns(self, p: int) -> None:
            pairs = [(self.text("question"), self.text("answer")) for _ in range(2)]
            assert self.workers[p].call("simultaneous", pairs) == []
            # Any interleaving of the two requests is right, as long as each reply follows its question.
            with open_store(url) as store:
                tail = [str(r.message["content"]) for r in store.current(self.sid)][len(self.model) :]
            assert Counter(tail) == Counter(t for pair in pairs for t in pair)
            for question, answer in pairs:
                assert tail.index(question) < tail.index(answer)
            self.model += tail

        @rule(p=st.integers(0, 1))
        def concurrent_requests_on_one_async_session(self, p: int) -> None:
            pairs = [(self.text("question"), self.text("answer")) for _ in range(2)]
            self.workers[p].call("coroutines", pairs)
            with open_store(url) as store:
                tail = [str(r.message["content"]) for r in store.current(self.sid)][len(self.model) :]
            assert Counter(tail) == Counter(t for pair in pairs for t in pair)
            for question, answer in pairs:
                assert tail.index(question) < tail.index(answer)
            self.model += tail

        # -- the caller's own edits ------------------------------------------------------------------

        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1), data=st.data())
        def edit(self, p: int, s: int, data: st.DataObject) -> None:
            index = data.draw(st.integers(0, len(self.model) - 1))
            new = self.text("edited")
            role = "user" if self.model[index].startswith("question") else "assistant"
            content = f"question {new}" if role == "user" else new
            self.workers[p].call("edit", s, self.seq_of(index), {"role": role, "content": content})
            self.model[index] = content

        # (Preconditions read only the model's length: its order after simultaneous turns varies from
        # run to run, and hypothesis needs the same choices to lead to the same rules.)
        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def regenerate(self, p: int, s: int) -> None:
            # The latest message (a reply, or whatever is last after simultaneous turns and pops) is
            # popped and a new reply recorded in its place: the model's length stays the same either way.
            answer = self.text("answer")
            popped = self.workers[p].call("regenerate", s, answer)
            assert popped is not None and popped["content"] == self.model[-1]
            self.model[-1] = answer

        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def pop(self, p: int, s: int) -> None:
            popped = self.workers[p].call("pop", s)
            assert popped is not None and popped["content"] == self.model.pop()

        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1), data=st.data(), erase=st.booleans())
        def remove(self, p: int, s: int, data: st.DataObject, erase: bool) -> None:
            index = data.draw(st.integers(0, len(self.model) - 1))
            seq = self.seq_of(index)
            if erase:
                assert self.workers[p].call("erase", s, seq) == [seq]
            else:
                self.workers[p].call("remove", s, seq)
            del self.model[index]

        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def delete_the_session(self, p: int, s: int) -> None:
            # The id goes on afterwards, on either worker: nothing of the deleted conversation may
            # come back from what the other worker (or the other session object) still holds.
            self.workers[p].call("clear", s)
            self.model = []

        # -- failures and restarts ---------------------------------------------------------------------

        @rule(p=st.integers(0, 1))
        def crash_and_restart(self, p: int) -> None:
            self.workers[p].crash()
            self.workers[p] = Worker(url, self.sid)

        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def refused_write(self, p: int, s: int) -> None:
            assert "append" in self.workers[p].call("refused", s, self.text("question"))

        @rule(p=st.integers(0, 1), s=st.integers(0, 1), unreadable=st.booleans())
        def write_lost_its_reply(self, p: int, s: int, unreadable: bool) -> None:
            question = self.text("question")
            self.workers[p].call("lost", s, question, unreadable)
            self.model.append(question)

        # -- what must hold ----------------------------------------------------------------------------

        @invariant()
        def the_store_holds_the_conversation(self) -> None:
            type(self).checks += 1
            with open_store(url) as store:
                assert [str(r.message["content"]) for r in store.current(self.sid)] == self.model

        @invariant()
        def a_new_session_restores_only_the_conversation(self) -> None:
            with ctxlife.Session(self.sid, settings_from_dict({"store": url}), context_window=WINDOW) as fresh:
                items = [str(m["content"]) for m in fresh.get_items()]
            # What it restores of the conversation (a compaction keeps part of it) is in the model's order.
            kept = iter(self.model)
            assert all(any(i == m for m in kept) for i in items if i in set(self.model))

    return Fleet


FLEET = settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    phases=[p for p in Phase if p not in (Phase.shrink, Phase.explain)],
)


def run(url: str) -> None:
    machine = fleet_machine(url)
    run_state_machine_as_test(machine, settings=FLEET)
    # The depth the run reached (pytest -s shows it): invariants are checked once after each
    # example's start and once after each step.
    steps = machine.checks - machine.examples  # type: ignore[attr-defined]
    print(f"\n[fleet {url.split(':', 1)[0]}] {machine.examples} examples, {steps} steps")  # type: ignore[attr-defined]
    assert steps >= machine.examples  # type: ignore[attr-defined]  # a machine that runs no steps proves nothing


@pytest.mark.slow
def test_fleet_on_a_file_store(tmp_path: Path) -> None:
    run(f"file://{tmp_path / 'sessions'}")


@pytest.mark.slow
def test_fleet_on_a_sqlite_store(tmp_path: Path) -> None:
    run(f"sqlite:///{tmp_path / 'sessions.db'}")


@pytest.mark.slow
def test_fleet_on_a_redis_store(redis_url: str, tmp_path: Path) -> None:
    run(f"{redis_url}?prefix=fleet-{tmp_path.name}:")


@pytest.mark.slow
def test_fleet_on_a_postgres_store(postgres_url: str) -> None:
    run(f"{postgres_url}?schema=fleet_{uuid.uuid4().hex[:12]}")


def test_the_model_is_not_the_product(tmp_path: Path) -> None:
    # The machine's oracle reads the store's own current state and nothing of the keeper's: a
    # store that loses an append must fail it (a guard against a machine that cannot fail).
    url = f"file://{tmp_path / 'sessions'}"
    machine = fleet_machine(url)()
    try:
        machine.turn(0, 0, False)
        machine.the_store_holds_the_conversation()
        with open_store(url) as store:
            store.append(machine.sid, [{"role": "user", "content": "written behind the model's back"}])
        with pytest.raises(AssertionError):
            machine.the_store_holds_the_conversation()
    finally:
        machine.teardown()
