"""benchmarks/woz.py on hand-made dialogues: which informed values become questions, how a cut is made and replayed.

The dialogues here are invented in the sources' shapes (CrossWOZ: ``messages`` with ``dialog_act`` lists;
MultiWOZ: ``log`` with ``dialog_act`` dicts and booking metadata); the real cut is checked when it is found.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_recall  # noqa: E402 - the benchmark using the source
import grading  # noqa: E402
import woz  # noqa: E402 - the loader under test


def user(text, *acts):
    return {"role": "user", "content": text, "acts": [list(a) for a in acts]}


def assistant(text, *acts, booked=None):
    turn = {"role": "assistant", "content": text, "acts": [list(a) for a in acts]}
    if booked:
        turn["booked"] = booked
    return turn


def dialogue(key, *turns):
    return {"id": key, "turns": list(turns)}


def hotel(key, name, phone):
    return dialogue(
        key,
        user(f"Is {name} any good?", ("Inform", "Hotel", "Name", name.lower())),
        assistant(f"It is. Call them on {phone}.", ("Inform", "Hotel", "Phone", phone)),
    )


FILLER = dialogue("filler", user("Thanks, bye."), assistant("Goodbye!"))


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setitem(woz.PER_DAY, "en", 1)
    monkeypatch.setitem(woz.PER_DAY, "cn", 1)


def questions(language, dialogues):
    return {woz.question_text(language, f): f.value for f in woz.facts(language, dialogues)}


def test_an_informed_value_of_an_earlier_day_becomes_a_question(small):
    got = questions("en", [hotel("a", "Warkworth House", "01223363682"), FILLER])
    assert got == {"What was the phone number of Warkworth House?": "01223363682"}


def test_a_value_said_on_the_last_day_is_not_asked(small):
    assert questions("en", [FILLER, hotel("a", "Warkworth House", "01223363682")]) == {}


def test_a_value_found_in_another_dialogue_too_is_not_asked(small):
    again = dialogue("b", user("My number is 01223363682, call me."), assistant("Noted."))
    assert questions("en", [hotel("a", "Warkworth House", "01223363682"), again, FILLER]) == {}


def test_a_question_with_two_answers_is_dropped(small):
    # The same hotel given with two numbers on two days: "What was the phone number of ..." has no single answer.
    first, second = hotel("a", "Warkworth House", "01223363682"), hotel("b", "Warkworth House", "01223999999")
    assert questions("en", [first, second, FILLER]) == {}


def test_a_question_whose_other_answer_comes_on_the_last_day_is_dropped_too(small):
    first, last = hotel("a", "Warkworth House", "01223363682"), hotel("b", "Warkworth House", "01223999999")
    assert questions("en", [first, FILLER, last]) == {}


def test_a_place_the_dialogue_never_names_in_its_text_is_not_asked(small):
    unnamed = dialogue(
        "a",
        user("A cheap hotel, please.", ("Inform", "Hotel", "Name", "the nowhere inn")),
        assistant("Call 01223363682.", ("Inform", "Hotel", "Phone", "01223363682")),
    )
    assert questions("en", [unnamed, FILLER]) == {}


def test_a_postcode_annotated_as_an_address_is_not_asked_as_one(small):
    place = dialogue(
        "a",
        user("Where is Old Schools?", ("Inform", "Attraction", "Name", "old schools")),
        assistant("It is at cb21tt.", ("Inform", "Attraction", "Addr", "cb21tt")),
    )
    assert questions("en", [place, FILLER]) == {}


def test_bookings_and_taxis_are_asked_by_what_they_were_for(small):
    booked = dialogue(
        "a",
        user("Book Saigon City for two.", ("Inform", "Restaurant", "Name", "saigon city")),
        assistant(
            "Booked, reference J8IGNS09.", booked={"restaurant": [{"name": "saigon city", "reference": "J8IGNS09"}]}
        ),
        user("And a taxi to Saigon City.", ("Inform", "Taxi", "Dest", "saigon city")),
        assistant(
            "A red tesla will come; its number is 07218068540.",
            ("Inform", "Taxi", "Car", "red tesla"),
            ("Inform", "Taxi", "Phone", "07218068540"),
        ),
    )
    assert questions("en", [booked, FILLER]) == {
        "What was the reference number of my booking at Saigon City?": "J8IGNS09",
        "What was the contact number of the taxi to Saigon City?": "07218068540",
        "What car was the taxi to Saigon City?": "red tesla",
    }


def test_chinese_questions_name_the_place_the_dialogue_talked_about(small):
    talk = dialogue(
        "a",
        user("推荐一个餐馆。"),
        assistant("鲜鱼口老字号美食街不错。", ("Inform", "餐馆", "名称", "鲜鱼口老字号美食街")),
        user("电话是多少？", ("Request", "餐馆", "电话", "")),
        assistant("010-67051230。", ("Inform", "餐馆", "电话", "010-67051230")),
    )
    assert questions("cn", [talk, FILLER]) == {"鲜鱼口老字号美食街的电话是多少？": "010-67051230"}


def write_sources(folder: Path) -> tuple[Path, Path]:
    """Tiny CrossWOZ and MultiWOZ ``{val,test}.json.zip`` in the sources' own shapes."""
    crosswoz, multiwoz = folder / "crosswoz", folder / "multiwoz"
    for split in ("val", "test"):
        cw = {
            f"{split}{i}": {
                "messages": [
                    {"role": "usr", "content": f"第{i}个问题", "dialog_act": [["Request", "餐馆", "电话", ""]]},
                    {"role": "sys", "content": f"回答{i}", "dialog_act": [["Inform", "餐馆", "电话", f"010-{i}"]]},
                ]
            }
            for i in range(6)
        }
        mw = {
            f"{split}{i}": {
                "log": [
                    {"text": f"question {i}", "dialog_act": {"Hotel-Inform": [["Name", "kirkwood house"]]}},
                    {
                        "text": f"answer {i}",
                        "dialog_act": {},
                        "metadata": {"hotel": {"book": {"booked": [{"name": "kirkwood house", "reference": "AB12"}]}}},
                    },
                ]
            }
            for i in range(6)
        }
        for root, data in ((crosswoz, cw), (multiwoz, mw)):
            root.mkdir(exist_ok=True)
            with zipfile.ZipFile(root / f"{split}.json.zip", "w") as archive:
                archive.writestr(f"{split}.json", json.dumps(data, ensure_ascii=False))
    return crosswoz, multiwoz


