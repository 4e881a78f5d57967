"""What a history search returns for a question: which passages, in what order, the neighbours shown
with each, their dates, what is in view left out, and an index that stays true to the raw history
(rebuilt when its version or the history changes, no remembered hit outliving a write).

Written for the survivors of mutation scope ``recall`` (docs/mutation/recall.md): real stores and
indexes under tmp_path, ``ctxlife session search`` run in this process (a subprocess would run the
unmutated code). They assert what is returned or printed, not how the index gets there.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ctxlife import TokenCounter
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.recall import (
    INDEX_VERSION,
    HistoryIndex,
    HistorySearch,
    Hit,
    Passage,
    StoredRecord,
    configured_index_dir,
    default_index_dir,
    excerpt,
    live_keys,
    passages_from,
    position,
    query_terms,
    read_records,
    remove_index,
    split_question,
)
from ctxlife.recall.records import CHUNK_CHARS, chunks, head_of
from ctxlife.sessions import RawRecord, open_store

TRIP = [
    {"role": "user", "content": "Hello there."},
    {"role": "assistant", "content": "Hi!"},
    {"role": "user", "content": "Our hotel in Lisbon is the Casa do Mar,\n room 214."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Any   tips for dinner?"},
    {"role": "assistant", "content": "Try the harbour."},
]


def chat_records(*texts: tuple[str, str], start: int = 1, at: float | None = None, view: str = "") -> list[RawRecord]:
    return [
        RawRecord(start + i, {"role": role, "content": text}, recorded_at=at, view=view)
        for i, (role, text) in enumerate(texts)
    ]


@contextlib.contextmanager
def searching(store: Any, **options: Any) -> Iterator[HistorySearch]:
    """A history search on ``store``, closed on the way out."""
    search = HistorySearch(store, **options)
    try:
        yield search
    finally:
        search.close()


def seqs(passages: list[Any]) -> list[list[int]]:
    return [[r.seq for r in p.records] for p in passages]


@pytest.fixture
def index(tmp_path: Path):
    made = HistoryIndex(tmp_path / "index.sqlite")
    yield made
    made.close()


@pytest.fixture
def trip_url(tmp_path: Path) -> str:
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("trip", TRIP)
    return url


# -- ctxlife session search, in this process ----------------------------------------------------------


def test_session_search_prints_each_passage_with_its_place_rank_and_marked_match(trip_url, capsys):
    assert main(["session", "search", "--store", trip_url, "trip", "hotel Lisbon"]) == 0
    out = capsys.readouterr().out
    with open_store(trip_url) as store:
        first = store.read_records("trip")[1]
    lines = out.splitlines()
    when = datetime.fromtimestamp(first.recorded_at).strftime("%Y-%m-%d %H:%M")
    n = sum(line.startswith("[") for line in lines)
    assert lines[0] == f"[{when}, message 2]  match 1 of {n}"
    # the match marked with '>', its turn and one message of context on each side (a question among them
    # with its answer); whitespace folded
    assert lines[1:] == [
        "  #2 assistant: Hi!",
        "> #3 user: Our hotel in Lisbon is the Casa do Mar, room 214.",
        "  #4 assistant: Noted.",
        "  #5 user: Any tips for dinner?",
        "  #6 assistant: Try the harbour.",
        "",
    ]


def test_session_search_json_lists_each_passage_with_its_messages_as_stored(trip_url, capsys):
    assert main(["session", "search", "--store", trip_url, "trip", "hotel Lisbon", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    with open_store(trip_url) as store:
        stored = {r.seq: r for r in store.read_records("trip")}
    assert len(rows) == 1 and rows[0]["seq"] == 3 and rows[0]["score"] > 0
    assert rows[0]["score"] == round(rows[0]["score"], 3)
    assert [m["seq"] for m in rows[0]["messages"]] == [2, 3, 4, 5, 6]
    for m in rows[0]["messages"]:
        assert m["role"] == stored[m["seq"]].message["role"] and m["text"] == stored[m["seq"]].message["content"]
        assert m["recorded_at"] == stored[m["seq"]].recorded_at and m["view"] == ""


def test_session_search_json_is_indented_and_its_scores_are_the_searchs_to_3_places(trip_url, capsys):
    assert main(["session", "search", "--store", trip_url, "trip", "hotel Lisbon dinner", "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    assert out == json.dumps(rows, ensure_ascii=False, indent=2) + "\n"
    assert len(rows) > 1 and [row["rank"] for row in rows] == list(range(1, len(rows) + 1))  # best first, from 1
    with open_store(trip_url) as store:
        with searching(store, index_dir="memory") as search:
            scores = [round(p.hit.score, 3) for p in search.passages("trip", "hotel Lisbon dinner")]
    assert [row["score"] for row in rows] == scores and any(s != round(s) for s in scores)


def test_session_search_shows_nothing_the_configs_privacy_filter_removes(trip_url, tmp_path, capsys):
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        f'strategies = ["redact"]\nstore = "{trip_url}"\n[redact]\nkinds = []\npatterns = {{ room = "room [0-9]+" }}\n',
        encoding="utf-8",
    )
    for extra in ([], ["--json"]):
        assert (
            main(["session", "search", "--store", trip_url, "trip", "hotel Lisbon", "--config", str(config), *extra])
            == 0
        )
        out = capsys.readouterr().out
        assert "Casa do Mar" in out and "room 214" not in out and "[REDACTED:room]" in out
    assert main(["session", "search", "--store", trip_url, "trip", "hotel Lisbon"]) == 0
    assert "room 214" in capsys.readouterr().out  # the value is there without the filter


def test_session_search_prints_a_long_message_as_its_excerpt_around_the_match_filtered_and_json_the_whole(
    tmp_path, capsys
):
    # A long message is indexed in chunks; the one that matched ends just before the value. The match is
    # printed as the excerpt the recall block would show (the value past the chunk's end included), not
    # thousands of characters; --json lists the message as stored. Both through the privacy filter.
    filler = " ".join(f"line {i} of the deploy log, all fine." for i in range(28))
    said = (
        "ERROR disk quota exceeded on the shared volume during the nightly backup of the analytics cluster,"
        " which the on-call engineer traced to the retention job writing snapshots that never expire, on volume"
    )
    log = f"{filler} {said} vol-7731 (room 214). {filler} {filler} {filler}"
    chunk = next(c for c in chunks(log, CHUNK_CHARS) if "disk quota" in c)
    assert "vol-7731" not in chunk and len(log) > 3 * CHUNK_CHARS  # the chunk that matches lacks the value
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("ops", [{"role": "user", "content": "Run the deploy."}, {"role": "assistant", "content": log}])
    assert main(["session", "search", "--store", url, "ops", "disk quota exceeded volume"]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("> #2 ")]
    assert len(shown) == 1 and "volume vol-7731" in shown[0] and len(shown[0]) < len(log) // 3
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        f'strategies = ["redact"]\nstore = "{url}"\n[redact]\nkinds = []\npatterns = {{ room = "room [0-9]+" }}\n',
        encoding="utf-8",
    )
    question = ["ops", "disk quota exceeded volume"]
    assert main(["session", "search", "--store", url, *question, "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "vol-7731" in out and "room 214" not in out and "[REDACTED:room]" in out
    assert main(["session", "search", "--store", url, "ops", "disk quota exceeded volume", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [m["text"] for m in rows[0]["messages"] if m["seq"] == 2] == [log]


def test_session_search_json_keeps_non_ascii_text_as_it_is(tmp_path, capsys):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append(
            "cn",
            [{"role": "user", "content": "我们在里斯本住的酒店叫海之家。"}, {"role": "assistant", "content": "好的。"}],
        )
    assert main(["session", "search", "--store", url, "cn", "酒店", "--json"]) == 0
    out = capsys.readouterr().out
    assert "海之家" in out and "\\u" not in out
    assert json.loads(out)[0]["messages"][0]["text"] == "我们在里斯本住的酒店叫海之家。"


def test_session_search_limit_shows_at_most_that_many_passages(tmp_path, capsys):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append(
            "s",
            [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"the kettle story part {i}"}
                for i in range(30)
            ],
        )
    assert main(["session", "search", "--store", url, "s", "kettle", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5  # the default
    assert main(["session", "search", "--store", url, "s", "kettle", "--json", "--limit", "2"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["session", "search", "--store", url, "s", "kettle", "--limit", "1"]) == 0
    assert capsys.readouterr().out.count(">") == 1


def test_session_search_says_when_nothing_matches_and_exits_0(trip_url, capsys):
    assert main(["session", "search", "--store", trip_url, "trip", "zebra"]) == 0
    assert capsys.readouterr().out == "Nothing in session 'trip' matches \"zebra\".\n"
    assert main(["session", "search", "--store", trip_url, "trip", "zebra", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_session_search_of_an_unknown_session_exits_1_and_names_it(trip_url, capsys):
    assert main(["session", "search", "--store", trip_url, "nobody", "hotel"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: no raw history for session 'nobody' in {trip_url}; `ctxlife session list` shows the sessions\n"
    )


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_session_search_refuses_a_limit_below_1_with_exit_2(trip_url, capsys, limit):
    assert main(["session", "search", "--store", trip_url, "trip", "hotel", "--limit", limit]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"error: --limit must be at least 1, got {limit}\n"


def test_session_search_prints_a_record_without_a_role_as_message(tmp_path, capsys):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s", [{"content": "the walrus password is tusk"}])
    assert main(["session", "search", "--store", url, "s", "walrus"]) == 0
    assert "> #1 message: the walrus password is tusk" in capsys.readouterr().out.splitlines()


# -- where the index lives --------------------------------------------------------------------------


def test_the_default_index_folder_is_beside_a_local_store_and_none_for_others(tmp_path):
    assert default_index_dir(f"file://{tmp_path}/s") == tmp_path / "s" / "recall_index"
    assert default_index_dir(f"FILE://{tmp_path}/s?fsync=false") == tmp_path / "s" / "recall_index"
    assert default_index_dir(f"file://{tmp_path}/a%20b") == tmp_path / "a b" / "recall_index"
    assert default_index_dir(f"sqlite:///{tmp_path}/s.db") == tmp_path / "s.db.recall_index"
    assert default_index_dir(f"SQLite:///{tmp_path}/s.db?timeout=3") == tmp_path / "s.db.recall_index"
    for other in ("sqlite:///:memory:", "sqlite://", "sqlite:///", "file://", "redis://localhost:6379/0", ""):
        assert default_index_dir(other) is None, other


def test_a_configured_index_folder_is_used_only_when_recall_is_on_and_it_is_not_memory(tmp_path):
    def settings(strategies: list[str], **recall: Any) -> Any:
        return settings_from_dict({"strategies": strategies, "recall": recall})

    assert configured_index_dir(settings(["recall"], index_dir=str(tmp_path / "idx"))) == tmp_path / "idx"
    assert configured_index_dir(settings(["recall"], index_dir="~/idx")) == Path("~/idx").expanduser()
    assert configured_index_dir(settings(["recall"], index_dir="memory")) is None
    assert configured_index_dir(settings(["recall"])) is None
    assert configured_index_dir(settings(["truncate_last_n"])) is None


def test_remove_index_deletes_the_database_and_its_logs_and_says_whether_any_existed(tmp_path):
    for suffix in ("", "-wal", "-shm", "-journal"):
        (tmp_path / f"s1.sqlite{suffix}").write_text("x")
    (tmp_path / "s2.sqlite").write_text("kept")
    assert remove_index(tmp_path, "s1") is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s2.sqlite"]
    assert remove_index(str(tmp_path), "s1") is False
    (tmp_path / "s3.sqlite-wal").write_text("x")
    assert remove_index(tmp_path, "s3") is True and not (tmp_path / "s3.sqlite-wal").exists()


def test_a_search_keeps_its_index_with_the_sessions_derived_data_or_where_index_dir_says(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        derived = store.derived_dir("s1")
        assert derived is not None and not (derived / "recall.sqlite").exists()
        with searching(store) as search:
            assert search.passages("s1", "hotel Lisbon")
            assert search.index_path("s1") == derived / "recall.sqlite" and (derived / "recall.sqlite").is_file()
        with searching(store, index_dir=tmp_path / "idx") as elsewhere:
            assert elsewhere.passages("s1", "hotel Lisbon")
            assert elsewhere.index_path("s1") == tmp_path / "idx" / "s1.sqlite"
            assert (tmp_path / "idx" / "s1.sqlite").is_file()
        with searching(store, index_dir="memory") as in_memory:
            assert in_memory.passages("s1", "hotel Lisbon") and in_memory.index_path("s1") is None
        assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["s1.sqlite"]


def test_an_index_deleted_under_an_open_search_is_rebuilt_from_the_raw_history(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        with searching(store, index_dir=tmp_path / "idx") as search:
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]
            assert remove_index(tmp_path / "idx", "s1")
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]
            assert (tmp_path / "idx" / "s1.sqlite").is_file()


def test_a_session_deleted_and_written_again_is_searched_as_it_is_now(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        with searching(store, index_dir=tmp_path / "idx") as search:
            assert search.passages("s1", "hotel Lisbon")
            store.delete("s1")
            store.append("s1", [{"role": "user", "content": "the parrot is called Kiwi"}, *TRIP[1:2]])
            assert search.passages("s1", "hotel Lisbon") == []
            assert [p.hit.seq for p in search.passages("s1", "parrot")] == [1]


def test_an_index_file_of_another_version_is_rebuilt_and_finds_everything_again(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        with searching(store, index_dir=tmp_path / "idx") as search:
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]
        with sqlite3.connect(tmp_path / "idx" / "s1.sqlite") as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(INDEX_VERSION - 1),))
        with searching(store, index_dir=tmp_path / "idx") as again:
            assert [p.hit.seq for p in again.passages("s1", "hotel Lisbon")] == [3]
            assert [p.hit.seq for p in again.passages("s1", "harbour dinner")] == [6]
        with sqlite3.connect(tmp_path / "idx" / "s1.sqlite") as db:
            assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == (str(INDEX_VERSION),)
            assert db.execute("SELECT count(*) FROM records").fetchone() == (len(TRIP),)


# -- the records a search reads ----------------------------------------------------------------------


class _Foreign:
    """A store of another package: its records are its own objects, not ctxlife's RawRecord."""

    class Record:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    def __init__(self, records: list[Any]) -> None:
        self.records = records

    def read_records(self, session_id: str, after_seq: int = 0) -> list[Any]:
        return [r for r in self.records if int(r.seq) > after_seq]


