"""What the recall block shows (:func:`ctxlife.recall.block.render`, :func:`~ctxlife.recall.block.excerpt`):
within its budget, every passage's turn before any context, long texts cut to the excerpt that holds
the question's words, every line a title or a labelled, quoted message.

Written for the survivors of mutation scope ``recall-render`` (docs/mutation/recall-render.md): the
passages are built by hand (what a search returns), the block is what the model is sent.
"""

from __future__ import annotations

import json
import re

from ctxlife import TokenCounter
from ctxlife.messages import QUOTE_MARK
from ctxlife.recall import Hit, Passage, StoredRecord, excerpt
from ctxlife.recall.block import RECALL_HEADER, render

count = TokenCounter().count_text
FILLER = " ".join(f"word{i}" for i in range(300))


def rec(seq: int, role: str, text: str) -> StoredRecord:
    return StoredRecord(seq, role, text, None, None, None)


def passage(records: list[StoredRecord], hit: int, core: set[int] | None = None, **weights: float) -> Passage:
    found = next(r for r in records if r.seq == hit)
    return Passage(Hit(hit, 0, 1.0, found.text, found.role, None, None, None), records, weights, core or {hit})


def albatross(**weights: float) -> Passage:
    """A turn whose question is long (the match deep inside it), its answer, and a message either side."""
    return passage(
        [
            rec(1, "user", "hello"),
            rec(2, "user", f"{FILLER} the albatross code is 7 {FILLER}"),
            rec(3, "assistant", "Noted, albatross 7."),
            rec(4, "user", "bye"),
        ],
        2,
        {2, 3},
        **weights,
    )


def zebra() -> Passage:
    return passage([rec(10, "user", "the zebra is striped"), rec(11, "assistant", "yes zebra")], 10, {10, 11})


def test_every_passages_turn_is_shown_before_any_context():
    passages = [albatross(albatross=1.0), zebra()]
    text, shown = render(passages, 200, count, query="albatross zebra")
    assert text is not None and count(text) <= 200 and shown == passages
    # both turns (the long question cut to its match, the answers whole) and no message of context
    assert "albatross code is 7" in text and "assistant: │ Noted, albatross 7." in text
    assert "user: │ the zebra is striped\nassistant: │ yes zebra" in text
    assert "hello" not in text and "bye" not in text and "[message 2]" in text and "[message 10]" in text
    # with room, the context around the first turn too, titled from its first message
    roomy, shown = render(passages, 2000, count, query="albatross zebra")
    assert roomy is not None and shown == passages
    assert (
        "[message 1]\nuser: │ hello\nuser: │ … " in roomy and "Noted, albatross 7.\nuser: │ bye\n[message 10]" in roomy
    )


def test_the_block_stays_within_its_budget_dropping_the_last_passages_first():
    passages = [albatross(albatross=1.0), zebra()]
    header = count(RECALL_HEADER)
    assert render(passages, header, count) == (None, [])  # not even the header and one line
    for budget in range(header + 10, 420, 7):
        text, shown = render(passages, budget, count, query="albatross zebra")
        if text is None:
            assert shown == []
            continue
        assert count(text) <= budget and text.startswith(RECALL_HEADER + "\n")
        assert shown == passages[: len(shown)]  # best first
        if shown:
            assert "albatross" in text.split("[message", 2)[1]  # the match, whatever is cut


def test_a_first_passage_cut_to_leave_room_for_the_others_gets_back_what_they_left():
    long = passage([rec(2, "user", f"{FILLER} the albatross code is 7 {FILLER}")], 2, albatross=1.0)
    short = passage([rec(10, "user", "zebra")], 10, zebra=1.0)
    left = 300  # the first passage's share: two thirds of it, under hit_tokens (250)
    text, shown = render([long, short], count(RECALL_HEADER) + 1 + left, count, hit_tokens=250)
    lines = body_lines(text)
    assert shown == [long, short] and lines[2:] == ["[message 10]", "user: │ zebra"]
    assert "albatross code is 7" in lines[1] and 240 <= count(lines[1]) <= 251, count(lines[1])


