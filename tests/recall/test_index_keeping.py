"""The history index kept true to the raw history: by sequence number, across workers, through resets.

Written for the survivors of mutation scopes ``recall-index``, ``recall-index-search`` and
``recall-index-history`` (docs/mutation/recall-index*.md). Real SQLite indexes under tmp_path (or in
memory); each test asserts what a search returns, what is on disk, or what the index reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from ctxlife.errors import CtxlifeError
from ctxlife.recall import HistoryIndex, dates_in
from ctxlife.sessions import RawRecord


def said(*texts: str, start: int = 1, view: str = "", role: str = "user") -> list[RawRecord]:
    return [
        RawRecord(start + i, {"role": role, "content": text}, fingerprint=f"fp{start + i}", view=view)
        for i, text in enumerate(texts)
    ]


HISTORY = (
    "the parcel for order 4411 left the depot",
    "the gate code is 0427",
    "the parcel was delivered to the neighbour",
    "my bike lock is 9031",
)


def on_disk(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


# -- reset and rebuild -------------------------------------------------------------------------------


def test_a_reset_index_is_empty_and_once_rebuilt_ranks_and_reopens_as_one_built_fresh(tmp_path):
    path = tmp_path / "s.sqlite"
    index = HistoryIndex(path, chunk_chars=400)
    index.add(said(*HISTORY))
    assert index.last_seq == 4 and len(index) == 4
    index.reset()
    assert index.last_seq == 0 and len(index) == 0 and index.search("parcel") == []
    assert index.add(said(*HISTORY)) == 4
    fresh = HistoryIndex(chunk_chars=400)
    fresh.add(said(*HISTORY))
    terms = ["parcel", "gate", "neighbour"]
    assert index.term_weights(terms) == fresh.term_weights(terms)
    assert [(h.seq, h.score) for h in index.search("parcel depot")] == [
        (h.seq, h.score) for h in fresh.search("parcel depot")
    ]
    index.close()
    # The next process with the same chunk size uses the rebuilt file as it is (not emptied again).
    reopened = HistoryIndex(path, chunk_chars=400)
    assert reopened.last_seq == 4 and len(reopened) == 4
    assert reopened.term_weights(terms) == fresh.term_weights(terms)


def test_a_reset_leaves_no_old_text_on_disk_while_the_index_stays_open(tmp_path):
    folder = tmp_path / "idx"
    index = HistoryIndex(folder / "s.sqlite")
    index.add(said("my passport number is QX7781234", "noted"))
    assert b"QX7781234" in on_disk(folder)  # written: in the file or its write-ahead log
    index.reset()
    assert b"QX7781234" not in on_disk(folder).upper()
    index.close()


# -- several workers sharing one index file -----------------------------------------------------------


def test_a_worker_searching_one_view_sees_the_views_another_worker_indexed(tmp_path):
    path = tmp_path / "s.sqlite"
    first, second = HistoryIndex(path), HistoryIndex(path)
    first.add(said("the planner booked the hotel Plaza", view="planner"))
    second.add(
        said("the planner booked the hotel Plaza", view="planner")
        + said("the critic disliked the hotel Plaza", start=2, view="critic")
    )
    assert first.refresh() == 2
    assert [h.seq for h in first.search("hotel Plaza", view="planner")] == [1]
    assert [h.seq for h in first.search("hotel Plaza", view="critic")] == [2]
    first.add(said("the critic found the hotel Plaza loud", start=3, view="critic"))
    assert sorted(h.seq for h in first.search("hotel Plaza", view="critic")) == [2, 3]


def test_workers_sharing_an_index_file_rank_as_one_index_of_the_same_records(tmp_path):
    path = tmp_path / "s.sqlite"
    first, second = HistoryIndex(path), HistoryIndex(path)
    first.add(said(*HISTORY[:2]))
    second.add(said(*HISTORY[:3]))  # one more record, written by the other worker
    first.add(said(*HISTORY))  # without a refresh: it learns the other's writes as it writes
    truth = HistoryIndex()
    truth.add(said(*HISTORY))
    terms = ["parcel", "gate", "bike"]
    assert first.term_weights(terms) == truth.term_weights(terms)
    assert HistoryIndex(path).term_weights(terms) == truth.term_weights(terms)


# -- adding: once per sequence number ----------------------------------------------------------------


def test_records_fed_again_change_nothing_and_keep_the_last_fingerprint():
    index = HistoryIndex()
    assert index.add(said(*HISTORY)) == 4
    assert index.last_fingerprint == "fp4"
    assert index.add(said(*HISTORY)) == 0  # a retry, or a second worker: nothing to apply
    assert index.last_seq == 4 and index.last_fingerprint == "fp4"
    edit = RawRecord(
        5, {"role": "user", "content": "the gate code is now 5550"}, fingerprint="fp5", op="replace", target=2
    )
    assert index.add([*said(*HISTORY), edit]) == 1
    assert index.add([*said(*HISTORY), edit]) == 0  # the edit is not applied twice
    assert index.last_fingerprint == "fp5"
    assert [h.text for h in index.search("gate code")] == ["the gate code is now 5550"]
    unmarked = HistoryIndex()  # records no store wrote carry no fingerprint: none is claimed
    unmarked.add([RawRecord(1, {"role": "user", "content": "hello"})])
    assert unmarked.last_seq == 1 and unmarked.last_fingerprint is None


def test_a_write_that_fails_midway_leaves_the_index_as_it_was_and_usable(tmp_path):
    index = HistoryIndex(tmp_path / "s.sqlite")
    index.add(said(*HISTORY[:2]))

    def interrupted() -> Iterator[RawRecord]:
        yield from said(*HISTORY[2:3], start=3)
        raise KeyboardInterrupt  # the store's read stopped halfway

    with pytest.raises(KeyboardInterrupt):
        index.add(interrupted())
    assert index.last_seq == 2 and len(index) == 2
    assert index.add(said(*HISTORY)) == 2
    truth = HistoryIndex()
    truth.add(said(*HISTORY))
    assert [(h.seq, h.score) for h in index.search("parcel")] == [(h.seq, h.score) for h in truth.search("parcel")]


# -- what is read back --------------------------------------------------------------------------------


def test_more_records_than_the_index_remembers_are_all_returned():
    index = HistoryIndex()
    count = HistoryIndex._MEMO_ROWS + 100
    index.add(said(*(f"note {i}" for i in range(1, count + 1))))
    found = index.records(range(1, count + 1))
    assert len(found) == count
    assert found[1].text == "note 1" and found[count].text == f"note {count}"
    assert index.records([7, 8]) == {7: found[7], 8: found[8]}


def test_every_chunk_of_a_long_result_is_found_by_its_records_head():
    # A long tool result is indexed in chunks; each later chunk carries the record's head (what the
    # result is about), so a question naming the report finds every part of it.
    rows = " ".join(f"row {k}: widget stock in aisle {k % 7};" for k in range(120))
    text = f"Quarterly inventory report of the Leeds warehouse. {rows}"
    index = HistoryIndex(chunk_chars=400)
    index.add([RawRecord(1, {"role": "tool", "tool_call_id": "c1", "content": text})])
    parts = {h.part for h in index.search("quarterly inventory report", limit=50)}
    assert len(parts) > 3 and parts == set(range(len(parts)))


# -- where it lives -----------------------------------------------------------------------------------


def test_an_index_file_is_made_with_its_missing_folders_private_to_the_user(tmp_path):
    path = tmp_path / "home" / "recall_index" / "s.sqlite"
    index = HistoryIndex(path)
    index.add(said(*HISTORY))
    index.close()
    assert path.is_file()
    assert (path.parent.stat().st_mode & 0o777) == 0o700  # the conversation's text: not for other users
    assert HistoryIndex(path).last_seq == 4


def test_an_index_opened_in_one_thread_is_written_and_searched_from_another(tmp_path):
    import threading

    index = HistoryIndex(tmp_path / "s.sqlite")
    index.add(said(*HISTORY[:2]))
    found: list[list[int]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            index.add(said(*HISTORY))
            found.append([h.seq for h in index.search("bike lock")])
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert errors == [] and found == [[4]]
    assert index.last_seq == 4


def test_a_file_that_is_not_an_index_is_refused_with_its_path_named(tmp_path):
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not a database, " * 256)
    with pytest.raises(CtxlifeError) as caught:
        HistoryIndex(path)
    assert str(caught.value).startswith(f"cannot open the history index {path}: ")


def test_the_space_of_deleted_records_is_given_back_to_the_file_system(tmp_path):
    # A user removing most of a long history gets the disk space back, not a file of free pages.
    path = tmp_path / "s.sqlite"
    index = HistoryIndex(path)
    filler = " ".join(f"word{k}" for k in range(200))
    index.add(said(*(f"note {i}: {filler}" for i in range(1, 301))))
    index.close()
    full = path.stat().st_size
    index = HistoryIndex(path)
    index.add([RawRecord(300 + i, {}, op="remove", target=i) for i in range(1, 291)])
    index.close()
    assert len(HistoryIndex(path)) == 10
    assert path.stat().st_size < 0.6 * full  # the postings of removed text wait for a merge: about half


# -- dated questions ----------------------------------------------------------------------------------


def at(day: str, hour: int = 10) -> float:
    return datetime.fromisoformat(f"{day}T{hour:02d}:00").timestamp()


RATES = (
    "Rates of the hotel Plaza for May. "
    + " ".join(f"row {k}: room rate {100 + k} euro;" for k in range(60))
    + " The Plaza breakfast is served from seven."
)


def two_days() -> list[RawRecord]:
    return [
        RawRecord(1, {"role": "user", "content": "We went to the museum."}, recorded_at=at("2023-05-02", 9)),
        RawRecord(2, {"role": "user", "content": "I booked the hotel Plaza."}, recorded_at=at("2023-05-02", 10)),
        RawRecord(3, {"role": "tool", "tool_call_id": "c1", "content": RATES}, recorded_at=at("2023-05-02", 11)),
        RawRecord(
            4, {"role": "assistant", "content": "Breakfast at the Plaza is included."}, recorded_at=at("2023-05-02", 12)
        ),
        RawRecord(5, {"role": "user", "content": "We ate at the harbour."}, recorded_at=at("2023-05-03", 9)),
        RawRecord(6, {"role": "user", "content": "The hotel Plaza again."}, recorded_at=at("2023-05-04", 9)),
    ]


def test_a_dated_question_ranks_that_days_documents_by_the_words_they_hold():
    index = HistoryIndex(chunk_chars=400)
    index.add(two_days())
    hits = index.search("Plaza breakfast on May 2nd", limit=20)
    assert {h.seq for h in hits} >= {1, 2, 3, 4} and 5 not in {h.seq for h in hits}
    assert hits[0].seq in (3, 4) and "breakfast" in (hits[0].head + hits[0].text).lower()
    museum = next(i for i, h in enumerate(hits) if h.seq == 1)
    assert museum > next(i for i, h in enumerate(hits) if h.seq == 2)  # no word of the question: after
    both = index.search("What happened on May 2nd and May 3rd?", limit=20)
    assert {h.seq for h in both} == {1, 2, 3, 4, 5}


def test_a_dated_question_weighs_tool_results_and_shows_each_chunk_as_the_search_does():
    from ctxlife.recall.records import text_documents

    index = HistoryIndex(chunk_chars=400)
    index.add(two_days())
    plain = {(h.seq, h.part): h for h in index.search("Plaza breakfast on May 2nd", limit=20)}
    weighed = {(h.seq, h.part): h for h in index.search("Plaza breakfast on May 2nd", limit=20, tool_weight=2.0)}
    assert plain.keys() == weighed.keys() and any(seq == 3 and plain[seq, part].score > 0 for seq, part in plain)
    for key, hit in plain.items():
        assert weighed[key].score == (2 * hit.score if hit.role == "tool" else hit.score)
    # a document of the day scores the idf of each question word it holds ("I booked the hotel Plaza.")
    assert plain[2, 0].score == index.term_weights(["plaza"])["plaza"]
    chunks = text_documents(3, "tool", RATES, 400)
    shown = sorted(part for seq, part in plain if seq == 3)
    assert shown == list(range(len(chunks))) and len(chunks) > 2
    for part in shown:
        assert (plain[3, part].text, plain[3, part].head) == (chunks[part].text, chunks[part].head)


def test_a_dated_question_leaves_out_the_records_excluded_and_shows_those_after_them():
    index = HistoryIndex(chunk_chars=400)
    index.add(two_days())
    hits = index.search("What did I book on May 2nd?", limit=20, exclude=[2])
    assert 2 not in {h.seq for h in hits} and {1, 3, 4} <= {h.seq for h in hits}


def test_a_dated_question_on_a_day_of_more_documents_than_it_reads_still_answers():
    index = HistoryIndex()
    index.add(
        [
            RawRecord(i, {"role": "user", "content": f"note {i}"}, recorded_at=at("2023-05-02") + i)
            for i in range(1, HistoryIndex.DAY_DOCS + 21)
        ]
    )
    assert [h.seq for h in index.search("What happened on May 2nd?", limit=3)] == [1, 2, 3]


# -- no remembered search outliving a write -----------------------------------------------------------


def test_a_search_asked_again_after_each_rebuild_sees_that_rebuilds_text():
    # A session deleted and written again, twice, as long as before: the same sequence numbers and
    # document count each time, another text.
    index = HistoryIndex()
    for code in ("1111", "2222", "3333"):
        index.reset()
        index.add(said(f"the gate code is {code}", "noted"))
        assert [h.text for h in index.search("gate code")] == [f"the gate code is {code}"]


def test_term_weights_asked_between_writes_are_those_of_the_index_as_it_is_now():
    index = HistoryIndex()
    index.add(said(*HISTORY[:2]))
    terms = ["parcel", "gate", "bike"]
    index.term_weights(terms)
    for end in (3, 4):
        index.add(said(*HISTORY[:end]))
        fresh = HistoryIndex()
        fresh.add(said(*HISTORY[:end]))
        assert index.term_weights(terms) == fresh.term_weights(terms)
    index.add([RawRecord(5, {}, op="remove", target=1)])
    fresh.add([RawRecord(5, {}, op="remove", target=1)])
    assert index.term_weights(terms) == fresh.term_weights(terms)


def test_term_weights_are_bm25s_idf_of_the_documents_indexed():
    import math

    index = HistoryIndex()
    index.add(said(*HISTORY))  # four documents: "parcel" in two, "gate" in one, "tram" in none
    weights = index.term_weights(["parcel", "gate", "tram"])
    assert weights == {
        "parcel": math.log(1 + (4 - 2 + 0.5) / (2 + 0.5)),
        "gate": math.log(1 + (4 - 1 + 0.5) / (1 + 0.5)),
        "tram": math.log(1 + (4 - 0 + 0.5) / (0 + 0.5)),
    }


def test_a_hit_carries_its_records_role_time_day_and_view():
    index = HistoryIndex(chunk_chars=400)
    index.add(
        [
            RawRecord(
                1,
                {"role": "assistant", "content": "the gate code is 0427"},
                recorded_at=at("2023-05-02"),
                view="planner",
            )
        ]
    )
    (hit,) = index.search("gate code")
    assert (hit.seq, hit.part, hit.role, hit.text, hit.head) == (1, 0, "assistant", "the gate code is 0427", "")
    assert (hit.recorded_at, hit.day, hit.view) == (at("2023-05-02"), "2023-05-02", "planner")


# -- searching: defaults and views ---------------------------------------------------------------------


def test_a_search_by_default_returns_five_hits_and_weighs_tool_results_as_chat():
    index = HistoryIndex()
    index.add(said(*(f"the parcel {i} left the depot" for i in range(1, 9))))
    index.add([RawRecord(9, {"role": "tool", "tool_call_id": "c1", "content": "parcel depot scan"})])
    assert len(index.search("parcel depot")) == 5
    assert index.search("parcel depot", limit=20) == index.search("parcel depot", limit=20, tool_weight=1.0)
    assert index.search("parcel depot", limit=20) != index.search("parcel depot", limit=20, tool_weight=3.0)


def test_a_search_in_a_view_finds_only_that_views_records_in_an_index_of_one_view_or_of_several():
    planner = said("the planner booked the hotel Plaza", "the planner paid the hotel", view="planner")
    critic = said(*(f"the critic rated hotel number {i}" for i in range(3, 40)), start=3, view="critic")
    critic += said("the critic disliked the hotel Plaza", start=40, view="critic")
    index = HistoryIndex()
    index.add(planner)
    assert [h.seq for h in index.search("hotel Plaza", view="planner")] == [1, 2]
    assert index.search("hotel Plaza", view="critic") == []
    index.add(critic)
    hits = index.search("hotel Plaza", view="critic", limit=3)
    assert hits[0].seq == 40 and {h.view for h in hits} == {"critic"}
    assert [h.seq for h in index.search("hotel Plaza", view="planner", limit=3)] == [1, 2]
    # the same on an index past the size where a search leaves out the documents that cannot make its
    # result (PRUNE_DOCS): the best two of all views are 40 and 1, never those of one view
    pruned = HistoryIndex()
    pruned.PRUNE_DOCS = 0
    pruned.add(planner + critic)
    for question in ("hotel Plaza", "hotel Plaza critic"):
        assert [(h.seq, h.score) for h in pruned.search(question, limit=2)] == [
            (h.seq, h.score) for h in index.search(question, limit=2)
        ]
    assert {h.seq for h in pruned.search("hotel Plaza critic", limit=2)} == {1, 40}
    hits = pruned.search("hotel Plaza critic", view="critic", limit=2)
    assert hits[0].seq == 40 and {h.view for h in hits} == {"critic"}
    assert [h.seq for h in pruned.search("hotel Plaza", view="planner", limit=2)] == [1, 2]


def test_a_question_naming_a_day_is_searched_by_its_words_alone_when_dates_are_not_used():
    index = HistoryIndex(chunk_chars=400)
    index.add(two_days())
    assert 5 in {h.seq for h in index.search("Plaza on May 3rd", limit=20)}  # the day's record, no word of it
    words_only = index.search("Plaza on May 3rd", limit=20, use_dates=False)
    assert {h.seq for h in words_only} == {2, 3, 4, 6}


def test_a_search_of_a_closed_index_fails_naming_the_search():
    index = HistoryIndex()
    index.add(said(*HISTORY))
    index.close()
    with pytest.raises(CtxlifeError, match="^searching the history index failed: "):
        index.search("parcel")


def plaza_history() -> list[RawRecord]:
    """Two short records on May 2nd, six longer ones holding the same words on later days, two views."""
    short = [
        RawRecord(i, {"role": "user", "content": "hotel Plaza"}, recorded_at=at("2023-05-02", 9 + i), view=view)
        for i, view in ((1, "a"), (2, "b"))
    ]
    longer = [
        RawRecord(
            i,
            {"role": "user", "content": f"hotel Plaza: a note about room {i} and its view"},
            recorded_at=at("2023-05-06"),
            view="a",
        )
        for i in range(3, 9)
    ]
    return short + longer


def test_a_search_leaving_records_out_still_returns_as_many_hits_as_asked():
    index = HistoryIndex()
    index.add(plaza_history())
    best = [h.seq for h in index.search("hotel Plaza", limit=3)]
    assert best[:2] == [1, 2]
    hits = [h.seq for h in index.search("hotel Plaza", limit=3, exclude=best[:2])]
    assert len(hits) == 3 and not set(hits) & set(best[:2])


def test_a_dated_question_fills_its_limit_with_the_best_matches_of_other_days():
    index = HistoryIndex()
    index.add(plaza_history())
    hits = [h.seq for h in index.search("hotel Plaza on May 2nd", limit=4)]
    assert hits[:2] == [1, 2] and len(hits) == 4 and len(set(hits)) == 4


def test_a_dated_question_in_a_view_finds_only_that_views_records_of_the_day():
    index = HistoryIndex()
    index.add(plaza_history())
    assert [h.seq for h in index.search("What happened on May 2nd?", view="b")] == [2]
    assert [h.seq for h in index.search("What happened on May 2nd?", view="a")] == [1]


def test_a_stored_record_says_whether_it_calls_tools_in_every_message_format():
    index = HistoryIndex()
    calling = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "looking"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            ],
        },
    ]
    plain = [
        {"role": "assistant", "content": [{"type": "text", "text": "no call here"}]},
        {"role": "assistant", "content": "no call either"},
        {"role": "user", "content": [{"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
    ]
    index.add([RawRecord(i, m) for i, m in enumerate(calling + plain, start=1)])
    stored = index.records(range(1, 7))
    assert {seq: record.calls for seq, record in stored.items()} == {
        1: True,
        2: True,
        3: True,
        4: False,
        5: False,
        6: False,
    }


def test_records_either_side_of_midnight_are_of_their_own_days():
    midnight = datetime.fromisoformat("2019-11-17T00:00").timestamp()
    index = HistoryIndex()
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "late walk"}, recorded_at=midnight - 1),
            RawRecord(2, {"role": "user", "content": "early swim"}, recorded_at=midnight + 1),
        ]
    )
    assert [(h.seq, h.day) for h in index.search("What happened on November 17th?")] == [(2, "2019-11-17")]
    assert [(h.seq, h.day) for h in index.search("What happened on November 16th?")] == [(1, "2019-11-16")]


# -- HistorySearch: where each session's index lives, kept and let go ---------------------------------


def test_the_default_index_folder_of_a_path_holding_the_scheme_separator_and_of_a_server_store(tmp_path):
    from ctxlife.recall import default_index_dir

    assert default_index_dir(f"file://{tmp_path}/a://b") == tmp_path / "a:" / "b" / "recall_index"
    for server in ("postgresql:///ctxlife", "postgres://localhost/ctxlife", "redis:///0"):
        assert default_index_dir(server) is None, server


def test_a_search_over_a_sqlite_store_keeps_its_indexes_beside_the_database(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        store.append(
            "s1", [{"role": "user", "content": "the gate code is 0427"}, {"role": "assistant", "content": "noted"}]
        )
        search = HistorySearch(store)
        assert search.index_dir == tmp_path / "s.db.recall_index"
        assert [p.hit.seq for p in search.passages("s1", "gate code", min_score=0.0)] == [1]
        assert search.index_path("s1") == tmp_path / "s.db.derived" / "s1" / "recall.sqlite"
        assert search.index_path("s1").is_file()
        search.close()
        # closing the search leaves the caller's store open (the SQLite store is read as it is)
        store.append("s1", [{"role": "user", "content": "and the bike lock is 9031"}])
        assert [r.seq for r in store.read_records("s1", after_seq=0)] == [1, 2, 3]
    with open_store(f"file://{tmp_path}/files") as store:
        search = HistorySearch(store)
        assert search.index_dir == tmp_path / "files" / "recall_index"
        search.close()  # nothing read yet: nothing to close
        store.append("s2", [{"role": "user", "content": "hello"}])
        assert len(store.read_records("s2", after_seq=0)) == 1


def test_recent_keys_are_those_of_the_latest_400_records_by_default(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append("s", [{"role": "user", "content": f"note {i}"} for i in range(1, 411)])
        search = HistorySearch(store, index_dir="memory")
        keys = search.recent_keys("s")
        assert len(keys) == 400 and ("user", "note 410") in keys and ("user", "note 10") not in keys
        search.close()


def test_a_forgotten_sessions_index_is_closed_and_the_next_search_opens_it_again(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append("s", [{"role": "user", "content": "the gate code is 0427"}])
        search = HistorySearch(store, index_dir=tmp_path / "idx")
        before = search.index("s")
        assert [h.seq for h in before.search("gate code")] == [1]
        search.forget("s")
        with pytest.raises(CtxlifeError):
            before.search("code")  # closed: its file is free for whoever deletes the session
        after = search.index("s")
        assert after is not before and [h.seq for h in after.search("gate code")] == [1]
        search.close()


class RecordsOnly:
    """A store of another kind: only the store contract's incremental reader (no derived data folder)."""

    def __init__(self, messages: list[dict]) -> None:
        self.records = [RawRecord(i, m, fingerprint=f"fp{i}") for i, m in enumerate(messages, start=1)]

    def read_records(self, session_id: str, after_seq: int = 0) -> list[RawRecord]:
        return [r for r in self.records if r.seq > after_seq]


