"""Runs whose lists are built from scratch (``start_run(new_lists=True)``, a CrewAI kickoff) in a new process.

A new process's recorder holds no state of any view when the run starts; the views it reads later in the run
must still take the run's lists as new (a repeated task message is a new turn), and a later run that keeps its
conversation (``start_run()``) must not: each test compares the raw history on disk with what one process
that never restarted records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.sessions import open_store
from ctxlife.sessions.recording import Recorder
from ctxlife.testing import assistant, user

SYSTEM = {"role": "system", "content": "You are a clerk."}


def _host(url: str) -> ctxlife.Host:
    settings = settings_from_dict({"strategies": ["truncate_last_n"], "context_window": 8000}, source="test")
    host = ctxlife.Host(settings, session_id="s")
    host.store = open_store(url)
    return host


def _texts(url: str, view: str = "") -> list[Any]:
    with open_store(url) as store:
        return [r.message.get("content") for r in store.current("s", view)]


def _two_views_two_runs(url: str, *, restart: bool) -> None:
    """Two agents (views "a" and "b"), each run built from scratch; the second run repeats both tasks."""
    host = _host(url)
    for run in ("once", "twice"):
        if restart and run == "twice":
            host.close()
            host = _host(url)
        host.start_run(new_lists=True)
        for agent in ("a", "b"):
            messages = [SYSTEM, user(f"task {agent}")]
            host.before_llm_call(messages, view=agent)
            host.record_reply([*messages, assistant(f"{agent} done {run}")], view=agent)
    host.close()


def test_every_view_first_read_in_a_new_processs_run_built_from_scratch_records_the_run_again(
    tmp_path: Path,
) -> None:
    one, two = f"sqlite:///{tmp_path / 'one.db'}", f"sqlite:///{tmp_path / 'two.db'}"
    _two_views_two_runs(one, restart=False)
    _two_views_two_runs(two, restart=True)
    for view in ("a", "b"):
        expected = [f"task {view}", f"{view} done once", f"task {view}", f"{view} done twice"]
        assert _texts(one, view) == expected  # one process
        assert _texts(two, view) == expected  # the second run in a new process: the view "b" read after "a"


def test_a_run_that_keeps_its_conversation_after_a_run_built_from_scratch_records_nothing_twice(
    tmp_path: Path,
) -> None:
    """A new process starts a run from scratch, then (before any call) a run that sends its kept conversation:
    the kept messages are the ones recorded, not new turns."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    host = _host(url)
    host.record_reply([SYSTEM, user("task"), assistant("done once")])
    host.close()
    host = _host(url)
    host.start_run(new_lists=True)
    host.start_run()  # this run keeps its list: the mark of the one before is dropped
    host.manage([SYSTEM, user("task"), assistant("done once"), user("and now?")])
    host.record_reply([SYSTEM, user("task"), assistant("done once"), user("and now?"), assistant("now this")])
    host.close()
    assert _texts(url) == ["task", "done once", "and now?", "now this"]


def test_a_view_marked_alone_in_a_new_process_is_the_only_one_built_from_scratch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        first = Recorder(store)
        for view in ("a", "b"):
            first.record("s", [user("task"), assistant(f"{view} once")], view=view)
    with open_store(url) as store:
        again = Recorder(store)
        again.new_lists("s", "a")
        again.record("s", [user("task"), assistant("a twice")], view="a")
        again.record("s", [user("task"), assistant("b once"), user("more")], view="b")
    assert _texts(url, "a") == ["task", "a once", "task", "a twice"]
    assert _texts(url, "b") == ["task", "b once", "more"]