def test_records_of_another_stores_kind_are_read_as_raw_records():
    full = _Foreign.Record(
        seq="2",
        message={"role": "user", "content": "hi"},
        fingerprint="fp2",
        view="v",
        recorded_at=5.0,
        op="replace",
        target="1",
    )
    bare = _Foreign.Record(seq=3, message="not a dict")
    empty = _Foreign.Record(seq=4, message={}, fingerprint=None, view=None, recorded_at=None, op=None, target=None)
    store = _Foreign([_Foreign.Record(seq=1, message={"role": "user", "content": "a"}), full, bare, empty])
    got = read_records(store, "s", 1)
    assert got == [
        RawRecord(
            2, {"role": "user", "content": "hi"}, fingerprint="fp2", view="v", recorded_at=5.0, op="replace", target=1
        ),
        RawRecord(3, {}, fingerprint="", view="", recorded_at=None, op="add", target=None),
        RawRecord(4, {}, fingerprint="", view="", recorded_at=None, op="add", target=None),
    ]
    assert all(type(r) is RawRecord for r in got)
    assert [r.seq for r in read_records(store, "s", 0)] == [1, 2, 3, 4]


def test_a_ctxlife_stores_records_are_read_as_they_are(trip_url):
    with open_store(trip_url) as store:
        assert read_records(store, "trip", 4) == store.read_records("trip", after_seq=4)
        assert [r.seq for r in read_records(store, "trip", 0)] == [1, 2, 3, 4, 5, 6]