class WithoutDerivedData(RecordsOnly):
    def derived_dir(self, session_id: str) -> None:
        return None  # a server store: no folder of its own for derived data


class KeepsItsOwnIndex(RecordsOnly):
    """A store that keeps the index itself, written with the history (as the PostgreSQL store does)."""

    def __init__(self, messages: list[dict]) -> None:
        super().__init__(messages)
        self.asked: list[str] = []
        self.own = HistoryIndex()
        self.own.add(self.records)

    def search_index(self, session_id: str) -> HistoryIndex:
        self.asked.append(session_id)
        return self.own


GATE = [{"role": "user", "content": "the gate code is 0427"}, {"role": "assistant", "content": "noted"}]


def test_a_store_of_another_kind_gets_its_index_where_index_dir_says_or_in_memory(tmp_path):
    from ctxlife.recall import HistorySearch

    search = HistorySearch(RecordsOnly(GATE), index_dir=tmp_path / "idx")
    assert search.index_path("s") == tmp_path / "idx" / "s.sqlite"
    assert [p.hit.seq for p in search.passages("s", "gate code", min_score=0.0)] == [1]
    assert (tmp_path / "idx" / "s.sqlite").is_file()
    index = search.index("s")
    assert search.index("s") is index and index.last_seq == 2  # kept open between calls
    search.close()
    server = HistorySearch(WithoutDerivedData(GATE))
    assert server.index_path("s") is None and server.index_dir is None
    assert [p.hit.seq for p in server.passages("s", "gate code", min_score=0.0)] == [1]
    server.close()


