"""What a large index's selective search (HistoryIndex._selective, _with_common) must keep, beyond
tests/recall/test_selective.py: written for the survivors of `make mutate MUTATE_SCOPE=recall-index-search`
(docs/mutation/recall-index-search.md) and of pruning.py's idf, averages and _varint, which complete the scores
(docs/mutation/recall-text-pruning.md). Each compares with an index that scores every match (FTS5's bm25 over
the whole question), never with the selective search's own arithmetic."""

from __future__ import annotations

import itertools
import random

import pytest

from ctxlife.recall import HistoryIndex, pruning
from ctxlife.sessions import RawRecord

COMMON = [f"common{i}" for i in range(4)]
RARE = [f"rare{i}" for i in range(6)]
FILLER = [f"filler{i}" for i in range(200)]


def _records(texts: list[str]) -> list[RawRecord]:
    return [RawRecord(i + 1, {"role": "user", "content": text}, recorded_at=None) for i, text in enumerate(texts)]


def _chat(rng: random.Random, count: int, rare_share: float) -> list[str]:
    """``count`` texts of filler and common words; about ``rare_share`` of them hold a rare word once or twice."""
    texts = []
    for _ in range(count):
        words = rng.choices(FILLER, k=rng.randint(3, 20)) + rng.sample(COMMON, rng.randint(1, 3))
        if rng.random() < rare_share:
            words += [rng.choice(RARE)] * rng.randint(1, 2)
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts


def _selective_and_exact(tmp_path, texts: list[str], **options) -> tuple[HistoryIndex, HistoryIndex]:
    selective = HistoryIndex(tmp_path / "selective.sqlite", **options)
    selective.SELECTIVE_DOCS, selective.SELECTIVE_MATCHES = 0, 40
    exact = HistoryIndex(tmp_path / "exact.sqlite", **options)
    exact.SELECTIVE_DOCS, exact.PRUNE_DOCS = 10**12, 10**12
    for index in (selective, exact):
        index.add(_records(texts))
    return selective, exact


def test_a_later_chunk_of_a_long_text_scores_as_the_index_chunked_it(tmp_path):
    """An index built with its own chunk size: the common words are counted in the chunk the index holds
    (its body after the record's head), not in a chunk of the default size."""
    rng = random.Random(4)
    texts = []
    for i in range(300):
        words = rng.choices(FILLER, k=rng.randint(4, 12)) + rng.sample(COMMON, rng.randint(1, 3))
        if i % 10 == 0:  # a long text: a rare word and common words throughout its chunks
            words = words * 25 + [rng.choice(RARE) for _ in range(3)] + rng.choices(COMMON, k=30)
        rng.shuffle(words)
        texts.append(" ".join(words))
    selective, exact = _selective_and_exact(tmp_path, texts, chunk_chars=300)
    later = 0
    for rare in RARE:
        terms = [rare, *COMMON[:2]]
        assert len(selective._selective(terms)) < len(terms)  # the precondition: the common words complete
        whole = {(h.seq, h.part): h.score for h in exact._ranked(terms, 10_000)}
        for hit in selective._ranked(terms, 6):
            later += hit.part > 0
            assert hit.score == pytest.approx(whole[(hit.seq, hit.part)], rel=1e-9), (terms, hit.seq, hit.part)
    assert later >= 5  # the precondition: hits in a long text's later chunks were scored
    selective.close()
    exact.close()


def test_the_rarest_words_choose_while_their_matches_stay_within_the_budget(tmp_path):
    """The choosing words' matches are summed over all of them, and a budget met exactly still holds."""
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.SELECTIVE_DOCS = 0
    texts = [f"alpha {i}" for i in range(10)] + [f"beta {i}" for i in range(12)] + [f"gamma {i}" for i in range(14)]
    index.add(_records(texts + [f"delta {i}" for i in range(30)]))
    terms = ["delta", "gamma", "alpha", "beta"]
    index.SELECTIVE_MATCHES = 22
    assert index._selective(terms) == ["alpha", "beta"]  # 10 + 12 = 22: the budget met exactly
    index.SELECTIVE_MATCHES = 21
    assert index._selective(terms) == ["alpha"]
    index.SELECTIVE_MATCHES = 35
    assert index._selective(terms) == ["alpha", "beta"]  # 10 + 12 + 14 = 36: gamma would pass it
    index.SELECTIVE_MATCHES = 36
    assert index._selective(terms) == ["alpha", "beta", "gamma"]
    index.close()