def test_recent_keys_are_the_role_and_text_of_the_latest_records(trip_url):
    with open_store(trip_url) as store:
        with searching(store, index_dir="memory") as search:
            assert search.recent_keys("trip", 2) == {
                ("user", "Any   tips for dinner?"),
                ("assistant", "Try the harbour."),
            }
            assert len(search.recent_keys("trip")) == len(TRIP)


def test_sessions_past_max_open_are_closed_and_reopened_with_everything_found(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        for sid in ("a", "b", "c"):
            store.append(sid, [{"role": "user", "content": f"the {sid}-team mascot is a heron"}])
        with searching(store, index_dir=tmp_path / "idx", max_open=1) as search:
            for _ in range(2):
                for sid in ("a", "b", "c"):
                    found = search.passages(sid, "mascot heron")
                    assert [r.text for p in found for r in p.records] == [f"the {sid}-team mascot is a heron"]
        assert HistorySearch.MAX_OPEN == 64 and HistorySearch(store).max_open == 64
        assert HistorySearch(store, max_open=0).max_open == 64 and HistorySearch(store, max_open=-5).max_open == 1


def test_a_forgotten_session_is_found_again_in_full_and_new_records_too(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        with searching(store, index_dir=tmp_path / "idx") as search:
            assert search.passages("s1", "hotel Lisbon")
            search.forget("s1")
            search.forget("never-opened")
            store.append("s1", [{"role": "user", "content": "the ferry leaves at nine"}])
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]
            assert [p.hit.seq for p in search.passages("s1", "ferry")] == [7]


def test_records_appended_through_the_same_store_object_are_found(tmp_path):
    """The recorder appends through the store object the search was given: each search still sees them."""
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP[:2])
        with searching(store, index_dir=tmp_path / "idx") as search:
            assert search.passages("s1", "hotel") == []
            for i, message in enumerate(TRIP[2:], 3):
                store.append("s1", [message])
                assert search.index("s1").last_seq == i
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]


# -- which passages, in what order ------------------------------------------------------------------


def test_the_best_matching_turn_comes_first_then_the_others_by_score(index):
    index.add(
        chat_records(
            ("user", "I like tea."),
            ("assistant", "Tea is nice."),
            ("user", "The violin teacher is Mrs Okafor; violin lessons are on Tuesday."),
            ("assistant", "Okafor, Tuesday: noted."),
            ("user", "Maybe a violin some day."),
            ("assistant", "Sure."),
            ("user", "Weather is grey."),
            ("assistant", "It is."),
        )
    )
    found = passages_from(index, "who is the violin teacher", context=0)
    assert [p.hit.seq for p in found] == [3, 5]
    assert seqs(found) == [[3, 4], [5, 6]]
    assert found[0].hit.score >= found[1].hit.score


def test_a_stores_search_defaults_to_five_passages_any_coverage_and_tool_results_unweighted(tmp_path):
    messages: list[dict[str, Any]] = []
    for name in ("alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo", "hazel"):
        messages += [
            {"role": "user", "content": f"chat with {name}: the harbour tour was fun"},
            {"role": "assistant", "content": "noted"},
        ]
    messages += [
        {"role": "user", "content": "the ferry fee is forty"},
        {"role": "tool", "tool_call_id": "c1", "content": "the ferry fee is forty"},
    ]
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", messages)
        with searching(store, index_dir="memory") as search:
            assert len(search.passages("s1", "harbour tour")) == 5
            assert search.passages("s1", "harbour ferry")  # a partial match is enough by default
            # the same text as a chat message and as a tool result: unweighted, the earlier first
            assert [p.hit.seq for p in search.passages("s1", "ferry fee forty", context=0)] == [17, 18]
            assert [p.hit.seq for p in search.passages("s1", "ferry fee forty", context=0, tool_weight=2.0)] == [18, 17]


def test_min_score_leaves_out_weak_matches_and_limit_caps_the_passages(index):
    index.add(chat_records(*[("user" if i % 2 == 0 else "assistant", f"walrus fact number {i}") for i in range(12)]))
    assert len(passages_from(index, "walrus", limit=3)) == 3
    assert len(passages_from(index, "walrus", limit=1)) == 1
    assert passages_from(index, "walrus", min_score=1e9) == []


