"""Recall in the database with a postgres store (ctxlife.recall.pg): the index is rows next to the
raw history, written with it, and every worker searches the same rows.

What a user relies on: the search finds what the SQLite index finds; an edit, a removal, an erase
or a delete is gone from the search in the same transaction that made it; a worker that never saw
a session builds nothing, writes nothing and keeps no file to search it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sessions"))

from pg_sql import pg_sql  # noqa: E402

from ctxlife.recall import HistorySearch  # noqa: E402
from ctxlife.sessions import REMOVE, REPLACE, Event, open_store  # noqa: E402

pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def url(postgres_url: str) -> str:
    return f"{postgres_url}?schema=t_rc_{uuid.uuid4().hex[:12]}"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


TOPICS = ["gardening", "the weather", "cooking pasta", "a walk by the river", "board games", "the train timetable"]


def history() -> list[dict[str, Any]]:
    """A conversation with a few facts among small talk (English, Chinese, a long tool result)."""
    out: list[dict[str, Any]] = []
    for i in range(60):
        topic = TOPICS[i % len(TOPICS)]
        out += [user(f"Day {i}: let's chat about {topic}, nothing special."), reply(f"Sure, {topic} sounds nice.")]
        if i == 7:
            out += [user("Which movie did you recommend for Friday?"), reply("I recommended Spirited Away.")]
        if i == 19:
            out += [user("我们明天去爬山，记得带上登山杖。"), reply("好的，我会提醒你带登山杖。")]
        if i == 33:
            out += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "orders", "arguments": "{}"}}],
                },
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "content": json.dumps(
                        [{"order": 4000 + k, "item": "umbrella" if k == 57 else "pencil"} for k in range(90)]
                    ),
                },
            ]
        if i == 41:
            out += [user("My sister's cat is called Marmalade."), reply("Marmalade is a lovely name.")]
    return out


QUESTIONS = [
    "which movie did you recommend?",
    "what was recommended for Friday",
    "我们去爬山要带什么？",
    "登山杖",
    "which order had the umbrella?",
    "what is my sister's cat called?",
    "Marmalade",
    "movies",  # a stem: matches "movie"
]


def best(search: HistorySearch, session: str, question: str) -> list[int]:
    return [p.hit.seq for p in search.passages(session, question, limit=3)]


def test_the_database_search_finds_what_the_sqlite_index_finds(url: str, tmp_path: Path) -> None:
    messages = history()
    with open_store(url) as pg, open_store(f"sqlite:///{tmp_path / 's.db'}") as lite:
        pg.append("s", messages)
        lite.append("s", messages)
        on_pg, on_lite = HistorySearch(pg), HistorySearch(lite)
        try:
            for question in QUESTIONS:
                found = best(on_pg, "s", question)
                assert found, question
                assert found[0] == best(on_lite, "s", question)[0], question
        finally:
            on_pg.close()
            on_lite.close()


def test_the_database_weighs_tool_results_before_keeping_the_best_few(url: str) -> None:
    lines = [user(f"The kettle on shelf {i} is blue.") for i in range(12)]
    fields = " ".join(f"field{i} value{i}" for i in range(400))
    messages = [*lines, {"role": "tool", "tool_call_id": "t1", "content": f"{fields} warranty kettle {fields}"}]
    with open_store(url) as pg:
        pg.append("s", messages)
        search = HistorySearch(pg)
        try:
            index = search.index("s")
            assert [h.role for h in index.search("kettle", limit=2)] == ["user", "user"]
            weighted = index.search("kettle", limit=2, tool_weight=20.0)
            assert weighted[0].seq == 13 and weighted[0].part > 0 and "warranty kettle" in weighted[0].text
            assert weighted[1].role == "user"
        finally:
            search.close()


def test_an_edit_a_removal_and_an_erase_leave_the_search_with_the_write(url: str) -> None:
    with open_store(url) as store:
        store.append("s", [user("the locker code is 4711"), reply("noted"), user("the wifi password is tulip")])
        store.append("s", [user("the gate opens at dawn")])
        search = HistorySearch(store)
        try:
            assert best(search, "s", "locker code") == [1]
            store.append_events("s", [Event(REPLACE, user("the locker code is 9000"), 1)])
            assert best(search, "s", "4711") == [] and best(search, "s", "9000") == [1]
            store.append_events("s", [Event(REMOVE, {}, 3)])
            assert best(search, "s", "wifi tulip") == []
            assert store.erase("s", [4]) == [4]
            assert best(search, "s", "gate dawn") == []
            texts = [str(r[0]) for r in pg_sql(url, "SELECT text FROM {s}.ctxlife_recall ORDER BY slot")]
            assert texts == ["the locker code is 9000", "noted"]  # nothing else of the session is kept
            counts = pg_sql(url, "SELECT recall_docs, recall_len FROM {s}.ctxlife_sessions")
            kept = pg_sql(url, "SELECT count(*), sum(len) FROM {s}.ctxlife_recall_docs")
            assert counts == kept  # BM25's counters follow every change
            assert store.delete("s")
            assert pg_sql(url, "SELECT count(*) FROM {s}.ctxlife_recall_docs") == [(0,)]
            assert pg_sql(url, "SELECT count(*) FROM {s}.ctxlife_recall") == [(0,)]
            assert best(search, "s", "locker code") == []
        finally:
            search.close()


def test_a_worker_that_never_saw_a_long_session_builds_and_writes_nothing_to_search_it(
    url: str, tmp_path: Path
) -> None:
    session = "long"
    with open_store(url) as store:
        for start in range(0, 10_000, 1_000):
            batch = [
                user(f"message {k} about {TOPICS[k % len(TOPICS)]}") if k != 4242 else user("the vault is in Lisbon")
                for k in range(start, start + 1_000)
            ]
            store.append(session, batch)
    before = pg_sql(url, "SELECT count(*), sum(len) FROM {s}.ctxlife_recall_docs")
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import sys\n"
        "from structlog.testing import capture_logs\n"
        "from ctxlife.recall import HistorySearch\n"
        "from ctxlife.sessions import open_store\n"
        "with capture_logs() as events, open_store(sys.argv[1]) as store:\n"
        "    search = HistorySearch(store)\n"
        "    print([p.hit.seq for p in search.passages('long', 'where is the vault?')])\n"
        "    search.close()\n"
        "print(sorted({e['event'] for e in events if 'recall' in e['event']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
        env={**os.environ, "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found, events = done.stdout.strip().splitlines()
    assert found == "[4243]"  # found on the first call
    assert events == "[]"  # no index built
    assert pg_sql(url, "SELECT count(*), sum(len) FROM {s}.ctxlife_recall_docs") == before  # nothing written
    assert list(home.rglob("*")) == []  # no local index file


# -- a fleet: two worker processes, one Postgres --------------------------------------------------------

FLEET_WORKER = Path(__file__).with_name("fleet_worker.py")


class Worker:
    """A worker process (fleet_worker.py) with a folder and HOME of its own."""

    def __init__(self, url: str, session: str, folder: Path) -> None:
        self.folder = folder
        (folder / "home").mkdir(parents=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(FLEET_WORKER), url, session, "1000"],
            cwd=folder,
            env={**os.environ, "HOME": str(folder / "home")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def call(self, request: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise AssertionError(self.proc.stderr.read()[-3000:] if self.proc.stderr else "worker died")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def recalled(listing: list[dict[str, Any]]) -> tuple[str, str]:
    """(the recall block's text, the rest of the list's text) of a list a worker sent (as JSON: by its text)."""
    from ctxlife.messages import RECALL_PREFIX

    texts = [str(m.get("content")) for m in listing]
    block = "\n".join(t for t in texts if t.startswith(RECALL_PREFIX))
    rest = "\n".join(t for t in texts if not t.startswith(RECALL_PREFIX))
    return block, rest


def test_two_workers_alternate_200_turns_on_one_postgres(url: str, tmp_path: Path) -> None:
    session = "fleet"
    workers = [Worker(url, session, tmp_path / "a"), Worker(url, session, tmp_path / "b")]
    expected: list[str] = []
    asked = 0
    try:
        for turn in range(200):
            worker = workers[turn % 2]  # A takes the even turns, B the odd ones
            if turn % 10 == 0 and turn > 0:  # A records a fact (not first: a first message may be pinned)
                user_text, reply_text = f"Please remember: the password of locker {turn} is kw{turn}x.", "Noted."
            elif turn % 10 == 5 and turn >= 55:  # B asks for one A recorded 45 turns ago
                user_text, reply_text = f"What was the password of locker {turn - 45}?", "Let me check."
            else:
                topic = TOPICS[turn % len(TOPICS)]
                user_text, reply_text = f"Day {turn}: let's chat about {topic}. Nothing special.", "Sounds nice."
            if turn == 121:  # B's first call after A erased the fact of turn 100
                user_text = "What was the password of locker 100?"
            listing = worker.call({"op": "turn", "user": user_text, "reply": reply_text})
            expected += [user_text, reply_text]
            block, rest = recalled(listing)
            if turn % 10 == 5 and turn >= 55 and turn != 145:
                fact = f"kw{turn - 45}x"
                assert fact not in rest, turn  # A's fact left B's context (compaction) ...
                assert fact in block, turn  # ... and recall on B finds it in the shared search
                asked += 1
            if turn == 120:  # A erases a fact
                assert workers[0].call({"op": "erase", "pattern": "kw100x"})
                expected.remove("Please remember: the password of locker 100 is kw100x.")
            if turn in (121, 145):
                assert "kw100x" not in block + rest  # gone from B's very next call, and after
        assert asked == 14
    finally:
        for worker in workers:
            worker.stop()
    with open_store(url) as store:
        texts = [str(r.message.get("content")) for r in store.current(session)]
    assert texts == expected  # nothing lost, nothing recorded twice, in order
    for worker in workers:  # no index of a worker's own, in its folder or its HOME
        assert [p.name for p in worker.folder.rglob("*") if p.is_file()] == []
    assert pg_sql(url, "SELECT count(*) FROM {s}.ctxlife_recall WHERE strpos(text, 'kw100x') > 0") == [(0,)]