@pytest.mark.parametrize("tool_weight", [1.0, 3.0])
def test_the_best_single_hit_is_the_whole_querys(tmp_path, tool_weight):
    """A search for one hit: the rare words' documents completed one by one, the best kept."""
    texts = _chat(random.Random(9), 400, rare_share=0.1)
    selective, exact = _selective_and_exact(tmp_path, texts)
    compared = 0
    for rare in RARE:
        terms = [rare, *COMMON]
        assert len(selective._selective(terms)) < len(terms)  # the precondition: the common words complete
        want = exact._ranked(terms, 1, tool_weight)
        if not any(rare in h.text.split() for h in want):
            continue  # a document of common words only wins: the rare word cannot choose it
        got = selective._ranked(terms, 1, tool_weight)
        assert [(h.seq, h.part) for h in got] == [(h.seq, h.part) for h in want], terms
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9)
        compared += 1
    assert compared >= 4  # the precondition: most rare words' best documents were compared
    selective.close()
    exact.close()


def test_hits_scored_alike_come_in_the_order_they_were_said_tool_result_or_not(tmp_path):
    """A tie is broken by the record's place in the history, as the whole query breaks it, not by the
    document's number (a tool result's is above every message's)."""
    rng = random.Random(5)
    texts = [" ".join(rng.choices(FILLER, k=10) + ["common1"]) for _ in range(300)]
    records = _records(texts)
    for seq, role in ((4, "tool"), (6, "user"), (9, "tool"), (12, "user")):
        records[seq - 1] = RawRecord(seq, {"role": role, "content": "rare3 common1 filler1"}, recorded_at=None)
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.SELECTIVE_DOCS, index.SELECTIVE_MATCHES = 0, 10
    index.add(records)
    assert index._selective(["rare3", "common1"]) == ["rare3"]  # the precondition: common1 completes
    hits = index._ranked(["rare3", "common1"], 3)
    assert [(h.seq, h.role) for h in hits] == [(4, "tool"), (6, "user"), (9, "tool")]
    assert len({h.score for h in hits}) == 1  # (scored alike)
    index.close()


def test_a_word_in_half_the_documents_adds_what_fts5_adds_for_it(tmp_path):
    """A word in exactly half the documents has a BM25 idf of log(1) = 0, which FTS5 floors at 1e-6: the
    completed score adds that floor's share, as the whole query's score does (a word in more than half
    adds the same floor)."""
    texts = [
        " ".join(
            ["half"] * (i < 200) + ["most"] * (i % 4 != 0) + ["rare"] * (i % 25 == 0) + [f"filler{i % 7}"] * (1 + i % 3)
        )
        for i in range(400)
    ]
    selective, exact = _selective_and_exact(tmp_path, texts)
    terms = ["rare", "half", "most"]
    assert selective._doc_freq("half") * 2 == len(selective)  # the precondition: exactly half ...
    assert selective._selective(terms) == ["rare"]  # ... and completing the rare word's scores
    whole = {(h.seq, h.part): h.score for h in exact._ranked(terms, 10_000)}
    got = selective._ranked(terms, 10)
    assert len(got) == 10
    for hit in got:
        assert hit.score == pytest.approx(whole[(hit.seq, hit.part)], rel=1e-12, abs=0), hit.text
    selective.close()
    exact.close()


@pytest.mark.parametrize("tool_weight", [1.0, 3.0])
def test_past_both_lines_a_question_is_pruned_or_completed_never_both(tmp_path, tool_weight):
    """From PRUNE_DOCS on as well (the default lines: 5,000 then 20,000 documents): a question whose words all
    fit the budget is pruned (exactly the whole query's hits), one whose common words complete the rare ones'
    scores is not pruned too (its scores would count the common words twice)."""
    texts = _chat(random.Random(21), 600, rare_share=0.06)
    records = [
        RawRecord(i + 1, {"role": "tool" if i % 7 == 3 else "user", "content": t}, recorded_at=None)
        for i, t in enumerate(texts)
    ]
    selective = HistoryIndex(tmp_path / "selective.sqlite")
    selective.SELECTIVE_DOCS, selective.SELECTIVE_MATCHES, selective.PRUNE_DOCS = 0, 40, 0
    exact = HistoryIndex(tmp_path / "exact.sqlite")
    exact.SELECTIVE_DOCS, exact.PRUNE_DOCS = 10**12, 10**12
    for index in (selective, exact):
        index.add(records)
    completed = pruned = 0
    for first, second in itertools.pairwise(RARE):
        for terms in ([first, second], [first, *COMMON[:2]]):
            chooses_all = sorted(selective._selective(terms)) == sorted(terms)
            whole = {(h.seq, h.part): h.score for h in exact._ranked(terms, 10_000, tool_weight)}
            got = selective._ranked(terms, 5, tool_weight)
            for hit in got:
                assert hit.score == pytest.approx(whole[(hit.seq, hit.part)], rel=1e-9), (terms, hit.seq)
            if chooses_all:  # pruned: exactly the whole query's best
                want = exact._ranked(terms, 5, tool_weight)
                assert [(h.seq, h.part) for h in got] == [(h.seq, h.part) for h in want], terms
            pruned += chooses_all
            completed += bool(got) and not chooses_all
    assert pruned >= 4 and completed >= 4  # the precondition: both kinds of question were asked
    selective.close()
    exact.close()


