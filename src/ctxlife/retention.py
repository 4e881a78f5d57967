""" "Facts kept": how much of what an agent needs later is still in the context it is sent.

This is the one definition the benchmarks, ``ctxlife replay`` and the demo use. It is written
independently of ctxlife's fact extractor on purpose: a metric computed by the code it grades
proves nothing, so nothing here calls :mod:`ctxlife.facts`.

A :class:`Need` is a value written independently of ctxlife, and the model call that needs it:

* a **re-used tool argument** (:func:`reused_arguments`): a value the recorded agent passes to a
  tool verbatim, which it first read in an earlier user turn or tool result (and which the system
  prompt does not hold, so it was at risk). Works on any recording with tool calls;
* an **answer string** written with the data (a question asked later and its answer key), or a
  value **planted** by a generator at a known call: the data supplies those as ``Need`` objects.

A need is *kept* when one of its values appears in the context sent at that call: the text a model
reads, tool-call arguments included, with case and runs of whitespace ignored, and the value not
part of a longer word or number. Calls are numbered by message index: a need's ``call`` is the
index of the assistant message the model wrote at that call, so the context it was sent is built
from the messages before it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxlife.messages import role, tool_calls

__all__ = ["Need", "Retention", "NeedIndex", "reused_arguments", "context_text", "score"]

#: the shortest argument value that counts as a fact (shorter ones, "yes", "1", "NY", are too common)
MIN_CHARS = 4


@dataclass(frozen=True)
class Need:
    """A value the agent needs at one call.

    ``values``: any of them in the context counts (an answer key may list equivalent wordings).
    ``call``: index of the assistant message written at the call that needs it.
    ``origin``: index of the message the value first appears in, when known.
    ``kind``: where the need comes from ("reused argument", "answer", "planted", ...).
    """

    values: tuple[str, ...]
    call: int
    origin: int | None = None
    kind: str = "reused argument"

    def __post_init__(self) -> None:
        if isinstance(self.values, str):
            object.__setattr__(self, "values", (self.values,))
        if not self.values or not all(isinstance(v, str) and _normalize(v) for v in self.values):
            raise ValueError(f"a Need holds non-empty strings, got {self.values!r}")


@dataclass
class Retention:
    """Needs counted and needs kept (add them up over calls, conversations and runs)."""

    needs: int = 0
    kept: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [needs, kept]

    @property
    def share(self) -> float | None:
        return self.kept / self.needs if self.needs else None

    def add(self, other: Retention) -> None:
        self.needs += other.needs
        self.kept += other.kept
        for kind, (n, k) in other.by_kind.items():
            mine = self.by_kind.setdefault(kind, [0, 0])
            mine[0] += n
            mine[1] += k


# -- text ---------------------------------------------------------------------------------------


def _normalize(text: str) -> str:
    return " ".join(text.casefold().split())


def _leaves(value: Any) -> Iterator[Any]:
    """The scalar values of parsed JSON, depth first."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield value


def _arguments(call: Mapping[str, Any]) -> Any:
    """The parsed arguments of one tool call (OpenAI ``function.arguments`` or an ``input`` dict)."""
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, Mapping) else call.get("input", call.get("args"))
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, str)):
        return str(value)
    return None


def _parts_text(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, Mapping):
                for key in ("text", "content"):
                    if key in part:
                        yield from _parts_text(part[key])
                if isinstance(part.get("input"), (Mapping, list)):  # a tool-use block
                    yield " ".join(t for t in map(_scalar_text, _leaves(part["input"])) if t)


def message_text(message: Mapping[str, Any]) -> str:
    """All the text a model reads in one message: content, tool names and argument values."""
    parts = list(_parts_text(message.get("content")))
    for call in tool_calls(dict(message)) if isinstance(message, dict) else []:
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        parts.append(str(function.get("name") or call.get("name") or ""))
        arguments = _arguments(call)
        if isinstance(arguments, (Mapping, list)):
            parts.extend(t for t in map(_scalar_text, _leaves(arguments)) if t)
        elif isinstance(arguments, str):
            parts.append(arguments)
    return "\n".join(parts)