def test_a_larger_budget_never_shows_fewer_passages():
    long = passage([rec(2, "user", f"{FILLER} the albatross code is 7 {FILLER}")], 2, albatross=1.0)
    with_context = passage(
        [
            rec(9, "user", words("x", 80)),
            rec(10, "user", f"the zebra is striped {words('y', 50)}"),
            rec(11, "assistant", "yes zebra"),
            rec(12, "user", words("z", 80)),
        ],
        10,
        {10, 11},
        zebra=1.0,
    )
    short = passage([rec(20, "user", "the zebra again")], 20, zebra=1.0)
    passages = [long, with_context, short]
    most = 0
    for budget in range(count(RECALL_HEADER) + 20, count(RECALL_HEADER) + 900, 5):
        text, shown = render(passages, budget, count)
        assert len(shown) >= most and (text is None or count(text) <= budget), (budget, len(shown), most)
        most = len(shown)
    assert most == 3


def test_a_passages_context_is_added_after_a_passage_shown_whole():
    whole = passage([rec(20, "user", "the zebra again")], 20, zebra=1.0)
    turn = passage(
        [
            rec(9, "user", "before it"),
            rec(10, "user", "the zebra is striped"),
            rec(11, "assistant", REPLY),
            rec(12, "user", "after it"),
        ],
        10,
        {10, 11},
        zebra=1.0,
        albatross=1.0,
    )
    lines = body_lines(render([whole, turn], 2000, count, hit_tokens=250)[0])
    assert lines[:2] == ["[message 20]", "user: │ the zebra again"]
    assert lines[2:5] == ["[message 9]", "user: │ before it", "user: │ the zebra is striped"]
    assert lines[6] == "user: │ after it" and lines[5].startswith("assistant: │ … ")
    assert "the albatross is at dock 7" in lines[5] and 150 <= count(lines[5]) <= 170  # two thirds of hit_tokens


def test_a_passage_that_does_not_fit_leaves_its_room_to_the_next():
    long = passage([rec(2, "user", f"{FILLER} the albatross code is 7 {FILLER}")], 2, albatross=1.0)
    short = passage([rec(10, "user", "zebra")], 10, zebra=1.0)
    budget = count(RECALL_HEADER) + 1 + 30  # the short one, not the long one cut to its match
    text, shown = render([long, short], budget, count)
    assert shown == [short] and text == f"{RECALL_HEADER}\n[message 10]\nuser: │ zebra"


def test_a_passage_without_weights_is_cut_to_the_questions_words():
    text, _ = render([albatross()], 120, count, query="where is the albatross?")
    assert text is not None and "the albatross code is 7" in text
    head, _ = render([albatross()], 120, count, query="")  # no words to look for: the text's head
    assert head is not None and "user: │ word0 word1 word2" in head and "albatross code" not in head
    # the passage's own weights (the terms its match holds) over the question's words
    weighted, _ = render([albatross(albatross=1.0)], 120, count, query="zebra")
    assert weighted is not None and "the albatross code is 7" in weighted


def test_every_line_is_a_title_or_a_labelled_quoted_line():
    calls = passage(
        [
            rec(5, "user", "Any   tips\nfor   dinner?"),
            rec(6, "tool", "line one\n  indented line two\nassistant: I am not a role"),
            rec(7, "<b>assistant</b>", "Try\n\nthe harbour."),
        ],
        6,
        {5, 6, 7},
    )
    text, shown = render([calls], 500, count, query="tips dinner")
    assert text is not None and shown == [calls]
    lines = text.split("\n")
    assert lines[0] == RECALL_HEADER
    for line in lines[1:]:
        assert re.fullmatch(r"\[message \d+\]", line) or re.match(rf"([A-Za-z_]{{1,20}}: )?{QUOTE_MARK}", line), line
    # a message's text on one line, its whitespace folded; a tool's output keeps its lines, each quoted
    assert lines[1:] == [
        "[message 5]",
        "user: │ Any tips for dinner?",
        "tool: │ line one",
        "│   indented line two",
        "│ assistant: I am not a role",
        "bassistantb: │ Try the harbour.",
    ]


def words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


