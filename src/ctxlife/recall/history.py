"""Search a session's raw history: an index per session, kept fresh from the store, and passages.

:class:`HistorySearch` keeps one :class:`~ctxlife.recall.index.HistoryIndex` per session of a store,
adds the records recorded since the last call (by sequence number, so a call costs what is new),
rebuilds an index that is missing or no longer matches the raw history, and turns search hits into
*passages*: the matching message (whole, also where a chunk of it matched: the hit names the chunk)
with its neighbours, minus what is already in view (:mod:`ctxlife.recall.block` renders them with
their date, position and role). Where the index lives (``index_dir``): docs/strategies/recall.md.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import unquote

from ctxlife.events import emit
from ctxlife.messages import text_of
from ctxlife.recall.index import HistoryIndex, Hit, StoredRecord
from ctxlife.recall.records import CHUNK_CHARS
from ctxlife.recall.text import TermCounts, count_term, dates_in, query_terms
from ctxlife.sessions import RawRecord

MEMORY = "memory"


def default_index_dir(store_url: str) -> Path | None:
    """Where the index of a store's sessions goes by default: beside a local store, else memory (None).

    ``store_url`` is a store URL as the stores parse it: the path is percent-decoded once and
    ends at the first ``?`` (a ``#`` is part of the path, as for the stores themselves).
    """
    scheme, _, rest = store_url.partition("://")
    scheme = scheme.lower()
    path = unquote(rest.partition("?")[0])
    if scheme == "file" and path:
        return Path(path).expanduser() / "recall_index"
    if scheme == "sqlite" and path.startswith("/"):
        path = path[1:]
        if path and ":memory:" not in path:
            return _beside_database(Path(path).expanduser())
    return None


def configured_index_dir(settings: Any) -> Path | None:
    """The folder a config's ``[recall] index_dir`` names (None: unset, ``"memory"``, or recall off).

    Index files there are not the store's derived data: whoever deletes or erases a session deletes
    its index there with :func:`remove_index`.
    """
    if "recall" not in getattr(settings, "strategies", ()):
        return None
    index_dir = getattr(settings.options_for("recall"), "index_dir", None)
    if index_dir is None or str(index_dir) == MEMORY:
        return None
    return Path(index_dir).expanduser()


def remove_index(index_dir: str | Path, session_id: str) -> bool:
    """Delete a session's index files in ``index_dir`` (the database, its write-ahead log and shared
    memory); return whether any existed. An open index notices and rebuilds from the raw history."""
    base = Path(index_dir) / f"{session_id}.sqlite"
    removed = False
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            base.with_name(base.name + suffix).unlink()
            removed = True
        except FileNotFoundError:
            pass
    return removed


def _beside_database(path: Path) -> Path:
    return path.with_name(path.name + ".recall_index")


def _local_index_dir(store: Any) -> Path | None:
    """The default index folder of ``store``: from a local store's own path (its ``url`` is for
    display: a folder whose name holds ``%`` or ``#`` does not survive a round trip through it)."""
    # lazy: the CLI builds its parser from this package; a store module loads when a command opens it
    from ctxlife.sessions.file import FileStore
    from ctxlife.sessions.sqlite import SQLiteStore

    if isinstance(store, FileStore):
        return store.directory / "recall_index"
    if isinstance(store, SQLiteStore):
        return _beside_database(store.path)
    return default_index_dir(getattr(store, "url", "") or "")


def read_records(store: Any, session_id: str, after_seq: int) -> list[RawRecord]:
    """The raw-history records of a session after ``after_seq`` (all of them with ``0``); a third-party
    store's records are made :class:`RawRecord` s."""
    raws = store.read_records(session_id, after_seq=after_seq)
    if all(type(raw) is RawRecord for raw in raws):
        return list(raws)  # a ctxlife store's records: the index reads them as they are
    out: list[RawRecord] = []
    for raw in raws:
        target = getattr(raw, "target", None)
        view = getattr(raw, "view", None)
        out.append(
            RawRecord(
                seq=int(raw.seq),
                message=raw.message if isinstance(raw.message, dict) else {},
                fingerprint=getattr(raw, "fingerprint", None) or "",
                view="" if view is None else str(view),
                recorded_at=getattr(raw, "recorded_at", None),
                op=str(getattr(raw, "op", "add") or "add"),
                target=int(target) if target is not None else None,
            )
        )
    return out


