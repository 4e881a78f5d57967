"""A large index's search scores only the documents that can make its result, and finds exactly
what scoring every match finds (ctxlife.recall.pruning), however the history grows or is edited."""

from __future__ import annotations

import random

from ctxlife.recall import HistoryIndex, pruning
from ctxlife.recall.index import PART_STRIDE, TOOL_DOC
from ctxlife.sessions import RawRecord

COMMON = [f"common{i}" for i in range(12)]
RARE = [f"rare{i}" for i in range(10)]
FILLER = [f"filler{i}" for i in range(300)]


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = rng.choices(FILLER, k=rng.randint(3, 40))
        words += rng.sample(COMMON, rng.randint(0, 3))
        if rng.random() < 0.05:
            words.append(rng.choice(RARE))
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


def _records(texts: list[str], start: int) -> list[RawRecord]:
    return [
        RawRecord(start + i, {"role": "tool" if i % 7 == 3 else "user", "content": text}, recorded_at=None)
        for i, text in enumerate(texts)
    ]


def _pair(tmp_path):
    """Two indexes of the same history: one prunes from its first document on, one never does."""
    pruned = HistoryIndex(tmp_path / "pruned.sqlite")
    pruned.PRUNE_DOCS = 0
    full = HistoryIndex(tmp_path / "full.sqlite")
    full.PRUNE_DOCS = 10**12
    return pruned, full


def _same(pruned: HistoryIndex, full: HistoryIndex, queries: list[list[str]], tool_weight: float) -> None:
    for terms in queries:
        for limit in (1, 5, 16):
            got = [(h.seq, h.part, h.score) for h in pruned._ranked(terms, limit, tool_weight)]
            want = [(h.seq, h.part, h.score) for h in full._ranked(terms, limit, tool_weight)]
            assert got == want, (terms, limit, tool_weight)


def test_the_pruned_ranking_equals_scoring_every_match_as_the_history_grows_and_is_edited(tmp_path):
    rng = random.Random(7)
    pruned, full = _pair(tmp_path)
    queries = [[rng.choice(RARE), *rng.sample(COMMON, rng.randint(1, 4))] for _ in range(25)]
    queries += [rng.sample(COMMON, 3) for _ in range(5)]
    history = _records(_texts(rng, 3000), 1)
    for index in (pruned, full):
        index.add(history)
    for tool_weight in (1.0, 2.5, 0.5):
        _same(pruned, full, queries, tool_weight)
    # Short messages repeating common words outweigh every older document's use of them.
    burst = [" ".join([common] * 12) for common in COMMON] + _texts(rng, 200)
    more = _records(burst, history[-1].seq + 1)
    for index in (pruned, full):
        index.add(more)
    _same(pruned, full, queries, 1.0)
    # An edit puts new text into an old slot.
    edit = RawRecord(
        more[-1].seq + 1,
        {"role": "user", "content": " ".join(COMMON[:4] * 6)},
        op="replace",
        target=history[10].seq,
    )
    for index in (pruned, full):
        index.add([edit])
    _same(pruned, full, queries, 1.0)


def test_a_new_message_that_outweighs_every_older_use_of_a_common_word_is_still_found(tmp_path):
    """A short message repeating a common word outweighs every older use of it, and is found."""
    pruned, full = _pair(tmp_path)
    rng = random.Random(3)
    texts = [" ".join(rng.choices(FILLER, k=10) + ["often"]) for _ in range(20)]
    texts += [" ".join(rng.choices(FILLER, k=10)) for _ in range(1040)]
    texts.append(" ".join(rng.choices(FILLER, k=10) + ["unique"]))  # the one message with the rare word
    history = _records(texts, 1)
    for index in (pruned, full):
        index.add(history)
    assert [h.seq for h in pruned._ranked(["unique", "often"], 1)] == [history[-1].seq]
    repeated = RawRecord(history[-1].seq + 1, {"role": "user", "content": " ".join(["often"] * 20)})
    for index in (pruned, full):
        index.add([repeated])
    assert [h.seq for h in full._ranked(["unique", "often"], 1)] == [repeated.seq]
    assert [h.seq for h in pruned._ranked(["unique", "often"], 1)] == [repeated.seq]


