"""The key-fact ledger: the exact strings an agent typically needs again later.

Before a span of messages is summarized or cut, :func:`extract_facts` pulls out
identifiers, codes, amounts, numbers with units, dates, times, emails, URLs,
file paths and people's names. After summarizing, :func:`facts_missing_from` tells which of them the
summary lost, and :func:`format_fact_list` renders those as a compact
``Key facts: ...`` block that fits a token budget.

Everything here is pure Python (stdlib ``re``/``json``), framework neutral, and
has no import-time side effects.

Kinds of facts (``Fact.kind``):

========  ==================================================================
``id``    snake/kebab identifiers with digits (``ana_ruiz_2041``,
          ``store_credit_5519023``), UUIDs, long random tokens, values of
          id-like JSON keys (``"user_id"``), call ids of pending tool calls
``code``  upper-case codes with a digit (``QX4TR8``, ``BX4471``, ``ORD-12345``,
          ``#K5520913``); letters-only codes only when announced by a word such
          as "reservation"/"confirmation"/"code" or an id-like JSON key
          (``KXPLMR``)
``amount``  money (``$1,234.50``, ``EUR 20``, ``30 dollars``) and numbers under
          money-like JSON keys (``"price": 121``)
``number``  numbers with a unit (``120 kg``, ``15%``, ``3 bags``), numbers of 4+
          digits that are not years (``8123``, ``93117``), phone numbers
``date``  ``2024-05-15``, ``2024-05-15T10:00:00Z``, ``May 15, 2024``,
          ``March 14th``, ``15 May 2024``, ``15/05/2024``, ``2024/05/15``
``time``  ``14:30``, ``06:00:00``, ``11am``, ``2:30 PM``
``email`` ``name@example.com``
``url``   ``https://...``, ``www....``
``path``  ``/tmp/x.csv``, ``./data/report.md``, ``~/notes.txt``,
          ``data/report.md``, ``C:\\x\\y.txt``
``name``  a person's name the text says is one: after a cue (``my name is
          Ada Brandt``, ``passenger Lena Ortiz``, ``an email from Omar``,
          ``我叫张伟``), after a title (``Dr. Chen``) or as a signature
          (``Regards,\nOmar``); never a capitalised word on its own
========  ==================================================================

Plain small numbers, years on their own, list numbering, upper-case words
(``THE``, ``JSON``, ``NATO``), capitalised words without a name cue (``Hello``,
``Monday``) and ctxlife's own notes, blob references and token counts
(``[ctxlife: ...]``, ``2500 tokens``) are deliberately not facts.

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