def test_the_rare_words_choose_from_exactly_selective_docs_documents_on(tmp_path):
    """SELECTIVE_DOCS is the first size at which the rare words choose ("from 5,000 documents on"), and a
    budget of 0 turns the choosing off."""
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.SELECTIVE_MATCHES = 5
    index.add(_records([f"common words {i}" for i in range(40)] + ["rare common"]))
    terms = ["rare", "common"]
    index.SELECTIVE_DOCS = len(index)  # (41 short texts: one document each)
    assert [h.text for h in index._ranked(terms, 5)] == ["rare common"]
    index.SELECTIVE_DOCS = len(index) + 1
    assert len(index._ranked(terms, 5)) == 5  # every match scored: documents of "common" alone too
    index.SELECTIVE_DOCS, index.SELECTIVE_MATCHES = 0, 0
    assert len(index._ranked(terms, 5)) == 5
    index.close()


def test_an_index_of_16400_words_completes_scores_with_its_average_length(tmp_path):
    """FTS5 keeps its counts as big-endian varints; 16,400 words is 0x81 0x80 0x10, a middle byte of
    exactly 0x80 (more follows, its seven bits zero): read as the last, the average length is wrong."""
    texts = []
    for i in range(400):  # 41 words each
        words = [f"common{i % 3}"] * (1 + i % 2) + (["rare"] if i % 9 == 0 else [f"other{i % 5}"])
        texts.append(" ".join(words + [f"filler{(i + j) % 50}" for j in range(41 - len(words))]))
    selective, exact = _selective_and_exact(tmp_path, texts)
    assert pruning.averages(selective._db) == (400, 16_400)  # the precondition: the middle byte is 0x80
    terms = ["rare", "common0", "common1"]
    assert selective._selective(terms) == ["rare"]
    whole = {(h.seq, h.part): h.score for h in exact._ranked(terms, 10_000)}
    got = selective._ranked(terms, 10)
    assert len(got) == 10
    for hit in got:
        assert hit.score == pytest.approx(whole[(hit.seq, hit.part)], rel=1e-9), hit.text
    selective.close()
    exact.close()


@pytest.mark.parametrize("fetch", [4, 50])
def test_a_budget_holding_every_match_is_the_exact_search(tmp_path, fetch):
    """SELECTIVE_MATCHES and SELECTIVE_FETCH trade cost for approximation (benchmarks/recall_selective.py): a
    budget that holds every word's matches leaves no word to complete, and the hits are exactly the whole
    query's, however many documents a hit would fetch."""
    rng = random.Random(8)
    texts = [" ".join(rng.choices(FILLER, k=8) + rng.sample(COMMON, 2) + rng.sample(RARE, 1)) for _ in range(200)]
    selective, exact = _selective_and_exact(tmp_path, texts)
    selective.SELECTIVE_FETCH = fetch
    terms = [RARE[0], RARE[1], *COMMON]
    selective.SELECTIVE_MATCHES = sum(selective._doc_freq(t) for t in terms)
    assert sorted(selective._selective(terms)) == sorted(terms)
    for limit in (1, 5, 40):
        got = [(h.seq, h.part, h.score) for h in selective._ranked(terms, limit)]
        assert got == [(h.seq, h.part, h.score) for h in exact._ranked(terms, limit)]
    selective.SELECTIVE_MATCHES -= 1  # one match fewer: the commonest word completes
    assert len(selective._selective(terms)) == len(terms) - 1
    selective.close()
    exact.close()
