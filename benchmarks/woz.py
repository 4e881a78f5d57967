"""A second English and a second Chinese recall source: task dialogues strung into multi-day sessions.

* English: **MultiWOZ 2.1** (MIT): a tourist in Cambridge asks an assistant for restaurants, hotels, sights,
  trains and taxis;
* Chinese: **CrossWOZ** (Apache-2.0): the same kind of dialogue about Beijing (餐馆, 酒店, 景点).

:func:`cut` takes a small part of each (benchmarks/README.md: where from, which commit, how cut). Each
:class:`~memorybank.Conversation` is one traveller: ``DIALOGUES`` consecutive dialogues of the source, ``PER_DAY``
a day (one model call per user message, the assistant's reply appended after it), then questions asked the
day after. Conversations cut from the source's validation split are **dev**, from its test split
**held out**; recall was tuned on the dev sessions (issue 40), never on the held-out ones.

The questions are written mechanically from the dialogue acts (the sources' own annotation of what each
turn says): every value an assistant turn *informs* that identifies one thing (a phone number, an address, a
postcode, a booking reference, a taxi's car and number; 电话, 地址, 营业时间) becomes "What was the phone
number of Warkworth House?" / "鲜鱼口老字号美食街的电话是多少？". A fact is kept only when its value is in
that turn's text, occurs in no other dialogue of the conversation, is not in its question, and was said
before the last day (:func:`facts`); answers are graded with ``grading.present`` like MemoryBank's keys.
The three wordings (question, request, statement) come from ``memorybank.reword``.

Used by ``bench_recall.py``. ``python benchmarks/woz.py --cut CROSSWOZ_DATA MULTIWOZ_DATA [--out DIR]`` makes
the cut from the sources' ``{val,test}.json.zip`` (the cut is not committed: :data:`PLACES_LOOKED`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import string
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from grading import MIN_VALUE_CHARS, normalize, present
from memorybank import Conversation, Message, Question

REPO = Path(__file__).resolve().parent.parent
# The cut is not committed here (it comes from a fetched snapshot: see tests/data/README.md): it is looked for in
# $BENCH_WOZ_DATA, then tests/data/woz/, then the shared/data/woz/ beside the clone.
PLACES_LOOKED = (REPO / "tests" / "data" / "woz", REPO.parent / "shared" / "data" / "woz")
LANGUAGES = ("en", "cn")
SOURCE = {"en": "multiwoz", "cn": "crosswoz"}
SPLITS = {"dev": "val", "heldout": "test"}  # our split: the source's split it is cut from
# Per language (held out: the figures quoted; bench time: see bench_woz). A cut holding fewer dialogues of a split
# gives the whole conversations it holds (data5's cut: 1 dev conversation per language).
CONVERSATIONS = {"dev": 5, "heldout": 4}
DIALOGUES = {"en": 36, "cn": 20}  # per conversation: ~11.5k tokens of history in either language
PER_DAY = {"en": 3, "cn": 2}
QUESTIONS = 8  # at most, per conversation, spread over its days
FIRST_DAY = date(2024, 3, 4)
HOURS = ("09:00", "13:00", "18:00")
SYSTEM_PROMPT = {
    "en": "You are a travel assistant in Cambridge. Find and book places for the user; remember what you told them.",
    "cn": "你是北京的旅游助手，帮用户查找和预订餐馆、酒店、景点，记住告诉过用户的信息。",
}
TEMPLATES = {
    "en": {
        "Phone": "What was the phone number of {}?",
        "Addr": "What was the address of {}?",
        "Post": "What was the postcode of {}?",
        "Ref": "What was the reference number of my booking at {}?",
        "TrainRef": "What was the reference number of my ticket for train {}?",
        "TaxiPhone": "What was the contact number of the taxi to {}?",
        "TaxiCar": "What car was the taxi to {}?",
    },
    "cn": {
        "电话": "{}的电话是多少？",
        "地址": "{}的地址是什么？",
        "营业时间": "{}的营业时间是什么？",
    },
}
POSTCODE = re.compile(r"cb\d+[a-z]{2}", re.IGNORECASE)  # MultiWOZ annotates some postcodes as addresses
PLACES = {"en": ("Restaurant", "Hotel", "Attraction"), "cn": ("餐馆", "酒店", "景点")}


@dataclass(frozen=True)
class Fact:
    """A value an assistant turn informs: ``kind`` (a TEMPLATES key) of ``subject`` is ``value``."""

    dialogue: int  # index in the conversation
    turn: int
    kind: str
    subject: str
    value: str


# -- reading the cut -------------------------------------------------------------------------------


class DataMissing(FileNotFoundError):
    """The cut of MultiWOZ / CrossWOZ is in none of ``PLACES_LOOKED``."""


def data_dir() -> Path:
    """The first of ``$BENCH_WOZ_DATA`` and ``PLACES_LOOKED`` that holds both files of the cut."""
    places = [Path(os.environ["BENCH_WOZ_DATA"])] if os.environ.get("BENCH_WOZ_DATA") else []
    places += PLACES_LOOKED
    for folder in places:
        if all((folder / f"{name}.json").is_file() for name in SOURCE.values()):
            return folder
    looked = ", ".join(str(p) for p in dict.fromkeys(places))
    raise DataMissing(
        f"woz.py: multiwoz.json and crosswoz.json are in none of {looked}; make them with "
        "`python benchmarks/woz.py --cut CROSSWOZ_DATA MULTIWOZ_DATA` (benchmarks/README.md: where the sources are) "
        "or point BENCH_WOZ_DATA at a folder that has them"
    )


def load(language: str) -> dict[str, list[dict[str, Any]]]:
    """The cut: split -> dialogues, each ``{"id", "turns": [{"role", "content", "acts", "booked"?}]}``;
    an act is ``[intent, domain, slot, value]``, ``booked`` (MultiWOZ) the bookings made so far."""
    text = (data_dir() / f"{SOURCE[language]}.json").read_text("utf-8")
    cut: dict[str, list[dict[str, Any]]] = json.loads(text)
    return cut


def _turn_facts(language: str, index: int, dialogue: dict[str, Any]) -> list[Fact]:
    """Every informed value of one dialogue that a template can ask about (before the conversation filters)."""
    out: list[Fact] = []
    names: dict[str, str] = {}  # domain -> the place last named in this dialogue
    taxi_to = ""
    seen_refs: set[str] = set()
    for t, turn in enumerate(dialogue["turns"]):
        acts = turn["acts"]
        here = {d: v for _, d, s, v in acts if s in ("Name", "名称") and d in PLACES[language]}
        names.update(here)
        if language == "en":
            taxi_to = next((v for _, d, s, v in acts if d == "Taxi" and s == "Dest"), taxi_to)
        if turn["role"] != "assistant":
            continue
        for intent, domain, slot, value in acts:
            if intent not in ("Inform", "Recommend"):
                continue
            if domain in PLACES[language] and slot in TEMPLATES[language] and domain in names:
                out.append(Fact(index, t, slot, names[domain], value))
            elif language == "en" and domain == "Taxi" and slot in ("Phone", "Car") and taxi_to:
                out.append(Fact(index, t, f"Taxi{slot}", taxi_to, value))
        for domain, bookings in (turn.get("booked") or {}).items():
            for booking in bookings:
                ref = booking.get("reference", "")
                if not ref or ref in seen_refs:
                    continue
                seen_refs.add(ref)
                if domain == "train" and booking.get("trainID"):
                    out.append(Fact(index, t, "TrainRef", booking["trainID"], ref))
                elif booking.get("name"):
                    out.append(Fact(index, t, "Ref", booking["name"], ref))
    return out


def subject_text(language: str, fact: Fact) -> str:
    """The subject as a question names it (MultiWOZ's acts are lower-cased: capitalized back)."""
    if language == "en" and fact.kind != "TrainRef":
        return string.capwords(fact.subject)
    return fact.subject


def question_text(language: str, fact: Fact) -> str:
    return TEMPLATES[language][fact.kind].format(subject_text(language, fact))


def facts(language: str, dialogues: Sequence[dict[str, Any]]) -> list[Fact]:
    """The facts of one conversation that make fair questions (see the module docstring), in order."""
    texts = [normalize("\n".join(t["content"] for t in d["turns"])) for d in dialogues]
    last_day = (len(dialogues) - 1) // PER_DAY[language]
    candidates = []
    # A question asked of two different values (the same hotel booked twice) has no single answer: dropped below.
    values: dict[str, set[str]] = {}
    for i, dialogue in enumerate(dialogues):
        for fact in _turn_facts(language, i, dialogue):
            values.setdefault(question_text(language, fact), set()).add(normalize(fact.value))
            question = normalize(question_text(language, fact))
            if (
                len(normalize(fact.value)) >= MIN_VALUE_CHARS
                and i // PER_DAY[language] < last_day
                and present(fact.value, normalize(dialogue["turns"][fact.turn]["content"]))
                and present(normalize(subject_text(language, fact)), texts[i])
                and sum(present(fact.value, text) for text in texts) == 1
                and not present(fact.value, question)
                and not (fact.kind == "Addr" and POSTCODE.fullmatch(fact.value.replace(" ", "")))
            ):
                candidates.append(fact)
    kept: dict[str, Fact] = {}
    for fact in candidates:
        if len(values[question_text(language, fact)]) == 1:
            kept.setdefault(question_text(language, fact), fact)
    return list(kept.values())


def _spread(items: list[Fact], n: int) -> list[Fact]:
    """At most ``n`` of ``items``, evenly spaced (so the questions reach back to every part of the history)."""
    if len(items) <= n:
        return items
    return [items[round(k * (len(items) - 1) / (n - 1))] for k in range(n)]


def conversations(language: str, splits: Sequence[str] = ("dev", "heldout")) -> list[Conversation]:
    """``CONVERSATIONS[split]`` travellers per split, each ``DIALOGUES[language]`` dialogues then its questions."""
    cut = load(language)
    size, per_day = DIALOGUES[language], PER_DAY[language]
    out = []
    for split in splits:
        dialogues = cut[split]
        for c in range(min(CONVERSATIONS[split], len(dialogues) // size)):
            chunk = dialogues[c * size : (c + 1) * size]
            calls: list[tuple[str | None, list[Message], list[Message]]] = []
            for i, dialogue in enumerate(chunk):
                when = f"{FIRST_DAY + timedelta(days=i // per_day)}T{HOURS[i % per_day]}"
                turns = dialogue["turns"]
                for t, turn in enumerate(turns):
                    if turn["role"] != "user":
                        continue
                    reply = turns[t + 1] if t + 1 < len(turns) and turns[t + 1]["role"] == "assistant" else None
                    after = [{"role": "assistant", "content": reply["content"]}] if reply else []
                    calls.append((when, [{"role": "user", "content": turn["content"]}], after))
            questions = [
                Question(question_text(language, f), [[f.value]], f"{chunk[f.dialogue]['id']}#{f.turn}-{f.kind}")
                for f in _spread(facts(language, chunk), QUESTIONS)
            ]
            question_day = str(FIRST_DAY + timedelta(days=(len(chunk) - 1) // per_day + 1))
            name = f"{SOURCE[language]}-{split}-{c}"
            out.append(Conversation(name, language, split, SYSTEM_PROMPT[language], calls, questions, question_day))
    return out


# -- cutting the sources (how tests/data/woz was made) ---------------------------------------------


def _crosswoz_dialogue(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    turns = [
        {
            "role": "user" if m["role"] == "usr" else "assistant",
            "content": m["content"],
            "acts": [list(a) for a in m["dialog_act"]],
        }
        for m in raw["messages"]
    ]
    return {"id": key, "turns": turns}


def _multiwoz_dialogue(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    turns = []
    for i, m in enumerate(raw["log"]):
        acts = []
        for domain_intent, pairs in (m.get("dialog_act") or {}).items():
            domain, intent = domain_intent.split("-", 1)
            acts += [[intent, domain, slot, value] for slot, value in pairs]
        turn: dict[str, Any] = {"role": "user" if i % 2 == 0 else "assistant", "content": m["text"], "acts": acts}
        metadata = m.get("metadata") or {}
        booked = {d: v["book"]["booked"] for d, v in metadata.items() if v.get("book", {}).get("booked")}
        if booked:
            turn["booked"] = booked
        turns.append(turn)
    return {"id": key, "turns": turns}


def cut(crosswoz: Path, multiwoz: Path, out_dir: Path) -> None:
    """Write ``out_dir/{crosswoz,multiwoz}.json`` from the sources' ``{val,test}.json.zip`` (in the
    folders given): the first ``CONVERSATIONS[split] * DIALOGUES`` dialogues of each split, in the file's order,
    with their text, dialogue acts and (MultiWOZ) bookings; nothing else."""
    for language, folder, convert in (("cn", crosswoz, _crosswoz_dialogue), ("en", multiwoz, _multiwoz_dialogue)):
        out: dict[str, list[dict[str, Any]]] = {}
        for split, source_split in SPLITS.items():
            with zipfile.ZipFile(folder / f"{source_split}.json.zip") as archive:
                raw = json.loads(archive.read(f"{source_split}.json"))
            keys = list(raw)[: CONVERSATIONS[split] * DIALOGUES[language]]
            out[split] = [convert(k, raw[k]) for k in keys]
        out_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
        (out_dir / f"{SOURCE[language]}.json").write_text(text + "\n", encoding="utf-8")


def summary() -> dict[str, Any]:
    """Per language and split: conversations, calls, questions, and the questions' kinds."""
    rows: dict[str, Any] = {}
    for language in LANGUAGES:
        for conv in conversations(language):
            row = rows.setdefault(f"{language}-{conv.split}", {"conversations": 0, "calls": 0, "questions": 0})
            row["conversations"] += 1
            row["calls"] += len(conv.calls)
            row["questions"] += len(conv.questions)
            row.setdefault("kinds", Counter()).update(q.label.rsplit("-", 1)[1] for q in conv.questions)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cut", nargs=2, type=Path, metavar=("CROSSWOZ_DATA", "MULTIWOZ_DATA"))
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "woz", help="where --cut writes")
    args = parser.parse_args()
    if args.cut:
        cut(*args.cut, args.out)
    print(json.dumps(summary(), ensure_ascii=False, indent=1))
