"""A fleet on one session, searched by hypothesis: the keeper's explicit events against a plain model.

Two *processes* (each its own store object and host, as two workers behind a load balancer) serve
one conversation, each through two ``ctxlife.Session`` objects sharing its host (two requests, or
coroutines, in one process). Hypothesis picks the steps:

* **turn** — one session records a user turn (``prepare``) and the model's reply (``record_reply``);
  a long turn makes the config's strategy compact (a snapshot is written);
* **simultaneous turns** — both sessions of one process take a turn at the same moment (threads);
* **edit**, **regenerate** (pop the last reply, record another), **pop**, **remove**, **erase** — the
  caller's own edits, through any session;
* **restart** — a process dies (its host, store object and sessions are gone) and starts again;
* **failed write** — the store refuses the next append (the call raises, nothing is recorded) or
  writes it and loses the reply (recorded once, whether the call then succeeds or is retried).

The model is this file's own: the conversation as a list of texts, changed by what each step did.
After every step ``store.current()`` (read through a store object of its own) must equal it, and a
new session restores nothing the model no longer holds, and nothing out of its order. ``RELIABILITY_EXAMPLES=4``
(``make test-deep``) runs 250 examples of 40 steps per store: 10,000 steps each.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from pathlib import Path

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
EXAMPLES = 250 if SCALE >= 4 else max(1, int(8 * SCALE))
STEPS = 40
WINDOW = 1500  # truncate_last_n compacts above 20% of it: a long turn (~300 tokens) or a long history


class Process:
    """One worker: its own store object (through the fault-injecting scheme) and host, two sessions."""

    def __init__(self, url: str, sid: str) -> None:
        cfg = settings_from_dict(
            {
                "store": url,
                "strategies": ["truncate_last_n"],
                "threshold": 0.2,
                "truncate_last_n": {"rounds": 2},
            }
        )
        self.host = ctxlife.Host(cfg, context_window=WINDOW)
        self.sessions = [ctxlife.Session(sid, host=self.host) for _ in range(2)]

    def close(self) -> None:
        for session in self.sessions:
            session.close()
        self.host.close()


def fleet_machine(url: str) -> type[RuleBasedStateMachine]:
    class Fleet(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sid = f"fleet-{uuid.uuid4().hex[:10]}"
            self.plan = FaultPlan()
            self.scheme = faulty_scheme(url, self.plan)
            self.faulty_url = self.scheme.__enter__()
            self.processes = [Process(self.faulty_url, self.sid) for _ in range(2)]
            self.model: list[str] = []
            self.counter = 0

        def teardown(self) -> None:
            for process in self.processes:
                process.close()
            self.scheme.__exit__(None, None, None)

        def text(self, what: str) -> str:
            self.counter += 1
            return f"{what} {self.counter}"

        def session(self, p: int, s: int) -> ctxlife.Session:
            return self.processes[p].sessions[s]

        def seq_of(self, index: int) -> int:
            with open_store(url) as store:
                return store.current(self.sid)[index].seq

        # -- turns ---------------------------------------------------------------------------------

        @rule(p=st.integers(0, 1), s=st.integers(0, 1), long=st.booleans())
        def turn(self, p: int, s: int, long: bool) -> None:
            question = self.text("question") + (" words" * 250 if long else "")
            answer = self.text("answer")
            session = self.session(p, s)
            session.prepare({"role": "user", "content": question})
            session.record_reply(answer)
            assert session.last_report is not None and session.last_report.failures == []
            self.model += [question, answer]

        @rule(p=st.integers(0, 1))
        def simultaneous_turns(self, p: int) -> None:
            start = threading.Barrier(2)
            pairs = [(self.text("question"), self.text("answer")) for _ in range(2)]
            errors: list[BaseException] = []

            def run(s: int) -> None:
                try:
                    start.wait(timeout=30)
                    self.session(p, s).prepare({"role": "user", "content": pairs[s][0]})
                    self.session(p, s).record_reply(pairs[s][1])
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(s,)) for s in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert not errors, errors
            # Any interleaving of the two requests is right, as long as each reply follows its question.
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
            role = "user" if self.model[index].startswith(("question", "edited q")) else "assistant"
            self.session(p, s).edit(self.seq_of(index), {"role": role, "content": new})
            self.model[index] = new

        @precondition(lambda self: self.model and self.model[-1].startswith("answer"))
        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def regenerate(self, p: int, s: int) -> None:
            session = self.session(p, s)
            popped = session.pop()
            assert popped is not None and popped["content"] == self.model[-1]
            answer = self.text("answer")
            session.record_reply(answer)
            self.model[-1] = answer

        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def pop(self, p: int, s: int) -> None:
            popped = self.session(p, s).pop()
            assert popped is not None and popped["content"] == self.model.pop()

        @precondition(lambda self: self.model)
        @rule(p=st.integers(0, 1), s=st.integers(0, 1), data=st.data(), erase=st.booleans())
        def remove(self, p: int, s: int, data: st.DataObject, erase: bool) -> None:
            index = data.draw(st.integers(0, len(self.model) - 1))
            seq = self.seq_of(index)
            session = self.session(p, s)
            if erase:
                assert session.erase(seq) == [seq]
            else:
                session.remove(seq)
            del self.model[index]

        # -- failures and restarts ---------------------------------------------------------------------

        @rule(p=st.integers(0, 1))
        def restart(self, p: int) -> None:
            self.processes[p].close()
            self.processes[p] = Process(self.faulty_url, self.sid)

        @rule(p=st.integers(0, 1), s=st.integers(0, 1))
        def refused_write(self, p: int, s: int) -> None:
            question = self.text("question")
            with self.plan.outage("append"), pytest.raises(StoreError):
                self.session(p, s).prepare({"role": "user", "content": question})

        @rule(p=st.integers(0, 1), s=st.integers(0, 1), unreadable=st.booleans())
        def write_lost_its_reply(self, p: int, s: int, unreadable: bool) -> None:
            question = self.text("question")
            session = self.session(p, s)
            self.plan.break_("append", mode="landed")
            if unreadable:
                self.plan.break_("read_records")
            try:
                session.prepare({"role": "user", "content": question})
            except StoreError:
                self.plan.heal()
                session.prepare({"role": "user", "content": question})  # the caller retries
            finally:
                self.plan.heal()
            self.model.append(question)

        # -- what must hold ----------------------------------------------------------------------------

        @invariant()
        def the_store_holds_the_conversation(self) -> None:
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
    run_state_machine_as_test(fleet_machine(url), settings=FLEET)


@pytest.mark.slow
def test_fleet_on_a_file_store(tmp_path: Path) -> None:
    run(f"file://{tmp_path / 'sessions'}")


@pytest.mark.slow
def test_fleet_on_a_sqlite_store(tmp_path: Path) -> None:
    run(f"sqlite:///{tmp_path / 'sessions.db'}")


@pytest.mark.slow
def test_fleet_on_a_redis_store(redis_url: str, tmp_path: Path) -> None:
    run(f"{redis_url}?prefix=fleet-{tmp_path.name}:")


def test_the_model_is_not_the_product(tmp_path: Path) -> None:
    # The machine's oracle reads the store's own current state and nothing of the keeper's: a
    # store that loses an append must fail it (a guard against a machine that cannot fail).
    url = f"file://{tmp_path / 'sessions'}"
    machine = fleet_machine(url)()
    try:
        machine.turn(0, 0, False)
        with open_store(url) as store:
            store.append(machine.sid, [{"role": "user", "content": "written behind the model's back"}])
        with pytest.raises(AssertionError):
            machine.the_store_holds_the_conversation()
    finally:
        machine.teardown()