def test_min_coverage_keeps_only_turns_holding_that_share_of_the_question(index):
    index.add(
        chat_records(
            ("user", "the quokka lives on Rottnest"),
            ("assistant", "ok"),
            ("user", "another quokka"),
            ("assistant", "ok"),
            ("user", "filler one"),
            ("assistant", "filler two"),
        )
    )
    assert [p.hit.seq for p in passages_from(index, "quokka Rottnest", context=0)] == [1, 3]
    assert [p.hit.seq for p in passages_from(index, "quokka Rottnest", context=0, min_coverage=0.9)] == [1]


def test_tool_weight_ranks_fetched_data_above_chat_that_repeats_the_words(index):
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "what is the parcel status code"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": [call]}),
            RawRecord(
                3,
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "content": json.dumps({"parcel": "A7", "status": "held", "code": 5521, "depot": "north"}),
                },
            ),
            RawRecord(4, {"role": "assistant", "content": "It is held."}),
            RawRecord(5, {"role": "user", "content": "parcel status parcel status"}),
            RawRecord(6, {"role": "assistant", "content": "ok"}),
        ]
    )
    plain = [p.hit.seq for p in passages_from(index, "parcel status", context=0, limit=2)]
    weighted = [p.hit.seq for p in passages_from(index, "parcel status", context=0, limit=2, tool_weight=50.0)]
    assert weighted[0] == 3 and plain != weighted


# -- the neighbours shown with a match --------------------------------------------------------------


def test_a_user_message_is_shown_with_its_reply_and_context_messages_each_side(index):
    index.add(chat_records(*[("user" if i % 2 == 0 else "assistant", f"line {i}") for i in range(10)]))
    index.add(chat_records(("user", "the lynx is named Boris"), ("assistant", "Boris the lynx, noted."), start=11))
    index.add(chat_records(*[("user" if i % 2 == 0 else "assistant", f"line {i}") for i in range(6)], start=13))
    assert seqs(passages_from(index, "lynx Boris", context=0, limit=1)) == [[11, 12]]
    assert seqs(passages_from(index, "lynx Boris", context=1, limit=1)) == [[10, 11, 12, 13]]
    found = passages_from(index, "lynx Boris", context=2, limit=1)
    assert seqs(found) == [[9, 10, 11, 12, 13, 14]] and found[0].core == {11, 12}


def test_a_reply_is_shown_with_what_it_answers_and_a_reply_that_asks_with_the_users_answer(index):
    index.add(
        chat_records(
            ("user", "plan the week"),
            ("assistant", "Shall we book the glacier hike for Thursday?"),
            ("user", "yes please"),
            ("assistant", "done"),
            ("user", "something else"),
            ("assistant", "the otter exhibit opens at noon."),
            ("user", "thanks"),
        )
    )
    asks = passages_from(index, "glacier hike", context=0, limit=1)
    assert [p.hit.seq for p in asks] == [2] and seqs(asks) == [[1, 2, 3]] and asks[0].core == {1, 2, 3}
    states = passages_from(index, "otter exhibit", context=0, limit=1)
    assert seqs(states) == [[5, 6]]  # a reply that asks nothing: not the next user message


@pytest.mark.parametrize("mark", ["?", "？", "؟"])
def test_a_reply_ending_in_a_question_mark_of_any_script_takes_the_answer_in(index, mark):
    index.add(
        chat_records(
            ("user", "start"), ("assistant", f"Is the kayak red{mark}  "), ("user", "it is blue"), ("assistant", "ok")
        )
    )
    assert seqs(passages_from(index, "kayak", context=0, limit=1)) == [[1, 2, 3]]


def test_a_tool_result_is_shown_with_the_call_and_a_call_with_its_results(index):
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "forecast", "arguments": json.dumps({"city": c})}}
        for i, c in enumerate(("Oslo", "Bergen"))
    ]
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "weather please"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": calls}),
            RawRecord(3, {"role": "tool", "tool_call_id": "c0", "content": "Oslo: sleet, 1C"}),
            RawRecord(4, {"role": "tool", "tool_call_id": "c1", "content": "Bergen: drizzle, 6C"}),
            RawRecord(5, {"role": "assistant", "content": "Cold in both."}),
            RawRecord(6, {"role": "user", "content": "fine"}),
        ]
    )
    by_result = passages_from(index, "drizzle", context=0, limit=1)
    assert [p.hit.seq for p in by_result] == [4] and by_result[0].core == {2, 4}
    assert seqs(by_result) == [[2, 4]]
    by_call = passages_from(index, "forecast", context=0, limit=1)
    assert [p.hit.seq for p in by_call] == [2] and by_call[0].core == {2, 3, 4} and seqs(by_call) == [[2, 3, 4]]
    # context around a tool turn: chat messages, never another tool result
    assert seqs(passages_from(index, "drizzle", context=1, limit=1)) == [[1, 2, 4, 5]]


def test_a_call_with_many_results_is_shown_whole_from_the_call_or_from_its_last_result(index):
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "stock", "arguments": json.dumps({"shop": i})}}
        for i in range(4)
    ]
    results = ["apples 3", "pears 9", "plums 0", "quinces 12"]
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "count the fruit"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": calls}),
            *[RawRecord(3 + i, {"role": "tool", "tool_call_id": f"c{i}", "content": r}) for i, r in enumerate(results)],
            RawRecord(7, {"role": "assistant", "content": "Counted."}),
        ]
    )
    by_call = passages_from(index, "stock shop", context=0, limit=1)
    assert [p.hit.seq for p in by_call] == [2] and seqs(by_call) == [[2, 3, 4, 5, 6]]
    by_last = passages_from(index, "quinces", context=0, limit=1)
    assert [p.hit.seq for p in by_last] == [6] and seqs(by_last) == [[2, 6]] and by_last[0].core == {2, 6}


def test_neighbours_from_another_view_are_not_shown(index):
    index.add(chat_records(("user", "shared chatter"), start=1, view="writer"))
    index.add(chat_records(("user", "the cipher key is amber"), start=2, view="spy"))
    index.add(chat_records(("assistant", "writer reply"), start=3, view="writer"))
    index.add(chat_records(("assistant", "amber, noted"), start=4, view="spy"))
    found = passages_from(index, "cipher key amber", context=1, limit=1)
    assert seqs(found) == [[2, 4]] or seqs(found) == [[2]] or seqs(found) == [[4, 2]]
    assert {r.view for p in found for r in p.records} == {"spy"}


# -- dates -------------------------------------------------------------------------------------------


def test_a_position_names_the_local_time_and_the_message_number():
    at = datetime(2023, 4, 30, 14, 5, 59).timestamp()
    rec = StoredRecord(seq=42, role="user", text="x", recorded_at=at, day=None, view=None)
    assert position(rec) == "2023-04-30 14:05, message 42"
    assert position(StoredRecord(7, "user", "x", None, None, None)) == "message 7"
    assert position(StoredRecord(7, "user", "x", 1e300, None, None)) == "message 7"  # no such date