def context_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The normalized text of a context (what :func:`score` searches)."""
    return "\n".join(_normalize(message_text(m)) for m in messages)


def _edge_guard(value: str) -> re.Pattern[str]:
    """A search for ``value`` that is not part of a longer word or number.

    Only ASCII letters and digits count as word characters: CJK text has no spaces, so a CJK
    value inside a CJK sentence still matches.
    """
    before = r"(?<![0-9a-z])" if value[:1].isascii() and value[:1].isalnum() else ""
    after = r"(?![0-9a-z])" if value[-1:].isascii() and value[-1:].isalnum() else ""
    return re.compile(before + re.escape(value) + after)


# -- needs from a recording ---------------------------------------------------------------------


def reused_arguments(messages: Sequence[Mapping[str, Any]], *, min_chars: int = MIN_CHARS) -> list[Need]:
    """Every (value, later call) where the recorded agent passes a tool a value it read earlier.

    A value is a scalar of a tool call's arguments (a string, or a number written out) of at
    least ``min_chars`` characters. It counts at the call whose assistant message carries the
    tool call when it appears, as a whole word, in an earlier user turn or tool result, and the
    system prompt does not hold it. One need per value and call.
    """
    texts: list[str | None] = [None] * len(messages)

    def text(i: int) -> str:
        found = texts[i]
        if found is None:
            found = texts[i] = _normalize(message_text(messages[i]))
        return found

    system = "\n".join(text(i) for i, m in enumerate(messages) if role(dict(m)) in ("system", "developer"))
    sources = [i for i, m in enumerate(messages) if role(dict(m)) in ("user", "tool")]
    needs: list[Need] = []
    origins: dict[str, int | None] = {}
    for k, message in enumerate(messages):
        calls = tool_calls(dict(message)) if isinstance(message, dict) else []
        if not calls:
            continue
        seen: set[str] = set()
        for call in calls:
            for leaf in _leaves(_arguments(call)):
                raw = _scalar_text(leaf)
                value = _normalize(raw) if raw else ""
                if len(value) < min_chars or value in seen:
                    continue
                seen.add(value)
                if value not in origins:
                    pattern = _edge_guard(value)
                    if pattern.search(system):
                        origins[value] = None
                    else:
                        origins[value] = next((i for i in sources if pattern.search(text(i))), None)
                origin = origins[value]
                if origin is not None and origin < k:
                    needs.append(Need((str(raw).strip(),), k, origin))
    return needs


# -- scoring -----------------------------------------------------------------------------------


class NeedIndex:
    """Needs grouped by the call that needs them, with compiled searches (build once per recording)."""

    def __init__(self, needs: Iterable[Need]) -> None:
        self.at: dict[int, list[tuple[Need, list[re.Pattern[str]]]]] = {}
        cache: dict[str, re.Pattern[str]] = {}
        self.total = 0
        for need in needs:
            patterns = [cache.setdefault(v, _edge_guard(v)) for v in map(_normalize, need.values)]
            self.at.setdefault(need.call, []).append((need, patterns))
            self.total += 1
        self._text: dict[int, tuple[Mapping[str, Any], str]] = {}

    def calls(self) -> list[int]:
        return sorted(self.at)

    def _message_text(self, message: Mapping[str, Any]) -> str:
        # Contexts share message objects from call to call: normalize each object once.
        entry = self._text.get(id(message))
        if entry is None or entry[0] is not message:
            entry = self._text[id(message)] = (message, _normalize(message_text(message)))
        return entry[1]

    def score_call(self, call: int, context: Sequence[Mapping[str, Any]]) -> Retention:
        """Needs of ``call`` and how many of them ``context`` (what was sent at that call) holds."""
        out = Retention()
        entries = self.at.get(call)
        if not entries:
            return out
        text = "\n".join(self._message_text(m) for m in context)
        for need, patterns in entries:
            hit = any(p.search(text) for p in patterns)
            out.needs += 1
            out.kept += hit
            counts = out.by_kind.setdefault(need.kind, [0, 0])
            counts[0] += 1
            counts[1] += hit
        return out


def score(needs: Iterable[Need], contexts: Mapping[int, Sequence[Mapping[str, Any]]]) -> Retention:
    """Retention over a replay: ``contexts`` maps each call (assistant message index) to what was sent.

    A need whose call has no context in ``contexts`` counts as not kept.
    """
    index = NeedIndex(needs)
    out = Retention()
    for call in index.calls():
        context = contexts.get(call)
        if context is None:
            missed = Retention(needs=len(index.at[call]))
            for need, _ in index.at[call]:
                missed.by_kind.setdefault(need.kind, [0, 0])[0] += 1
            out.add(missed)
        else:
            out.add(index.score_call(call, context))
    return out
