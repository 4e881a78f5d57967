"""The hand-written answer keys of the MemoryBank probing questions hold up against the data.

The keys (``tests/data/memorybank/answer_keys_*.json``) were written by reading the conversations,
not with ctxlife code. These checks make sure each key says what it claims: every answer string is
in that user's history on the date(s) given and on no other date (so finding it in a context means
the answering exchange is there), none is already in the question (which is always in the context),
and every probing question is either keyed or excluded with a reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "memorybank"
LANGUAGES = ("en", "cn")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def _load(language: str) -> tuple[dict, dict, dict]:
    keys = json.loads((DATA / f"answer_keys_{language}.json").read_text(encoding="utf-8"))
    bank = json.loads((DATA / f"memory_bank_{language}.json").read_text(encoding="utf-8"))
    questions: dict[str, list[str]] = {}
    for line in (DATA / f"probing_questions_{language}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            questions.update(json.loads(line))
    return keys, bank, questions


def _questions_of(questions: dict[str, list[str]], user: str) -> list[str]:
    # The English question file spells four names without the stray spaces of the history file.
    return questions[user] if user in questions else questions[user.strip()]


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_answer_string_is_on_its_dates_and_nowhere_else(language: str) -> None:
    keys, bank, questions = _load(language)
    problems = []
    for key in keys["questions"]:
        user, index = key["user"], key["index"]
        days = {
            day: _norm(" ".join(f"{e['query']} {e['response']}" for e in exchanges))
            for day, exchanges in bank[user]["history"].items()
        }
        assert set(key["dates"]) <= set(days), f"{user} #{index}: unknown date in {key['dates']}"
        question = _norm(_questions_of(questions, user)[index])
        assert key["question"] == _questions_of(questions, user)[index]
        assert key["answers"] and all(group for group in key["answers"]), f"{user} #{index}: empty answer group"
        for group in key["answers"]:
            found_on_date = False
            for answer in group:
                where = {day for day, text in days.items() if _norm(answer) in text}
                found_on_date |= bool(where & set(key["dates"]))
                if where - set(key["dates"]):
                    problems.append(f"{user} #{index}: {answer!r} also on {sorted(where - set(key['dates']))}")
                if _norm(answer) in question:
                    problems.append(f"{user} #{index}: {answer!r} is in the question itself")
            if not found_on_date:
                problems.append(f"{user} #{index}: none of {group} is in the history on {key['dates']}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_probing_question_is_keyed_or_excluded_with_a_reason(language: str) -> None:
    keys, bank, questions = _load(language)
    keyed = {(k["user"], k["index"]) for k in keys["questions"]}
    excluded = {(k["user"], k["index"]) for k in keys["excluded"]}
    assert not keyed & excluded
    assert all(k["reason"].strip() for k in keys["excluded"])
    expected = {(user, i) for user in bank for i in range(len(_questions_of(questions, user)))}
    assert keyed | excluded == expected
    assert len(keyed) >= 95  # about a hundred per language, as the fixture promises


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_split_is_by_person_and_the_same_in_both_languages(language: str) -> None:
    keys, bank, _ = _load(language)
    users = list(bank)
    assert keys["split"]["dev"] == users[0::2]
    assert keys["split"]["heldout"] == users[1::2]
    for key in keys["questions"] + keys["excluded"]:
        assert key["split"] == ("dev" if users.index(key["user"]) % 2 == 0 else "heldout")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_shared_metric_finds_every_key_in_the_answering_exchange(language: str) -> None:
    """``ctxlife.retention`` (what the benchmarks grade with) counts each key as kept in its day's messages."""
    from ctxlife.retention import Need, score

    keys, bank, _ = _load(language)
    missed = []
    for key in keys["questions"]:
        messages = [
            {"role": role, "content": exchange[field]}
            for day in key["dates"]
            for exchange in bank[key["user"]]["history"][day]
            for role, field in (("user", "query"), ("assistant", "response"))
        ]
        needs = [Need(tuple(group), call=0, kind="answer") for group in key["answers"]]
        if score(needs, {0: messages}).kept != len(needs):
            missed.append(f"{key['user']} #{key['index']}")
    assert not missed


def test_excluded_questions_name_what_the_data_lacks() -> None:
    keys, bank, _ = _load("en")
    for key in keys["excluded"]:
        # The one exclusion: a question about a day whose conversation is empty in this language.
        assert "May 5th" in key["reason"]
        assert bank[key["user"]]["history"]["2023-05-05"] == []