def test_each_passage_record_keeps_its_date_and_a_question_naming_a_day_finds_that_days_turn(index):
    may2 = datetime(2024, 5, 2, 10, 0).timestamp()
    may3 = datetime(2024, 5, 3, 10, 0).timestamp()
    index.add(chat_records(("user", "we visited the castle"), ("assistant", "lovely"), at=may2))
    index.add(chat_records(("user", "we visited the museum"), ("assistant", "nice"), start=3, at=may3))
    found = passages_from(index, "what did we visit on May 3rd?", context=0, limit=1)
    assert [p.hit.seq for p in found] == [3]
    assert [(r.seq, r.recorded_at, r.day) for r in found[0].records] == [
        (3, may3, "2024-05-03"),
        (4, may3, "2024-05-03"),
    ]
    assert [p.hit.seq for p in passages_from(index, "what did we visit on May 2nd?", context=0, limit=1)] == [1]


# -- what is in view is left out ---------------------------------------------------------------------


def test_a_search_leaves_out_every_record_in_view_but_shows_the_rest_of_the_turn(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP)
        visible = live_keys(TRIP[3:])  # the recent messages after the match
        with searching(store, index_dir="memory") as search:
            found = search.passages("s1", "hotel Lisbon", in_view=lambda r: (r.role, r.text) in visible)
            assert seqs(found) == [[2, 3]]
            everything = live_keys(TRIP)
            assert search.passages("s1", "hotel Lisbon", in_view=lambda r: (r.role, r.text) in everything) == []
            assert seqs(search.passages("s1", "hotel Lisbon")) == [[2, 3, 4, 5, 6]]


def test_live_keys_are_role_and_stripped_text_of_each_message():
    assert live_keys(
        [
            {"role": "user", "content": "  hi \n"},
            {"content": "no role"},
            "not a message",
            {"role": "tool", "content": [{"type": "text", "text": "t"}]},
        ]
    ) == {("user", "hi"), ("", "no role"), ("tool", "t")}


def test_new_records_in_view_are_found_by_a_search_without_them_in_view(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", TRIP[:2])
        with searching(store, index_dir=tmp_path / "idx") as search:
            search.passages("s1", "anything")
            store.append("s1", TRIP[2:4])
            visible = live_keys(TRIP[2:4])
            assert search.passages("s1", "hotel Lisbon", in_view=lambda r: (r.role, r.text) in visible) == []
            assert [p.hit.seq for p in search.passages("s1", "hotel Lisbon")] == [3]


# -- no remembered hit outlives a write ---------------------------------------------------------------


def test_a_search_made_again_after_a_reset_and_rebuild_sees_the_new_text(index):
    index.add(chat_records(("user", "alpha code is 11"), ("assistant", "ok")))
    assert [h.seq for h in index.search("alpha")] == [1]
    index.reset()
    # the same sequence numbers and as many documents: only the text differs
    index.add(chat_records(("user", "omega code is 22"), ("assistant", "ok")))
    assert index.search("alpha") == [] and [h.seq for h in index.search("omega")] == [1]
    assert index.records([1])[1].text == "omega code is 22"


def test_a_search_made_again_after_a_replace_sees_the_new_text_and_not_the_old(index):
    index.add(chat_records(("user", "the gate code is 4711"), ("assistant", "ok")))
    assert [h.text for h in index.search("gate code")] == ["the gate code is 4711"]
    assert index.records([1])[1].text == "the gate code is 4711"
    index.add([RawRecord(3, {"role": "user", "content": "the gate code is 9090"}, op="replace", target=1)])
    assert [h.text for h in index.search("gate code")] == ["the gate code is 9090"]
    assert index.records([1])[1].text == "the gate code is 9090"
    index.add([RawRecord(4, {}, op="remove", target=1)])
    assert index.search("gate code") == [] and index.records([1]) == {}


def test_a_search_made_again_after_an_addition_finds_the_new_record(index):
    index.add(chat_records(("user", "pelican one"), ("assistant", "ok")))
    assert [h.seq for h in index.search("pelican", limit=5)] == [1]
    index.add(chat_records(("user", "pelican two"), start=3))
    assert sorted(h.seq for h in index.search("pelican", limit=5)) == [1, 3]
    assert [p.hit.seq for p in passages_from(index, "pelican two", context=0, limit=1)] == [3]


# -- excerpts of a long text -------------------------------------------------------------------------


_count = TokenCounter().count_text


def _fields(before: int) -> str:
    fields = {**{f"k{i}": "v" for i in range(before)}, "albatross": 7}
    return json.dumps({**fields, **{f"k{i}": "filler value text" for i in range(before, 80)}})


def test_an_excerpt_starts_at_the_line_or_record_holding_the_match():
    lines = [f"row {i}: plain filler words for the table" for i in range(60)]
    lines[40] = "row 40: the albatross code is 7"
    assert excerpt("\n".join(lines), 30, {"albatross": 1.0}, _count) == (
        "… table\nrow 40: the albatross code is 7\nrow 41: plain filler words for the table …"
    )
    # a JSON record whose match is near its start: from the record's opening brace
    assert excerpt(_fields(4), 60, {"albatross": 1.0}, _count).startswith(
        '{"k0": "v", "k1": "v", "k2": "v", "k3": "v", "albatross": 7, "k4": '
    )
    # farther in: a little before the match, not from the top
    assert excerpt(_fields(3), 30, {"albatross": 1.0}, _count).startswith('… "k2": "v", "albatross": 7, "k3": ')


def test_an_excerpt_of_a_text_without_line_breaks_near_the_match_still_holds_it():
    text = (
        "Intro line\n"
        + " ".join(f"word{i}" for i in range(400))
        + " albatross code 7 "
        + " ".join(f"tail{i}" for i in range(100))
    )
    got = excerpt(text, 30, {"albatross": 1.0}, _count)
    assert got.startswith("… word397 word398 word399 albatross code 7 tail0") and got.endswith(" …")
    assert _count(got) <= 30


# -- what a passage holds ----------------------------------------------------------------------------


def test_a_passages_weights_are_the_terms_some_match_holds_and_asked_is_every_term(index):
    index.add(chat_records(("user", "the walrus sleeps on the ice"), ("assistant", "a walrus tusk is ivory")))
    found = passages_from(index, "walrus zeppelin", context=0)
    assert [p.core for p in found] == [{1, 2}] and set(found[0].weights) == set(query_terms("walrus"))
    assert set(found[0].asked) == set(query_terms("walrus zeppelin")) and min(found[0].asked.values()) > 0
    # a term only what is in view holds is not one a passage can hold
    only_in_view = passages_from(index, "walrus ivory", context=0, in_view=lambda r: r.seq == 2)
    assert [p.hit.seq for p in only_in_view] == [1] and not any("ivor" in t for t in only_in_view[0].weights)
    # no match holds any term: every term counts
    assert passages_from(index, "zeppelin", context=0) == []


def test_a_match_in_a_later_chunk_of_a_long_record_names_that_chunk_and_keeps_the_whole_record(tmp_path):
    # The passage holds the record as stored (the block cuts its excerpt from it around the chunk).
    index = HistoryIndex(tmp_path / "i.sqlite", chunk_chars=200)
    text = (
        "Invoice for Wilhelmina Harwich, order list follows. "
        + " ".join(f"line {i} item widget." for i in range(60))
        + " The grand total is 4711 euros."
    )
    try:
        index.add(
            [RawRecord(1, {"role": "user", "content": text}), RawRecord(2, {"role": "assistant", "content": "ok"})]
        )
        found = passages_from(index, "grand total euros", context=0, limit=1)
        assert [p.hit.seq for p in found] == [1] and found[0].hit.part > 0
        last = chunks(text, 200)[found[0].hit.part]
        assert found[0].hit.text == last and found[0].hit.head == head_of(text) and "4711" in last
        assert found[0].records[0].text == text and found[0].records[1].text == "ok"
        # a short record is shown whole
        index.add([RawRecord(3, {"role": "user", "content": "the short euros note"})])
        short = passages_from(index, "short euros note", context=0, limit=1)
        assert [r.text for r in short[0].records] == ["the short euros note"]
    finally:
        index.close()


def test_the_filter_sees_every_record_of_a_passage_and_what_it_leaves_is_shown_unchanged(index):
    index.add(chat_records(("user", "pin of the locker is 2468"), ("assistant", "locker pin noted")))
    seen: list[str] = []

    def mask(text: str) -> str:
        seen.append(text)
        return text.replace("2468", "####")

    found = passages_from(index, "locker pin", context=0, limit=1, text_filter=mask)
    assert sorted(seen) == ["locker pin noted", "pin of the locker is 2468"]
    assert [(r.seq, r.role, r.text) for r in found[0].records] == [
        (1, "user", "pin of the locker is ####"),
        (2, "assistant", "locker pin noted"),
    ]


def test_a_passages_first_seq_is_its_first_records_or_its_matchs():
    hit = Hit(seq=9, part=0, score=1.0, text="x", role="user", recorded_at=None, day=None, view=None)
    assert Passage(hit).first_seq == 9
    records = [StoredRecord(7, "user", "a", None, None, None), StoredRecord(9, "user", "x", None, None, None)]
    assert Passage(hit, records).first_seq == 7


def test_a_question_in_parts_is_split_at_each_sentence_or_second_question_word():
    assert split_question("Who teaches violin? Which day are the lessons?") == [
        "Who teaches violin?",
        "Which day are the lessons?",
    ]
    assert split_question("who teaches violin, and which day are the lessons") == [
        "who teaches violin",
        "which day are the lessons",
    ]
    assert split_question("谁教小提琴？哪天上课？") == ["谁教小提琴？", "哪天上课？"]
    assert split_question("Who teaches violin and piano?") == []
    assert split_question("Who teaches violin? And you?") == []  # one part with search terms


def test_each_part_of_a_question_gets_its_best_turn_before_the_rest(index):
    index.add(
        chat_records(
            ("user", "the violin teacher is Mrs Okafor"),
            ("assistant", "noted"),
            ("user", "violin violin violin practice again"),
            ("assistant", "ok"),
            ("user", "lessons are on Tuesday"),
            ("assistant", "noted"),
        )
    )
    found = passages_from(index, "Who is the violin teacher? Which day are the lessons?", context=0, limit=2)
    assert sorted(p.hit.seq for p in found) == [1, 5]


WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "hazel"]


