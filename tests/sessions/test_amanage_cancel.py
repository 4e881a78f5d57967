"""A cancelled ``ctxlife.amanage()`` (the user pressed stop, a request timed out) on every store.

The caller's list is left exactly as it was, whatever the abandoned worker thread still does, so
what the caller adds after the cancellation is kept and recorded by its next call; a call cancelled
while it waits behind another call of the same session records nothing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import ctxlife
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
        # asyncio.run() returns once the worker thread is done: the abandoned call has finished.

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
