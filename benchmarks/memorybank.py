"""MemoryBank (``tests/data/memorybank``, MIT): 15 people x 10 days of chat, English and Chinese, with
hand-written answer keys for probing questions about early days (``answer_keys_{en,cn}.json``).

People at even positions are the **dev** half (``recall`` was tuned on them), odd positions the
**held-out** half. :func:`conversations` gives each person's chat as a replayable
:class:`Conversation` (the shape ``bench_recall.py`` also builds its synthetic agent sessions in);
:func:`chat_pool` gives every exchange as plain messages, for timing runs that need volume.

Used by ``bench_recall.py``, ``bench_retention.py`` and ``recall_costs.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "memorybank"
LANGUAGES = ("en", "cn")
SYSTEM_PROMPT = {
    "en": "You are the user's AI companion. Chat warmly and remember what they tell you.",
    "cn": "你是用户的AI伴侣，亲切地聊天，记住用户告诉你的事情。",
}
QUESTION_DAY = "2023-05-07"  # the day after the last recorded day: when the probing questions are asked

Message = dict[str, Any]


@dataclass
class Question:
    text: str
    answers: list[list[str]]  # every group needs one of its strings in the context
    label: str


@dataclass
class Conversation:
    """Calls to replay: each is (day or None, messages added before the call, messages after it); then questions."""

    name: str
    language: str
    split: str
    system: str
    calls: list[tuple[str | None, list[Message], list[Message]]]
    questions: list[Question] = field(default_factory=list)
    question_day: str | None = None
    interleaved: dict[int, Question] = field(default_factory=dict)  # call index -> question asked at that call


def load_bank(language: str) -> dict[str, Any]:
    """The chats: person -> {"history": {day: [{"query", "response"}, ...]}, ...}."""
    bank: dict[str, Any] = json.loads((DATA / f"memory_bank_{language}.json").read_text(encoding="utf-8"))
    return bank


def load_answer_keys(language: str) -> dict[str, Any]:
    """The answer keys: {"split": {"dev": [...], "heldout": [...]}, "questions": [...]}."""
    keys: dict[str, Any] = json.loads((DATA / f"answer_keys_{language}.json").read_text(encoding="utf-8"))
    return keys


def conversations(language: str, users: Sequence[str] | None = None) -> list[Conversation]:
    """Each person's ten days (one call per user message), then their probing questions."""
    keys = load_answer_keys(language)
    split_of = {u: "dev" for u in keys["split"]["dev"]} | {u: "heldout" for u in keys["split"]["heldout"]}
    out = []
    for user, data in load_bank(language).items():
        if users is not None and user not in users:
            continue
        calls: list[tuple[str | None, list[Message], list[Message]]] = []
        for day, exchanges in data["history"].items():
            for exchange in exchanges:
                before = [{"role": "user", "content": exchange["query"]}]
                after = [{"role": "assistant", "content": exchange["response"]}]
                calls.append((day, before, after))
        questions = [
            Question(k["question"], k["answers"], f"{user.strip()}#{k['index']}")
            for k in keys["questions"]
            if k["user"] == user
        ]
        name = f"memorybank-{language}-{user.strip()}"
        out.append(
            Conversation(name, language, split_of[user], SYSTEM_PROMPT[language], calls, questions, QUESTION_DAY)
        )
    return out


WORDINGS = ("question", "request", "statement")


def reword(text: str, language: str, wording: str) -> str:
    """A probing question asked another way, mechanically, to see whether recall hinges on the phrasing:
    ``"request"`` ("Tell me ...", "告诉我……") or ``"statement"`` ("I'm trying to think of ...", "我在想……"), without
    a question mark or a leading question word. ``"question"``: the text as written."""
    if wording == "question":
        return text
    bare = text.strip().rstrip("?？").strip()
    if language == "cn":
        bare = bare.rstrip("吗呢吧").rstrip("，,")
        return ("告诉我" if wording == "request" else "我在想") + bare + "。"
    bare = bare[0].lower() + bare[1:]
    return ("Tell me " if wording == "request" else "I'm trying to think of this: ") + bare + "."


def reworded(conv: Conversation, wording: str) -> Conversation:
    """``conv`` with its final questions asked in ``wording`` (see :func:`reword`)."""
    if wording == "question":
        return conv
    questions = [Question(reword(q.text, conv.language, wording), q.answers, q.label) for q in conv.questions]
    return replace(conv, name=f"{conv.name}-{wording}", questions=questions)


def chat_pool(language: str = "en") -> list[Message]:
    """Every exchange of every person, as alternating user and assistant messages."""
    pool: list[Message] = []
    for data in load_bank(language).values():
        for exchanges in data["history"].values():
            for e in exchanges:
                pool += [{"role": "user", "content": e["query"]}, {"role": "assistant", "content": e["response"]}]
    return pool


def question_texts(language: str = "en") -> list[str]:
    """Every probing question of the answer keys."""
    return [k["question"] for k in load_answer_keys(language)["questions"]]
