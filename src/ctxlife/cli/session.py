"""The ``ctxlife session`` command (list, show, export, erase, rm, search) and ``ctxlife store``.

Options, exit codes and session ids: docs/sessions.md, "The ``ctxlife session`` command" (every option:
docs/cli.md); the privacy filter on what ``show``, ``export`` and ``search`` print (the
``ctxlife_filter_text`` hook, :class:`Shown`): docs/security.md. Without ``--store`` the
``default_store_url`` given by the caller (the config's ``store``) is used, and failing that
:data:`ctxlife.sessions.DEFAULT_STORE_URL`. Exit code ``1`` means "no such session" and nothing else,
so a script can take it as "already gone". The stores load when a command opens one, and ``rich``'s
tables when a command prints one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from ctxlife.errors import ConfigError, CtxlifeError
from ctxlife.inspection import (
    RECORDED,
    Composition,
    NextCall,
    Shown,
    last_recorded_call,
    next_context,
    pick_view,
    simulated_because,
)
from ctxlife.messages import SUMMARY_PREFIX, content_text, inserted_text, is_summary, restore_inserted
from ctxlife.sessions import DEFAULT_STORE_URL, open_store, session_key
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.durations import parse_duration
from ctxlife.sessions.ids import original_session_id, validate_session_id, validate_view
from ctxlife.sessions.records import materialize

__all__ = ["add_session_parser", "key_of", "parts_table", "run_session_command"]

TokenCounter = Callable[[list[dict[str, Any]]], int]

_EXIT_OK, _EXIT_NOT_FOUND, _EXIT_ERROR = 0, 1, 2


def add_session_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``session`` command and its subcommands (docs/cli.md, "ctxlife session") to
    ``subparsers`` (what ``ArgumentParser.add_subparsers()`` returns); return the ``session`` parser. The parsed
    namespace's ``session_command`` names the subcommand, ``store`` the URL (or ``None``)."""
    config_help = "config whose store to use (default: ./ctxlife.toml, then [tool.ctxlife] in ./pyproject.toml)"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="session store URL, e.g. file://workspace/sessions, sqlite:///sessions.db, "
        "redis://127.0.0.1:6379/0 (default: the config's store)",
    )
    # SUPPRESS: a subcommand's default must not overwrite a --config given before the subcommand.
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=config_help)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "session",
        help="list, show, export or remove stored sessions",
        description="Inspect and manage the sessions in a session store.",
    )
    parser.add_argument("--config", metavar="FILE", default=None, help=config_help)
    sub = parser.add_subparsers(dest="session_command", metavar="COMMAND")
    sub.required = True
    sub.add_parser(
        "list",
        parents=[common],
        help="list the sessions in the store",
        description="List every session: id, raw message count, last snapshot update.",
    )
    show = sub.add_parser(
        "show",
        parents=[common],
        help="show one session: messages, tokens, summary, last update",
        description="Show a session's message counts, token count, summary and last update.",
    )
    show.add_argument("session_id", metavar="ID", help="the session id")
    show.add_argument("--view", metavar="VIEW", default=None, help="show only this view (an agent's or task's lane)")
    add_context_arguments(show)  # --context: the list the next call would send
    export = sub.add_parser(
        "export",
        parents=[common],
        help="print a session's snapshot (or raw history) as JSON",
        description="Print the session's snapshot as JSON to stdout; with --raw, its raw history "
        "(a JSON array of messages); with --calls, what each model call sent.",
    )
    export.add_argument("session_id", metavar="ID", help="the session id")
    export.add_argument(
        "--raw", action="store_true", help="export the conversation from the raw history instead (edits applied)"
    )
    export.add_argument(
        "--all",
        action="store_true",
        dest="log",
        help="export the whole event log: every record with its seq, view, op (add/replace/remove) and target, "
        "superseded and removed messages included (for audit)",
    )
    export.add_argument(
        "--calls",
        action="store_true",
        help="export the call records: per model call (of --view), the exact list it sent, its tokens and what the "
        "strategies did",
    )
    export.add_argument(
        "--view", metavar="VIEW", default="", help="the view whose snapshot to export (default: the default view)"
    )
    erase = sub.add_parser(
        "erase",
        parents=[common],
        help="delete messages for privacy (raw history, snapshots, tool-output blobs, recall index)",
        description="Overwrite messages everywhere the store keeps them and drop them from the conversation: "
        "by sequence number (--seq, see `export --all`) or every message matching a regular expression "
        "(--match; the matches are also scrubbed from summaries). Prints the sequence numbers erased.",
    )
    erase.add_argument("session_id", metavar="ID", help="the session id")
    which = erase.add_mutually_exclusive_group(required=True)
    which.add_argument("--seq", metavar="N", type=int, nargs="+", help="the sequence numbers of the messages")
    which.add_argument("--match", metavar="REGEX", help="erase every message whose text matches this expression")
    rm = sub.add_parser(
        "rm",
        parents=[common],
        help="delete a session, the sessions idle longer than a duration, or all of them",
        description="Delete sessions (snapshots, raw history, call records and blobs): one by id, those idle for "
        "longer than "
        "--older-than, or --all (with --yes). --dry-run only lists them.",
    )
    rm.add_argument("session_id", metavar="ID", nargs="?", default=None, help="the session id")
    rm.add_argument(
        "--older-than",
        metavar="DURATION",
        default=None,
        help="delete every session not written for longer than DURATION (30d, 12h, 90m, 2w or seconds)",
    )
    rm.add_argument("--all", action="store_true", help="delete every session in the store (needs --yes)")
    rm.add_argument("--yes", action="store_true", help="confirm --all")
    rm.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    # lazy: the recall package loads its index (sqlite3, rich); importing this module stays light
    from ctxlife.cli.search import add_search_parser

    add_search_parser(sub, common)  # the history search (recall)
    return parser


