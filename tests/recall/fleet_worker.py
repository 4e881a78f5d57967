"""A worker process of a fleet for the recall tests: serves turns of one session, read as JSON lines.

    python fleet_worker.py STORE_URL SESSION WINDOW

Each line on stdin is a request: ``{"op": "turn", "user": TEXT, "reply": TEXT}`` (a new
``ctxlife.Session`` on the process's host, as a stateless service's request handler makes one:
``prepare`` the user turn, then ``record_reply``), ``{"op": "erase", "pattern": REGEX}``, or
``{"op": "quit"}``. Each answer is one JSON line: for a turn, the list sent to the model.
"""

from __future__ import annotations

import json
import sys

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.host import Host


def main() -> None:
    store, session_id, window = sys.argv[1:]
    settings = settings_from_dict(
        {"strategies": ["truncate_last_n", "recall"], "store": store, "truncate_last_n": {"rounds": 3, "always": False}}
    )
    host = Host(settings, context_window=int(window), session_id=session_id)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "quit":
                break
            session = ctxlife.Session(session_id, host=host, system="You are a friendly companion.")
            if request["op"] == "turn":
                listing = session.prepare({"role": "user", "content": request["user"]})
                session.record_reply(request["reply"])
                answer: object = listing
            else:
                answer = session.erase_matching(request["pattern"])
            session.close()
            print(json.dumps(answer, ensure_ascii=False), flush=True)
    finally:
        host.close()


if __name__ == "__main__":
    main()
