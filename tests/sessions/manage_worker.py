"""A worker process for tests/sessions/test_workers.py: one ``manage()`` caller serving one session.

    python manage_worker.py STORE_URL SESSION_ID

It reads one JSON command per line on stdin and answers one JSON line on stdout:

* ``{"op": "call", "messages": [...], "window": N}`` -- ``ctxlife.manage(messages, ...)`` on the list
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


def record_reply(messages: list[dict[str, Any]], reply: dict[str, Any], **kw: Any) -> bool:
    """Record the model's reply with this ctxlife's call for it; False when it has none."""
    messages.append(reply)
    fn = getattr(ctxlife, "record_reply", None)
    if fn is None:
        return False
    fn(messages, **kw)
    return True


def main() -> None:
    url, session = sys.argv[1:3]
    settings = make_settings(url)

    def manage(messages: list[dict[str, Any]], window: int, **kw: Any) -> ctxlife.Report:
        return ctxlife.manage(messages, config=settings, context_window=window, session_id=session, **kw)

    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "exit":
            sys.stdout.flush()
            return
        if op == "call":
            messages = cmd["messages"]
            report = manage(messages, cmd.get("window") or BIG_WINDOW)
            out: dict[str, Any] = {
                "messages": messages,
                "acted": report.acted,
                "failures": [str(f) for f in report.failures],
            }
        elif op == "reply":
            out = {"recorded": record_reply(cmd["messages"], cmd["reply"])}
        elif op == "run":
            tag, view, every = cmd["tag"], cmd.get("view"), cmd.get("compact_every") or 0
            kw = {"view": view} if view is not None else {}
            messages = [dict(SYSTEM)]
            failures: list[str] = []
            for i in range(cmd["turns"]):
                messages = json.loads(json.dumps(messages))  # rebuilt every call, as from a database
                messages.append({"role": "user", "content": f"{tag} q{i}: " + "tell me about the order " * 5})
                window = SMALL_WINDOW if every and (i + 1) % every == 0 else BIG_WINDOW
                report = manage(messages, window, **kw)
                failures += [str(f) for f in report.failures]
                record_reply(messages, {"role": "assistant", "content": f"{tag} a{i}: " + "it shipped " * 5}, **kw)
            out = {"conversation": messages, "failures": failures}
        else:
            raise SystemExit(f"unknown op {op!r}")
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