def test_a_call_reaches_its_results_up_to_six_records_away(index):
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "sensor", "arguments": "{}"}} for i in range(8)]
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "run the probes"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": calls}),
            *[
                RawRecord(3 + i, {"role": "tool", "tool_call_id": f"c{i}", "content": f"reading {w}"})
                for i, w in enumerate(WORDS)
            ],
        ]
    )
    by_call = passages_from(index, "sensor", context=0, limit=1)
    assert [p.hit.seq for p in by_call] == [2] and by_call[0].core == {2, 3, 4, 5, 6, 7, 8}
    assert [p.core for p in passages_from(index, "apple", context=0, limit=1)] == [{2, 3}]
    assert [p.core for p in passages_from(index, "fig", context=0, limit=1)] == [{2, 8}]
    assert [p.core for p in passages_from(index, "grape", context=0, limit=1)] == [{9}]  # its call is 7 away


def test_a_user_message_answered_by_a_call_is_shown_with_the_call_and_its_results(index):
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in range(4)]
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "look up the flamingo count"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": calls}),
            *[
                RawRecord(3 + i, {"role": "tool", "tool_call_id": f"c{i}", "content": f"lake {i}: 42 birds"})
                for i in range(4)
            ],
            RawRecord(7, {"role": "assistant", "content": "Plenty of them."}),
        ]
    )
    assert [p.core for p in passages_from(index, "plenty", context=0, limit=1)] == [{6, 7}]  # a reply to a result
    found = passages_from(index, "flamingo count", context=0, limit=1)
    assert (
        [p.hit.seq for p in found] == [1]
        and found[0].core == {1, 2, 3, 4, 5, 6}
        and seqs(found) == [[1, 2, 3, 4, 5, 6]]
    )
    assert seqs(passages_from(index, "flamingo count", context=1, limit=1)) == [[1, 2, 3, 4, 5, 6, 7]]


def test_a_match_on_a_day_the_question_names_comes_first_even_below_min_score(index):
    may2 = datetime(2024, 5, 2, 10, 0).timestamp()
    may3 = datetime(2024, 5, 3, 10, 0).timestamp()
    index.add(chat_records(("user", "we ate pasta at the harbour"), ("assistant", "yum"), at=may2))
    index.add(chat_records(("user", "pasta pasta pasta harbour harbour"), ("assistant", "ok"), start=3, at=may3))
    found = passages_from(index, "where did we eat pasta on May 2nd?", context=0, limit=2)
    assert [p.hit.seq for p in found][0] == 1
    dated = passages_from(index, "where did we eat pasta on May 2nd?", context=0, limit=2, min_score=1e9)
    assert [p.hit.seq for p in dated] == [1]