def _as_stored(record: RawRecord) -> StoredRecord:
    """A new record as the index would keep it (what an ``in_view`` test reads: role and text)."""
    message = record.message
    return StoredRecord(
        seq=record.seq,
        role=str(message.get("role") or ""),
        text=text_of(message).strip(),
        recorded_at=record.recorded_at,
        day=None,
        view=record.view,
    )


@dataclass
class Passage:
    """Consecutive records shown together: the hit and a little context around it."""

    hit: Hit
    records: list[StoredRecord] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)  # the query's terms and how rare they are
    core: set[int] = field(default_factory=set)  # the hit's turn; the other records are context
    #: Every term of the query and its weight, those no match holds included (``weights`` leaves them
    #: out): how much of what the question says the history holds at all.
    asked: dict[str, float] = field(default_factory=dict)

    @property
    def first_seq(self) -> int:
        return self.records[0].seq if self.records else self.hit.seq


class HistorySearch:
    """History search over the sessions of one store.

    Args:
        store: the session store (its raw history is the source of truth).
        index_dir: where index files go; None for the default beside a local store, ``"memory"``
            for memory only.
        chunk_chars: long texts are indexed (and recalled) in chunks of about this many characters.
    """

    #: Most session indexes kept open at once per search object (each holds a few file descriptors);
    #: the least recently used is closed past it and reopened from its file when needed again.
    MAX_OPEN = 64

    def __init__(
        self,
        store: Any,
        *,
        index_dir: str | Path | None = None,
        chunk_chars: int = CHUNK_CHARS,
        max_open: int | None = None,
    ) -> None:
        self.store = store
        self.chunk_chars = chunk_chars
        self.max_open = max(1, max_open or self.MAX_OPEN)
        self._explicit_dir = index_dir is not None
        if index_dir is None:
            self.index_dir = _local_index_dir(store)
        elif str(index_dir) == MEMORY:
            self.index_dir = None
        else:
            self.index_dir = Path(index_dir).expanduser()
        self._indexes: OrderedDict[str, HistoryIndex] = OrderedDict()
        self._deferred: dict[str, list[RawRecord]] = {}  # new records in view, not indexed yet (see index)
        self._lock = threading.Lock()
        self._reader: Any = None

    def _records_reader(self) -> Any:
        """The store to read new records from.

        A file store remembers where its last read of a session ended, so reading what is new
        costs only the new records, but one position per store object: appends through the same
        object (the recorder's) move it past what this index has. The index reads through a copy of
        the store object with positions of its own (a subclass's reads, such as a replay's times, kept).
        """
        if self._reader is None:
            self._reader = self.store
            from ctxlife.sessions.file import FileStore  # lazy: as in _local_index_dir

            if isinstance(self.store, FileStore):
                self._reader = self.store.own_reader()
        return self._reader

    def index_path(self, session_id: str) -> Path | None:
        """Where the session's index file is: the store's folder for the session's derived data (so
        it is deleted and expires with the session) unless ``index_dir`` was given; else beside the
        store; None for memory."""
        if not self._explicit_dir:
            derived = getattr(self.store, "derived_dir", None)
            if callable(derived):
                folder = derived(session_id)
                return None if folder is None else Path(folder) / "recall.sqlite"
        return None if self.index_dir is None else self.index_dir / f"{session_id}.sqlite"

    #: Most new records held back from the index while the model has them in view (see :meth:`index`).
    MAX_DEFERRED = 64

    def index(self, session_id: str, *, defer: Callable[[StoredRecord], bool] | None = None) -> HistoryIndex:
        """The session's index, brought up to date with its raw history.

        ``defer``: whether a new record is in view (the model has it in the list it is sent). New
        records that all are (the latest reply, the question) are held back, up to
        :attr:`MAX_DEFERRED`: a search would skip them anyway, and each write to the index costs a
        transaction. They are written together when one leaves the view (compaction dropped it),
        when an edit or removal comes, and by any call without ``defer``.

        A store that keeps the index itself, written with the history (``search_index(session_id)``:
        postgres, :mod:`ctxlife.recall.pg`), is searched there: nothing is built, read or held here.
        """
        in_store = getattr(self.store, "search_index", None)
        if callable(in_store):
            return in_store(session_id)  # type: ignore[no-any-return]
        evicted: list[HistoryIndex] = []
        with self._lock:
            index = self._indexes.get(session_id)
            if index is not None and index.path is not None and not index.path.exists():
                index.close()  # the file was deleted with the session: start over from the raw history
                index = None
            if index is None:
                self._deferred.pop(session_id, None)
                index = self._indexes[session_id] = HistoryIndex(
                    self.index_path(session_id), chunk_chars=self.chunk_chars
                )
            self._indexes.move_to_end(session_id)
            while len(self._indexes) > self.max_open:
                closed, old = self._indexes.popitem(last=False)
                # What is kept of a session goes with its index (a server sees endless sessions):
                # held-back records are read from the store again.
                self._deferred.pop(closed, None)
                evicted.append(old)
        for old in evicted:
            old.close()
        self._sync(session_id, index, defer)
        return index

    def _sync(self, session_id: str, index: HistoryIndex, defer: Callable[[StoredRecord], bool] | None = None) -> None:
        """Apply the records recorded since the index's last one; rebuild when the history changed under it.

        Every call reads the record the index ends at again, with the new ones, and compares its
        fingerprint: when it is gone or differs (the session was deleted and written again, here or on
        another worker, or rewritten under the index), the index no longer describes this history
        and is rebuilt from it. One extra record per call buys that.
        """
        if index.path is not None:
            index.refresh()  # another process may have indexed records already
        last = index.last_seq
        reader = self._records_reader()
        with self._lock:
            held = [r for r in self._deferred.pop(session_id, []) if r.seq > last]
        if held and held[0].seq != last + 1:
            held = []  # they no longer follow the index (another process indexed part of them)
        # The last record the index (or the held records) ends at is read again with the new ones
        # and compared by fingerprint: a session deleted and written again (on any worker, however
        # long its new history), erased or rewritten under the index is seen on the next call.
        anchor = held[-1] if held else None
        anchor_seq = anchor.seq if anchor is not None else last
        anchor_fp = anchor.fingerprint if anchor is not None else index.last_fingerprint
        records = read_records(reader, session_id, max(anchor_seq - 1, 0))
        if anchor_seq > 0:
            first = records[0] if records and records[0].seq == anchor_seq else None
            if first is None or (anchor_fp and first.fingerprint and first.fingerprint != anchor_fp):
                emit("info", "ctxlife.recall_index_rebuilt", session_id=session_id, reason="history_changed")
                index.reset()
                held = []
                records = read_records(reader, session_id, 0)
            else:
                records = records[1:]
        records = held + records
        if (
            records
            and defer is not None
            and len(records) <= self.MAX_DEFERRED
            and all((r.op or "add") == "add" and defer(_as_stored(r)) for r in records)
        ):
            with self._lock:
                self._deferred[session_id] = records
            return
        if records:
            index.add(records)

    def recent_keys(self, session_id: str, records: int = 400) -> set[tuple[str, str]]:
        """(role, text) of the session's latest ``records`` records the index holds (see :func:`live_keys`)."""
        index = self.index(session_id)
        return index.recent_keys(records)

    def forget(self, session_id: str) -> None:
        """Close and drop the session's index (its file stays: it is rebuilt or reused on next use)."""
        with self._lock:
            index = self._indexes.pop(session_id, None)
            self._deferred.pop(session_id, None)
        if index is not None:
            index.close()

    def close(self) -> None:
        with self._lock:
            indexes, self._indexes = list(self._indexes.values()), OrderedDict()
            self._deferred.clear()
            reader, self._reader = self._reader, None
        for index in indexes:
            index.close()
        if reader is not None and reader is not self.store:
            reader.close()

    # -- searching ---------------------------------------------------------------------------

    def passages(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 5,
        in_view: Callable[[StoredRecord], bool] = lambda record: False,
        context: int = 1,
        min_score: float = 0.0,
        tool_weight: float = 1.0,
        min_coverage: float = 0.0,
        view: str | None = None,
        text_filter: Callable[[str], str] | None = None,
    ) -> list[Passage]:
        """The best passages of the session's history for ``query``, skipping what ``in_view`` says is shown.

        Each passage is a matching record, whole (its ``hit`` names the chunk of a long one that matched),
        with up to ``context`` records before and after it that are not in view either; overlapping
        passages are merged. ``view`` keeps to the records of one view (an agent's or task's lane; None:
        the whole session).
        """
        index = self.index(session_id, defer=in_view)
        return passages_from(
            index,
            query,
            limit=limit,
            in_view=in_view,
            context=context,
            min_score=min_score,
            tool_weight=tool_weight,
            min_coverage=min_coverage,
            view=view,
            text_filter=text_filter,
        )


