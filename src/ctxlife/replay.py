"""Dry runs: feed a recorded conversation through a config, call by call, without any model.

A *call point* is every place where the recording has an assistant message: the model was
called with everything before it. At each call point the managed context (what ctxlife
would have sent) is compared with the unmanaged one (everything so far). The model's reply
is then appended as recorded, tool results pass through the after-tool strategies first,
and the next call point follows. Used by ``ctxlife replay`` and by the benchmarks.

Input formats (:func:`load_conversations`): a JSON list of OpenAI-format messages; a
JSON object with ``"messages"``; a ``_raw.jsonl`` session history (one message per line);
tau-bench trajectory files (a list of objects with ``"traj"``, optionally gzipped).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxlife.config import Settings
from ctxlife.contexts import ToolCallContext
from ctxlife.errors import ConfigError, CtxlifeError
from ctxlife.events import redact_url
from ctxlife.host import Host
from ctxlife.inspection import (
    RECORDED,
    Frame,
    SessionReplay,
    Shown,
    check_view,
    compose,
    evicted_messages,
    host_on,
    next_context,
    require_window,
    scratch_session,
    simulated_because,
    stored_system_prompt,
)
from ctxlife.messages import (
    SUMMARY_PREFIX,
    calls_of,
    check_shape,
    content_text,
    inserted_text,
    is_inserted,
    is_recall_block,
    is_summary,
    pair_tool_results,
    role,
    text_of,
    validate,
)
from ctxlife.retention import NeedIndex, reused_arguments
from ctxlife.session import Session
from ctxlife.sessions.calls import sent_calls
from ctxlife.sessions.ids import SessionKey, validate_session_id, validate_view
from ctxlife.sessions.records import ADD, RawRecord, decode_record, fingerprint, materialize
from ctxlife.tokens import TokenCounter

#: How "facts kept" is defined wherever replay shows it (ctxlife.retention; never ctxlife's own extractor).
FACTS_KEPT_DEFINITION = (
    "facts kept = tool-call argument values the recorded agent re-used verbatim after reading them in a user "
    "turn or tool result, counted as kept when the value is in the context sent at the call that re-uses it"
)


class InputFileError(CtxlifeError):
    """A recorded conversation file cannot be read or has the wrong shape."""


@dataclass
class Conversation:
    name: str
    messages: list[dict[str, Any]]


@dataclass
class CallRow:
    """One model call of a replay."""

    index: int
    unmanaged_tokens: int
    managed_tokens: int
    messages: int
    actions: list[str]
    problems: list[str]
    facts_needed: int = 0
    facts_kept: int = 0


@dataclass
class ReplayResult:
    name: str
    context_window: int
    threshold: float
    rows: list[CallRow] = field(default_factory=list)
    encoding: str = ""
    window_source: str = ""
    facts_total: int = 0
    facts_kept: int = 0
    tool_tokens_saved: int = 0

    @property
    def unmanaged_total(self) -> int:
        return sum(r.unmanaged_tokens for r in self.rows)

    @property
    def managed_total(self) -> int:
        return sum(r.managed_tokens for r in self.rows)

    @property
    def peak_unmanaged(self) -> int:
        return max((r.unmanaged_tokens for r in self.rows), default=0)

    @property
    def peak_managed(self) -> int:
        return max((r.managed_tokens for r in self.rows), default=0)

    @property
    def compactions(self) -> int:
        return sum(
            1
            for r in self.rows
            for a in r.actions
            if a.startswith("llm_summary:compacted") or a.startswith("llm_summary:truncated")
        )

    @property
    def violations(self) -> int:
        return sum(1 for r in self.rows if r.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "context_window": self.context_window,
            "window_source": self.window_source,
            "threshold": self.threshold,
            "encoding": self.encoding,
            "facts_kept_definition": FACTS_KEPT_DEFINITION,
            "calls": [r.__dict__ for r in self.rows],
            "totals": {
                "calls": len(self.rows),
                "unmanaged_tokens": self.unmanaged_total,
                "managed_tokens": self.managed_total,
                "saved_share": round(1 - self.managed_total / self.unmanaged_total, 4) if self.unmanaged_total else 0.0,
                "peak_unmanaged": self.peak_unmanaged,
                "peak_managed": self.peak_managed,
                "compactions": self.compactions,
                "invalid_calls": self.violations,
                "facts_total": self.facts_total,
                "facts_kept": self.facts_kept,
                "tool_tokens_saved": self.tool_tokens_saved,
            },
        }


# -- loading ------------------------------------------------------------------------------


def load_conversations(path: str | Path) -> list[Conversation]:
    """Read a recording in any supported format; errors name the file and what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise InputFileError(f"{path} looks gzipped but cannot be decompressed: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputFileError(
            f"{path} is empty; expected a JSON list of messages, a _raw.jsonl history or tau-bench trajectories"
        )
    if path.name.endswith(".jsonl") or path.name.endswith(".jsonl.gz"):
        return _jsonl_conversations(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if "\n{" in text.strip() and text.lstrip().startswith("{"):
            return _jsonl_conversations(path, text)  # JSON lines without the suffix
        raise InputFileError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    return _conversations_from(path, data)


def _jsonl_conversations(path: Path, text: str) -> list[Conversation]:
    """A JSON-lines file of messages, or a session's ``_raw.jsonl``: one conversation per view."""
    lines = text.splitlines()
    views: dict[str, list[dict[str, Any]]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith("\n"):
                break  # a torn last line (a crash mid-write): skip it, as the session store does
            raise InputFileError(f"{path} line {number} is not JSON: {exc.msg}") from None
        try:
            record = decode_record(value)  # a stored record -> its message
        except ValueError:
            views.setdefault("", []).append(value)  # a plain message (not an object: _check names the line)
            continue
        views.setdefault(record.view, []).append(record.message)
    conversations = []
    for view, messages in views.items():
        _check(path, messages, "a JSON-lines history" + (f" (view {view!r})" if view else ""))
        conversations.append(Conversation(path.stem if not view else f"{path.stem} [{view}]", messages))
    if not conversations:
        _check(path, [], "a JSON-lines history")
    return conversations


def _conversations_from(path: Path, data: Any) -> list[Conversation]:
    if isinstance(data, dict):
        if "traj" in data:
            data = [data]
        elif "messages" in data:
            _check(path, data["messages"], 'the "messages" list')
            return [Conversation(path.stem, data["messages"])]
        else:
            raise InputFileError(
                f'{path}: a JSON object must have a "messages" list (or be a tau-bench trajectory with "traj")'
            )
    if not isinstance(data, list) or not data:
        raise InputFileError(
            f"{path}: expected a non-empty JSON list of messages or of tau-bench trajectories, "
            f"got {type(data).__name__ if data else 'an empty list'}"
        )
    if all(isinstance(item, dict) and "traj" in item for item in data):
        conversations = []
        for i, item in enumerate(data):
            _check(path, item["traj"], f"trajectory {i}")
            label = f"task {item['task_id']} trial {item.get('trial', 0)}" if "task_id" in item else f"trajectory {i}"
            conversations.append(Conversation(label, item["traj"]))
        return conversations
    _check(path, data, "the message list")
    return [Conversation(path.stem, data)]


def _check(path: Path, messages: Any, what: str) -> None:
    if isinstance(messages, list) and not messages:
        raise InputFileError(f"{path}: {what} is empty")
    try:
        check_shape(messages, where=what)
    except CtxlifeError as exc:
        raise InputFileError(f"{path}: {exc}") from None


# -- replaying ----------------------------------------------------------------------------


def call_points(messages: list[dict[str, Any]]) -> Iterator[int]:
    """Indices of the assistant messages: the model was called with everything before each."""
    for i, message in enumerate(messages):
        if role(message) == "assistant" and i > 0:
            yield i


def _tool_names(messages: list[dict[str, Any]]) -> dict[tuple[int, int | None], tuple[str, dict[str, Any]]]:
    """For each tool result: the (name, arguments) of the call it answers (paired by id, any format).

    Keyed by ``(message index, block index)``; the block index is None for a whole ``tool`` or
    ``function`` message, the index of the ``tool_result`` block in an Anthropic user message.
    """
    names: dict[tuple[int, int | None], tuple[str, dict[str, Any]]] = {}
    for i, message in enumerate(messages):
        calls = calls_of(message)
        if not calls:
            continue
        pairing = pair_tool_results(messages, i)
        for position, k in enumerate(pairing.results):
            if k is None:
                continue
            try:
                arguments = json.loads(calls[k].arguments or "{}")
            except (TypeError, ValueError):
                arguments = {}
            arguments = arguments if isinstance(arguments, dict) else {}
            names[pairing.result_at[position]] = (calls[k].name or "tool", arguments)
    return names


def _through_tool_policy(
    host: Host, message: dict[str, Any], i: int, tools: dict[Any, Any], context_window: int
) -> tuple[dict[str, Any], int]:
    """``message`` with each tool result it carries as the tool nodes leave it; the tokens saved."""
    counter = host.counter()
    saved = 0

    def apply(text: str, at: tuple[int, int | None]) -> str:
        nonlocal saved
        name, arguments = tools.get(at, ("tool", {}))
        ctx = ToolCallContext(tool_name=name, tool_input=dict(arguments), result=text)
        host.after_tool_call(ctx, context_window=context_window)
        if ctx.result != text and isinstance(ctx.result, str):
            saved += counter.count_text(text) - counter.count_text(ctx.result)
            return ctx.result
        return text

    content = message.get("content")
    if role(message) in ("tool", "function") and isinstance(content, str):
        shown = apply(content, (i, None))
        return ({**message, "content": shown} if shown is not content else message), saved
    if role(message) == "user" and isinstance(content, list):
        blocks = list(content)
        for k, block in enumerate(blocks):
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                continue
            inner = block.get("content")
            if isinstance(inner, str):
                shown = apply(inner, (i, k))
                if shown is not inner:
                    blocks[k] = {**block, "content": shown}
            elif (
                inner
                and isinstance(inner, list)
                and all(isinstance(b, dict) and b.get("type") == "text" for b in inner)
            ):
                text = content_text(inner)
                shown = apply(text, (i, k))
                if shown is not text:
                    blocks[k] = {**block, "content": [{"type": "text", "text": shown}]}
        if any(a is not b for a, b in zip(blocks, content, strict=True)):
            return {**message, "content": blocks}, saved
    return message, saved


def replay(
    conversation: Conversation,
    settings: Settings,
    *,
    context_window: int | None = None,
    model: str | None = None,
    session_id: str | None = None,
    plugins: Iterable[object] = (),
) -> ReplayResult:
    """Replay one conversation through ``settings``; nothing calls a model.

    ``context_window``/``model`` are explicit values: they beat the environment and the config
    (one precedence everywhere); without them the settings' values are used. The result records
    the window, threshold and encoding the strategies actually worked with.
    """
    host = Host(settings, context_window=context_window, model=model, session_id=session_id, plugins=tuple(plugins))
    try:
        if not host.context_window:
            raise ConfigError("replay needs a context window: pass --window N or set context_window in the config")
        result = _replay(conversation, host, host.context_window)
        if context_window:
            result.window_source = "--window"
        elif os.environ.get("CTXLIFE_CONTEXT_WINDOW"):
            result.window_source = "CTXLIFE_CONTEXT_WINDOW"
        else:
            result.window_source = f"the config ({settings.source})"
        return result
    finally:
        host.close()


def _replay(conversation: Conversation, host: Host, context_window: int) -> ReplayResult:
    recorded = conversation.messages
    counter = host.counter()
    tools = _tool_names(recorded)
    policy = host.implements("ctxlife_after_tool_call")
    result = ReplayResult(conversation.name, context_window, host.settings.threshold, encoding=counter.encoding_name)
    needs = NeedIndex(reused_arguments(recorded))
    live: list[dict[str, Any]] = []
    calls = set(call_points(recorded))
    for i, message in enumerate(recorded):
        if i in calls:
            unmanaged = counter.count_messages(recorded[:i])
            report = host.before_llm_call(live)
            problems = [str(p) for p in validate(live)]
            kept = needs.score_call(i, live)  # what was sent at the call that re-uses the values
            result.facts_total += kept.needs
            result.facts_kept += kept.kept
            result.rows.append(
                CallRow(
                    index=len(result.rows),
                    unmanaged_tokens=unmanaged,
                    managed_tokens=report.tokens_after,
                    messages=len(live),
                    actions=[f"{a.strategy}:{a.what}" for a in report.actions],
                    problems=problems,
                    facts_needed=kept.needs,
                    facts_kept=kept.kept,
                )
            )
        if policy:
            message, saved = _through_tool_policy(host, message, i, tools, context_window)
            result.tool_tokens_saved += saved
        live.append(message)
    return result


def context_text(messages: list[dict[str, Any]]) -> str:
    """All the text a model would read in a context, tool-call arguments included (any format)."""
    return "\n".join(text_of(m) for m in messages)


# -- replaying a stored session ---------------------------------------------------------------


def replay_session(
    settings: Settings,
    store: Any,
    session_id: str,
    *,
    view: str = "",
    ask: str | None = None,
    context_window: int | None = None,
    model: str | None = None,
    next_call: bool = False,
    simulate: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SessionReplay:
    """A stored session (one view) call by call: as recorded, else replayed through ``settings``.

    A session with call records (:mod:`ctxlife.sessions.calls`) shows each call exactly as it was
    sent (:func:`recorded_replay`; ``ask`` adds one simulated call at the end). Without them, or with
    ``simulate`` (a config tried on purpose), the session is replayed on a scratch copy, and the result says
    so (``source`` :data:`~ctxlife.inspection.SIMULATED`, ``note``): how the conversation is fed, docs/inspecting.md,
    "Every call". ``next_call`` adds the call the stored session itself would make next
    (:func:`ctxlife.inspection.next_context`). The original store is only read. ``progress(done, total)`` is called
    after each recorded call read, or each message replayed (``ctxlife report``'s progress bar).
    """
    validate_session_id(session_id)
    validate_view(view)
    if not simulate:
        found = recorded_replay(
            settings, store, session_id, view=view, context_window=context_window, model=model, progress=progress
        )
        if found is not None:
            if ask:
                found.frames.append(_simulated_next_frame(settings, store, session_id, view, found, ask, model))
            # What the report shows leaves the store: through the config's privacy filter, once.
            host = Host(settings, context_window=found.context_window or None)
            with Shown(host, session_id, view, owned=True) as privacy:
                found.frames = [privacy.frame(f) for f in found.frames]
            return found
    window = require_window(settings, context_window)
    check_view(store, session_id, view)
    records = store.current(session_id, view)
    conversation = [r.message for r in records]
    system = stored_system_prompt(store, session_id, view)
    prompt = [{"role": "system", "content": system}] if system else []
    # The replay records the conversation in order, one record per message: record N shows message N's time.
    times = [r.recorded_at for r in records]

    def recorded_at(record: RawRecord) -> float | None:
        return times[record.seq - 1] if 0 < record.seq <= len(times) else record.recorded_at

    with scratch_session(recorded_at=recorded_at, marks_of=store) as scratch:
        host = host_on(settings, scratch, context_window=window, model=model, session_id=session_id)
        try:
            counter = host.counter()
            result = SessionReplay(
                session_id,
                view,
                redact_url(store.url),
                settings.source,
                window,
                settings.threshold,
                counter.encoding_name,
                messages=len(conversation),
                note=simulated_because(settings, on_purpose=simulate),
            )
            tools = _tool_names(conversation)
            policy = host.implements("ctxlife_after_tool_call")
            with Session(SessionKey(session_id), host=host, view=view, system=system) as session:

                def call(new: list[dict[str, Any]], label: str, upto: list[dict[str, Any]]) -> None:
                    before = prompt + session.get_items() + new
                    sent = session.messages(*new)
                    report = session.last_report
                    assert report is not None
                    result.frames.append(
                        _frame(
                            len(result.frames),
                            label,
                            compose(sent, counter),
                            counter.count_messages(prompt + upto),
                            report,
                            evicted_messages(before, sent),
                            sent,
                            before,
                            scratch,
                            session_id,
                            counter,
                        )
                    )

                pending: list[dict[str, Any]] = []
                shown: list[dict[str, Any]] = []  # the conversation as the model saw it (tool policy applied)
                for i, message in enumerate(conversation):
                    if progress is not None:
                        progress(i, len(conversation))
                    if role(message) == "assistant" and (pending or i > 0):
                        call(pending, f"call {len(result.frames) + 1}", shown)
                        pending = []
                        session.record_reply(message)
                        shown.append(message)
                        continue
                    if policy:
                        message, _ = _through_tool_policy(host, message, i, tools, window)
                    pending.append(message)
                    shown.append(message)
                if ask:
                    question = {"role": "user", "content": ask}
                    call([*pending, question], "asked", [*shown, question])
                elif pending:
                    call(pending, f"call {len(result.frames) + 1}", shown)
                if progress is not None:
                    progress(len(conversation), len(conversation))
            if next_call:
                result.frames.append(_simulated_next_frame(settings, store, session_id, view, result, None, model))
            # What the report shows leaves the store: through the config's privacy filter, once.
            filtered = Shown(host, session_id, view)
            result.frames = [filtered.frame(f) for f in result.frames]
        finally:
            host.close()
    return result


def _simulated_next_frame(
    settings: Settings,
    store: Any,
    session_id: str,
    view: str,
    result: SessionReplay,
    ask: str | None,
    model: str | None,
) -> Frame:
    """The (simulated) next call of the stored session, restored from a copy of it; with ``ask``, the question."""
    found = next_context(
        settings,
        store,
        session_id,
        view=view,
        ask=ask,
        context_window=result.context_window,
        model=model,
        filtered=False,  # (the caller filters every frame once)
    )
    counter = TokenCounter(model or settings.agent_model)
    conversation = [r.message for r in store.current(session_id, view)]
    system = stored_system_prompt(store, session_id, view)
    prompt = [{"role": "system", "content": system}] if system else []
    asked = [{"role": "user", "content": ask}] if ask else []
    frame = _frame(
        len(result.frames),
        "asked (simulated)" if ask else "next call (simulated)",
        found.composition,
        counter.count_messages(prompt + conversation + asked),
        found.report,
        found.evicted,
        found.composition.messages,
        found.restored,
        store,
        session_id,
        counter,
    )
    frame.restored = {
        "from_snapshot": found.restored_from_snapshot,
        "snapshot_covers": found.snapshot_covers,
        "from_records": found.restored_from_records,
    }
    return frame


def recorded_replay(
    settings: Settings,
    store: Any,
    session_id: str,
    *,
    view: str = "",
    context_window: int | None = None,
    model: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SessionReplay | None:
    """The view's calls exactly as recorded (one :class:`Frame` per call record), or None when it has none.

    Nothing is run again: the window and model are the recorded ones unless given. A call's summary is one not
    in the previous call's list; its evicted messages, those the previous call sent and this one does not.
    ``progress(done, total)`` is called after each call.
    """
    calls = sent_calls(store, session_id, view)
    if not calls:
        return None
    last = calls[-1].doc
    window = int(context_window or last.get("window") or settings.context_window or 0)  # what the run used
    counter = TokenCounter(model or last.get("model") or settings.agent_model or None)
    records = sorted(store.read_records(session_id, view=view, strict=False), key=lambda r: r.seq)
    result = SessionReplay(
        session_id,
        view,
        redact_url(store.url),
        settings.source,
        window,
        (int(last.get("budget") or 0) / window) if window and last.get("budget") else settings.threshold,
        counter.encoding_name,
        messages=len(materialize(records)),
        source=RECORDED,
        note=f"{len(calls)} call(s) as recorded: exactly what the model was sent at each call",
    )
    # Replies recorded before the first call record: calls made before call records existed (or
    # while the view's messages were not recorded): not shown, and said so.
    first_at = calls[0].doc.get("at")
    earlier = sum(
        1
        for r in records
        if r.op == ADD
        and role(r.message) == "assistant"
        and r.recorded_at is not None
        and isinstance(first_at, (int, float))
        and r.recorded_at < first_at
    )
    if earlier:
        result.note += (
            f"; {earlier} earlier call(s) have no call record (made before call records existed) and are "
            "not shown: --simulate replays the whole session"
        )
    previous: list[dict[str, Any]] = []
    previous_slots: list[int | None] = []
    for call in calls:
        sent = call.messages
        before, after = call.tokens
        upto = materialize([r for r in records if r.seq <= call.head])
        # the system prompt: a system message sent that is neither recorded (no slot) nor ctxlife's (a summary)
        system = [
            m
            for m, slot in zip(sent, call.slots, strict=True)
            if slot is None and role(m) == "system" and not is_inserted(m)
        ]
        kept = set(call.slots)
        alive = {r.slot for r in upto}
        evicted = [
            m
            for m, slot in zip(previous, previous_slots, strict=True)
            if slot is not None and slot not in kept and slot in alive
        ]
        frame = Frame(
            len(result.frames),
            f"call {call.number}",
            compose(sent, counter),
            counter.count_messages(system[:1] + [r.message for r in upto]),
            before,
            after,
            call.actions,
            call.failures,
            [_shown(m, counter) for m in evicted],
            problems=[str(p) for p in validate(sent)],
            source=RECORDED,
        )
        _fill_inserted(frame, sent, previous, store, session_id)
        result.frames.append(frame)
        previous, previous_slots = sent, call.slots
        if progress is not None:
            progress(len(result.frames), len(calls))
    return result


def _actions(report: Any) -> list[dict[str, Any]]:
    return [{"strategy": a.strategy, "what": a.what, **a.details} for a in report.actions]


def _shown(message: dict[str, Any], counter: Any) -> dict[str, Any]:
    return {"role": role(message) or "?", "text": text_of(message), "tokens": counter.count_message(message)}


def _frame(
    index: int,
    label: str,
    composition: Any,
    unmanaged: int,
    report: Any,
    evicted: list[dict[str, Any]],
    sent: list[dict[str, Any]],
    before: list[dict[str, Any]],
    store: Any,
    session_id: str,
    counter: Any,
) -> Frame:
    frame = Frame(
        index,
        label,
        composition,
        unmanaged,
        report.tokens_before,
        report.tokens_after,
        _actions(report),
        [f.__dict__ for f in report.failures],
        [_shown(m, counter) for m in evicted],
        problems=[str(p) for p in validate(sent)],
    )
    _fill_inserted(frame, sent, before, store, session_id)
    return frame


def _fill_inserted(
    frame: Frame,
    sent: list[dict[str, Any]],
    before: list[dict[str, Any]],
    store: Any,
    session_id: str,
) -> None:
    """The summary a compaction wrote at this call, and the passages a recall block brought back.

    The passages' records are read from ``store`` (recall searches every view's records, not only the
    replayed view's), leniently as every replay reads (a damaged record shows as an unknown passage,
    not a failed replay).
    """
    had = {fingerprint(m) for m in before if is_summary(m)}
    for message in sent:
        if is_summary(message) and fingerprint(message) not in had:
            frame.summary = inserted_text(content_text(message)).removeprefix(SUMMARY_PREFIX).strip()
        elif is_recall_block(message):
            frame.recall_block = content_text(message)
    recalled = next((a for a in frame.actions if a["what"] == "recalled"), None)
    if recalled is None:
        return
    seqs = [int(s) for s in recalled.get("seqs", [])]
    scores = list(recalled.get("scores", []))
    records: dict[int, Any] = {}
    if store is not None and seqs:
        wanted = set(seqs)
        read = store.read_records(session_id, min(seqs) - 1, strict=False)
        records = {r.seq: r for r in read if r.seq in wanted}
    for k, seq in enumerate(seqs):
        record = records.get(seq)
        frame.recalled.append(
            {
                "seq": seq,
                "role": (role(record.message) or "?") if record is not None else "?",
                "text": text_of(record.message) if record is not None else "",
                "score": scores[k] if k < len(scores) else None,
            }
        )