def test_context_is_read_around_the_turn_not_only_around_the_match(index):
    filler = [("user" if i % 2 == 0 else "assistant", f"small talk {i}") for i in range(6)]
    index.add(
        chat_records(
            *filler,  # 1-6
            ("user", "I saw an okapi today"),  # 7: the match of a user turn asking nothing
            ("assistant", "Lucky you."),  # 8
            *filler,  # 9-14
            ("user", "hello"),  # 15
            ("assistant", "Did you feed the capybara?"),  # 16: a reply that asks: its turn is 15-17
            ("user", "not yet"),  # 17
            *filler,  # 18-23
        )
    )
    assert seqs(passages_from(index, "okapi", context=2, limit=1)) == [[5, 6, 7, 8, 9, 10]]
    assert seqs(passages_from(index, "capybara", context=2, limit=1)) == [[13, 14, 15, 16, 17, 18, 19]]


def test_a_partner_in_view_does_not_count_towards_a_turns_share_of_the_question(index):
    index.add(
        chat_records(
            ("user", "who teaches the violin"),
            ("assistant", "Mrs Okafor does."),
            ("user", "Okafor phoned"),
            ("assistant", "fine"),
        )
    )
    assert [p.core for p in passages_from(index, "violin Okafor", context=0, min_coverage=0.9)] == [{1, 2}]
    in_view = passages_from(index, "violin Okafor", context=0, min_coverage=0.9, in_view=lambda r: r.seq == 2)
    assert in_view == []
    assert [p.hit.seq for p in passages_from(index, "violin Okafor", context=0, in_view=lambda r: r.seq == 2)] == [1, 3]


def test_a_later_chunk_counts_the_records_head_towards_the_share_of_the_question(tmp_path):
    index = HistoryIndex(tmp_path / "i.sqlite", chunk_chars=200)
    text = (
        "Invoice for Wilhelmina Harwich, order list follows. "
        + " ".join(f"line {i} item widget." for i in range(60))
        + " The grand total is 4711 euros."
    )
    try:
        index.add([RawRecord(1, {"role": "tool", "tool_call_id": "c1", "content": text})])
        found = passages_from(index, "Wilhelmina grand total euros", context=0, min_coverage=0.99)
        assert [(p.hit.seq, p.hit.part > 0) for p in found] == [(1, True)]
    finally:
        index.close()


def test_of_two_turns_holding_the_question_as_often_the_shorter_ranks_first(index):
    index.add(
        chat_records(
            ("user", "the walrus " + " ".join(f"rambling word{i}" for i in range(40))),
            ("assistant", "ok"),
            ("user", "the walrus"),
            ("assistant", "ok"),
        )
    )
    assert [p.hit.seq for p in passages_from(index, "walrus", context=0)] == [3, 1]


def test_min_coverage_1_keeps_a_turn_holding_every_term_and_skips_past_those_that_do_not(index):
    index.add(
        chat_records(
            ("user", "walrus walrus walrus"),
            ("assistant", "ok"),
            *[("user" if i % 2 == 0 else "assistant", f"tusk item {i}") for i in range(6)],
            ("user", "a walrus with a tusk appeared near the boats today"),
            ("assistant", "ok"),
        )
    )
    assert [p.hit.seq for p in passages_from(index, "walrus tusk", context=0, min_coverage=1.0)] == [9]
    assert [p.hit.seq for p in passages_from(index, "walrus tusk", context=0, min_coverage=0.99)] == [9]


def test_tool_weight_picks_which_matches_are_ranked_not_only_their_order(index):
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    chat = [("user" if i % 2 == 0 else "assistant", f"parcel status {i}") for i in range(12)]
    data = {"parcel": "A7", "status": "held", **{f"field{i}": f"value {i}" for i in range(30)}}
    index.add(
        [
            *chat_records(*chat),
            RawRecord(13, {"role": "assistant", "content": None, "tool_calls": [call]}),
            RawRecord(14, {"role": "tool", "tool_call_id": "c1", "content": json.dumps(data)}),
        ]
    )
    assert [p.hit.seq for p in passages_from(index, "parcel status", context=0, limit=1)] != [14]
    assert [p.hit.seq for p in passages_from(index, "parcel status", context=0, limit=1, tool_weight=50.0)] == [14]


def test_a_reply_that_asks_after_a_tool_result_takes_the_users_answer_in(index):
    call = {"id": "c1", "type": "function", "function": {"name": "stock", "arguments": "{}"}}
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "check the stock"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": [call]}),
            RawRecord(3, {"role": "tool", "tool_call_id": "c1", "content": "2 left"}),
            RawRecord(4, {"role": "assistant", "content": "Only two left. Shall I reorder lanterns?"}),
            RawRecord(5, {"role": "user", "content": "yes"}),
            RawRecord(6, {"role": "assistant", "content": "done"}),
        ]
    )
    assert [p.core for p in passages_from(index, "reorder lanterns", context=0, limit=1)] == [{3, 4, 5}]


def test_context_stops_at_a_tool_result(index):
    call = {"id": "c1", "type": "function", "function": {"name": "stock", "arguments": "{}"}}
    index.add(
        [
            RawRecord(1, {"role": "assistant", "content": None, "tool_calls": [call]}),
            RawRecord(2, {"role": "tool", "tool_call_id": "c1", "content": "2 left"}),
            RawRecord(3, {"role": "user", "content": "the okapi is back"}),
            RawRecord(4, {"role": "assistant", "content": "good"}),
            RawRecord(5, {"role": "user", "content": "fine"}),
        ]
    )
    assert seqs(passages_from(index, "okapi", context=1, limit=1)) == [[3, 4, 5]]


def test_each_part_of_a_question_is_searched_in_the_view_asked_and_with_the_tool_weight(index):
    index.add(chat_records(("user", "the violin teacher is Mrs Okafor"), ("assistant", "noted"), view="a"))
    index.add(chat_records(("user", "lessons are on Tuesday"), ("assistant", "noted"), start=3, view="b"))
    index.add(chat_records(("user", "lessons moved to Friday"), ("assistant", "noted"), start=5, view="a"))
    question = "Who is the violin teacher? Which day are the lessons?"
    found = passages_from(index, question, context=0, limit=3, view="a")
    assert {p.hit.seq for p in found} == {1, 5} and {r.view for p in found for r in p.records} == {"a"}
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    index.add(
        [
            RawRecord(7, {"role": "assistant", "content": None, "tool_calls": [call]}, view="a"),
            RawRecord(8, {"role": "tool", "tool_call_id": "c1", "content": "depot north holds parcel A7"}, view="a"),
        ]
    )
    weighted = passages_from(
        index, "Who is the violin teacher? Which depot holds it?", context=0, tool_weight=2.0, view="a"
    )
    assert {p.hit.seq for p in weighted} >= {1, 8}


def test_a_passage_keeps_whether_each_record_calls_tools_when_its_text_is_cut_or_filtered(index):
    call = {"id": "c1", "type": "function", "function": {"name": "barometer", "arguments": "{}"}}
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "read the pressure gauge"}),
            RawRecord(2, {"role": "assistant", "content": None, "tool_calls": [call]}),
            RawRecord(3, {"role": "tool", "tool_call_id": "c1", "content": "1013 hPa"}),
        ]
    )
    for text_filter in (None, lambda text: text.upper()):
        found = passages_from(index, "barometer", context=0, limit=1, text_filter=text_filter)
        assert [p.hit.seq for p in found] == [2]
        assert [(r.seq, r.calls) for r in found[0].records] == [(2, True), (3, False)]


