"""``ctxlife replay``: a recorded conversation (a file) or a stored session, dry-run call by call.

The argparse arguments and the printing; the replay itself is :mod:`ctxlife.replay` (files and
stored sessions) and the tables' data :mod:`ctxlife.inspection`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ctxlife.cli.session import console_on, key_of, parts_table
from ctxlife.errors import ConfigError, CtxlifeError
from ctxlife.inspection import PART_KINDS, RECORDED, SessionReplay, pick_view
from ctxlife.sessions import open_store
from ctxlife.sessions.ids import original_session_id

if TYPE_CHECKING:
    from ctxlife.config import Settings


def cmd_replay(args: argparse.Namespace) -> int:
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.config import load_settings
    from ctxlife.replay import FACTS_KEPT_DEFINITION, load_conversations, replay

    if (args.file is None) == (args.session is None):
        raise ConfigError("replay takes a recording FILE or --session ID (a stored session), one of the two")
    if args.session is not None:
        return run_session_replay(args)
    settings = load_settings(args.config)
    if not (args.window or settings.context_window):
        raise ConfigError("replay needs a context window: pass --window N or set context_window in the config")
    conversations = load_conversations(args.file)
    if args.conversation is not None:
        if not 0 <= args.conversation < len(conversations):
            raise ConfigError(
                f"no conversation {args.conversation} in {args.file}; it holds {len(conversations)} "
                f"(0..{len(conversations) - 1})"
            )
        conversations = [conversations[args.conversation]]
    # Explicit --window/--model beat the environment and the config (one precedence everywhere).
    results = [replay(c, settings, context_window=args.window, model=args.model) for c in conversations]
    window, encoding, source = results[0].context_window, results[0].encoding, results[0].window_source
    if args.plot:
        _plot_replay(results[0], args.plot)
    if args.json:
        print(
            json.dumps(
                {
                    "config": settings.source,
                    "context_window": window,
                    "window_source": source,
                    "threshold": settings.threshold,
                    "encoding": encoding,
                    "facts_kept_definition": FACTS_KEPT_DEFINITION,
                    "conversations": [r.to_dict() for r in results],
                },
                indent=2,
            )
        )
        return 1 if any(r.violations for r in results) else 0
    from rich.table import Table  # lazy: rich's tables load only when a table is printed

    console = console_on(highlight=True)
    console.print(
        f"window {window:,} tokens (from {source}); "
        f"threshold {settings.threshold:.0%} = {int(settings.threshold * window):,} tokens; "
        f"tokens counted with {encoding}; config {settings.source}"
    )
    if len(results) == 1:
        result = results[0]
        table = Table(
            title=f"{result.name}: what the model would have received, call by call (window "
            f"{window:,}, threshold line {int(settings.threshold * window):,})"
        )
        for column in (
            "call",
            "msgs",
            "unmanaged",
            "managed",
            "saved",
            "facts kept",
            "what the strategies did",
            "valid",
        ):
            table.add_column(column, justify="left" if column == "what the strategies did" else "right")
        for row in result.rows:
            actions = ", ".join(a for a in row.actions if not a.endswith(":skipped")) or "-"
            table.add_row(
                str(row.index + 1),
                str(row.messages),
                f"{row.unmanaged_tokens:,}",
                f"{row.managed_tokens:,}",
                f"{row.unmanaged_tokens - row.managed_tokens:,}",
                f"{row.facts_kept}/{row.facts_needed}" if row.facts_needed else "-",
                actions,
                "yes" if not row.problems else "NO: " + row.problems[0],
            )
        console.print(table)
    else:
        table = Table(
            title=f"{len(results)} conversations (window {window:,}); --conversation N shows one call by call"
        )
        for column in (
            "#",
            "name",
            "calls",
            "unmanaged",
            "managed",
            "saved",
            "peak",
            "compactions",
            "facts kept",
            "invalid",
        ):
            table.add_column(column, justify="left" if column == "name" else "right")
        for i, r in enumerate(results):
            table.add_row(
                str(i),
                r.name,
                str(len(r.rows)),
                f"{r.unmanaged_total:,}",
                f"{r.managed_total:,}",
                f"{r.unmanaged_total - r.managed_total:,}",
                f"{r.peak_managed:,}",
                str(r.compactions),
                f"{r.facts_kept}/{r.facts_total}" if r.facts_total else "-",
                str(r.violations),
            )
        console.print(table)
    unmanaged = sum(r.unmanaged_total for r in results)
    managed = sum(r.managed_total for r in results)
    calls = sum(len(r.rows) for r in results)
    invalid = sum(r.violations for r in results)
    facts_total = sum(r.facts_total for r in results)
    facts_kept = sum(r.facts_kept for r in results)
    share = 1 - managed / unmanaged if unmanaged else 0.0
    console.print(
        f"[bold]Totals[/bold]: {calls} calls; prompt tokens {unmanaged:,} unmanaged -> {managed:,} "
        f"managed ({share:.1%} saved); "
        f"peak {max(r.peak_unmanaged for r in results):,} -> {max(r.peak_managed for r in results):,}; "
        f"compactions {sum(r.compactions for r in results)}; facts kept {facts_kept}/{facts_total}"
        + (f" ({facts_kept / facts_total:.0%})" if facts_total else "")
    )
    console.print(
        f"[dim]{FACTS_KEPT_DEFINITION} (ctxlife.retention; independent of ctxlife's own fact extractor)[/dim]"
    )
    if invalid:
        console.print(f"[red]Validity: {invalid} call(s) would have sent a provider-invalid message list[/red]")
        return 1
    console.print("[green]Validity: every call's message list is provider-valid[/green]")
    return 0


def _plot_replay(result: Any, path: str) -> None:
    try:
        import matplotlib  # lazy: an optional extra (ctxlife[plot]), and slow to import

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: as above, once the backend is set
    except ImportError:
        raise CtxlifeError("--plot needs matplotlib: pip install 'ctxlife[plot]'") from None
    calls = [r.index + 1 for r in result.rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(calls, [r.unmanaged_tokens for r in result.rows], label="unmanaged", color="#999999")
    ax.plot(calls, [r.managed_tokens for r in result.rows], label="managed by ctxlife", color="#1f77b4")
    ax.axhline(
        result.context_window,
        linestyle="-",
        color="#444444",
        linewidth=1,
        label=f"context window ({result.context_window:,}, {result.window_source or 'as used'})",
    )
    ax.axhline(
        result.threshold * result.context_window,
        linestyle="--",
        color="#d62728",
        label=f"threshold ({result.threshold:.0%} of {result.context_window:,})",
    )
    ax.set_xlabel("model call")
    ax.set_ylabel("context tokens")
    ax.set_title(f"{result.name}: context tokens per call")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_session_replay_arguments(parser: Any) -> None:
    """Add ``--session``, ``--store``, ``--view``, ``--ask`` and ``--html`` to ``ctxlife replay``."""
    parser.add_argument(
        "--session",
        metavar="ID",
        default=None,
        help="replay a stored session instead of a file (on a scratch copy: the store is only read)",
    )
    parser.add_argument(
        "--store", metavar="URL", default=None, help="with --session: the store (default: the config's store)"
    )
    parser.add_argument(
        "--view",
        metavar="VIEW",
        default=None,
        help="with --session: the view to replay (default: the default view, or the session's only one)",
    )
    parser.add_argument(
        "--ask", metavar="TEXT", default=None, help="with --session: one more call with this user message at the end"
    )
    parser.add_argument(
        "--html", metavar="FILE", default=None, help="with --session: also write the HTML report to FILE"
    )
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="with --session: run the config's strategies call by call instead of showing the recorded calls "
        "(what the model was sent); the output says SIMULATED",
    )


def open_session_store(settings: Settings, url: str | None) -> Any:
    """The store a stored-session command reads: ``url`` (``--store``), else the config's."""
    return open_store(url or settings.store_url())