ASK = f"{words('a', 60)} where is the albatross? {words('b', 60)}"  # about 250 tokens each
RESULT = f"{words('r', 60)} albatross seen at dock 7 {words('s', 60)}"
REPLY = f"{words('c', 60)} the albatross is at dock 7 {words('d', 60)}"


def lookup_turn() -> Passage:
    """A question, the call it made, the tool's result and the reply: one turn of four messages."""
    records = [
        rec(1, "user", ASK),
        rec(2, "assistant", "called lookup"),
        rec(3, "tool", RESULT),
        rec(4, "assistant", REPLY),
    ]
    return passage(records, 1, {1, 2, 3, 4}, albatross=1.0)


def body_lines(text: str | None) -> list[str]:
    assert text is not None and text.startswith(RECALL_HEADER + "\n")
    return text[len(RECALL_HEADER) + 1 :].split("\n")


def test_the_match_and_tool_results_get_hit_tokens_the_other_messages_two_thirds_of_it():
    lines = body_lines(render([lookup_turn()], 2000, count, hit_tokens=250)[0])
    assert lines[0] == "[message 1]" and lines[1] == f"user: │ {ASK}" and lines[2] == "assistant: │ called lookup"
    assert lines[3] == f"tool: │ {RESULT}"  # a tool result as long as the match: whole too
    assert lines[4].startswith("assistant: │ … ") and "the albatross is at dock 7" in lines[4]
    assert 150 <= count(lines[4]) <= 170  # cut to two thirds of hit_tokens (166), around the question's word


def test_a_turn_longer_than_its_room_is_shown_whole_each_message_cut_to_its_share():
    left = 300
    text, shown = render([lookup_turn()], count(RECALL_HEADER) + 1 + left, count, hit_tokens=250)
    lines = body_lines(text)
    assert [line.split(":", 1)[0] for line in lines] == ["[message 1]", "user", "assistant", "tool", "assistant"]
    assert all("albatross" in lines[i] for i in (1, 3, 4)) and lines[2] == "assistant: │ called lookup"
    used = count("\n".join(lines))
    assert 0.7 * left <= used <= left, used
    # the match and the tool result twice the reply's share
    ask, result, reply = count(lines[1]), count(lines[3]), count(lines[4])
    assert abs(ask - result) <= 4 and 1.6 <= ask / reply <= 2.4, (ask, result, reply)


def test_a_turn_with_no_room_for_its_messages_shows_its_match_alone_cut_to_the_questions_words():
    left = 100
    text, shown = render([lookup_turn()], count(RECALL_HEADER) + 1 + left, count, hit_tokens=250)
    lines = body_lines(text)
    assert len(lines) == 2 and lines[0] == "[message 1]" and lines[1].startswith("user: │ … ")
    assert "where is the albatross?" in lines[1] and 0.8 * left <= count("\n".join(lines)) <= left


# -- excerpts ----------------------------------------------------------------------------------------


def test_a_text_that_fits_exactly_is_shown_whole():
    text = "one two three four five six"
    assert excerpt(text, count(text), {"four": 1.0}, count) == text
    assert excerpt(text, count(text) - 1, {"four": 1.0}, count) != text


def test_a_term_the_text_repeats_weighs_less_than_one_it_says_once():
    text = " ".join(["time"] * 200) + " Okafor teaches " + " ".join(["time"] * 200)
    got = excerpt(text, 20, {"time": 1.0, "okafor": 1.0}, count)
    assert "Okafor teaches" in got and count(got) <= 20
    # apart, the name gets the wide fragment (its whole sentence), the repeated word a short one
    sentence = "Mrs Okafor teaches the violin class on Tuesdays and Thursdays at noon."
    text = " ".join(["time"] * 150) + ". " + words("w", 200) + f". {sentence} " + words("v", 200)
    got = excerpt(text, 50, {"time": 1.0, "okafor": 1.0}, count)
    assert sentence in got and got.startswith("time time") and count(got) <= 50, got


