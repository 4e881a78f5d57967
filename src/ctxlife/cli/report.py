"""``ctxlife report ID -o report.html``: the HTML report of a stored session."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ctxlife.cli.replay import replay_stored

__all__ = ["add_report_parser", "cmd_report"]


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``report`` command to the ``ctxlife`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a stored session, call by call",
        description="Write one HTML file of a stored session's calls as recorded (each call's call record: what "
        "the model was sent), or, for a session without call records or with --simulate, replayed through a "
        "config on a scratch copy (the store is only read; the page says SIMULATED): per call, the context's "
        "parts as stacked bars against the window and the "
        "threshold line; each compaction with its summary and what it evicted, each recall with its passages "
        "and scores, the restore of the next call, and failures. Nothing in the file is fetched from anywhere.",
    )
    parser.add_argument("session_id", metavar="ID", help="the session id")
    parser.add_argument("-o", "--output", metavar="FILE", default="report.html", help="where to write the report")
    parser.add_argument(
        "--config", metavar="FILE", default=None, help="config to replay with (default: ./ctxlife.toml, ...)"
    )
    parser.add_argument("--store", metavar="URL", default=None, help="the store (default: the config's store)")
    parser.add_argument(
        "--view",
        metavar="VIEW",
        default=None,
        help="the view to report on (default: the default view, or the session's only one)",
    )
    parser.add_argument("--window", type=int, default=None, metavar="N", help="the context window in tokens")
    parser.add_argument("--model", default=None, help="the model name (picks the tokenizer)")
    parser.add_argument("--ask", metavar="TEXT", default=None, help="one more call with this user message at the end")
    parser.add_argument("--title", default=None, help="the page title")
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="replay the session through the config instead of showing its recorded calls (the page says SIMULATED)",
    )
    parser.set_defaults(func=cmd_report)
    return parser


@contextmanager
def _progress_bar(description: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr while the block runs, when stderr is a terminal (a long session
    takes a while to read or replay); None otherwise, so that pipes and logs get no control codes."""
    if not sys.stderr.isatty():
        yield None
        return
    # lazy: rich's progress loads only when a terminal will show it
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def cmd_report(args: argparse.Namespace) -> int:
    # lazy: the CLI builds its parser from this module; config and host load when a report is made
    from ctxlife.report import write_report

    bar = _progress_bar(f"reading {args.session_id}")
    result = replay_stored(args, args.session_id, bar, next_call=args.ask is None, simulate=bool(args.simulate))
    path = write_report(result, args.output, title=args.title)
    compactions = sum(1 for f in result.frames if f.compacted)
    print(f"wrote {path}: {len(result.frames)} {result.source} calls, {compactions} compaction(s)")
    if result.source != "recorded":
        print(result.note)
    return 0