def test_the_ceilings_prove_a_result_without_the_full_query(tmp_path):
    """Not a fallback in disguise: for a rare word with common ones the ceilings settle it."""
    rng = random.Random(11)
    index = HistoryIndex(tmp_path / "i.sqlite")
    texts = [" ".join(rng.choices(FILLER, k=8) + rng.sample(COMMON[:3], 2)) for _ in range(2000)]
    texts += [f"rare3 {rng.choice(FILLER)} common1" for _ in range(10)]
    index.add(_records(texts, 1))
    assert pruning._documents(index._db) == 2010  # the document count bm25 reads (FTS5's varint, two bytes here)
    score = f"-bm25(fts) * (CASE WHEN fts.rowid >= {TOOL_DOC} THEN ? ELSE 1.0 END)"
    order = f"ORDER BY 2 DESC, fts.rowid % {PART_STRIDE}, fts.rowid LIMIT ?"
    for terms in (["rare3", "common1", "common2"], ["rare3", "common1"]):  # two terms are enough to leave one out
        hits = {t: index._doc_freq(t) for t in terms}
        rows = pruning.ranked(index._db, terms, 3, 1.0, hits, score, order, PART_STRIDE)
        assert rows is not None, terms
        query = " OR ".join(f'"{t}"' for t in terms)
        every = index._db.execute(f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? {order}", (1.0, query, 3))
        assert rows == every.fetchall()
    # One term: nothing to leave out, the full query is run.
    assert pruning.ranked(index._db, ["rare3"], 3, 1.0, {"rare3": 10}, score, order, PART_STRIDE) is None


def test_matches_scored_alike_come_in_the_order_they_were_said_tool_result_or_not(tmp_path):
    """A tie is broken by the record's place in the history, as the full query breaks it, not by its rowid
    (a tool result's rowid is above every message's)."""
    pruned, full = _pair(tmp_path)
    rng = random.Random(5)
    texts = [" ".join(rng.choices(FILLER, k=10) + ["common1"]) for _ in range(600)]
    texts[3] = texts[5] = "rare3 common1 filler1"  # record 4 is a tool result (_records), record 6 a message
    for index in (pruned, full):
        index.add(_records(texts, 1))
    for index in (pruned, full):
        assert [h.seq for h in index._ranked(["rare3", "common1"], 1, 1.0)] == [4]
        assert [h.seq for h in index._ranked(["rare3", "common1"], 2, 1.0)] == [4, 6]


def test_a_word_in_many_messages_still_ranks_them_when_the_rarer_word_leaves_room(tmp_path):
    """A word in 40 of 100 messages weighs little (idf under 1) but not nothing: a short message repeating it
    outranks long ones holding the rarer word once, and messages holding only it fill a result the rarer
    word's messages leave room in."""
    pruned, full = _pair(tmp_path)
    rng = random.Random(9)
    texts = [" ".join(rng.choices(FILLER, k=10)) for _ in range(40)]
    texts += [" ".join(rng.choices(FILLER, k=60) + ["seldom"]) for _ in range(20)]  # long, the rarer word once
    texts += [" ".join(rng.choices(FILLER, k=10) + ["often"]) for _ in range(39)]
    texts.append("often " * 8)  # record 100: short, the common word only
    history = _records(texts, 1)
    for index in (pruned, full):
        index.add(history)
    for limit in (1, 25):
        want = [(h.seq, h.score) for h in full._ranked(["seldom", "often"], limit, 1.0)]
        assert [(h.seq, h.score) for h in pruned._ranked(["seldom", "often"], limit, 1.0)] == want
    assert want[0][0] == 100 and len(want) == 25  # 20 messages hold the rarer word: 5 hold only the common one
    # A word in most messages (idf floored at 1e-6) still fills a result the rare word leaves room in.
    more = [" ".join(rng.choices(FILLER, k=10) + ["often"]) for _ in range(60)]
    for index in (pruned, full):
        index.add(_records(more, 101))
    want = [h.seq for h in full._ranked(["seldom", "often"], 25, 1.0)]
    assert [h.seq for h in pruned._ranked(["seldom", "often"], 25, 1.0)] == want and len(want) == 25


def test_a_chat_history_is_pruned_at_any_tool_weight_and_a_tool_result_of_common_words_still_wins(tmp_path):
    """Tool results weighed up raise the ceilings only of the words tool results hold: a history without tool
    results is pruned as at weight 1, and a tool result holding only common words, which the weight lifts
    above the rare word's messages, is still found first."""
    rng = random.Random(13)
    pruned, full = _pair(tmp_path)
    texts = [" ".join(rng.choices(FILLER, k=8) + rng.sample(COMMON[:6], 1)) for _ in range(2000)]
    texts += [f"rare3 {rng.choice(FILLER)} common1" for _ in range(10)]
    chat = [RawRecord(i + 1, {"role": "user", "content": text}) for i, text in enumerate(texts)]
    for index in (pruned, full):
        index.add(chat)
    terms = ["rare3", "common1", "common2"]
    score = f"-bm25(fts) * (CASE WHEN fts.rowid >= {TOOL_DOC} THEN ? ELSE 1.0 END)"
    order = f"ORDER BY 2 DESC, fts.rowid % {PART_STRIDE}, fts.rowid LIMIT ?"
    hits = {t: pruned._doc_freq(t) for t in terms}
    tools = {t: pruned._doc_freq(t, tools=True) for t in terms}
    assert tools == dict.fromkeys(terms, 0)
    assert pruning.ranked(pruned._db, terms, 3, 3.0, hits, score, order, PART_STRIDE, tools) is not None
    _same(pruned, full, [terms], 3.0)
    result = RawRecord(
        len(chat) + 1, {"role": "tool", "tool_call_id": "c1", "content": "common1 common1 common1 common1 common2"}
    )
    for index in (pruned, full):
        index.add([result])
    # With one common word its ceiling (3.5) stays below the rare word's best message (9.5), but not five times it.
    for asked, weight in ((terms, 3.0), (terms[:2], 5.0)):
        assert [h.seq for h in full._ranked(asked, 1, weight)] == [result.seq]
        assert [h.seq for h in pruned._ranked(asked, 1, weight)] == [result.seq]
        _same(pruned, full, [asked], weight)


def test_word_counts_kept_across_writes_are_those_a_fresh_process_counts(tmp_path):
    """A long-running index keeps its words' document counts across additions (counting only what was added);
    after additions, long messages in chunks, tool results, an edit, a removal and another process's write, every
    count, and so every ranking, is what a fresh process opening the file counts."""
    rng = random.Random(17)
    path = tmp_path / "kept.sqlite"
    kept = HistoryIndex(path, chunk_chars=120)
    other = HistoryIndex(path, chunk_chars=120)
    words = [*COMMON[:4], *RARE[:3]]

    def batch(start: int, n: int) -> list[RawRecord]:
        out = []
        for i in range(n):
            size = rng.choice((6, 6, 60))  # some past chunk_chars: documents numbered past PART_STRIDE
            text = " ".join(rng.choices(FILLER, k=size) + rng.sample(words, 2))
            role = "tool" if i % 5 == 2 else rng.choice(("user", "assistant"))
            out.append(RawRecord(start + i, {"role": role, "content": text}))
        return out

    def check() -> None:
        fresh = HistoryIndex(path, chunk_chars=120)
        for word in words:
            for tools in (False, True):
                assert kept._doc_freq(word, tools=tools) == fresh._doc_freq(word, tools=tools), (word, tools)
        assert kept.term_weights(words) == fresh.term_weights(words)
        fresh.close()

    history = batch(1, 300)
    kept.add(history)
    check()
    for _ in range(3):  # additions only: counted from what was added
        more = batch(kept.last_seq + 1, 40)
        kept.add(more)
        check()
    seq = kept.last_seq + 1
    kept.add([RawRecord(seq, {"role": "user", "content": "rare0 common1"}, op="replace", target=history[5].seq)])
    check()
    kept.add([RawRecord(seq + 1, {"role": "user", "content": ""}, op="remove", target=history[7].seq)])
    check()
    other.refresh()
    other.add(batch(seq + 2, 30))  # another process writes
    other.add([RawRecord(seq + 32, {"role": "user", "content": "rare1"}, op="replace", target=history[9].seq)])
    kept.add(batch(seq + 33, 10))  # ...and this one adds after it, without a refresh
    check()
    kept.refresh()
    check()
    for index in (kept, other):
        index.close()


def test_a_word_never_said_and_a_rare_word_in_too_few_messages_are_pruned_exactly(tmp_path):
    """A word no message holds scores nothing and is left out; the rarest word's messages too few to fill the
    result bring in the next rarest word: the ceilings still settle it, exactly as scoring every match."""
    rng = random.Random(19)
    pruned, full = _pair(tmp_path)
    texts = [" ".join(rng.choices(FILLER, k=8) + rng.sample(COMMON[:6], 1)) for _ in range(2000)]
    texts += [f"rare3 {rng.choice(FILLER)} common1" for _ in range(2)]
    texts += [f"rare4 {rng.choice(FILLER)} common2 {rng.choice(FILLER)}" for _ in range(12)]
    rng.shuffle(texts)
    for index in (pruned, full):
        index.add([RawRecord(i + 1, {"role": "user", "content": text}) for i, text in enumerate(texts)])
    terms = ["nowhere", "rare3", "rare4", "common1", "common2"]
    score = f"-bm25(fts) * (CASE WHEN fts.rowid >= {TOOL_DOC} THEN ? ELSE 1.0 END)"
    order = f"ORDER BY 2 DESC, fts.rowid % {PART_STRIDE}, fts.rowid LIMIT ?"
    hits = {t: pruned._doc_freq(t) for t in terms}
    assert hits["nowhere"] == 0 and hits["rare3"] == 2
    rows = pruning.ranked(pruned._db, terms, 5, 1.0, hits, score, order, PART_STRIDE)
    every = pruned._db.execute(
        f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? {order}", (1.0, " OR ".join(f'"{t}"' for t in terms), 5)
    ).fetchall()
    assert rows == every
    _same(pruned, full, [terms, terms[1:], ["nowhere", "common1", "common2"]], 1.0)