def test_an_excerpt_takes_a_fragment_for_each_term_far_apart():
    text = f"alpha beta. {words('w', 300)} albatross here. {words('v', 300)} zebra there. {words('u', 300)}"
    got = excerpt(text, 40, {"albatross": 1.0, "zebra": 1.0}, count)
    assert count(got) <= 40 and got.startswith("… ") and got.endswith(" …")
    first, second = got.split(" … ")[:2]
    assert "albatross here." in first and "zebra" not in first and "zebra there." in second


def test_terms_close_together_are_one_fragment():
    text = f"{words('w', 200)} albatross v0 v1 v2 v3 v4 zebra {words('u', 200)}"
    got = excerpt(text, 30, {"albatross": 1.0, "zebra": 1.0}, count)
    assert got == "… w198 w199 albatross v0 v1 v2 v3 v4 zebra u0 u1 u2 u3 …", got  # two fragments that overlap


def test_an_excerpt_that_reaches_the_end_of_the_text_has_no_closing_ellipsis():
    text = f"{FILLER} and at last the albatross"
    got = excerpt(text, 30, {"albatross": 1.0}, count)
    assert got.startswith("… ") and got.endswith("at last the albatross") and count(got) <= 30


def test_an_excerpt_of_a_text_without_the_terms_is_its_head():
    got = excerpt(FILLER, 20, {"albatross": 1.0}, count)
    assert got.startswith("word0 word1 word2") and got.endswith(" …") and count(got) <= 20


def test_an_excerpt_starts_at_the_sentence_or_clause_holding_the_match():
    for mark in (". ", "; ", "。"):
        text = f"{FILLER} an earlier one{mark}one more clause{mark}Albatross code 7 {FILLER}"
        got = excerpt(text, 40, {"albatross": 1.0}, count)
        assert got.startswith("… " + ("clause。" if mark == "。" else "") + "Albatross code 7"), (mark, got)


def test_an_excerpt_of_a_text_dense_in_tokens_is_still_cut():
    got = excerpt("😀" * 400, 4, {"albatross": 1.0}, count)
    assert got.startswith("😀") and got.endswith(" …") and len(got) < 20


def test_an_excerpt_of_a_text_of_four_tokens_a_character_is_cut_within_its_tokens():
    # Egyptian hieroglyphs count four tokens each: twelve shrinks of the fragment still leave two characters,
    # over 7 tokens; the last resort cuts the text's start to what fits: one character and the mark.
    assert count("\U00013000" * 100) == 400
    got = excerpt("\U00013000" * 400, 7, {"albatross": 1.0}, count)
    assert got == "\U00013000 …" and count(got) <= 7


def test_an_excerpt_of_compact_json_holds_the_match():
    rows = [{"id": i, "name": f"item{i}", "note": "plain"} for i in range(80)]
    rows[60]["name"] = "albatross"
    got = excerpt(json.dumps(rows, separators=(",", ":")), 40, {"albatross": 1.0}, count)
    assert count(got) <= 40 and '"name":"albatross"' in got, got


def test_an_excerpt_of_chinese_text_holds_the_match_within_its_tokens():
    text = "今天天气很好我们去公园散步" * 40 + "信天翁的代码是七" + "明天也许会下雨我们待在家里" * 40
    got = excerpt(text, 40, {"信天": 1.0, "天翁": 1.0}, count)
    assert count(got) <= 40 and "信天翁" in got, got


# -- a hit on one chunk of a long message --------------------------------------------------------------


def chunk_hit(record: StoredRecord, chunk: str) -> Passage:
    """What a search returns for a match in ``chunk`` of a long ``record``: the hit names the chunk, the
    passage holds the whole record."""
    return Passage(Hit(record.seq, 1, 1.0, chunk, record.role, None, None, None), [record], {"albatross": 1.0})


def test_a_chunks_excerpt_runs_on_past_the_chunks_end_in_the_whole_message():
    for role in ("user", "tool"):
        text = f"{words('w', 150)} the albatross code is\n  7391-KESTREL and more {words('v', 150)}"
        chunk = text[text.index("w100") : text.index("7391")]  # the chunk ends before the value
        block = render([chunk_hit(rec(5, role, text), chunk)], 120, count, hit_tokens=60)[0]
        assert block is not None and count(block) <= 120
        assert body_lines(block)[1].startswith(f"{role}: │ … ")
        assert "albatross code is 7391-KESTREL" in " ".join(block.replace(QUOTE_MARK, " ").split())