def run_session_replay(args: Any) -> int:
    """``ctxlife replay --session ID``: print what each call would have sent (exit 1 if a list is invalid)."""
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.report import write_report

    result = replay_stored(args, args.session, simulate=bool(getattr(args, "simulate", False)))
    if args.html:
        write_report(result, args.html)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_session_replay(result)
        if args.html:
            print(f"HTML report: {args.html}")
    return 1 if any(f.problems for f in result.frames) else 0


def replay_stored(
    args: argparse.Namespace, session_id: str, bar: AbstractContextManager[Any] | None = None, **options: Any
) -> SessionReplay:
    """``replay_session`` of a stored session with the command's ``--config``, ``--store``, ``--view``,
    ``--ask``, ``--window`` and ``--model`` (``replay --session`` and ``report``); ``bar`` is entered
    once the store is open and what it yields is the progress callback; ``options`` go as they are."""
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.config import load_settings
    from ctxlife.replay import replay_session

    settings = load_settings(args.config)
    with open_session_store(settings, args.store) as store, bar or contextlib.nullcontext() as progress:
        session_id = key_of(store, session_id)  # (any id the app used, as `ctxlife session` takes it)
        view = pick_view(store, session_id, args.view)
        return replay_session(
            settings,
            store,
            session_id,
            view=view,
            ask=args.ask,
            context_window=args.window,
            model=args.model,
            progress=progress,
            **options,
        )


