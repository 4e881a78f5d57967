"""A worker process for tests/sessions/test_workers.py: one host serving one session.

    python manage_worker.py STORE_URL SESSION_ID [host|manage]

``host`` (default): the process holds one ``ctxlife.Host`` for the session (as ``manage()`` keeps one
per config and session, so a worker remembers what it saw) and records replies with
``Host.record_reply``; views go through ``Host.before_llm_call(view=)``. ``manage``: calls
``ctxlife.manage()`` and ``ctxlife.record_reply()`` (default view only), as a user's loop would.

It reads one JSON command per line on stdin and answers one JSON line on stdout:

* ``{"op": "call", "messages": [...], "window": N, "view": V}`` -- ``host.manage(messages)`` on the list
  (as a stateless HTTP handler would get it); answers ``{"messages": <what the model is sent>,
  "acted": [...], "failures": [...]}``;
* ``{"op": "reply", "messages": [...], "reply": {...}}`` -- the model answered: the reply is appended
  to the list and recorded with ctxlife's call for it; answers ``{"recorded": true|false}``;
* ``{"op": "run", "tag": "A", "turns": N, "view": V|null, "compact_every": K}`` -- play N turns of
  its own conversation (user ``"{tag} q{i}"``, reply ``"{tag} a{i}"``), every K-th call with a small
  window (a compaction); answers ``{"conversation": [...]}`` (what the caller holds at the end);
* ``{"op": "exit"}`` -- exit without closing anything (as a process that is stopped).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ctxlife.testing import offline_environment

offline_environment()

import ctxlife  # noqa: E402
from ctxlife.config import Settings, settings_from_dict  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a careful support agent."}
BIG_WINDOW = 1_000_000
SMALL_WINDOW = 400


def make_settings(url: str) -> Settings:
    tables: dict[str, Any] = {
        "strategies": ["snapshot_restore", "llm_summary"],
        "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 0, "keep_rounds": 1, "target": 0.3},
    }
    if "store" in Settings.model_fields:  # the host owns the store (issue 11)
        tables["store"] = url
    else:
        tables["snapshot_restore"] = {"store": url}
    return settings_from_dict(tables)


def main() -> None:
    url, session = sys.argv[1:3]
    mode = sys.argv[3] if len(sys.argv) > 3 else "host"
    settings = make_settings(url)
    host = ctxlife.Host(settings, session_id=session)

    def manage(messages: list[dict[str, Any]], window: int, view: str | None = None) -> ctxlife.Report:
        if view:
            return host.before_llm_call(messages, context_window=window, view=view)
        if mode == "manage":
            return ctxlife.manage(messages, config=settings, context_window=window, session_id=session)
        return host.manage(messages, context_window=window)

    def record_reply(messages: list[dict[str, Any]], reply: dict[str, Any], view: str | None = None) -> bool:
        """Append the model's reply and record it with this ctxlife's call for it; False when it has none."""
        messages.append(reply)
        if mode == "manage" and not view:
            fn = getattr(ctxlife, "record_reply", None)
            if fn is None:
                return False
            fn(messages, config=settings, session_id=session)
            return True
        fn = getattr(host, "record_reply", None)
        if fn is None:
            return False
        fn(messages, **({"view": view} if view else {}))
        return True

    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "exit":
            sys.stdout.flush()
            return
        if op == "call":
            messages = cmd["messages"]
            report = manage(messages, cmd.get("window") or BIG_WINDOW, cmd.get("view"))
            out: dict[str, Any] = {
                "messages": messages,
                "acted": report.acted,
                "failures": [str(f) for f in report.failures],
            }
        elif op == "reply":
            out = {"recorded": record_reply(cmd["messages"], cmd["reply"], cmd.get("view"))}
        elif op == "run":
            tag, view, every = cmd["tag"], cmd.get("view"), cmd.get("compact_every") or 0
            messages = [dict(SYSTEM)]
            failures: list[str] = []
            for i in range(cmd["turns"]):
                messages = json.loads(json.dumps(messages))  # rebuilt every call, as from a database
                messages.append({"role": "user", "content": f"{tag} q{i}: " + "tell me about the order " * 5})
                window = SMALL_WINDOW if every and (i + 1) % every == 0 else BIG_WINDOW
                report = manage(messages, window, view)
                failures += [str(f) for f in report.failures]
                record_reply(messages, {"role": "assistant", "content": f"{tag} a{i}: " + "it shipped " * 5}, view)
            out = {"conversation": messages, "failures": failures}
        else:
            raise SystemExit(f"unknown op {op!r}")
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
