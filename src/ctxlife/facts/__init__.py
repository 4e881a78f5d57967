"""The key-fact ledger: the exact strings an agent typically needs again later.

:func:`extract_facts` before a span is summarized, :func:`facts_missing_from` after, and
:func:`format_fact_list` for the ``Key facts: ...`` block. The kinds of facts, and what is deliberately
not one: docs/strategies/llm_summary.md, "The key-fact ledger". Pure Python, no import-time side effects.

Modules, in the order a fact goes through them:

* :mod:`~ctxlife.facts.fact` -- the :class:`Fact` value and its kinds;
* :mod:`~ctxlife.facts.vocabulary` -- month names, currencies, units, stopwords, JSON key names;
* :mod:`~ctxlife.facts.normalise` -- canonical forms (numbers, dates, times, units);
* :mod:`~ctxlife.facts.patterns` -- the table of (kind, regex, normaliser), in priority order;
* :mod:`~ctxlife.facts.scanner` -- runs the table over one string;
* :mod:`~ctxlife.facts.extract` -- walks messages, tool arguments and JSON results into a ledger;
* :mod:`~ctxlife.facts.matching` -- whether a text (a summary) still carries a fact;
* :mod:`~ctxlife.facts.formatting` -- the ``Key facts: ...`` block.
"""

from __future__ import annotations

from ctxlife.facts.extract import extract_facts
from ctxlife.facts.fact import FACT_KINDS, Fact, FactError
from ctxlife.facts.formatting import FACT_LIST_HEADER, KIND_PRIORITY, format_fact_list
from ctxlife.facts.matching import FactMatcher, TextIndex, fact_in_text, facts_missing_from

__all__ = [
    "FACT_KINDS",
    "FACT_LIST_HEADER",
    "KIND_PRIORITY",
    "Fact",
    "FactError",
    "FactMatcher",
    "TextIndex",
    "extract_facts",
    "fact_in_text",
    "facts_missing_from",
    "format_fact_list",
]