def add_store_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``store`` command (``store migrate URL``) to ``subparsers``; returns its parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "store",
        help="operate on a session store itself (schema migrations)",
        description="Operations on a session store as a whole.",
    )
    sub = parser.add_subparsers(dest="store_command", metavar="COMMAND")
    sub.required = True
    migrate = sub.add_parser(
        "migrate",
        help="bring a store's schema to this ctxlife's version (a deploy step, before starting workers)",
        description="Bring the store's schema to the version this ctxlife writes, under the store's own lock "
        "(several deploys at once migrate once). Stores without a schema step (file, sqlite, redis) have "
        "nothing to do. Prints the versions before and after.",
    )
    migrate.add_argument("url", metavar="URL", help="the store URL, e.g. postgres://user@db:5432/app")
    return parser


def run_store_command(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run a parsed ``store`` command; a store error propagates (the CLI prints it, exit code 1)."""
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.sessions import open_store

    out = out or sys.stdout
    with open_store(args.url) as store:
        migrate = getattr(store, "migrate", None)
        if migrate is None:
            print(f"{store.url}: nothing to migrate ({type(store).__name__} upgrades itself when opened)", file=out)
            return _EXIT_OK
        before, after = migrate()
        if before == after:
            print(f"{store.url}: schema at version {after}, nothing to do", file=out)
        else:
            print(f"{store.url}: schema migrated from {before or 'none'} to version {after}", file=out)
    return _EXIT_OK


def run_session_command(
    args: argparse.Namespace,
    default_store_url: str | None,
    *,
    count_tokens: TokenCounter | None = None,
    token_encoding: str | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    index_dirs: Sequence[str | Path] = (),
) -> int:
    """Run the ``session`` subcommand parsed into ``args`` (by :func:`add_session_parser`'s parser); return
    the exit code.

    ``default_store_url``: the store without ``--store`` (the config's). ``index_dirs``: folders holding recall
    indexes outside the store (the config's ``[recall] index_dir``): ``rm`` and ``erase`` delete a session's index
    there too. ``count_tokens`` (``f(messages) -> int``): ``show`` then reports the snapshot's tokens, with
    ``token_encoding`` beside them.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    command = getattr(args, "session_command", None)
    url = getattr(args, "store", None) or default_store_url or DEFAULT_STORE_URL
    from ctxlife.cli.search import search_command  # lazy: as in add_session_parser

    handlers = {"list": _list, "show": _show, "export": _export, "erase": _erase, "rm": _rm, "search": search_command}
    if command in ("rm", "erase"):
        handlers[command] = _dropping_indexes(handlers[command], index_dirs)
    handler = handlers.get(command or "")
    if handler is None:
        err.write(f"error: unknown session command {command!r}; use one of: {', '.join(handlers)}\n")
        return _EXIT_ERROR
    try:
        with open_store(url) as store:
            if getattr(args, "session_id", None) is not None:
                args.session_id = key_of(store, args.session_id)
                if command != "rm":  # an erase killed before it finished is completed before anything is read
                    store.finish_erase(args.session_id, replacing=command == "erase")
            return handler(store, args, out, err, count_tokens, token_encoding)
    except BrokenPipeError:
        raise  # the reader stopped (`| head`): not an error of the store (see cli.main)
    except (CtxlifeError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return _EXIT_ERROR


def _dropping_indexes(handler: Callable[..., int], index_dirs: Sequence[str | Path]) -> Callable[..., int]:
    """``handler`` (rm, erase), then the recall indexes of the sessions it touched deleted from
    ``index_dirs`` (outside the store, so its delete and erase cannot reach them)."""

    def run(store: Any, args: argparse.Namespace, *rest: Any) -> int:
        before = {i.session_id for i in store.list_sessions()} if args.session_id is None else {args.session_id}
        code = handler(store, args, *rest)
        if code == _EXIT_OK and not getattr(args, "dry_run", False):
            after = {i.session_id for i in store.list_sessions()} if args.session_id is None else set()
            # lazy: the recall package loads sqlite3 and its index; only rm and erase need it
            from ctxlife.recall import remove_index

            for sid in before - after if args.session_id is None else before:
                for folder in index_dirs:
                    remove_index(folder, sid)
        return code

    return run


def console_on(out: IO[str] | None = None, *, width: int | None = None, highlight: bool = False) -> Any:
    """The rich console every command prints with: on ``out`` (default stdout), ``width`` columns
    when it is a file or a pipe (a table is not cut to 80)."""
    from rich.console import Console  # lazy: rich's console loads only when something is printed

    console = Console(file=out, highlight=highlight, soft_wrap=False)
    if width is not None and not console.is_terminal:
        console.width = width
    return console


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _not_found(store: Any, sid: str, err: IO[str]) -> int:
    sid = _shown(sid)
    err.write(f"error: no session {sid!r} in {store.url}; `ctxlife session list` shows the sessions\n")
    return _EXIT_NOT_FOUND


def key_of(store: Any, typed: str) -> str:
    """The key of the session ``typed`` names: the id as the app passed it, else a key typed as it is stored."""
    key = session_key(typed)
    if key != typed and _is_plain_key(typed):
        stored = {info.session_id for info in store.list_sessions()}
        if key not in stored and typed in stored:
            return typed  # no session has that id, but one has that key (a file name copied from the store)
    return key


def _is_plain_key(text: str) -> bool:
    try:
        validate_session_id(text)
    except CtxlifeError:
        return False
    return True


def _shown(key: str) -> str:
    """A session as ``list`` and the messages show it: the id it was made from (see ``session_key``)."""
    return original_session_id(key)


def _list(store: Any, args: argparse.Namespace, out: IO[str], err: IO[str], *_: Any) -> int:
    # lazy: rich's tables load only when a table is printed
    from rich.table import Table
    from rich.text import Text

    sessions = store.list_sessions()
    console = console_on(out)
    if not sessions:
        console.print(f"No sessions in {store.url}", markup=False)
        return _EXIT_OK
    table = Table(title=f"Sessions in {store.url}", title_justify="left")
    table.add_column("Session")
    table.add_column("Raw messages", justify="right")
    table.add_column("Last snapshot")
    for info in sessions:
        table.add_row(Text(_shown(info.session_id)), str(info.message_count), _when(info.updated_at))
    console.print(table)
    return _EXIT_OK


def _views(store: Any, sid: str) -> dict[str, int]:
    """``{view: record count}`` of a session's raw history, the default view first."""
    counts: dict[str, int] = {"": 0}
    for record in store.read_records(sid, strict=False):
        counts[record.view] = counts.get(record.view, 0) + 1
    return counts


def current_summary(snapshot: Any) -> str | None:
    """The text of the newest history summary in a snapshot (the one ``llm_summary`` inserted), or None.

    Its inserted messages are re-marked first (:func:`~ctxlife.messages.restore_inserted`); a ``"summary"`` entry of
    the snapshot's meta is the fallback.
    """
    restore_inserted(snapshot.messages, snapshot.meta.get("inserted"))
    found = [m for m in snapshot.messages if is_summary(m)]
    if found:
        return inserted_text(content_text(found[-1])).removeprefix(SUMMARY_PREFIX).strip()
    summary = snapshot.meta.get("summary")
    if summary is None:
        return None
    return summary if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False)


def _show(
    store: Any,
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    count_tokens: TokenCounter | None,
    token_encoding: str | None,
) -> int:
    sid = args.session_id
    only = getattr(args, "view", None)
    if only is not None:
        validate_view(only)
    if wants_context(args):
        return show_context(store, args, out)
    raw_count = store.head(sid)
    counts = _views(store, sid) if raw_count else {"": 0}
    if only is not None:
        counts = {only: counts.get(only, 0)}
    snapshots = {view: store.load_snapshot(sid, view) for view in counts}
    if raw_count == 0 and all(snap is None for snap in snapshots.values()):
        return _not_found(store, sid, err)
    with Shown.from_config(args, sid, "show") as shown:
        table = _show_table(store, sid, only, raw_count, counts, snapshots, shown, count_tokens, token_encoding)
    console_on(out).print(table)
    return _EXIT_OK


def _show_table(
    store: Any,
    sid: str,
    only: str | None,
    raw_count: int,
    counts: dict[str, int],
    snapshots: dict[str, Any],
    shown: Shown,
    count_tokens: TokenCounter | None,
    token_encoding: str | None,
) -> Any:
    # lazy: rich's tables load only when a table is printed
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Session", Text(_shown(sid)))
    table.add_row("Store", Text(store.url))
    table.add_row("Raw messages", str(raw_count))
    calls = store.read_calls(sid, only)
    table.add_row(
        "Recorded calls",
        f"{len(calls)} (what each call sent: --context, export --calls, ctxlife report)"
        if calls
        else "none (--context and ctxlife report simulate this session)",
    )
    named = [view for view in counts if view]
    if named and only is None:
        table.add_row(
            "Views", Text(", ".join(f"{v or '(default)'} ({n})" for v, n in counts.items() if n or snapshots[v]))
        )
    for view, snapshot in snapshots.items():
        if view == "" and snapshot is None and counts[view] == 0 and named:
            continue  # a multi-agent session whose default view is unused
        if view or only is not None:
            table.add_row("", "")
            table.add_row("View", Text(view or "(default)"))
            table.add_row("View raw messages", str(counts[view]))
        if snapshot is None:
            table.add_row("Snapshot", "none")
            continue
        table.add_row("Context messages", str(len(snapshot.messages)))
        if count_tokens is not None:
            try:
                tokens = str(count_tokens(snapshot.messages))
            except Exception as exc:  # noqa: BLE001 - a broken counter must not hide the rest
                tokens = f"unavailable ({type(exc).__name__}: {exc})"
            label = f"Context tokens ({token_encoding})" if token_encoding else "Context tokens"
            table.add_row(label, Text(tokens))
        table.add_row("Snapshot covers", f"up to raw message {snapshot.raw_length}")
        table.add_row("Last update", _when(snapshot.updated_at))
        table.add_row("Format version", str(snapshot.format_version))
        summary = current_summary(snapshot)
        if summary is not None:
            summary = shown.text(summary, view)
        table.add_row("Summary", Text(summary) if summary is not None else "none (not compacted yet)")
        others = sorted(k for k in snapshot.meta if k not in ("summary", "inserted"))
        if others:
            table.add_row("Meta keys", Text(", ".join(others)))
    return table


def _write_json(out: IO[str], value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: fall back to \u escapes (same JSON value)
        text = json.dumps(value, ensure_ascii=True, indent=2) + "\n"
        data = text.encode("ascii")
    buffer = getattr(out, "buffer", None)
    if buffer is not None:  # JSON is UTF-8 whatever the terminal's locale
        out.flush()
        buffer.write(data)
        buffer.flush()
    else:
        out.write(text)


def _export(store: Any, args: argparse.Namespace, out: IO[str], err: IO[str], *_: Any) -> int:
    sid = args.session_id
    if getattr(args, "calls", False):
        from ctxlife.sessions.calls import sent_calls  # lazy: the CLI builds its parser from this module

        calls = sent_calls(store, sid, getattr(args, "view", "") or "")
        if not calls and not store.head(sid):
            return _not_found(store, sid, err)
        _write_json(out, [_call_doc(call) for call in calls])
        return _EXIT_OK
    if args.raw or getattr(args, "log", False):
        records = store.read_records(sid)
        if not records and store.load_snapshot(sid) is None:
            return _not_found(store, sid, err)
        with Shown.from_config(args, sid, "export") as shown:
            if getattr(args, "log", False):
                _write_json(out, [_record_doc(r, shown) for r in records])
            else:
                views = sorted({r.view for r in records})
                current = sorted(
                    (r for view in views for r in materialize([x for x in records if x.view == view])),
                    key=lambda r: r.seq,
                )
                _write_json(out, [shown.message(r.message, r.view) for r in current])
        return _EXIT_OK
    snapshot = store.load_snapshot(sid, getattr(args, "view", "") or "")
    if snapshot is None:
        if store.head(sid):
            err.write(f"error: session {_shown(sid)!r} has no snapshot yet, only raw history; use --raw\n")
        else:
            return _not_found(store, sid, err)
        return _EXIT_NOT_FOUND
    doc = snapshot.to_dict()
    with Shown.from_config(args, sid, "export") as shown:
        doc["messages"] = [shown.message(m, snapshot.view) for m in doc.get("messages", [])]
        doc["meta"] = shown.value(doc.get("meta", {}), snapshot.view)  # strategies keep text there too
    _write_json(out, doc)
    return _EXIT_OK


def _record_doc(record: Any, shown: Shown) -> dict[str, Any]:
    doc: dict[str, Any] = {"seq": record.seq, "view": record.view, "op": record.op}
    if record.target is not None:
        doc["target"] = record.target
    doc["at"] = record.recorded_at
    if record.erased:
        doc["erased"] = True
    doc["message"] = shown.message(record.message, record.view)
    return doc


def _call_doc(call: Any) -> dict[str, Any]:
    doc = call.doc
    keys = ("at", "head", "tokens", "window", "budget", "model", "actions", "failures")
    return {
        "call": call.number,
        "n": call.record.n,
        "view": call.record.view,
        **{k: doc.get(k) for k in keys},
        "slots": call.slots,
        "messages": call.messages,
    }


def _erase(store: Any, args: argparse.Namespace, out: IO[str], err: IO[str], *_: Any) -> int:
    sid = args.session_id
    if not store.head(sid):
        return _not_found(store, sid, err)
    if args.match is not None:
        try:
            erased = store.erase_matching(sid, args.match)
        except re.error as exc:
            err.write(f"error: --match {args.match!r} is not a regular expression: {exc}\n")
            return _EXIT_ERROR
    else:
        erased = store.erase(sid, args.seq)
    out.write(f"erased {len(erased)} message(s) of session {_shown(sid)}: {' '.join(map(str, erased)) or '-'}\n")
    return _EXIT_OK


def _last_activity(store: Any, info: Any) -> float | None:
    """When a session was last written: what the store knows, else its newest snapshot or record."""
    if info.last_active is not None:
        return float(info.last_active)
    times = [info.updated_at] if info.updated_at is not None else []
    if info.message_count:
        last = store.read_records(info.session_id, after_seq=info.message_count - 1, strict=False)
        times += [r.recorded_at for r in last if r.recorded_at is not None]
    return max(times) if times else None


def _rm(store: Any, args: argparse.Namespace, out: IO[str], err: IO[str], *_: Any) -> int:
    sid = args.session_id
    older = getattr(args, "older_than", None)
    everything = getattr(args, "all", False)
    dry = getattr(args, "dry_run", False)
    if sum((sid is not None, older is not None, everything)) != 1:
        err.write("error: session rm takes one of: a session ID, --older-than DURATION, or --all (with --yes)\n")
        return _EXIT_ERROR
    if sid is not None:
        if dry:
            found = store.head(sid) > 0 or store.load_snapshot(sid) is not None
            if not found:
                return _not_found(store, sid, err)
            out.write(f"would delete session {_shown(sid)!r} from {store.url}\n")
            return _EXIT_OK
        if not store.delete(sid):
            return _not_found(store, sid, err)
        out.write(f"deleted session {_shown(sid)!r} from {store.url}\n")
        return _EXIT_OK
    infos = store.list_sessions()
    if older is not None:
        try:
            limit = parse_duration(older)
        except ValueError as exc:
            err.write(f"error: --older-than: {exc}\n")
            return _EXIT_ERROR
        cutoff = time.time() - limit
        chosen, unknown = [], []
        for info in infos:
            last = _last_activity(store, info)
            if last is None:
                unknown.append(info.session_id)
            elif last < cutoff:
                chosen.append(info.session_id)
        if unknown:
            err.write(
                f"note: kept {len(unknown)} session(s) whose last activity the store does not know: "
                f"{', '.join(unknown)}\n"
            )
    else:
        chosen = [info.session_id for info in infos]
        if not dry and not args.yes:
            err.write(
                f"error: --all would delete {len(chosen)} session(s) from {store.url}; add --yes to delete them "
                f"(or --dry-run to list them)\n"
            )
            return _EXIT_ERROR
    verb = "would delete" if dry else "deleted"
    for name in chosen:
        if not dry:
            store.delete(name)
        out.write(f"{verb} session {_shown(name)!r}\n")
    out.write(f"{verb} {len(chosen)} session(s) from {store.url}\n")
    return _EXIT_OK


# -- session show --context ---------------------------------------------------------------------


def print_next_call(call: NextCall, out: Any, *, width: int = 160) -> None:
    """Print a :class:`NextCall` as a table (part, role, tokens, text) with the totals per part kind."""
    from rich.text import Text  # lazy: rich loads only when a table is printed

    console = console_on(out, width=max(width, 60))
    comp = call.composition
    budget = int(call.threshold * call.context_window)
    view = f" view {call.view!r}" if call.view else ""
    if call.source == RECORDED:
        what = f"Call {call.call_number} of session {_shown(call.session_id)!r}{view} in {call.store_url}, as recorded"
        restored = call.note
    else:
        what = f"Next call of session {_shown(call.session_id)!r}{view} in {call.store_url} (config {call.config})"
        restored = (
            f"restored {call.restored_from_snapshot} message(s) from the snapshot (covers raw message "
            f"{call.snapshot_covers}) + {call.restored_from_records} record(s) after it"
            if call.restored_from_snapshot
            else f"restored {call.restored_from_records} record(s) (no snapshot)"
        )
    if call.source != RECORDED and call.note:
        console.print(Text(call.note, style="bold"))
    console.print(
        Text(
            f"{what}: {len(comp.messages)} messages, {comp.total:,} tokens ({comp.encoding}) of a "
            f"{call.context_window:,} window (threshold line {budget:,}); {restored}"
        )
    )
    if call.asked:
        console.print(Text(f"with the question: {call.asked}"))
    console.print(parts_table(comp))
    totals = ", ".join(f"{kind} {tokens:,}" for kind, tokens in comp.tokens_by_kind().items())
    console.print(Text(f"Tokens by part: {totals}; reply priming {comp.priming}; total {comp.total:,}"))
    acted = [f"{a.strategy}:{a.what}" for a in call.report.actions if a.what != "skipped"]
    if acted:
        console.print(Text(f"Strategies: {', '.join(acted)}"))
    if call.evicted:
        console.print(Text(f"Left out of this call by the strategies: {len(call.evicted)} message(s)"))
    for failure in call.report.failures:
        console.print(Text(f"FAILED: {failure.strategy} at {failure.node}: {failure.error}", style="red"))


def parts_table(composition: Composition, title: str | None = None) -> Any:
    """A table of a list sent, part by part: index, part kind, role, tokens, the text (cut at 160)."""
    # lazy: rich's tables load only when a table is printed
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for column in ("#", "part", "role", "tokens", "text"):
        table.add_column(column, justify="right" if column in ("#", "tokens") else "left", overflow="fold")
    for part in composition.parts:
        preview = " ".join(part.text.split())
        preview = preview if len(preview) <= 160 else preview[:157] + "..."
        table.add_row(str(part.index), part.kind, part.role, f"{part.tokens:,}", Text(preview))
    return table


def add_context_arguments(parser: Any) -> None:
    """Add ``--context``, ``--ask``, ``--window`` and ``--model`` to ``ctxlife session show``."""
    parser.add_argument(
        "--context",
        action="store_true",
        help="show the exact list the last model call sent (its call record), each part with its token count; "
        "with --ask or --simulate, or for a session without call records: the list the next call would send "
        "(restored and run through the config's strategies on a copy of the session), marked SIMULATED",
    )
    parser.add_argument(
        "--ask", metavar="TEXT", default=None, help="with --context: the next user message (default: none)"
    )
    parser.add_argument(
        "--window", type=int, default=None, metavar="N", help="with --context: the context window in tokens"
    )
    parser.add_argument("--model", default=None, help="with --context: the model name (picks the tokenizer)")
    parser.add_argument("--json", action="store_true", help="with --context: print JSON")
    parser.add_argument(
        "--simulate",
        action="store_true",
        default=None,
        help="with --context: run the config's strategies for the next call instead of showing the last "
        "recorded call (what the model was sent)",
    )


def wants_context(args: Any) -> bool:
    """Whether ``session show`` was asked for the next call's context (``--ask`` etc. only go with ``--context``)."""
    if getattr(args, "context", False):
        return True
    given = [f"--{name}" for name in ("ask", "window", "model", "simulate") if getattr(args, name, None) is not None]
    given += ["--json"] if getattr(args, "json", False) else []
    if given:
        raise ConfigError(f"{', '.join(given)} go with --context (the next call's list): add --context")
    return False


def show_context(store: SessionStore, args: Any, out: Any) -> int:
    """``ctxlife session show ID --context``: print the last recorded call (:func:`last_recorded_call`), else
    (``--ask``, ``--simulate``, no call records) :func:`next_context`, marked simulated (exit code)."""
    # lazy: the CLI builds its parser from this module; config loads per command
    from ctxlife.config import load_settings

    settings = load_settings(getattr(args, "config", None))
    view = pick_view(store, args.session_id, getattr(args, "view", None))
    found = None
    if getattr(args, "ask", None) is None and not getattr(args, "simulate", None):
        found = last_recorded_call(settings, store, args.session_id, view=view, model=getattr(args, "model", None))
    if found is not None:  # what is shown leaves the store: through the config's privacy filter
        from ctxlife.host import Host  # lazy: the CLI builds its parser from this module

        with Shown(Host(settings), args.session_id, view, owned=True) as privacy:
            found = privacy.next_call(found)
    call = found or next_context(
        settings,
        store,
        args.session_id,
        view=view,
        ask=getattr(args, "ask", None),
        context_window=getattr(args, "window", None),
        model=getattr(args, "model", None),
    )
    if found is None and getattr(args, "ask", None) is None and not getattr(args, "simulate", None):
        call.note = simulated_because(settings)  # no call records: the next call is all there is to show
    if getattr(args, "json", False):
        out.write(json.dumps(call.to_dict(), ensure_ascii=False, indent=2) + "\n")
    else:
        print_next_call(call, out)
    return 0