def test_a_cut_keeps_text_acts_and_bookings_and_replays_one_call_per_user_message(tmp_path, monkeypatch):
    monkeypatch.setattr(woz, "CONVERSATIONS", {"dev": 1, "heldout": 2})
    monkeypatch.setattr(woz, "DIALOGUES", {"en": 2, "cn": 2})
    crosswoz, multiwoz = write_sources(tmp_path)
    woz.cut(crosswoz, multiwoz, tmp_path / "cut")
    cut = json.loads((tmp_path / "cut" / "multiwoz.json").read_text("utf-8"))
    assert [len(cut[s]) for s in ("dev", "heldout")] == [2, 4]
    assert cut["dev"][0]["turns"][0] == {
        "role": "user",
        "content": "question 0",
        "acts": [["Inform", "Hotel", "Name", "kirkwood house"]],
    }
    assert cut["dev"][0]["turns"][1]["booked"] == {"hotel": [{"name": "kirkwood house", "reference": "AB12"}]}
    cn = json.loads((tmp_path / "cut" / "crosswoz.json").read_text("utf-8"))
    assert cn["heldout"][3]["turns"][1] == {
        "role": "assistant",
        "content": "回答3",
        "acts": [["Inform", "餐馆", "电话", "010-3"]],
    }

    monkeypatch.setenv("BENCH_WOZ_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr(woz, "PLACES_LOOKED", (tmp_path / "cut",))
    convs = woz.conversations("cn")
    assert [(c.name, c.split) for c in convs] == [
        ("crosswoz-dev-0", "dev"),
        ("crosswoz-heldout-0", "heldout"),
        ("crosswoz-heldout-1", "heldout"),
    ]
    first = convs[1].calls
    assert first == [
        ("2024-03-04T09:00", [{"role": "user", "content": "第0个问题"}], [{"role": "assistant", "content": "回答0"}]),
        ("2024-03-04T13:00", [{"role": "user", "content": "第1个问题"}], [{"role": "assistant", "content": "回答1"}]),
    ]
    assert convs[1].question_day == "2024-03-05"
    # A cut made for fewer conversations than are asked for gives the whole ones it holds.
    monkeypatch.setattr(woz, "CONVERSATIONS", {"dev": 3, "heldout": 5})
    assert [c.name for c in woz.conversations("cn")] == [c.name for c in convs]


def test_without_the_cut_the_error_says_where_it_looked_and_the_bench_skips_the_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCH_WOZ_DATA", raising=False)
    monkeypatch.setattr(woz, "PLACES_LOOKED", (tmp_path,))
    with pytest.raises(woz.DataMissing, match="--cut CROSSWOZ_DATA MULTIWOZ_DATA") as error:
        woz.conversations("en")
    assert str(tmp_path) in str(error.value)
    notes = []
    assert bench_recall.bench_woz((4000,), notes.append) == []
    assert notes and notes[0].startswith("skipped the MultiWOZ / CrossWOZ rows")


def test_every_question_of_the_real_cut_has_one_answer_in_one_dialogue():
    try:
        woz.data_dir()
    except woz.DataMissing:
        pytest.skip("the MultiWOZ / CrossWOZ cut is not on this machine (benchmarks/README.md says how to make it)")
    for language in woz.LANGUAGES:
        for conv in woz.conversations(language):
            assert conv.questions, conv.name
            texts = [
                grading.normalize(b[0]["content"] + "\n" + (a[0]["content"] if a else "")) for _, b, a in conv.calls
            ]
            for q in conv.questions:
                (value,) = q.answers[0]
                assert not grading.present(value, grading.normalize(q.text)), q.label
                assert sum(grading.present(value, t) for t in texts) >= 1, q.label
