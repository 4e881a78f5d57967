"""A cancelled ``ctxlife.amanage()`` (the user pressed stop, a request timed out) on every store.

The caller's list is left exactly as it was, whatever the abandoned worker thread still does, so
what the caller adds after the cancellation is kept and recorded by its next call; a call cancelled
while it waits behind another call of the same session records nothing and gives its thread back.
The pipelines run in ctxlife's own pool: an abandoned one never holds the event loop's threads.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import ctxlife
from ctxlife import api
from ctxlife.config import settings_from_dict
from ctxlife.sessions import open_store

# manage() with snapshot_restore warns that task_end is not called: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")

WINDOW = 100_000


class SlowCompaction:
    """A compaction that asks a slow model: reads the list, waits for the model, writes the result
    back (keeping the question), as a summarizer does. ``hold`` makes it wait until ``release``."""

    def __init__(self) -> None:
        self.hold = True
        self.started = threading.Event()
        self.release = threading.Event()

    @ctxlife.hookimpl(tryfirst=True)
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        seen = list(ctx.messages)
        self.started.set()
        if self.hold:
            self.release.wait(30)
        if len(seen) > 1:
            ctx.messages[:] = seen[-1:]


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Where is order 17?"},
        {"role": "assistant", "content": "It ships tomorrow."},
        {"role": "user", "content": "And order 18?"},
    ]


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def stored(url: str, sid: str) -> list[str]:
    with open_store(url) as store:
        return [r.message["content"] for r in store.read_records(sid)]


def test_a_cancelled_call_leaves_the_list_as_it_was_and_what_follows_is_recorded(store_url: str) -> None:
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url})
    slow = SlowCompaction()
    messages = conversation()

    async def cancel_mid_call() -> None:
        task = asyncio.create_task(
            ctxlife.amanage(messages, config=settings, session_id="u1", context_window=WINDOW, plugins=[slow])
        )
        assert await asyncio.to_thread(slow.started.wait, 30)  # the pipeline is running in its thread
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        # The user goes on: a new message while the abandoned call is still running.
        messages.append({"role": "user", "content": "Actually, cancel order 18."})
        slow.release.set()
        # The abandoned call may still run in ctxlife's pool: the session's next call waits for it.

    asyncio.run(cancel_mid_call())
    assert contents(messages) == contents(conversation()) + ["Actually, cancel order 18."]

    asyncio.run(ctxlife.amanage(messages, config=settings, session_id="u1", context_window=WINDOW, plugins=[slow]))
    assert contents(messages) == ["Actually, cancel order 18."]  # this call's compaction, written back
    assert stored(store_url, "u1") == contents(conversation()) + ["Actually, cancel order 18."]


def test_a_call_cancelled_while_waiting_for_its_session_records_nothing(store_url: str) -> None:
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "store": store_url})
    slow = SlowCompaction()
    first = conversation()[:1]
    second = conversation()

    async def cancel_waiting_call() -> None:
        busy = asyncio.create_task(
            ctxlife.amanage(first, config=settings, session_id="u1", context_window=WINDOW, plugins=[slow])
        )
        assert await asyncio.to_thread(slow.started.wait, 30)
        waiting = asyncio.create_task(
            ctxlife.amanage(second, config=settings, session_id="u1", context_window=WINDOW, plugins=[slow])
        )
        await asyncio.sleep(0.3)  # its worker thread waits for the session's host
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            pass
        slow.release.set()
        await busy

    asyncio.run(cancel_waiting_call())
    assert contents(second) == contents(conversation())
    assert stored(store_url, "u1") == contents(conversation())[:1]


class Gate:
    """Holds the model calls of one session until ``release`` (the others pass)."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.started = threading.Event()
        self.release = threading.Event()

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        if ctx.session_id == self.session:
            self.started.set()
            self.release.wait(120)  # longer than the tests' hang guards (30 s): only release ends it


async def until(condition: Any) -> None:
    """Wait for what another thread does at once unless the code is broken (a hang guard, no timing)."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("gave up waiting")


def test_an_abandoned_amanage_holds_none_of_the_event_loops_threads() -> None:
    settings = settings_from_dict({"strategies": []})
    gate = Gate("u1")

    async def abandon() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))  # the app's to_thread calls: one thread
        task = asyncio.create_task(
            ctxlife.amanage(conversation(), config=settings, session_id="u1", context_window=WINDOW, plugins=[gate])
        )
        await until(gate.started.is_set)
        task.cancel()  # a timeout: the pipeline still runs, in ctxlife's own pool
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "the app's own work"), 30) == "the app's own work"
        gate.release.set()

    asyncio.run(abandon())


def test_a_call_cancelled_while_waiting_for_its_session_gives_its_thread_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = ThreadPoolExecutor(2)
    monkeypatch.setattr(api, "_executor", pool)
    settings = settings_from_dict({"strategies": []})
    gate = Gate("u1")

    def call(session: str) -> Any:
        return ctxlife.amanage(
            conversation(), config=settings, session_id=session, context_window=WINDOW, plugins=[gate]
        )

    async def cancel_waiting() -> None:
        busy = asyncio.create_task(call("u1"))  # holds one of the pool's two threads
        await until(gate.started.is_set)
        waiting = asyncio.create_task(call("u1"))  # the other, waiting behind the first
        await until(lambda: any(s.users == 2 for s in api._hosts.values()))
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # Another session's call gets the thread the cancelled call gave back, while u1's first waits.
        report = await asyncio.wait_for(call("u2"), 30)
        assert report.failures == [] and not busy.done()
        gate.release.set()
        await busy

    try:
        asyncio.run(cancel_waiting())
    finally:
        pool.shutdown()