#: Matches re-ranked per passage kept (see :func:`passages_from`).
MATCHES_PER_PASSAGE = 3


def passages_from(
    index: HistoryIndex,
    query: str,
    *,
    limit: int = 5,
    in_view: Callable[[StoredRecord], bool] = lambda record: False,
    context: int = 1,
    min_score: float = 0.0,
    tool_weight: float = 1.0,
    min_coverage: float = 0.0,
    view: str | None = None,
    text_filter: Callable[[str], str] | None = None,
) -> list[Passage]:
    """:meth:`HistorySearch.passages` on an index already up to date.

    ``min_coverage``: the least share of the question's term weight (idf) a match must hold.
    ``text_filter``: applied to the text of every record a passage shows (the privacy filter,
    ``ctxlife_filter_text``), before anything is cut or rendered.
    """
    # tool_weight: BM25's length normalization ranks long structured tool results (many field
    # names) below short chat messages that share a question's wording, yet fetched data is what
    # users come back to; tool results can be weighted up.
    # About two matches per passage kept (a turn's question and its answer often both match): each
    # is re-ranked by its whole turn (its neighbours read, its terms counted), so this bound is
    # most of what a search costs.
    hits = index.search(query, limit=limit * MATCHES_PER_PASSAGE + 4, tool_weight=tool_weight, view=view)
    # A question in several parts ("who ...? and which ...?", one per entity or day) is also searched
    # part by part: each part's best turn is shown, not only the turns of the part with rarer words.
    parts = [
        (part, index.search(part, limit=limit + 4, tool_weight=tool_weight, view=view))
        for part in split_question(query)
    ]
    if not hits and not any(found for _, found in parts):
        return []
    every = [h for found in (hits, *(found for _, found in parts)) for h in found]
    nearby = _nearby(index, every, context)
    said = "\n".join(f"{h.head}\n{h.text}" for h in every if h.seq in nearby and not in_view(nearby[h.seq])).casefold()

    def weights_of(text: str) -> dict[str, float]:
        # A term no match holds (a bigram across a word boundary, a word never said) can be held by
        # no passage: it does not count in what share of the question a passage holds.
        weights = asked if text is query else index.term_weights(query_terms(text))
        return {t: w for t, w in weights.items() if count_term(said, t, first=True)} or weights

    asked = index.term_weights(query_terms(query))
    weights = weights_of(query)
    memo = getattr(index, "memo", None)  # the postgres index keeps none
    turns = _Turns(nearby, in_view, memo() if callable(memo) else None)
    chosen = _best_turns(hits, turns, weights, query, limit, min_score, min_coverage, tool_weight)
    if parts:
        firsts = [
            hit
            for part, found in parts
            for hit in _best_turns(found, turns, weights_of(part), part, 1, min_score, 0.0, tool_weight)
        ]
        ordered: dict[int, Hit] = {}
        for hit in [*chosen[:1], *firsts, *chosen[1:]]:
            ordered.setdefault(turns.core(hit.seq)[0], hit)  # one passage per turn
        chosen = list(ordered.values())[:limit]
    _around(index, chosen, context, nearby)
    cores = {hit.seq: _span(hit.seq, nearby, context) for hit in chosen}
    reserved = {s for core, _ in cores.values() for s in core}  # each turn is shown in its own passage
    taken: dict[int, int] = {}  # seq -> the passage (index in ``shown``) that shows it
    shown: list[tuple[Hit, set[int], set[int]]] = []  # hit, records shown, core
    for hit in chosen:
        turn, extra = cores[hit.seq]
        if hit.seq in taken:
            # Already shown with a better passage: the rest of its turn joins that one ("The chop house." shown
            # as a passage's last line, its reply with the value: reserved for this turn, so shown by no other).
            at = taken[hit.seq]
            rest = {s for s in turn if s not in taken and not in_view(nearby[s])}
            shown[at][1].update(rest)
            shown[at][2].update(rest)
            taken.update(dict.fromkeys(rest, at))
            continue
        seqs = {
            s
            for s in turn + [e for e in extra if e not in reserved]
            if s == hit.seq or (s not in taken and not in_view(nearby[s]))
        }
        taken.update(dict.fromkeys(seqs, len(shown)))
        shown.append((hit, seqs, set(turn)))
    out: list[Passage] = []
    for hit, seqs, core in shown:
        records = []
        for seq in sorted(seqs):
            # The whole record, also where the hit is one chunk of it: the block cuts its excerpt from the
            # whole text around that chunk (``hit.text``), so a value just past the chunk's end is shown.
            record = nearby[seq]
            if text_filter is not None:
                clean = text_filter(record.text)
                if clean != record.text:
                    record = StoredRecord(
                        record.seq, record.role, clean, record.recorded_at, record.day, record.view, record.calls
                    )
            records.append(record)
        out.append(Passage(hit, records, weights, core, asked))
    return out


