"""A large index lets a question's rarest terms choose its hits, and the common terms complete their scores
(HistoryIndex._selective, _with_common): each hit's score is the one the whole question gives it (FTS5's bm25
over every term), and where the best documents all hold a rare term, the hits are exactly the whole query's."""

from __future__ import annotations

import random

import pytest

from ctxlife.recall import HistoryIndex
from ctxlife.sessions import RawRecord

COMMON = [f"common{i}" for i in range(6)]
RARE = [f"rare{i}" for i in range(12)]
FILLER = [f"filler{i}" for i in range(400)]


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        words = rng.choices(FILLER, k=rng.randint(3, 30))
        words += rng.sample(COMMON, rng.randint(1, 4))  # every document holds common words
        if rng.random() < 0.04:
            words += [rng.choice(RARE)] * rng.randint(1, 3)
        if i % 97 == 5:  # a long text, indexed in chunks: its later chunks are their own documents
            words = words * 40
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


def _records(texts: list[str], views: bool = False) -> list[RawRecord]:
    return [
        RawRecord(
            i + 1,
            {"role": "tool" if i % 7 == 3 else "user", "content": text},
            recorded_at=None,
            view=("a" if i % 2 else "b") if views else "",
        )
        for i, text in enumerate(texts)
    ]


@pytest.fixture()
def pair(tmp_path):
    """One history in two indexes: one lets the rare terms choose from its first document on (at most 60
    matches: one or two rare terms), the other always scores every match."""
    rng = random.Random(11)
    history = _records(_texts(rng, 1500), views=True)
    selective = HistoryIndex(tmp_path / "selective.sqlite")
    selective.SELECTIVE_DOCS, selective.SELECTIVE_MATCHES = 0, 60
    exact = HistoryIndex(tmp_path / "exact.sqlite")
    exact.SELECTIVE_DOCS, exact.PRUNE_DOCS = 10**12, 10**12
    for index in (selective, exact):
        index.add(history)
    yield selective, exact
    selective.close()
    exact.close()


def _queries(seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [[*rng.sample(RARE, rng.randint(1, 2)), *rng.sample(COMMON, rng.randint(1, 3))] for _ in range(30)]


@pytest.mark.parametrize("tool_weight", [1.0, 3.0])
@pytest.mark.parametrize("view", [None, "a"])
def test_each_hit_scores_what_the_whole_question_gives_it(pair, tool_weight, view):
    selective, exact = pair
    chose_fewer = found = 0
    for terms in _queries(3):
        chose_fewer += len(selective._selective(terms)) < len(terms)
        whole = {(h.seq, h.part): h.score for h in exact._ranked(terms, 10_000, tool_weight, view)}
        got = selective._ranked(terms, 8, tool_weight, view)
        found += bool(got)  # (none when no document of the view holds a rare term: see the next test)
        for hit in got:
            assert hit.score == pytest.approx(whole[(hit.seq, hit.part)], rel=1e-9, abs=1e-9), (terms, hit)
            assert view is None or hit.view == view
    assert chose_fewer >= 20  # the precondition: most questions left their common terms out of the choice
    assert found >= 20


def test_a_question_with_rare_terms_finds_only_documents_holding_one(tmp_path):
    """As Elasticsearch's common terms query: when rare terms choose, a document of common words only is not
    searched (in a view whose documents hold none of them, nothing is found)."""
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.SELECTIVE_DOCS, index.SELECTIVE_MATCHES = 0, 5
    texts = [f"common words {i}" for i in range(40)] + ["rare common"]
    index.add(_records(texts, views=True))
    hits = index._ranked(["rare", "common"], 5)
    assert [(h.text, h.view) for h in hits] == [("rare common", "b")]
    assert index._ranked(["rare", "common"], 5, view="a") == []
    assert len(index._ranked(["common"], 5, view="a")) == 5  # (the view's documents hold "common")
    index.close()


@pytest.mark.parametrize("tool_weight", [1.0, 3.0])
def test_where_the_best_documents_hold_a_rare_term_the_hits_are_the_whole_querys(pair, tool_weight):
    selective, exact = pair
    compared = 0
    for terms in _queries(5):
        want = exact._ranked(terms, 5, tool_weight)
        rare = [t for t in terms if t in RARE]
        if not all(any(t in h.text.split() for t in rare) for h in want):
            continue  # a document of common words only outranks them: the rare terms cannot choose it
        got = selective._ranked(terms, 5, tool_weight)
        assert [(h.seq, h.part) for h in got] == [(h.seq, h.part) for h in want], terms
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9)
        compared += 1
    assert compared >= 10  # the precondition: the comparison ran on most questions


def test_a_common_word_orders_the_documents_a_rare_one_found(tmp_path):
    """ "Which movies do I like?": "movies" finds the few documents, "like" tells the answer from the rest."""
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.SELECTIVE_DOCS, index.SELECTIVE_MATCHES = 0, 50
    texts = [f"I like item {i} of the shop" if i % 4 == 0 else f"an item {i} of the shop" for i in range(600)]
    texts += ["We watched movies at home", "Movies on Sunday again", "I like movies with dragons"]
    texts += [f"movies list {i}" for i in range(5)]
    index.add(_records(texts))
    terms = ["movies", "like"]
    assert index._selective(terms) == ["movies"]  # the precondition: "like" does not choose
    hits = index._ranked(terms, 3)
    assert hits[0].text == "I like movies with dragons"
    index.close()


def test_small_indexes_and_questions_of_rare_words_only_score_every_match(tmp_path):
    index = HistoryIndex(tmp_path / "i.sqlite")
    index.add(_records(["alpha beta", "beta gamma", "gamma alpha"] * 10))
    assert len(index) < index.SELECTIVE_DOCS  # below the line: every term chooses
    index.SELECTIVE_DOCS = 0
    assert index._selective(["alpha", "beta"]) == ["alpha", "beta"]  # 40 matches: within the budget
    index.SELECTIVE_MATCHES = 15
    assert index._selective(["alpha", "nothing"]) == ["alpha"]  # the rarest always chooses, whatever it matches
    assert index._selective(["nothing"]) == ["nothing"]
    index.close()
