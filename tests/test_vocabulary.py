"""Held-out discipline: the product's code and docstrings carry no words of the data sets it is measured on.

ctxlife is benchmarked on tau-bench airline trajectories, MemoryBank chats and generated sessions. If
the fact extractor or the summarizer knew those data sets' field names, ids, people or answers, the
figures would measure tuning, not the method. The words checked are read from the data files at test
time (so a new field or id in them is covered too), plus a short fixed list of words an audit found:

* tau-bench (``tests/data``): compound field names of tool arguments and results (``last_four``,
  ``nonfree_baggages``), compound tool names (``update_reservation_flights``), and every value with a
  digit that looks like an id or a code (user ids, reservation codes, flight numbers, payment ids);
* MemoryBank (``tests/data/memorybank``): the people's names, and the answer strings of the answer keys
  (multi-word, capitalised or CJK ones: single common words such as "tea" are ordinary English);
* generated sessions (``benchmarks/synthetic*.py``, ``benchmarks/gen_*.py``): the distinctive string
  constants of the generators' vocabularies (names, phrases, identifiers, long words such as drug
  names; not single common words such as "sales").

The file *format* readers (``ctxlife.replay`` reads a tau-bench file's ``traj`` list) are not
vocabulary: only what is inside the conversations is checked. Dates are not checked: every data set
has dates, and a date says nothing about a domain.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = [ROOT / "src" / "ctxlife", ROOT / "strategies" / "ctxlife_strategies"]
TAU_BENCH = ROOT / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"
MEMORYBANK = ROOT / "tests" / "data" / "memorybank"

#: Words an audit found in the product, and other words of the tau-bench domain (checked case-insensitively).
FIXED = {"last_four", "last4", "baggages", "fare", "fares", "pnr", "my reservation", "airline", "tau_bench"}
#: Compound field names every schema has: not specific to one data set.
GENERIC_FIELDS = {"user_id", "first_name", "last_name", "created_at"}

_ID_VALUE_RE = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_-]{3,}")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _walk(value: Any, keys: set[str], values: set[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            keys.add(str(k))
            _walk(v, keys, values)
    elif isinstance(value, list):
        for v in value:
            _walk(v, keys, values)
    elif isinstance(value, str) and _ID_VALUE_RE.fullmatch(value) and re.search(r"\d", value):
        if not _DATE_RE.match(value):
            values.add(value)


def tau_bench_words() -> set[str]:
    items = json.loads(gzip.decompress(TAU_BENCH.read_bytes()))
    keys: set[str] = set()
    values: set[str] = set()
    tools: set[str] = set()
    for item in items:
        user_id = (item.get("info") or {}).get("task", {}).get("user_id")
        if user_id:
            values.add(user_id)
        for message in item["traj"]:
            for call in message.get("tool_calls") or []:
                tools.add(call["function"]["name"])
                _walk(_json(call["function"]["arguments"]), keys, values)
            if message["role"] == "tool":
                _walk(_json(message.get("content")), keys, values)
    fields = {k for k in keys if "_" in k and not re.search(r"\d", k)} - GENERIC_FIELDS
    return fields | {t for t in tools if "_" in t} | values


def memorybank_words() -> set[str]:
    words: set[str] = set()
    for language in ("en", "cn"):
        people = json.loads((MEMORYBANK / f"memory_bank_{language}.json").read_text(encoding="utf-8"))
        words |= {name.strip() for name in people}
        keys = json.loads((MEMORYBANK / f"answer_keys_{language}.json").read_text(encoding="utf-8"))
        for question in keys["questions"]:
            for group in question["answers"]:
                for answer in group:
                    a = answer.strip()
                    if " " in a or a[:1].isupper() or (_CJK_RE.search(a) and len(a) >= 3):
                        words.add(a)
    return words


def generator_words() -> set[str]:
    """String constants of the generators' module-level vocabularies (lists, tuples, dicts of words)."""
    words: set[str] = set()
    for path in sorted((ROOT / "benchmarks").glob("synthetic*.py")) + sorted((ROOT / "benchmarks").glob("gen_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                node.value, (ast.List, ast.Tuple, ast.Dict)
            ):
                for constant in ast.walk(node.value):
                    if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                        if _distinctive(constant.value.strip()):
                            words.add(constant.value.strip())
    return words


def _distinctive(word: str) -> bool:
    """A name, a phrase, an identifier or a CJK word; not a single common lower-case word ("sales",
    "support", "rabbit"), which any code may use. Long lower-case words (drug names) count."""
    if _CJK_RE.search(word):
        return len(word) >= 2
    if not re.search(r"[A-Za-z]{4}", word):
        return False
    return " " in word or word[:1].isupper() or bool(re.search(r"[\d_]", word)) or len(word) >= 9


@cache
def product_text() -> dict[str, str]:
    files: dict[str, str] = {}
    for folder in PRODUCT:
        for path in sorted(folder.rglob("*.py")):
            files[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return files


def occurrences(words: set[str], *, ignore_case: bool = False) -> list[str]:
    """``word: file:line`` for every whole-word occurrence of a word in the product's code."""
    found: list[str] = []
    flags = re.IGNORECASE if ignore_case else 0
    words = {w for w in words if len(w) >= 4 or w in FIXED}
    if not words:
        return found
    # One alternation, longest first; a word is whole when no word character touches it.
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w])(?:{alternation})(?![\w])", flags)
    for name, text in product_text().items():
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{match.group(0)!r}: {name}:{line}")
    return found


def test_the_word_lists_are_read_from_the_data():
    """The lists are not empty by accident (a moved file would make the checks below vacuous)."""
    tau = tau_bench_words()
    assert {"last_four", "update_reservation_flights", "mia_li_3668", "HAT136"} <= tau
    memorybank = memorybank_words()
    assert {"Emily", "The Wandering Earth"} <= memorybank
    assert len(generator_words()) > 20


@pytest.mark.parametrize(
    "source", ["tau-bench", "memorybank", "generated sessions"], ids=["tau-bench", "memorybank", "generators"]
)
def test_no_data_set_words_in_the_product(source):
    words = {"tau-bench": tau_bench_words, "memorybank": memorybank_words, "generated sessions": generator_words}[
        source
    ]()
    found = occurrences(words)
    assert not found, (
        f"words of the {source} data in src/ or strategies/ (use generic examples and patterns instead):\n"
        + "\n".join(found[:40])
    )


def test_no_words_of_the_audit_list_in_the_product():
    found = occurrences(FIXED, ignore_case=True)
    assert not found, "dataset-specific words in src/ or strategies/:\n" + "\n".join(found)