def _nearby(index: HistoryIndex, hits: Sequence[Hit], context: int) -> dict[int, StoredRecord]:
    """The records :func:`_span` reads for these matches' turns (their context: :func:`_around`).

    A chat turn (a message, its reply, the user's answer to a reply that asks) lies within two
    records of its match; only a match near a tool call or result needs the wider reach of a tool
    call and its results (and ``context`` around them).
    """
    near = 2
    found = index.records(s for h in hits for s in range(h.seq - near, h.seq + near + 1))
    # The records of tool calls and results among them, looked up per match (most histories: none).
    units = {s for s, r in found.items() if r.calls or r.role == "tool"}
    tools = [h for h in hits if units and any(s in units for s in range(h.seq - near, h.seq + near + 1))]
    if tools:
        reach = context + _UNIT_REACH
        found.update(index.records(s for h in tools for s in range(h.seq - reach, h.seq + reach + 1)))
    return found


def _around(index: HistoryIndex, hits: Sequence[Hit], context: int, nearby: dict[int, StoredRecord]) -> None:
    """Add to ``nearby`` the records shown as context around the turns of the matches kept: ``context``
    more on each side of a chat turn, and the answer to a question among them (read for these few only, not for
    every match ranked)."""
    near = context + 3
    wanted = [s for h in hits for s in range(h.seq - near, h.seq + near + 1) if s not in nearby]
    if wanted:
        nearby.update(index.records(wanted))


