"""See what the model sees: the context each call of a stored session sent, part by part.

A session recorded with call records (:mod:`ctxlife.sessions.calls`: every call made through a host
that records the session) shows exactly what was sent: :func:`last_recorded_call` is its last call,
``ctxlife replay --session`` and ``ctxlife report`` show every call. Everything else here is a
*simulation* (:data:`SIMULATED`), and says so: a session recorded before call records existed, the
next call (``--ask``), or a config tried on purpose (``--simulate``).

:func:`next_context` answers "what did the model actually get?" for a stored session: it copies the
session into a scratch store (a temporary folder; the original store is only read), restores it
there through the real host path (:class:`ctxlife.Session` on a :class:`ctxlife.Host` built from
the config, so every configured strategy runs: compaction, recall, bootstrap, ...) and returns the
exact list that call would send, each part labelled (:data:`PART_KINDS`) with its token count.
``ctxlife session show ID --context`` prints it.

:func:`compose` labels any message list the same way; :func:`scratch_session` is the scratch copy
that ``ctxlife replay --session`` and ``ctxlife report`` build on too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlife.errors import ConfigError, CtxlifeError, StoreError
from ctxlife.events import redact_url
from ctxlife.messages import (
    BOOTSTRAP_END,
    BOOTSTRAP_START,
    content_text,
    inserted_kind,
    is_inserted,
    is_system,
    role,
    strip_bootstrap,
    text_of,
)
from ctxlife.sessions.calls import sent_calls
from ctxlife.sessions.ids import SessionKey, validate_session_id, validate_view
from ctxlife.sessions.records import ADD, Event, fingerprint

if TYPE_CHECKING:
    from ctxlife.config import Settings
    from ctxlife.host import Host
    from ctxlife.host_report import Report
    from ctxlife.sessions.base import SessionStore
    from ctxlife.sessions.records import RawRecord
    from ctxlife.tokens import TokenCounter

__all__ = [
    "PART_KINDS",
    "RECORDED",
    "SIMULATED",
    "Composition",
    "Frame",
    "SessionReplay",
    "NextCall",
    "Shown",
    "Part",
    "compose",
    "copy_session",
    "host_on",
    "isolated_settings",
    "last_recorded_call",
    "next_context",
    "scratch_session",
    "stored_system_prompt",
]

#: The kinds of part a context is made of, in the order they usually appear.
PART_KINDS = ("system", "bootstrap", "summary", "recall", "recent")

#: What a call shown comes from: its call record (what the model was sent), or a run of the strategies now.
RECORDED, SIMULATED = "recorded", "simulated"


def simulated_because(settings: Settings, *, asked: bool = False, on_purpose: bool = False) -> str:
    """The sentence that says why (and that) what is shown is a simulation, not what the model was sent."""
    if on_purpose:
        why = "on purpose (--simulate)"
    elif asked:
        why = "because the question has not been asked yet (--ask)"
    else:
        why = (
            "because this session has no call records (recorded before ctxlife kept them, or by a caller "
            "that records nothing)"
        )
    return (
        f"SIMULATED {why}: the config's strategies were run again on a copy of the session "
        f"({settings.source}); compactions and summaries may differ from what the model was sent"
    )


Message = dict[str, Any]


@dataclass
class Part:
    """One labelled part of a context: a message, or the bootstrap section inside one.

    Attributes:
        kind: one of :data:`PART_KINDS` (``recent``: the conversation's messages as kept).
        index: the position of its message in the list.
        role: the message's role.
        tokens: what it costs in the request (a message's per-message overhead included; a
            bootstrap section inside a message counts its text only, the rest goes to the message).
        text: its text (tool-call arguments included).
    """

    kind: str
    index: int
    role: str
    tokens: int
    text: str


@dataclass
class Composition:
    """A message list and its labelled parts; ``total`` is what the whole request costs."""

    messages: list[Message]
    parts: list[Part]
    total: int
    encoding: str = ""

    def tokens_by_kind(self) -> dict[str, int]:
        """Tokens per part kind (every kind of :data:`PART_KINDS`, 0 when absent)."""
        out = dict.fromkeys(PART_KINDS, 0)
        for part in self.parts:
            out[part.kind] = out.get(part.kind, 0) + part.tokens
        return out

    @property
    def priming(self) -> int:
        """Tokens of the request that belong to no message (the reply priming)."""
        return self.total - sum(p.tokens for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_tokens": self.total,
            "encoding": self.encoding,
            "tokens_by_kind": self.tokens_by_kind(),
            "priming_tokens": self.priming,
            "parts": [p.__dict__ for p in self.parts],
            "messages": self.messages,
        }


def compose(messages: Sequence[Message], counter: TokenCounter) -> Composition:
    """Label each message of ``messages`` with its part (docs/inspecting.md's part table) and its tokens."""
    parts: list[Part] = []
    for index, message in enumerate(messages):
        who = role(message) or "?"
        tokens = counter.count_message(message)
        kind = inserted_kind(message)  # "summary", "recall", "bootstrap": the whole message is that part
        text = text_of(message)
        if kind is not None:
            parts.append(Part(kind, index, who, tokens, text))
            continue
        plain = "system" if is_system(message) else "recent"
        body = content_text(message)
        start, end = body.find(BOOTSTRAP_START), body.find(BOOTSTRAP_END)
        if start >= 0 and end > start:
            section = body[start : end + len(BOOTSTRAP_END)]
            boot = min(counter.count_text(section), tokens)
            rest = (body[:start] + body[end + len(BOOTSTRAP_END) :]).strip()
            parts.append(Part(plain, index, who, tokens - boot, rest))
            parts.append(Part("bootstrap", index, who, boot, section))
        else:
            parts.append(Part(plain, index, who, tokens, text))
    return Composition(list(messages), parts, counter.count_messages(messages), counter.encoding_name)


# -- the scratch copy -------------------------------------------------------------------------------


def copy_session(source: SessionStore, target: SessionStore, session_id: str) -> int:
    """Copy a session's raw history (every record, every view, same sequence numbers) and snapshots.

    The source is only read. Returns the number of records copied. Raises
    :class:`~ctxlife.errors.StoreError` when the copy would not have the source's sequence numbers.
    """
    records = source.read_records(session_id)
    views: dict[str, None] = {"": None}
    batch: list[RawRecord] = []

    def flush() -> None:
        if not batch:
            return
        first = batch[0]
        if _plain(first):
            written = target.append(session_id, [r.message for r in batch], view=first.view)
        else:
            written = target.append_events(
                session_id,
                [Event(r.op, r.message, r.target, r.fingerprint) for r in batch],
                view=first.view,
            )
        got = [r.seq for r in written]
        wanted = [r.seq for r in batch]
        if got != wanted:
            raise StoreError(
                f"copying session {session_id!r} from {source.url}: records {wanted[:3]}... came out as "
                f"{got[:3]}... (the source's sequence numbers have gaps); nothing of the original was changed"
            )
        batch.clear()

    for record in records:
        views[record.view] = None
        if batch and (record.view != batch[0].view or _plain(record) != _plain(batch[0])):
            flush()
        batch.append(record)
    flush()
    for view in views:
        snapshot = source.load_snapshot(session_id, view)
        if snapshot is not None:
            target.save_snapshot(snapshot)
    return len(records)


def _plain(record: RawRecord) -> bool:
    """An append at the end (what :meth:`SessionStore.append` writes), not an edit event."""
    return record.op == ADD and record.target is None


#: ``f(record) -> when it was said``: the times a scratch copy shows for its records (see :func:`scratch_session`).
RecordedAt = Callable[["RawRecord"], "float | None"]


@contextlib.contextmanager
def scratch_session(
    source: SessionStore | None = None,
    session_id: str | None = None,
    *,
    recorded_at: RecordedAt | None = None,
    marks_of: SessionStore | None = None,
) -> Iterator[SessionStore]:
    """A file store in a new temporary folder, holding a copy of ``session_id`` from ``source`` (if given).

    Everything written while it is open (the recall index too) goes into the folder, removed on exit; the source
    is only read. Records carry the time they are written there, or the one ``recorded_at`` gives (what a recalled
    passage shows, "[2024-05-02 14:05, message 17]"); with a ``source`` and no ``recorded_at``, their original's.
    The copy marks what ctxlife inserts with the secret of ``marks_of`` (default: ``source``; read, never made
    there), so a summary or recall block reads exactly as the original store's would.
    """
    with tempfile.TemporaryDirectory(prefix="ctxlife-scratch-") as folder:
        times = recorded_at
        if times is None and source is not None and session_id is not None:
            original = {r.seq: r.recorded_at for r in source.read_records(session_id, strict=False)}

            def times(record: RawRecord) -> float | None:
                return original.get(record.seq, record.recorded_at)

        store = _scratch_store(Path(folder) / "sessions", times, marks_of or source)
        try:
            if source is not None and session_id is not None:
                copy_session(source, store, session_id)
            yield store
        finally:
            store.close()


def _scratch_store(directory: Path, recorded_at: RecordedAt | None, marks_of: SessionStore | None) -> SessionStore:
    """A :class:`~ctxlife.sessions.file.FileStore` (no fsync: it is thrown away) showing ``recorded_at``
    times, marking with the secret of ``marks_of`` when it has one."""

    # lazy: the CLI builds its parser from this module; a store module loads when a command opens it
    from ctxlife.sessions.file import FileStore

    class ScratchStore(FileStore):
        def __init__(self) -> None:
            super().__init__(directory, fsync=False)
            # Not a file:// URL: readers that would open their own store by URL (the recall index) read
            # through this object, with its times; derived data (the index) stays in memory.
            self.url = f"scratch+{self.url}"

        def read_records(
            self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
        ) -> list[RawRecord]:
            records = super().read_records(session_id, after_seq, view=view, strict=strict)
            if recorded_at is None:
                return records
            return [dataclasses.replace(r, recorded_at=recorded_at(r)) for r in records]

        def _read_mark_key(self, create: bool) -> bytes | None:
            found = marks_of.mark_key() if marks_of is not None else None
            return found if found is not None else super()._read_mark_key(create)

    return ScratchStore()


def host_on(settings: Settings, store: SessionStore, **kwargs: Any) -> Host:
    """A :class:`ctxlife.Host` for ``settings`` working on ``store`` (a scratch copy) instead of the config's store.

    The host opens the store its settings name (:func:`isolated_settings` points them at the copy's
    folder; opening creates nothing) and is then handed ``store`` itself, so the times the copy shows
    are the ones its strategies read. ``host.close()`` closes ``store`` too.
    """
    from ctxlife.host import Host  # lazy: the CLI builds its parser from this module; the host loads per command

    host = Host(isolated_settings(settings, store), **kwargs)
    opened = host.open_store()
    if opened is not store:
        host.store = store
        opened.close()
    return host


def isolated_settings(settings: Settings, store: SessionStore) -> Settings:
    """``settings`` with the session store replaced by ``store`` (a scratch copy), nothing else changed.

    Refuses (:class:`~ctxlife.errors.ConfigError`) a ``recall`` ``index_dir`` naming a folder: the
    copy's index would be written there, beside the real session's.
    """
    if "recall" in settings.strategies:
        index_dir = getattr(settings.options_for("recall"), "index_dir", None)
        if index_dir not in (None, "memory"):
            raise ConfigError(
                f"[recall] index_dir = {index_dir!r} in {settings.source}: a replay or inspection would write the "
                "copy's search index there, beside the real session's; set CTXLIFE_RECALL__INDEX_DIR=memory for "
                "this command (or leave index_dir unset: the index then follows the store)"
            )
    return settings.model_copy(update={"store": store.url.removeprefix("scratch+")})


def stored_system_prompt(store: SessionStore, session_id: str, view: str = "") -> str | None:
    """The system prompt a view's snapshot holds (without ctxlife's bootstrap section), or None.

    System prompts are not raw history (the caller sends its own every call); the snapshot keeps
    the one of the last saved call, which is the best guess of what the next call sends.
    """
    snapshot = store.load_snapshot(session_id, view)
    if snapshot is None:
        return None
    for message in snapshot.messages:
        if not is_system(message):
            break
        if inserted_kind(message) is not None:
            continue
        content = strip_bootstrap(message).get("content")
        if isinstance(content, str) and content.strip():
            return content.strip()
    return None


def check_view(store: SessionStore, session_id: str, view: str) -> None:
    """Raise a clear error when the session, or that view of it, holds nothing (naming the views it has)."""
    views = session_views(store, session_id)
    if view in views or store.load_snapshot(session_id, view) is not None:
        return
    if not views:
        raise CtxlifeError(
            f"no session {session_id!r} in {redact_url(store.url)}; `ctxlife session list` shows the sessions"
        )
    named = ", ".join(repr(v) if v else "'' (the default view)" for v in views)
    raise CtxlifeError(f"session {session_id!r} has nothing in view {view!r}; its views are {named}: pass --view")


def pick_view(store: SessionStore, session_id: str, view: str | None) -> str:
    """The view a command works on: ``view`` when given; else the default view, or the session's only view."""
    if view is not None:
        return view
    views = session_views(store, session_id)
    if "" in views or len(views) != 1:
        return ""  # check_view names the views when the default one is empty
    return views[0]


def session_views(store: SessionStore, session_id: str) -> list[str]:
    """The views of a session that have records or a snapshot, the default view first.

    The first read of every command on a stored session (report, replay, inspect): an erase of the
    session that was killed before it finished is completed first (:meth:`SessionStore.finish_erase`)."""
    store.finish_erase(session_id)
    views: dict[str, None] = {}
    for record in store.read_records(session_id, strict=False):
        views[record.view] = None
    if store.load_snapshot(session_id, "") is not None:
        views[""] = None
    return sorted(views, key=lambda v: (v != "", v))


# -- the next call ----------------------------------------------------------------------------------


@dataclass
class NextCall:
    """What the next call of a stored session would send (:func:`next_context`).

    Attributes:
        composition: the list, labelled part by part.
        report: the host's report of that call (actions, failures, tokens before/after).
        restored_from_snapshot: messages the view's snapshot gave back (0 without one).
        snapshot_covers: the last raw record the snapshot reflects (0 without one).
        restored_from_records: records after the snapshot that were restored too.
        context_window, threshold: what the strategies worked with.
        evicted: messages of the restored list that the strategies left out (a compaction).
        source: :data:`RECORDED` (a call record: what the model was sent, ``call_number``) or
            :data:`SIMULATED` (``note`` says why).
    """

    session_id: str
    view: str
    composition: Composition
    report: Report
    restored_from_snapshot: int
    snapshot_covers: int
    restored_from_records: int
    context_window: int
    threshold: float
    store_url: str
    config: str
    asked: str | None = None
    evicted: list[Message] = field(default_factory=list)
    restored: list[Message] = field(default_factory=list)
    source: str = SIMULATED
    note: str = ""
    call_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "note": self.note,
            "call": self.call_number,
            "session_id": self.session_id,
            "view": self.view,
            "store": self.store_url,
            "config": self.config,
            "context_window": self.context_window,
            "threshold": self.threshold,
            "asked": self.asked,
            "restored": {
                "from_snapshot": self.restored_from_snapshot,
                "snapshot_covers": self.snapshot_covers,
                "from_records": self.restored_from_records,
            },
            "tokens_before": self.report.tokens_before,
            "tokens_after": self.report.tokens_after,
            "actions": [{"strategy": a.strategy, "what": a.what, **a.details} for a in self.report.actions],
            "failures": [f.__dict__ for f in self.report.failures],
            **self.composition.to_dict(),
        }


def require_window(settings: Settings, context_window: int | None, flag: str = "--window N") -> int:
    """The window a command works with: ``context_window``, else the config's; a clear error without one."""
    window = context_window or settings.context_window
    if not window:
        raise ConfigError(
            f"no context window is known: pass {flag} or set context_window in the config ({settings.source})"
        )
    return int(window)


def next_context(
    settings: Settings,
    store: SessionStore,
    session_id: str,
    *,
    view: str = "",
    ask: str | None = None,
    context_window: int | None = None,
    model: str | None = None,
    filtered: bool = True,
) -> NextCall:
    """The exact list the next call of ``session_id`` (view ``view``) would send, labelled part by part.

    Runs the real host path (:class:`ctxlife.Session` restores the view, the config's strategies run) on a scratch
    copy: the original store is only read. ``ask`` is the next user message. Texts go through the privacy filter
    (:class:`Shown`) unless ``filtered`` is False (a caller that filters the result itself).
    """
    from ctxlife.session import Session  # lazy: the CLI builds its parser from this module; the host loads per command

    validate_session_id(session_id)
    validate_view(view)
    window = require_window(settings, context_window)
    check_view(store, session_id, view)
    with scratch_session(store, session_id) as scratch:
        host = host_on(settings, scratch, context_window=window, model=model, session_id=session_id)
        try:
            snapshot = scratch.load_snapshot(session_id, view)
            system = stored_system_prompt(scratch, session_id, view)
            with Session(SessionKey(session_id), host=host, view=view, system=system) as session:
                restored = session.get_items()
                new = [{"role": "user", "content": ask}] if ask else []
                before = ([{"role": "system", "content": system}] if system else []) + restored + new
                sent = session.messages(*new)
                report = session.last_report
                assert report is not None
            covers = snapshot.raw_length if snapshot is not None else 0
            from_records = len(scratch.read_records(session_id, covers, view=view))
            call = NextCall(
                session_id=session_id,
                view=view,
                composition=compose(sent, host.counter()),
                report=report,
                restored_from_snapshot=len(snapshot.messages) if snapshot is not None else 0,
                snapshot_covers=covers,
                restored_from_records=from_records,
                context_window=window,
                threshold=settings.threshold,
                store_url=redact_url(store.url),
                config=settings.source,
                asked=ask,
                evicted=evicted_messages(before, sent),
                restored=restored,
                note=simulated_because(settings, asked=ask is not None, on_purpose=ask is None),
            )
            return Shown(host, session_id, view).next_call(call) if filtered else call
        finally:
            host.close()


def last_recorded_call(
    settings: Settings, store: SessionStore, session_id: str, *, view: str = "", model: str | None = None
) -> NextCall | None:
    """The last call of the view as its call record says it was sent (None without call records)."""
    # lazy: the CLI builds its parser from this module; the host and tiktoken load per command
    from ctxlife.contexts import Action
    from ctxlife.host_report import Report, StrategyFailure
    from ctxlife.tokens import TokenCounter

    calls = sent_calls(store, session_id, view)
    if not calls:
        return None
    last = calls[-1]
    doc = last.doc
    before, after = last.tokens
    window = int(doc.get("window") or 0)
    report = Report(
        "before_llm_call",
        before,
        after,
        window,
        int(doc.get("budget") or 0),
        [Action(str(a.get("strategy")), "before_llm_call", str(a.get("what")), _details(a)) for a in last.actions],
        [StrategyFailure(str(f.get("strategy")), str(f.get("node")), str(f.get("error"))) for f in last.failures],
    )
    counter = TokenCounter(model or settings.agent_model or doc.get("model") or None)
    return NextCall(
        session_id=session_id,
        view=view,
        composition=compose(last.messages, counter),
        report=report,
        restored_from_snapshot=0,
        snapshot_covers=0,
        restored_from_records=0,
        context_window=window,
        threshold=(int(doc.get("budget") or 0) / window) if window else settings.threshold,
        store_url=redact_url(store.url),
        config=settings.source,
        source=RECORDED,
        note=f"call {last.number} of {len(calls)} as recorded: exactly what the model was sent",
        call_number=last.number,
    )


def _details(action: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in action.items() if k not in ("strategy", "what")}


class Shown:
    """The privacy filter (``ctxlife_filter_text``) over what an inspection or a command shows.

    Every text a report, a replay or ``session show|export|search`` prints comes from the store, so it goes
    through the config's text filters here (``where``: ``"report"``, ``"show"``, ``"export"``, ``"search"``):
    a redaction strategy's secrets reach no terminal, JSON or HTML file. Free when no strategy filters text.
    """

    def __init__(
        self, host: Host | None, session_id: str, view: str = "", where: str = "report", *, owned: bool = False
    ) -> None:
        self._session_id, self._view, self._where, self._owned = session_id, view, where, owned
        self._host = host if host is not None and host.implements("ctxlife_filter_text") else None
        self.active = self._host is not None
        if owned and host is not None and self._host is None:
            host.close()

    @classmethod
    def from_config(cls, args: Any, session_id: str, where: str) -> Shown:
        """The filter of the strategies of the config a command was given (``args.config``); close it after use."""
        # lazy: the CLI builds its parser from this module; config and host load when a command prints
        from ctxlife.config import load_settings
        from ctxlife.host import Host

        return cls(Host(load_settings(getattr(args, "config", None))), session_id, where=where, owned=True)

    def text(self, text: str, view: str | None = None) -> str:
        if self._host is None:
            return text
        view = self._view if view is None else view
        return self._host.filter_text(text, where=self._where, session_id=self._session_id, view=view)

    def message(self, message: Message, view: str | None = None) -> Message:
        if self._host is None or not isinstance(message, dict):
            return message
        view = self._view if view is None else view
        return self._host.filter_message(message, where=self._where, session_id=self._session_id, view=view)

    def value(self, value: Any, view: str | None = None) -> Any:
        """Every string in a JSON value (a snapshot's meta) through :meth:`text`."""
        if isinstance(value, str):
            return self.text(value, view)
        if isinstance(value, list):
            return [self.value(v, view) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, view) for k, v in value.items()}
        return value

    def close(self) -> None:
        if self._owned and self._host is not None:
            self._host.close()

    def __enter__(self) -> Shown:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rows(self, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        """``rows`` with each row's ``key`` filtered (evicted or recalled passages, failures)."""
        return [{**r, key: self.text(r[key])} if isinstance(r.get(key), str) else r for r in rows]

    def composition(self, composition: Composition) -> Composition:
        return dataclasses.replace(
            composition,
            messages=[self.message(m) for m in composition.messages],
            parts=[dataclasses.replace(p, text=self.text(p.text)) for p in composition.parts],
        )

    def next_call(self, call: NextCall) -> NextCall:
        if not self.active:
            return call
        return dataclasses.replace(
            call,
            composition=self.composition(call.composition),
            report=dataclasses.replace(
                call.report,
                failures=[dataclasses.replace(f, error=self.text(f.error)) for f in call.report.failures],
            ),
            evicted=[self.message(m) for m in call.evicted],
            restored=[self.message(m) for m in call.restored],
        )

    def frame(self, frame: Frame) -> Frame:
        if not self.active:
            return frame
        return dataclasses.replace(
            frame,
            composition=self.composition(frame.composition),
            failures=self.rows(frame.failures, "error"),
            evicted=self.rows(frame.evicted, "text"),
            recalled=self.rows(frame.recalled, "text"),
            summary=None if frame.summary is None else self.text(frame.summary),
            recall_block=None if frame.recall_block is None else self.text(frame.recall_block),
        )


def evicted_messages(before: Sequence[Message], after: Sequence[Message]) -> list[Message]:
    """The conversation messages of ``before`` that ``after`` no longer holds (by content, in order).

    System prompts and what ctxlife inserted (summaries, recall blocks) are not conversation.
    """
    left = Counter(fingerprint(m) for m in after)
    out = []
    for message in before:
        if is_system(message) or is_inserted(message):
            continue
        key = fingerprint(message)
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(message)
    return out


# -- a replay's calls (ctxlife.replay.replay_session fills them, ctxlife.report draws them) ---------


@dataclass
class Frame:
    """One model call of a session replay: what would have been sent, and what the strategies did.

    Attributes:
        index: 0-based position among the replay's calls.
        label: ``"call N"``, ``"asked"`` (the ``--ask`` question) or ``"next call"`` (restored from the store).
        composition: the list sent, labelled part by part (:func:`ctxlife.inspection.compose`).
        unmanaged_tokens: what the conversation so far costs sent whole (system prompt included).
        tokens_before / tokens_after: the host's count before and after the strategies.
        actions: ``{"strategy", "what", **details}`` per recorded action (skips included).
        failures: ``{"strategy", "node", "error"}`` per strategy rolled back.
        evicted: the conversation messages the strategies left out of this call.
        summary: the text of the history summary this call's compaction wrote (None without one).
        recalled: ``{"seq", "role", "text", "score"}`` per passage a recall block brought back.
        recall_block: the recall block's text (None without one).
        restored: ``{"from_snapshot", "snapshot_covers", "from_records"}`` for a restore from the store.
        problems: why the list would be refused by the provider (empty when valid).
        source: :data:`RECORDED` (from the call's record: what was sent) or :data:`SIMULATED`.
    """

    index: int
    label: str
    composition: Composition
    unmanaged_tokens: int
    tokens_before: int
    tokens_after: int
    actions: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    evicted: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    recalled: list[dict[str, Any]] = field(default_factory=list)
    recall_block: str | None = None
    restored: dict[str, int] | None = None
    problems: list[str] = field(default_factory=list)
    source: str = SIMULATED

    @property
    def compacted(self) -> bool:
        """Whether a strategy cut the conversation at this call (a summary or a truncation)."""
        return bool(self.evicted) or self.summary is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "source": self.source,
            "unmanaged_tokens": self.unmanaged_tokens,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "actions": self.actions,
            "failures": self.failures,
            "evicted": self.evicted,
            "summary": self.summary,
            "recalled": self.recalled,
            "recall_block": self.recall_block,
            "restored": self.restored,
            "problems": self.problems,
            **self.composition.to_dict(),
        }


@dataclass
class SessionReplay:
    """A stored session call by call (:func:`ctxlife.replay.replay_session`): its calls as recorded
    (``source`` :data:`RECORDED`), or replayed under a config (:data:`SIMULATED`; ``note`` says why)."""

    session_id: str
    view: str
    store_url: str
    config: str
    context_window: int
    threshold: float
    encoding: str
    frames: list[Frame] = field(default_factory=list)
    messages: int = 0
    source: str = SIMULATED
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "note": self.note,
            "session_id": self.session_id,
            "view": self.view,
            "store": self.store_url,
            "config": self.config,
            "context_window": self.context_window,
            "threshold": self.threshold,
            "encoding": self.encoding,
            "messages": self.messages,
            "calls": [f.to_dict() for f in self.frames],
        }