def test_a_store_that_keeps_the_index_itself_is_searched_there(tmp_path):
    from ctxlife.recall import HistorySearch

    store = KeepsItsOwnIndex(GATE)
    search = HistorySearch(store, index_dir=tmp_path / "idx")
    assert search.index("s1") is store.own and store.asked == ["s1"]
    assert [p.hit.seq for p in search.passages("s1", "gate code", min_score=0.0)] == [1]
    assert not (tmp_path / "idx").exists()  # nothing built here
    search.close()


def test_the_in_view_test_sees_each_new_records_seq_role_text_time_and_view(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append(
            "s", [{"role": "user", "content": "  the gate code is 0427  "}, {"content": "no role"}], view="planner"
        )
        recorded = store.read_records("s", after_seq=0)
        search = HistorySearch(store, index_dir="memory")
        seen = []
        search.index("s", defer=lambda record: seen.append(record) or True)
        assert [(r.seq, r.role, r.text, r.recorded_at, r.view) for r in seen] == [
            (1, "user", "the gate code is 0427", recorded[0].recorded_at, "planner"),
            (2, "", "no role", recorded[1].recorded_at, "planner"),
        ]
        assert recorded[0].recorded_at is not None
        search.close()


# -- HistorySearch: kept in step with the raw history, rebuilt only when it changed --------------------


def found(search, question: str) -> list[str]:
    return [r.text for p in search.passages("s", question, min_score=0.0) for r in p.records]


def rebuilds(caplog) -> int:
    return sum("recall_index_rebuilt" in r.getMessage() for r in caplog.records)


def test_a_session_rewritten_while_its_records_were_held_back_is_searched_as_it_is_now(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append("s", [{"role": "user", "content": f"my old locker code is 11{i}"} for i in range(3)])
        search = HistorySearch(store, index_dir="memory")
        assert search.index("s", defer=lambda record: True).last_seq == 0  # all three held back, in view
        store.delete("s")
        store.append("s", [{"role": "user", "content": f"the new parrot is called Kiwi{i}"} for i in range(3)])
        assert found(search, "locker code") == []
        assert "the new parrot is called Kiwi2" in found(search, "parrot Kiwi2")
        search.close()


def test_a_session_rewritten_as_long_as_before_is_rebuilt_and_one_of_one_message_too(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        for count in (1, 3):
            store.append("s", [{"role": "user", "content": f"my old locker code is 11{i}"} for i in range(count)])
            search = HistorySearch(store, index_dir="memory")
            assert found(search, "locker code")
            store.delete("s")
            store.append("s", [{"role": "user", "content": f"the new parrot is called Kiwi{i}"} for i in range(count)])
            assert found(search, "locker code") == [], count
            assert found(search, "parrot") != []
            search.close()
            store.delete("s")


def test_one_record_held_back_is_written_with_the_next_ones(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append("s", [{"role": "user", "content": "my locker code is 4471"}])
        search = HistorySearch(store, index_dir="memory")
        assert search.index("s", defer=lambda record: True).last_seq == 0
        store.append("s", [{"role": "assistant", "content": "noted, the locker"}])
        assert search.index("s").last_seq == 2
        assert "my locker code is 4471" in found(search, "locker code")
        search.close()


def test_records_held_back_over_an_index_another_worker_emptied_are_read_again_with_the_rest(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append(
            "s", [{"role": "user", "content": "my locker code is 4471"}, {"role": "assistant", "content": "noted"}]
        )
        search = HistorySearch(store, index_dir=tmp_path / "idx")
        assert search.index("s").last_seq == 2
        store.append(
            "s", [{"role": "user", "content": "the bike lock is 9031"}, {"role": "assistant", "content": "noted"}]
        )
        assert search.index("s", defer=lambda record: True).last_seq == 2  # 3 and 4 held back
        HistoryIndex(tmp_path / "idx" / "s.sqlite").reset()  # another worker empties the shared file
        assert search.index("s").last_seq == 4
        assert "my locker code is 4471" in found(search, "locker code")
        assert "the bike lock is 9031" in found(search, "bike lock")
        search.close()


def test_an_index_is_rebuilt_only_when_the_history_under_it_changed(tmp_path, caplog):
    import logging

    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    caplog.set_level(logging.INFO, logger="ctxlife")
    with open_store(f"file://{tmp_path}/sessions") as store:
        search = HistorySearch(store, index_dir=tmp_path / "idx")
        for i in range(4):
            store.append("s", [{"role": "user", "content": f"note {i} about the garden"}])
            assert len(found(search, "garden")) == i + 1
        assert rebuilds(caplog) == 0
        store.delete("s")
        store.append("s", [{"role": "user", "content": "note about the parrot"}])
        assert found(search, "garden") == [] and found(search, "parrot") == ["note about the parrot"]
        assert rebuilds(caplog) == 1
        search.close()


def test_each_sessions_index_cuts_long_texts_at_the_searchs_chunk_size(tmp_path):
    from ctxlife.recall import HistorySearch

    rows = " ".join(f"row {k}: widget stock in aisle {k % 7};" for k in range(60))
    store = RecordsOnly([{"role": "tool", "tool_call_id": "c1", "content": f"Inventory report. {rows}"}])
    search = HistorySearch(store, index_dir="memory", chunk_chars=400)
    index = search.index("s")
    assert index.chunk_chars == 400
    assert max(h.part for h in index.search("inventory report widget", limit=20)) >= 3  # 1,800 characters in 400s
    search.close()


def test_an_edit_in_view_is_applied_at_once_not_held_back(tmp_path):
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import Event, open_store

    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append(
            "s", [{"role": "user", "content": "my locker code is 4471"}, {"role": "assistant", "content": "noted"}]
        )
        search = HistorySearch(store, index_dir="memory")
        assert search.index("s").last_seq == 2
        edit = {"role": "user", "content": "my locker code is now 8812"}
        store.append_events("s", [Event("replace", edit, target=1)])
        assert search.index("s", defer=lambda record: True).last_seq == 3  # in view or not: written
        assert found(search, "locker code") == ["my locker code is now 8812", "noted"]
        search.close()


def test_a_store_without_fingerprints_is_never_rebuilt_for_lack_of_them(caplog):
    import logging

    from ctxlife.recall import HistorySearch

    caplog.set_level(logging.INFO, logger="ctxlife")
    store = RecordsOnly([{"role": "user", "content": f"note {i} about the garden"} for i in range(3)])
    store.records = [RawRecord(r.seq, r.message) for r in store.records]  # no fingerprint
    search = HistorySearch(store, index_dir="memory")
    for _ in range(3):
        assert len(search.passages("s", "garden", min_score=0.0)) >= 1
    assert rebuilds(caplog) == 0
    search.close()


def test_a_rebuild_is_reported_with_the_session_and_why(tmp_path, caplog):
    import logging

    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    caplog.set_level(logging.INFO, logger="ctxlife")
    with open_store(f"file://{tmp_path}/sessions") as store:
        store.append("trip-1", [{"role": "user", "content": "note about the garden"}])
        search = HistorySearch(store, index_dir="memory")
        assert search.passages("trip-1", "garden", min_score=0.0)
        store.delete("trip-1")
        store.append("trip-1", [{"role": "user", "content": "note about the parrot"}])
        assert search.passages("trip-1", "parrot", min_score=0.0)
        (message,) = [r.getMessage() for r in caplog.records if "recall_index" in r.getMessage()]
        assert "event='ctxlife.recall_index_rebuilt'" in message
        assert "session_id='trip-1'" in message and "reason='history_changed'" in message
        search.close()


def test_a_store_of_another_kind_with_a_local_url_gets_its_index_beside_it(tmp_path):
    from ctxlife.recall import HistorySearch

    store = RecordsOnly(GATE)
    store.url = f"file://{tmp_path}/elsewhere"  # type: ignore[attr-defined]
    search = HistorySearch(store)
    assert search.index_dir == tmp_path / "elsewhere" / "recall_index"
    assert search.index_path("s") == tmp_path / "elsewhere" / "recall_index" / "s.sqlite"
    search.close()


def test_two_workers_sharing_an_index_folder_follow_each_others_writes_without_rebuilding(tmp_path, caplog):
    import logging

    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import open_store

    caplog.set_level(logging.INFO, logger="ctxlife")
    with open_store(f"file://{tmp_path}/sessions") as store:
        first = HistorySearch(store, index_dir=tmp_path / "idx")
        second = HistorySearch(store, index_dir=tmp_path / "idx")
        store.append("s", [{"role": "user", "content": "note 1 about the garden"}])
        assert len(found(first, "garden")) == 1 and len(found(second, "garden")) == 1
        store.append("s", [{"role": "user", "content": f"note {i} about the garden"} for i in (2, 3)])
        assert len(found(first, "garden")) == 3  # indexed by the first worker
        assert len(found(second, "garden")) == 3  # the second reads them from the shared file
        assert rebuilds(caplog) == 0
        first.close()
        second.close()


@pytest.mark.parametrize("where", ["memory", "file"])
def test_a_write_sqlite_refuses_is_rolled_back_and_named_with_the_index(tmp_path, where):
    path = tmp_path / "s.sqlite" if where == "file" else None
    index = HistoryIndex(path)
    index.add(said(*HISTORY[:2]))
    refused = RawRecord(3, {"role": "user", "content": "hello"}, view="\ud800")  # a lone surrogate: not UTF-8
    with pytest.raises(CtxlifeError) as caught:
        index.add([refused])
    assert str(caught.value).startswith(f"cannot write the history index {path or ':memory:'}: ")
    assert index.last_seq == 2 and len(index) == 2
    assert index.add(said(*HISTORY)) == 2  # the transaction was closed: the index takes writes again


def test_an_index_file_is_kept_in_write_ahead_log_mode_for_workers_sharing_it(tmp_path):
    import sqlite3

    path = tmp_path / "s.sqlite"
    index = HistoryIndex(path)
    index.add(said(*HISTORY))
    reader = sqlite3.connect(path)
    assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # readers do not wait for a writer
    reader.close()
    index.close()


def test_a_record_of_a_day_not_seen_before_is_dated_and_found_by_its_date():
    # Days are remembered per quarter hour once converted: a day this process has not converted yet
    # (one per process, before 2015: no other test's) is worked out from the record's time.
    import os
    from datetime import date, timedelta

    day = date(1990, 1, 1) + timedelta(days=os.getpid() % 9000)
    then = datetime.combine(day, datetime.min.time()).timestamp() + 10 * 3600
    index = HistoryIndex()
    index.add(
        [
            RawRecord(1, {"role": "user", "content": "a walk by the river"}, recorded_at=then),
            RawRecord(2, {"role": "user", "content": "a swim in the lake"}, recorded_at=then + 86400 * 40),
        ]
    )
    months = "January February March April May June July August September October November December".split()
    question = f"What happened on {months[day.month - 1]} {day.day}?"  # not %B: the locale's name
    assert dates_in(question) == [(day.month, day.day)]
    assert [(h.seq, h.day) for h in index.search(question)] == [(1, day.isoformat())]


def test_records_fed_again_by_a_worker_behind_another_keep_the_others_last_fingerprint(tmp_path):
    path = tmp_path / "s.sqlite"
    behind = HistoryIndex(path)
    ahead = HistoryIndex(path)
    ahead.add(said(*HISTORY))
    assert ahead.last_fingerprint == "fp4" and behind.last_seq == 0  # the precondition: one worker behind
    assert behind.add(said(*HISTORY)) == 0  # nothing new for it: the other indexed them
    assert HistoryIndex(path).last_fingerprint == "fp4"