#: Where a question splits into parts: at the end of a sentence, or before a second question word
#: ("..., and which ...", "……，哪……").
_PART_BREAK = re.compile(
    r"(?<=[?？!！。;；])\s*|[,，]?\s+(?:and|or|also|plus)\s+(?=(?:what|which|who|whom|whose|when|where|why|how)\b)",
    re.IGNORECASE,
)


def split_question(query: str) -> list[str]:
    """The parts of a question asking several things (each with search terms of its own), or ``[]``."""
    parts = [p.strip() for p in _PART_BREAK.split(query) if p and p.strip()]
    parts = [p for p in parts if query_terms(p)]
    return parts if len(parts) >= 2 else []


#: BM25's parameters for ranking turns (the usual ones).
_K1, _B = 1.2, 0.75

#: The most characters of a turn's other messages read when it is scored (a long tool result
#: counts by the chunk that matched, not by all of it).
_PARTNER_CHARS = 2 * CHUNK_CHARS


class _Turns:
    """The turns of one search's matches, each read once: a question and its parts rank the same turns.

    ``texts``: the turn texts counted so far, kept by the index while the records it holds stay as they
    were (by match and the partners shown with it: the next calls of a conversation rank many of the
    same turns, and a new record changes no turn's key, only the turns that take it in).
    """

    def __init__(
        self,
        nearby: dict[int, StoredRecord],
        in_view: Callable[[StoredRecord], bool],
        texts: dict[Any, Any] | None = None,
    ) -> None:
        self.nearby = nearby
        self.in_view = in_view
        self._cores: dict[int, tuple[int, ...]] = {}
        self._texts: dict[Any, Any] = {} if texts is None else texts

    def core(self, seq: int) -> tuple[int, ...]:
        found = self._cores.get(seq)
        if found is None:
            found = self._cores[seq] = tuple(_span(seq, self.nearby, 0)[0])
        return found

    def text(self, hit: Hit, core: tuple[int, ...]) -> TermCounts:
        """The turn's text as a match shows it: the matching chunk, then its partners (cut short)."""
        nearby, in_view = self.nearby, self.in_view
        partners = tuple(s for s in core if s != hit.seq and not in_view(nearby[s]))
        lead = _lead_of(core, nearby)
        if lead is not None and in_view(nearby[lead]):
            lead = None
        key = ("turn", hit.seq, hit.part, partners, lead)
        found: TermCounts | None = self._texts.get(key)
        if found is None:
            parts = [f"{hit.head}\n{hit.text}" if hit.head else hit.text]
            parts += [nearby[s].text[:_PARTNER_CHARS] for s in partners]
            if len(self._texts) >= _TURNS_KEPT:
                self._texts.clear()
            text = "\n".join(parts).casefold()
            found = _Turn(text, None if lead is None else nearby[lead].text[:_PARTNER_CHARS].casefold())
            self._texts[key] = found
        return found