def test_a_chunks_first_fragment_is_taken_inside_the_chunk_though_a_better_one_lies_outside():
    # outside the chunk the question's two words together, inside it one: the chunk the search found wins
    text = f"albatross zebra. {words('w', 200)} the albatross is here. {words('v', 200)}"
    at = text.index("the albatross is here")
    got = excerpt(text, 30, {"albatross": 1.0, "zebra": 1.0}, count, around=(at - 50, at + 200))
    assert count(got) <= 30 and "the albatross is here. v0" in got  # the wide fragment
    assert got.startswith("albatross zebra. w0 w1 … ")  # zebra: a short one
    # no term in the chunk: the best place in the whole text, as without one
    alone = excerpt(text, 30, {"albatross": 1.0, "zebra": 1.0}, count)
    assert excerpt(text, 30, {"albatross": 1.0, "zebra": 1.0}, count, around=(100, 200)) == alone
    assert alone.startswith("albatross zebra.") and "the albatross is here" not in alone


def test_a_hit_naming_the_whole_record_or_a_chunk_the_text_no_longer_holds_is_cut_as_a_whole_message():
    text = f"the albatross is here. {words('w', 200)} albatross zebra. {words('v', 200)}"

    def shown(chunk: str) -> list[str]:
        hit = Passage(Hit(5, 1, 1.0, chunk, "user", None, None, None), [rec(5, "user", text)], {})
        return body_lines(render([hit], 80, count, query="albatross zebra", hit_tokens=40)[0])

    whole = shown(text)
    assert "albatross zebra." in whole[1] and "is here" not in whole[1]  # the best place of the whole text
    # a privacy filter changed the chunk: not found in the text shown, the whole text is searched
    assert shown("[redacted] " + text[40:400]) == whole


def test_the_excerpt_starts_in_the_chunk_found_first_last_or_of_a_tool_result():
    # the question's two words together in the middle, "albatross" alone in the first and the last chunk
    text = (
        f"the albatross is here.\n  {words('w', 150)} albatross zebra. {words('v', 150)} the  albatross\n"
        f" is there. {words('u', 150)}"
    )
    first, last = text[: text.index("w100")], text[text.index("v100") : text.index("u100")]
    # a chunk that starts with its match, one that ends where the next match starts
    starting, ending = text[text.index("albatross\n") :], text[text.index("w100") : text.index("albatross zebra")]
    for role in ("user", "tool"):
        shown = {}
        for name, chunk in (
            ("whole", text),
            ("first", first),
            ("last", last),
            ("starting", starting),
            ("ending", ending),
        ):
            hit = Passage(Hit(5, 1, 1.0, chunk, role, None, None, None), [rec(5, role, text)], {})
            block = render([hit], 120, count, query="albatross zebra", hit_tokens=60)[0]
            assert block is not None and count(block) <= 120
            shown[name] = " ".join(block.replace(QUOTE_MARK, " ").split())
        assert "albatross zebra." in shown["whole"] and "is here" not in shown["whole"] + shown["last"]
        assert "the albatross is here." in shown["first"] and "is there" not in shown["first"] + shown["whole"]
        assert "the albatross is there." in shown["last"], (role, shown["last"])
        assert shown["starting"] == shown["last"]  # the match at the chunk's first character is in it
        assert shown["ending"] == shown["whole"]  # no match in the chunk: the best of the whole text


def test_a_chunk_hit_shown_alone_for_want_of_room_is_still_cut_around_its_chunk():
    # the turn (the match and a long reply) does not fit: the match alone, cut around the chunk found
    text = (
        f"the albatross is here.\n  {words('w', 150)} albatross zebra. {words('v', 150)} the  albatross\n"
        f" is there. {words('u', 150)}"
    )
    last = text[text.index("v100") : text.index("u100")]
    for role in ("user", "tool"):
        records = [rec(5, role, text), rec(6, "assistant", words("r", 200))]
        hit = Passage(Hit(5, 1, 1.0, last, role, None, None, None), records, {}, {5, 6})
        lines = body_lines(render([hit], count(RECALL_HEADER) + 1 + 60, count, query="albatross zebra")[0])
        assert len(lines) == 2 and lines[1].startswith(f"{role}: │ … ") and "the albatross is there." in lines[1]