def print_session_replay(result: SessionReplay, out: Any = None) -> None:
    """A table of the replay: per call the tokens of each part, what the strategies did; then the last list."""
    # lazy: rich's console and tables load only when a table is printed
    from rich.table import Table
    from rich.text import Text

    console = console_on(out, width=160)
    budget = int(result.threshold * result.context_window)
    view = f" view {result.view!r}" if result.view else ""
    if result.source == RECORDED:
        how = "as recorded (each call's call record: what the model was sent)"
        title = "What each call sent (tokens per part)"
    else:
        console.print(Text(result.note, style="bold"))
        how = f"SIMULATED: replayed on a scratch copy with {result.config}"
        title = "What each call would have sent in this simulation (tokens per part)"
    console.print(
        Text(
            f"Session {original_session_id(result.session_id)!r}{view} from {result.store_url}, {how}: "
            f"window {result.context_window:,}, "
            f"threshold line {budget:,}, tokens counted with {result.encoding}; {result.messages} stored messages, "
            f"{len(result.frames)} calls"
        )
    )
    table = Table(title=title)
    for column in ("call", "msgs", "unmanaged", "sent", *PART_KINDS, "what the strategies did", "valid"):
        table.add_column(column, justify="left" if column == "what the strategies did" else "right")
    for frame in result.frames:
        kinds = frame.composition.tokens_by_kind()
        acted = [f"{a['strategy']}:{a['what']}" for a in frame.actions if a["what"] != "skipped"]
        acted += [f"FAILED {f['strategy']}" for f in frame.failures]
        table.add_row(
            frame.label,
            str(len(frame.composition.messages)),
            f"{frame.unmanaged_tokens:,}",
            f"{frame.composition.total:,}",
            *(f"{kinds[k]:,}" if kinds[k] else "-" for k in PART_KINDS),
            Text(", ".join(acted) or "-"),
            "yes" if not frame.problems else "NO: " + frame.problems[0],
        )
    console.print(table)
    if not result.frames:
        return
    last = result.frames[-1]
    console.print(parts_table(last.composition, f"The list sent at {last.label}"))
    for passage in last.recalled:
        score = passage.get("score")
        shown = f"{score:.2f}" if isinstance(score, (int, float)) else "-"
        console.print(Text(f"recalled message {passage['seq']} (score {shown}): {passage['text'][:120]}"))