class _Turn(TermCounts):
    """A turn's term counts, each term counted once (the next searches rank many of the same turns), with
    the message it follows (``_lead_of``): a term the turn lacks counts once when that message holds it
    (what the turn's "it" names); the turn's length is its own."""

    __slots__ = ("lead", "known")

    def __init__(self, lower: str, lead: str | None) -> None:
        super().__init__(lower)
        self.lead = lead
        self.known: dict[str, int] = {}

    def count(self, term: str) -> int:
        found = self.known.get(term)
        if found is None:
            found = self.known[term] = count_term(self.lower, term) or (
                count_term(self.lead, term, first=True) if self.lead is not None else 0
            )
        return found


def _lead_of(core: Sequence[int], records: dict[int, StoredRecord]) -> int | None:
    """The message a turn follows (a chat message of its view), which it may refer back to: "它的地址在哪里？"
    after "推荐您去恭王府", "And their phone number?" after a hotel's name. A turn is ranked with it (shown, it
    is the turn's context; whether the turn gets a block is read from the turn alone: with it, small talk got
    blocks more often on the MemoryBank dev half)."""
    first = records.get(core[0]) if core else None
    lead = records.get(core[0] - 1) if core else None
    chat = ("user", "assistant")
    if first is None or lead is None or first.role not in chat or lead.role not in chat or lead.calls:
        return None  # a tool result is ranked with its call, not with what came before
    if first.view is not None and lead.view != first.view:
        return None
    return lead.seq


#: Most turn texts an index keeps counted (see :class:`_Turns`).
_TURNS_KEPT = 2048


