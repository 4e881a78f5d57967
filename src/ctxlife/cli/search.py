"""``ctxlife session search ID QUERY``: search a session's whole raw history from the command line.

The same search the ``recall`` strategy and the ``ctxlife_search_history`` tool use
(docs/strategies/recall.md); for a store with no index beside it, the index is built in memory for
the command. Every text printed goes through the privacy filter (the ``ctxlife_filter_text`` hook,
``where="search"``): what a redaction strategy removes is not shown to operators either.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import IO, Any

_EXIT_OK, _EXIT_NOT_FOUND = 0, 1
#: Tokens of the excerpt printed for a match in a long message (about one indexed chunk's worth).
_MATCH_TOKENS = 300


def add_search_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``search`` to the ``session`` subcommands."""
    search: argparse.ArgumentParser = sub.add_parser(
        "search",
        parents=[common],
        help="search a session's whole history (what compaction evicted included)",
        description="Print the passages of a session's raw history that best match QUERY, best first, "
        "each with its date, position and role.",
    )
    search.add_argument("session_id", metavar="ID", help="the session id")
    search.add_argument("query", metavar="QUERY", help="words to look for, e.g. 'refund order 4711'")
    search.add_argument("--limit", type=int, default=5, metavar="N", help="most passages to show (default 5)")
    search.add_argument("--json", action="store_true", help="print the passages as JSON")
    return search


def search_command(store: Any, args: argparse.Namespace, out: IO[str], err: IO[str], *_: Any) -> int:
    """Run ``session search`` on an open store; return the exit code."""
    sid = args.session_id
    from ctxlife.sessions.ids import original_session_id  # lazy: as below

    given = original_session_id(sid)  # the id as given (``sid`` is its store key)
    if store.head(sid) == 0:
        err.write(
            f"error: no raw history for session {given!r} in {store.url}; `ctxlife session list` shows the sessions\n"
        )
        return _EXIT_NOT_FOUND
    if args.limit < 1:
        err.write(f"error: --limit must be at least 1, got {args.limit}\n")
        return 2
    # lazy: the index loads sqlite3 and rich; `ctxlife session` builds its parser from this module
    from ctxlife.inspection import Shown
    from ctxlife.recall.block import chunk_span, excerpt, position
    from ctxlife.recall.history import HistorySearch
    from ctxlife.tokens import FALLBACK_ENCODING, TokenCounter

    search = HistorySearch(store)
    try:
        with Shown.from_config(args, sid, "search") as shown:
            passages = search.passages(sid, args.query, limit=args.limit, text_filter=shown.text)
    finally:
        search.close()
    if args.json:
        rows = [
            {
                "rank": rank,
                "seq": p.hit.seq,
                "score": round(p.hit.score, 3),
                "messages": [
                    {"seq": r.seq, "role": r.role, "recorded_at": r.recorded_at, "view": r.view, "text": r.text}
                    for r in p.records
                ],
            }
            for rank, p in enumerate(passages, 1)
        ]
        out.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return _EXIT_OK
    if not passages:
        out.write(f'Nothing in session {given!r} matches "{args.query}".\n')
        return _EXIT_OK
    count: Callable[[str], int] | None = None  # made at the first long match: tiktoken's tables take ~0.2 s to load
    for rank, passage in enumerate(passages, 1):
        # The rank, not the match's own score: passages are ranked by their whole turn (a question and its
        # answer), so a match's score can be below the next one's (and tiny in a short history).
        where = position(passage.records[0] if passage.records else passage.hit)
        out.write(f"[{where}]  match {rank} of {len(passages)}\n")
        for record in passage.records:
            hit = record.seq == passage.hit.seq
            text = " ".join(record.text.split())
            if hit and len(record.text) > len(passage.hit.text):
                # A match in a long message (one chunk of it matched): the excerpt around it the recall block
                # would show, not the whole message (--json gives that). The text is filtered already.
                count = count or TokenCounter(encoding=FALLBACK_ENCODING).count_text
                around = chunk_span(text, passage.hit, False)
                text = excerpt(text, _MATCH_TOKENS, passage.weights, count, around=around)
            out.write(f"{'>' if hit else ' '} #{record.seq} {record.role or 'message'}: {text}\n")
        out.write("\n")
    return _EXIT_OK