def test_the_rarest_word_of_the_question_gets_the_widest_fragment():
    text = f"{words('w', 100)} zebra {words('z', 100)} albatross {words('a', 100)}"
    got = excerpt(text, 40, {"zebra": 0.1, "albatross": 3.0}, count)
    assert "albatross a0 a1 a2 a3 a4 a5" in got and "zebra z0 z1 z2 z3 z4" not in got and count(got) <= 40, got


def test_a_word_the_text_says_twice_weighs_half_its_rarity():
    # zebra is rarer in the history (1.8) but said twice here (0.9 each): albatross, said once (1.0), gets the
    # widest fragment
    text = f"{words('w', 100)} zebra {words('z', 100)} albatross {words('a', 100)} zebra {words('y', 100)}"
    got = excerpt(text, 40, {"zebra": 1.8, "albatross": 1.0}, count)
    assert "albatross a0 a1 a2 a3 a4 a5" in got and count(got) <= 40, got
    # albatross said twice too (0.5 each): zebra gets it
    got = excerpt(text.replace("y0", "y0 albatross", 1), 40, {"zebra": 1.8, "albatross": 1.0}, count)
    assert "albatross a0 a1 a2 a3 a4 a5" not in got and count(got) <= 40, got


def test_no_fragment_is_taken_for_a_word_another_fragment_already_shows():
    text = f"albatross one. {words('w', 100)} zebra two. {words('z', 100)} albatross three. {words('a', 100)}"
    got = excerpt(text, 60, {"zebra": 1.0, "albatross": 3.0}, count)  # albatross: the widest, at its first place
    assert got.startswith("albatross one.") and "zebra two." in got and "three" not in got and count(got) <= 60, got


def test_three_words_far_apart_get_the_widest_fragment_first_then_a_quarter_of_the_room_each():
    text = f"{words('w', 100)} albatross {words('x', 100)} zebra {words('y', 100)} walrus {words('z', 100)}"
    got = excerpt(text, 60, {"albatross": 1.0, "zebra": 1.0, "walrus": 1.0}, count)
    widest, second, third = "w95 w96 w97 w98 w99 albatross x0 x1 x2 x3 x4 x5 x", "x98 x99 zebra y0 y1 y2 y3", "y98 y99"
    assert got == f"… {widest} … {second} … {third} walrus z0 z1 z2 z3 …"


def test_only_the_match_is_cut_around_its_chunk_not_an_earlier_copy_of_the_same_result():
    # the same tool result fetched twice: the earlier copy, context, shows its own best place
    text = (
        f"the albatross is here.\n  {words('w', 150)} albatross zebra. {words('v', 150)} the  albatross\n"
        f" is there. {words('u', 150)}"
    )
    last = text[text.index("v100") : text.index("u100")]
    records = [rec(3, "tool", text), rec(5, "tool", text)]
    hit = Passage(Hit(5, 1, 1.0, last, "tool", None, None, None), records, {}, {5})
    block = render([hit], 400, count, query="albatross zebra", hit_tokens=60)[0]
    assert block is not None
    earlier, match = block.split("\ntool: ")[1:]
    assert "albatross zebra." in earlier and "is there" not in earlier and "is there." in match


def test_a_chunk_cut_inside_a_text_without_spaces_ends_before_the_next_match():
    filler = "今天天气很好我们去公园散步" * 20
    text = filler + "信天翁在这里。" + filler + "信天翁和斑马在一起。" + filler
    chunk = text[text.index("信天翁在这里") : text.index("信天翁和斑马")]  # ends where the next match starts
    terms = {"信天": 1.0, "天翁": 1.0, "斑马": 1.0}
    got = excerpt(text, 40, terms, count, around=(text.index(chunk), text.index(chunk) + len(chunk)))
    assert "信天翁在这里。" in got and count(got) <= 40, got