def _best_turns(
    hits: Sequence[Hit],
    turns: _Turns,
    weights: dict[str, float],
    query: str,
    limit: int,
    min_score: float,
    min_coverage: float,
    tool_weight: float,
) -> list[Hit]:
    """The best ``limit`` matches, one per turn, ranked by how well their whole turn matches the query.

    The index ranks single messages, but a question is usually answered by a turn: the user's
    words name the topic and the reply holds the answer (or a call names the record and its result
    holds the value). Each match is scored as its turn (BM25 over the turn's text, the query's idf),
    so a turn whose two halves each hold part of the question wins over a message that repeats the
    question's words alone. Matches on a day the query names keep their place first.
    """
    total = sum(weights.values()) or 1.0
    named_days = {f"{m:02d}-{d:02d}" for m, d in dates_in(query)}
    scored: dict[tuple[int, ...], tuple[tuple[int, float], Hit]] = {}
    lengths: dict[tuple[int, ...], int] = {}
    counts: dict[tuple[int, ...], list[tuple[int, float]]] = {}
    for hit in hits:
        record = turns.nearby.get(hit.seq)
        dated = 0 if named_days and (hit.day or "")[5:] in named_days else 1
        # Said on the day the query names: the date is the match (a question may have no other word).
        if record is None or (hit.score < min_score and dated) or turns.in_view(record):
            continue
        key = turns.core(hit.seq)
        if key in counts:
            continue  # one passage per turn (its best match)
        text = turns.text(hit, key)
        counts[key] = [(text.count(t), w) for t, w in weights.items()]
        lengths[key] = text.length or 1
        if min_coverage > 0 and sum(w for n, w in counts[key] if n) < min_coverage * total:
            del counts[key]
            continue  # it shares only a minor part of the question (a file suffix, a common word)
        scored[key] = ((dated, 0.0), hit)
    if not scored:
        return []
    average = sum(lengths[k] for k in scored) / len(scored)
    for key, ((dated, _), hit) in scored.items():
        norm = _K1 * (1 - _B + _B * lengths[key] / average)
        score = sum(w * n * (_K1 + 1) / (n + norm) for n, w in counts[key] if n)
        if hit.role == "tool":
            score *= tool_weight
        scored[key] = ((dated, score), hit)
    ranked = sorted(scored.values(), key=lambda item: (item[0][0], -item[0][1], item[1].seq))
    return [hit for _, hit in ranked[:limit]]


_UNIT_REACH = 6  # how far a tool call and its results are looked for around a match


def _asks(text: str) -> bool:
    """Whether a message ends with a question (its next message is likely the answer)."""
    tail = text.rstrip()[-1:]
    return tail in ("?", "？", "؟")


def _span(seq: int, records: dict[int, StoredRecord], context: int) -> tuple[list[int], list[int]]:
    """The records shown for a match at ``seq``: its turn (``core``) and a little context around it.

    A turn is a tool call with its results, or a chat message with the message it answers or that
    answers it (a user message and the reply; a reply and the user message or tool result before
    it). ``context`` more messages on each side are shown as context (cut shorter).
    """
    hit = records[seq]

    def same_view(other: StoredRecord | None) -> TypeGuard[StoredRecord]:
        return other is not None and (hit.view is None or other.view == hit.view)

    def results_after(call: int) -> list[int]:
        out, k = [], call + 1
        while same_view(records.get(k)) and records[k].role == "tool" and k - call <= _UNIT_REACH:
            out.append(k)
            k += 1
        return out

    core = [seq]
    if hit.role == "tool":  # a result: with the call that asked for it
        k = seq - 1
        while same_view(records.get(k)) and records[k].role == "tool" and seq - k <= _UNIT_REACH:
            k -= 1
        if same_view(records.get(k)) and records[k].calls:
            core.append(k)
    elif hit.calls:  # a call: with its results
        core += results_after(seq)
    elif hit.role == "user":  # a user message: with the reply (and what a tool call in it fetched)
        reply = records.get(seq + 1)
        if same_view(reply) and reply.role == "assistant":
            core.append(seq + 1)
            if reply.calls:
                core += results_after(seq + 1)
    else:  # a reply: with what it answers
        before = records.get(seq - 1)
        if same_view(before) and before.role in ("user", "tool"):
            core.append(seq - 1)
    core.sort()
    last = records[core[-1]]
    after = records.get(core[-1] + 1)
    if last.role == "assistant" and _asks(last.text) and same_view(after) and after.role == "user":
        core.append(core[-1] + 1)  # a reply that asks something: the user's answer is part of the turn
    extra: list[int] = []
    for step, edge in ((-1, core[0]), (1, core[-1])):
        for k in range(1, context + 1):
            other = records.get(edge + step * k)
            if not same_view(other) or other.role == "tool":
                break
            extra.append(edge + step * k)
    after = records.get(extra[-1] + 1) if extra and extra[-1] > seq else None
    if same_view(after) and after.role == "assistant" and records[extra[-1]].role == "user":
        if _asks(records[extra[-1]].text):
            extra.append(extra[-1] + 1)  # a question shown after the turn, with its answer ("那这家餐馆的电话是？")
    return core, sorted(extra)


def live_keys(messages: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(role, text) of every message in a context: a record with the same key is already in view."""
    out = set()
    for message in messages:
        if isinstance(message, dict):
            out.add((str(message.get("role") or ""), text_of(message).strip()))
    return out