def test_the_second_best_turn_of_the_whole_question_stays_after_each_parts_best(index):
    index.add(
        chat_records(
            ("user", "the violin teacher is Mrs Okafor, lessons on Tuesday"),
            ("assistant", "noted"),
            ("user", "the violin teacher retired, lessons stopped"),
            ("assistant", "sad"),
            ("user", "a violin teacher and lessons again"),
            ("assistant", "ok"),
        )
    )
    question = "Who is the violin teacher? When are the lessons?"
    whole = [p.hit.seq for p in passages_from(index, question.replace("?", ""), context=0, limit=3)]
    assert len(whole) == 3
    found = passages_from(index, question, context=0, limit=3)
    assert sorted(p.core.pop() // 2 for p in found) == [0, 1, 2]  # one passage per turn, all three turns


def test_a_match_already_shown_does_not_stop_the_passages_after_it(index):
    index.add(
        chat_records(
            ("user", "the heron nests by the lake"),
            ("assistant", "A heron! Did you see its chicks?"),
            ("user", "yes, two heron chicks"),
            ("assistant", "lovely"),
            *[("user" if i % 2 == 0 else "assistant", f"filler {i}") for i in range(6)],
            ("user", "another heron today, far away over the water near the old boathouse by the pier"),
            ("assistant", "nice"),
        )
    )
    found = passages_from(index, "heron", context=0, limit=5)
    shown = [r.seq for p in found for r in p.records]
    assert 11 in shown and len(shown) == len(set(shown))


# -- written for the survivors of the recall scope's run on abbaa00 (docs/mutation/recall.md) -------------


def test_session_search_prints_a_long_neighbour_whole_and_cuts_only_the_match(tmp_path, capsys):
    # Only the match is cut to its excerpt (one chunk of a long message matched); a neighbour shown with
    # it is printed whole, however long (`--json` is not the only way to read it).
    neighbour = " ".join(f"step {i}: the rollout went fine on host {i}." for i in range(120))
    assert TokenCounter().count_text(neighbour) > 600
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append(
            "ops",
            [
                {"role": "user", "content": "Which pelican badge opens the loading dock?"},
                {"role": "assistant", "content": neighbour},
            ],
        )
    assert main(["session", "search", "--store", url, "ops", "pelican badge"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "> #1 user: Which pelican badge opens the loading dock?" in lines
    assert f"  #2 assistant: {neighbour}" in lines


def test_session_search_prints_a_match_of_one_chunk_whole_however_many_tokens(tmp_path, capsys):
    # A message short enough to be indexed as one chunk matched whole: it is printed whole, even when it
    # counts more tokens than a long message's excerpt (codes and ids tokenize densely).
    codes = " ".join(f"k{i * 7919 % 10007:x}q{i * 104729 % 997:x}" for i in range(110))
    text = f"The osprey vault codes are {codes}"
    assert chunks(text) == [text] and TokenCounter().count_text(text) > 300 + 100
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("ops", [{"role": "user", "content": text}, {"role": "assistant", "content": "Stored."}])
    assert main(["session", "search", "--store", url, "ops", "osprey vault codes"]) == 0
    assert f"> #1 user: {text}" in capsys.readouterr().out.splitlines()


def test_a_position_of_a_time_out_of_range_is_the_message_number_alone():
    # Positions are remembered per process (and by a process forked from it): a time no call made before.
    unknown = 1e300 * (1 + random.random())
    assert position(StoredRecord(9, "user", "x", unknown, None, None)) == "message 9"
    assert position(StoredRecord(9, "user", "x", unknown, None, None)) == "message 9"  # remembered as unknown


def test_a_question_after_the_turn_that_ends_the_history_is_shown_without_an_answer(index):
    # Context after a turn takes a user's question with its answer; a question that ends the history has
    # none: it is shown alone (nothing past the last record is read or invented).
    index.add(
        chat_records(
            ("user", "Where did we park the heron van?"),
            ("assistant", "On level 3, bay 12."),
            ("user", "And the keys?"),
        )
    )
    found = passages_from(index, "heron van", context=1, limit=1)
    assert seqs(found) == [[1, 2, 3]] and found[0].core == {1, 2}


def test_turns_chained_by_questions_join_the_first_passage_leaving_out_what_is_in_view(index):
    # Three matches whose turns overlap (a reply that asks takes the user's answer in, and that answer starts
    # a turn of its own): the later matches are already shown by the first passage, so the rest of each of
    # their turns joins it: one passage in all, the record in view left out.
    index.add(
        chat_records(
            ("user", "Book the osprey suite with the falcon and kestrel view."),
            ("assistant", "For which city?"),
            ("user", "Lisbon, the falcon hotel."),
            ("assistant", "Which night?"),
            ("user", "Friday, the kestrel room."),
            ("assistant", "Booked for Friday."),
            ("user", "thanks"),
        )
    )
    plain = passages_from(index, "osprey falcon kestrel", context=0, limit=5)
    assert seqs(plain) == [[1, 2, 3, 4, 5, 6]] and plain[0].hit.seq == 1
    asked = "Which night?"
    in_view = passages_from(index, "osprey falcon kestrel", context=0, limit=5, in_view=lambda r: r.text == asked)
    assert seqs(in_view) == [[1, 2, 3, 5, 6]]


def test_session_search_cuts_a_long_match_around_the_chunk_that_matched_not_the_first_place_with_the_words(
    tmp_path, capsys
):
    # The question's words are in the message's first line (indexed with every later chunk) and in a later
    # chunk, twice there with the head: that chunk is the match. The excerpt printed is cut around it (the
    # value), not around the first place holding the same words; the chunk is found in the text as printed
    # (its spaces folded).
    filler = " ".join(f"line {i} of the deploy log, all fine." for i in range(28))
    error = "ERROR: disk quota  exceeded on the shared  volume vol-7731 at 02:14."
    log = f"Disk quota report for the shared volume. {filler} {filler} {filler} {error} {filler}"
    matched = [c for c in chunks(log, CHUNK_CHARS) if "vol-7731" in c]
    assert len(matched) == 1 and "Disk quota report" not in matched[0] and "  " in matched[0]
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("ops", [{"role": "user", "content": "Run the deploy."}, {"role": "assistant", "content": log}])
    assert main(["session", "search", "--store", url, "ops", "disk quota volume"]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("> #2 ")]
    assert len(shown) == 1 and "disk quota exceeded on the shared volume vol-7731" in shown[0]
    assert "Disk quota report" not in shown[0]
