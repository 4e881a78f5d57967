"""A worker process for the recall tests: one run of a chat under manage() in a session.

    python recall_worker.py STORE_URL SESSION WINDOW SCRIPT.json OUT.json

SCRIPT.json is a list of messages. The worker starts like a new process of a stateless service:
its first call sends only the system prompt (snapshot_restore restores the session), then it plays
the script, calling manage() before every model call (each user message), and writes the final
context to OUT.json.
"""

from __future__ import annotations

import json
import sys

import ctxlife
from ctxlife.config import settings_from_dict


def main() -> None:
    store, session, window, script_path, out_path = sys.argv[1:]
    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "truncate_last_n", "recall"],
            "store": store,
            "truncate_last_n": {"rounds": 3, "always": False},
        }
    )
    with open(script_path, encoding="utf-8") as f:
        script = json.load(f)
    live = [{"role": "system", "content": "You are a friendly companion."}]
    ctxlife.manage(live, config=settings, context_window=int(window), session_id=session)  # restore
    for message in script:
        live.append(message)
        if message["role"] == "user":
            ctxlife.manage(live, config=settings, context_window=int(window), session_id=session)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(live, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
